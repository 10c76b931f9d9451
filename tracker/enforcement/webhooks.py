"""Signed webhook requests: a JSON body POSTed with its signature.

``X-Copytrack-Timestamp`` carries the Unix time of the request, ``X-Copytrack-Signature``
``sha256=`` and the hex HMAC-SHA256 of ``"<timestamp>.<body>"`` under the subscription's
secret: a receiver recomputes it (``verify``) and refuses a request whose timestamp is
old, so a captured request cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
import urllib.error
import urllib.request

__all__ = ["WebhookError", "post", "sign", "verify"]

TIMEOUT = 15.0
#: Bytes of the receiver's answer kept for the delivery log.
ANSWER_CHARS = 300
#: Seconds a receiver should accept a timestamp off its own clock (``verify``).
TOLERANCE = 300
USER_AGENT = "copytrack/0.1 (alerts)"


class WebhookError(RuntimeError):
    """The receiver could not be reached or did not answer 2xx; the message says what."""


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``X-Copytrack-Signature`` value of ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(
    secret: str, timestamp: str, body: bytes, signature: str, at: float, tolerance: int = TOLERANCE
) -> bool:
    """True when ``signature`` is the body's under ``secret`` and ``timestamp`` (Unix
    seconds, as sent) is within ``tolerance`` seconds of ``at``: what a receiver checks."""
    if not (timestamp.isascii() and timestamp.isdigit()) or abs(at - int(timestamp)) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, int(timestamp), body), signature)


def post(url: str, secret: str, body: bytes, timestamp: int, delivery_id: str) -> str:
    """POST ``body`` signed; the receiver's answer (``HTTP 200 …``) when it took it,
    WebhookError otherwise."""
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": USER_AGENT,
            "X-Copytrack-Timestamp": str(timestamp),
            "X-Copytrack-Signature": sign(secret, timestamp, body),
            "X-Copytrack-Delivery": delivery_id,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            text = answer.read(ANSWER_CHARS).decode("utf-8", "replace")
            return f"HTTP {answer.status} {' '.join(text.split())}".strip()[:ANSWER_CHARS]
    except urllib.error.HTTPError as err:
        raise WebhookError(f"{url} answered HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise WebhookError(f"{url} cannot be reached: {reason}") from None
