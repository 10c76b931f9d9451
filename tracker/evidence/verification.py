"""Checking a time-stamp token as a court's expert would: ``openssl ts -verify`` over the
capture's SHA-256, the signature checked against the authority's certificate chain
(``COPYTRACK_TSA_CA_FILE``, else the system's trusted certificates).

OpenSSL is the reference implementation every verifier can rerun (docs/evidence.md gives
the commands); its answer is taken as it is, not re-implemented.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: Where Debian keeps the trusted certificates, when no chain is configured.
SYSTEM_CERTIFICATES = Path("/etc/ssl/certs")
TIMEOUT_SECONDS = 20


@dataclass(frozen=True)
class Verification:
    ok: bool
    detail: str  # OpenSSL's verdict, or why it could not be asked


def verify_token(token: bytes, sha256_hex: str, ca_file: Path | None) -> Verification:
    """Whether ``token`` (a DER TimeStampResp) is a valid signature by a chain of
    ``ca_file`` over the SHA-256 ``sha256_hex``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return Verification(False, "openssl is not installed: the token cannot be checked here")
    trust = ["-CAfile", str(ca_file)] if ca_file else ["-CApath", str(SYSTEM_CERTIFICATES)]
    with tempfile.NamedTemporaryFile(suffix=".tsr") as stored:
        stored.write(token)
        stored.flush()
        try:
            done = subprocess.run(
                [openssl, "ts", "-verify", "-digest", sha256_hex, "-in", stored.name, *trust],
                capture_output=True, text=True, timeout=TIMEOUT_SECONDS, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return Verification(False, f"openssl did not answer within {TIMEOUT_SECONDS} s")
    said = (done.stdout + done.stderr).strip().splitlines()
    if done.returncode == 0 and "Verification: OK" in said:
        return Verification(True, "Verification: OK")
    reasons = [_reason(line) for line in said if ":error:" in line]
    return Verification(False, "; ".join(reasons[:3]) or "Verification: FAILED")


def _reason(line: str) -> str:
    """OpenSSL's reason in an error line (``…:error:CODE:LIB:FUNC:REASON:FILE:LINE:DATA``)."""
    parts = line.split(":")
    data = ":".join(parts[8:]).strip(": ")
    return parts[5] + (f" ({data})" if data else "") if len(parts) > 5 else line
