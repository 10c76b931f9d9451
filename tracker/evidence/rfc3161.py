"""RFC 3161 time-stamp requests and responses: what the authority is asked (a SHA-256
imprint, a nonce, its certificate), and what its signed token states (serial number,
time, imprint, policy, authority's name).

Reading a token does not check its signature: `tracker.evidence.verification` does, with
``openssl ts -verify`` against the authority's certificate chain.
"""

from __future__ import annotations

import secrets
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography import x509

from . import der

SHA256 = "2.16.840.1.101.3.4.2.1"
SIGNED_DATA = "1.2.840.113549.1.7.2"
TST_INFO = "1.2.840.113549.1.9.16.1.4"
#: PKIStatus values meaning the token was issued.
GRANTED = (0, 1)
#: The authority's answer is refused past this size (a token is a few kB).
MAX_RESPONSE_BYTES = 256 * 1024
_NAMES = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST",
          "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.5": "serialNumber"}  # fmt: skip


class TimestampError(ValueError):
    """No token: the authority refused, could not be reached, or answered something else."""


@dataclass(frozen=True)
class Token:
    """A time-stamp response and what its token states."""

    der: bytes  # the whole TimeStampResp, as the authority sent it
    serial: int
    time: datetime
    digest: bytes  # the imprint: the SHA-256 the authority signed
    hash_algorithm: str  # OID of the imprint's hash
    policy: str
    nonce: int | None
    tsa: str | None  # the authority's name, from the token or its signing certificate


def request(digest: bytes, nonce: int) -> bytes:
    """A DER TimeStampReq for a SHA-256 ``digest``, asking for the signer's certificate."""
    imprint = der.sequence(der.sequence(der.oid(SHA256), der.null()), der.octets(digest))
    return der.sequence(der.integer(1), imprint, der.integer(nonce), der.boolean(True))


def stamp(url: str, digest: bytes, timeout: float) -> Token:
    """A token from the authority at ``url`` over ``digest``, its imprint and nonce checked;
    TimestampError saying why there is none."""
    nonce = secrets.randbits(63)
    asked = urllib.request.Request(
        url,
        data=request(digest, nonce),
        headers={"Content-Type": "application/timestamp-query"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(asked, timeout=timeout) as answer:
            body = answer.read(MAX_RESPONSE_BYTES + 1)
    except urllib.error.HTTPError as err:
        raise TimestampError(f"{url} answered HTTP {err.code}") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise TimestampError(f"{url} could not be reached: {reason}") from None
    if len(body) > MAX_RESPONSE_BYTES:
        raise TimestampError(f"{url} answered more than {MAX_RESPONSE_BYTES} bytes")
    token = read_response(body)
    if token.digest != digest or token.hash_algorithm != SHA256:
        raise TimestampError(f"{url} stamped another hash than the one asked")
    if token.nonce != nonce:
        raise TimestampError(f"{url} answered with another request's nonce (a replay?)")
    return token


def read_response(body: bytes) -> Token:
    """What a DER TimeStampResp's token states; TimestampError if it is not a granted one."""
    try:
        response = der.read(body).children()
        status = response[0].children()
        if status[0].integer() not in GRANTED:
            said = [s.body.decode("utf-8", "replace") for s in _free_text(status)]
            raise TimestampError(
                f"the authority refused (status {status[0].integer()}"
                + (f": {'; '.join(said)})" if said else ")")
            )
        content = response[1].children()
        if content[0].oid() != SIGNED_DATA:
            raise TimestampError("the token is not CMS signed data")
        signed = der.read(content[1].body).children()
        encapsulated = signed[2].children()
        if encapsulated[0].oid() != TST_INFO:
            raise TimestampError("the token signs something else than a TSTInfo")
        info = der.read(der.read(encapsulated[1].body).body).children()
        return _token(body, info, signed)
    except (der.DerError, IndexError, ValueError) as err:
        if isinstance(err, TimestampError):
            raise
        raise TimestampError(f"not an RFC 3161 time-stamp response ({err})") from None


def _free_text(status: list[der.Node]) -> list[der.Node]:
    return status[1].children() if len(status) > 1 and status[1].tag == der.SEQUENCE else []


def _token(body: bytes, info: list[der.Node], signed: list[der.Node]) -> Token:
    imprint = info[2].children()
    nonce, tsa = None, None
    for field in info[5:]:
        if field.tag == der.INTEGER:
            nonce = field.integer()
        elif field.tag == 0xA0:  # [0] EXPLICIT GeneralName
            tsa = _general_name(der.read(field.body))
    return Token(
        der=body,
        serial=info[3].integer(),
        time=_generalized_time(info[4]),
        digest=imprint[1].body,
        hash_algorithm=imprint[0].children()[0].oid(),
        policy=info[1].oid(),
        nonce=nonce,
        tsa=tsa or _signer_subject(signed),
    )


def _generalized_time(node: der.Node) -> datetime:
    if node.tag != der.GENERALIZED_TIME:
        raise der.DerError("genTime is not a GeneralizedTime")
    text = node.body.decode("ascii").rstrip("Z")
    whole, _, fraction = text.partition(".")
    stamped = datetime.strptime(whole, "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    return stamped.replace(microsecond=int((fraction + "000000")[:6])) if fraction else stamped


def _general_name(node: der.Node) -> str | None:
    if node.tag == 0xA4:  # directoryName: [4] EXPLICIT Name
        return _name(der.read(node.body))
    if node.tag in (0x82, 0x86):  # dNSName, URI
        return node.body.decode("ascii", "replace")
    return None


def _name(name: der.Node) -> str:
    parts = []
    for rdn in name.children():
        for attribute in rdn.children():
            kind, value = attribute.children()
            label = _NAMES.get(kind.oid(), kind.oid())
            parts.append(f"{label}={value.body.decode('utf-8', 'replace')}")
    return ", ".join(parts)


def _signer_subject(signed: list[der.Node]) -> str | None:
    """The subject of the first certificate the token carries (the signer's, as asked)."""
    certificates = next((n for n in signed[3:] if n.tag == 0xA0), None)
    if certificates is None or not certificates.children():
        return None
    first = certificates.children()[0]
    certificate = x509.load_der_x509_certificate(der.tlv(first.tag, first.body))
    return certificate.subject.rfc4514_string()
