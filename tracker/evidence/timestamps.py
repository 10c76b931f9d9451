"""Trusted time-stamps of captures: a token from the RFC 3161 authority of
``COPYTRACK_TSA_URL`` over each stored capture's SHA-256, kept on its page.

A stored capture is due (``timestamp_due``, set by `tracker.scanning.pages.store_page`); a worker
sweep (`tracker.tasks`) has the due ones stamped a few seconds later, off the crawl's
path. A request that fails is asked again later, at growing intervals (30 s … 1 h), and
the evidence says "not yet time-stamped" meanwhile. A page's ``timestamp``: the token (a
DER TimeStampResp) and what it states, for the capture whose SHA-256 it names; a new
capture of the page drops it and is due in turn.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bson import Binary, ObjectId

from ..context import Context
from ..core.times import now
from .rfc3161 import TimestampError, Token, read_response, stamp

log = logging.getLogger(__name__)

#: Seconds the authority has to answer one request.
REQUEST_TIMEOUT = 10.0
#: Captures one sweep stamps at most (the next sweep goes on).
SWEEP_LIMIT = 200
#: Seconds a sweep holds its mark: another is not started meanwhile (nor after a lost one).
SWEEP_HOLD = 900
#: A failed request is asked again after 30 s, then twice as long each time, at most 1 h.
RETRY_FIRST = timedelta(seconds=30)
RETRY_MAX = timedelta(hours=1)


@dataclass(frozen=True)
class CaptureTimestamp:
    """A capture's time-stamp as the evidence shows it."""

    state: str  # "stamped", "pending" (asked, or to be asked) or "off" (no authority)
    token: bytes | None = None
    authority: str | None = None  # the URL it was asked at
    tsa: str | None = None  # the name the token gives
    serial: str | None = None  # hexadecimal, as `openssl ts -reply -text` prints it
    time: datetime | None = None
    sha256: str | None = None  # the hash the token states
    policy: str | None = None
    error: str | None = None  # why the last request failed (pending only)


def serial_text(serial: int) -> str:
    """A serial number as ``openssl ts -reply -text`` prints it (hexadecimal, whole bytes)."""
    digits = f"{serial:X}"
    return "0x" + digits.zfill(len(digits) + len(digits) % 2)


def stored(token: Token, url: str, sha256: str) -> dict[str, Any]:
    """A page's ``timestamp`` field for ``token``."""
    return {
        "token": Binary(token.der),
        "sha256": sha256,
        "serial": serial_text(token.serial),
        "time": token.time,
        "tsa": token.tsa,
        "policy": token.policy,
        "authority": url,
        "stored_at": now(),
    }


def capture_timestamp(page: dict[str, Any], tsa_url: str | None) -> CaptureTimestamp:
    """The time-stamp of a page's current capture (its ``timestamp`` and ``timestamp_*``
    fields read)."""
    stamp_field = page.get("timestamp")
    if stamp_field and stamp_field.get("sha256") == page.get("raw_sha256"):
        token = bytes(stamp_field["token"])
        stated = read_response(token)  # what the token itself says, not the copy beside it
        return CaptureTimestamp(
            state="stamped",
            token=token,
            authority=stamp_field.get("authority"),
            tsa=stated.tsa,
            serial=serial_text(stated.serial),
            time=stated.time,
            sha256=stated.digest.hex(),
            policy=stated.policy,
        )
    if not tsa_url and "timestamp_due" not in page:
        return CaptureTimestamp(state="off")
    error = (page.get("timestamp_error") or {}).get("reason")
    return CaptureTimestamp(state="pending", authority=tsa_url, error=error)


#: What `stamp_capture` did.
STAMPED, FAILED, NOT_DUE = "stamped", "failed", "not_due"


def stamp_capture(ctx: Context, page_id: ObjectId) -> str:
    """Ask the authority for a token over the page's current capture (STAMPED); a failure
    is recorded on the page and asked again later (FAILED); NOT_DUE: no authority is set,
    the page has no capture, or its capture has its token."""
    url = ctx.settings.tsa_url
    page = ctx.db.pages.find_one(
        {"_id": page_id},
        {"raw_sha256": 1, "raw_bytes": 1, "timestamp.sha256": 1, "timestamp_error": 1},
    )
    if page is None:
        return NOT_DUE
    sha256 = page.get("raw_sha256")
    has_token = (page.get("timestamp") or {}).get("sha256") == sha256
    if not url or not page.get("raw_bytes") or has_token:
        ctx.db.pages.update_one({"_id": page_id}, {"$unset": {"timestamp_due": ""}})
        return NOT_DUE
    current = {"_id": page_id, "raw_sha256": sha256}  # not if a new capture came meanwhile
    try:
        token = stamp(url, bytes.fromhex(sha256), REQUEST_TIMEOUT)
    except TimestampError as err:
        attempts = (page.get("timestamp_error") or {}).get("attempts", 0) + 1
        wait = min(RETRY_FIRST * 2 ** (attempts - 1), RETRY_MAX)
        ctx.db.pages.update_one(current, {"$set": {
            "timestamp_error": {"at": now(), "reason": str(err), "attempts": attempts},
            "timestamp_due": now() + wait,
        }})  # fmt: skip
        log.warning("capture of page %s not time-stamped: %s; asking again in %s",
                    page_id, err, wait, extra={"page_id": str(page_id)})  # fmt: skip
        return FAILED
    ctx.db.pages.update_one(
        current,
        {"$set": {"timestamp": stored(token, url, sha256)},
         "$unset": {"timestamp_due": "", "timestamp_error": ""}},
    )  # fmt: skip
    return STAMPED


@dataclass(frozen=True)
class Sweep:
    stamped: int
    failed: int


def stamp_due_captures(ctx: Context, limit: int = SWEEP_LIMIT) -> Sweep:
    """Stamp the captures due by now, oldest first; stops at the first failure (the
    authority is likely down: the others wait for the next sweep, not a timeout each)."""
    due = ctx.db.pages.find({"timestamp_due": {"$lte": now()}}, {"_id": 1})
    stamped = 0
    for page in due.sort("timestamp_due", 1).limit(limit):
        done = stamp_capture(ctx, page["_id"])
        if done == FAILED:
            return Sweep(stamped, 1)
        stamped += done == STAMPED
    return Sweep(stamped, 0)


def claim_sweep(ctx: Context) -> bool:
    """Whether a sweep is to start now: an authority is set, no sweep holds the mark, and
    a capture is due. Takes the mark (`release_sweep` gives it back)."""
    if not ctx.settings.tsa_url:
        return False
    if not ctx.db.pages.find_one({"timestamp_due": {"$lte": now()}}, {"_id": 1}):
        return False
    return bool(ctx.redis.set(ctx.keys.timestamp_sweep, 1, nx=True, ex=SWEEP_HOLD))


def release_sweep(ctx: Context) -> None:
    ctx.redis.delete(ctx.keys.timestamp_sweep)
