"""A real RFC 3161 time-stamping authority on loopback for the tests: ``openssl ts -reply``
behind a small HTTP handler, its TSA certificate (extendedKeyUsage timeStamping, critical)
issued by a test CA made here with ``openssl``."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.loopback import Handler, served

CONFIG = """\
[ tsa ]
default_tsa = tsa_config
[ tsa_config ]
dir = {dir}
serial = $dir/serial
crypto_device = builtin
signer_cert = $dir/tsa.pem
certs = $dir/tsa.pem
signer_key = $dir/tsa.key
signer_digest = sha256
default_policy = 1.2.3.4.1
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = yes
tsa_name = yes
ess_cert_id_chain = no
ess_cert_id_alg = sha256
"""
TSA_EXTENSIONS = """\
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = critical, timeStamping
"""


def openssl(*args: str, cwd: Path) -> bytes:
    return subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True).stdout


def make_ca(directory: Path, name: str) -> Path:
    """A self-signed test CA (key and certificate) in ``directory``; its certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "3", "-subj", f"/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)  # fmt: skip
    return directory / "ca.pem"


@dataclass
class Authority:
    """The running authority: its URL, the CA file that verifies its tokens, and a switch
    that makes it answer 503 (an authority that is down)."""

    directory: Path
    url: str = ""
    answering: bool = True
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    def reply(self, query: bytes) -> bytes:
        with self.lock, tempfile.TemporaryDirectory() as work:
            asked = Path(work) / "query.tsq"
            asked.write_bytes(query)
            answer = Path(work) / "reply.tsr"
            openssl("ts", "-reply", "-config", "tsa.cnf", "-queryfile", str(asked),
                    "-out", str(answer), cwd=self.directory)  # fmt: skip
            return answer.read_bytes()


class _TimestampHandler(Handler):
    def do_POST(self) -> None:
        authority: Authority = self.server.authority  # type: ignore[attr-defined]
        query = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        authority.requests += 1
        if not authority.answering:
            self.send_body(b"down for maintenance", "text/plain", status=503)
            return
        self.send_body(authority.reply(query), "application/timestamp-reply")


@contextlib.contextmanager
def running_authority(directory: Path) -> Iterator[Authority]:
    """A test CA, a TSA certificate it issued, and ``openssl ts -reply`` served over HTTP
    on 127.0.0.1 until the block ends."""
    make_ca(directory, "copytrack test CA")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "tsa.key", "-out", "tsa.csr", "-subj", "/O=copytrack tests/CN=Test TSA",
            cwd=directory)  # fmt: skip
    (directory / "tsa.ext").write_text(TSA_EXTENSIONS)
    openssl("x509", "-req", "-in", "tsa.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "tsa.pem", "-days", "3", "-extfile", "tsa.ext",
            cwd=directory)  # fmt: skip
    (directory / "serial").write_text("01\n")
    (directory / "tsa.cnf").write_text(CONFIG.format(dir=directory))
    authority = Authority(directory)
    with served(_TimestampHandler, authority=authority) as server:
        authority.url = f"http://127.0.0.1:{server.server_address[1]}/tsa"
        yield authority


def verify_with_openssl(data: Path, token: Path, ca_file: Path) -> str:
    """``openssl ts -verify -data DATA -in TOKEN -CAfile CA``'s output (raises if it fails)."""
    command = ["openssl", "ts", "-verify", "-data", str(data), "-in", str(token)]
    done = subprocess.run(
        [*command, "-CAfile", str(ca_file)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout
