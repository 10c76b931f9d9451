"""The finding status model: every status, its label, where a reviewer may move it, which
statuses are still open, and the history entry each change appends.

new → confirmed / dismissed → notice_sent → removed. A scan marks a finding ``removed`` by
itself when the page no longer copies the work (and gives its status back when it copies
it again); ``licensed`` is only ever set and lifted through the whitelist of licensed
domains (syndication partners).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

NEW, CONFIRMED, NOTICE_SENT, REMOVED, DISMISSED, LICENSED = (
    "new", "confirmed", "notice_sent", "removed", "dismissed", "licensed"
)  # fmt: skip

#: Every status, in the order a reviewer meets them, with its label.
LABELS: dict[str, str] = {
    NEW: "New",
    CONFIRMED: "Confirmed",
    NOTICE_SENT: "Notice sent",
    REMOVED: "Removed",
    DISMISSED: "Dismissed",
    LICENSED: "Licensed",
}
STATUSES: tuple[str, ...] = tuple(LABELS)

#: Where a reviewer may move a finding from each status.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    NEW: (CONFIRMED, DISMISSED),
    CONFIRMED: (NOTICE_SENT, DISMISSED, NEW),
    NOTICE_SENT: (REMOVED, CONFIRMED),
    REMOVED: (NEW,),
    DISMISSED: (NEW, CONFIRMED),
    LICENSED: (),
}
#: What a reviewer may set (``licensed`` comes from the whitelist only).
REVIEWER_STATUSES: tuple[str, ...] = tuple(s for s in STATUSES if s != LICENSED)

#: Findings that still ask something of a reviewer.
OPEN: tuple[str, ...] = (NEW, CONFIRMED, NOTICE_SENT)
#: Findings a scan does not close again (they are closed already).
CLOSED: tuple[str, ...] = (REMOVED, DISMISSED, LICENSED)
#: Findings that are not copies to act on: a reviewer said so, or the domain is licensed.
NOT_COPIES: tuple[str, ...] = (DISMISSED, LICENSED)
#: A notice may be drafted or recorded as sent for these.
NOTICE_READY: tuple[str, ...] = (CONFIRMED, NOTICE_SENT)

#: Who changes a status by itself (scans, the licensed-domain whitelist).
SYSTEM = "copytrack"
MAX_NOTE_CHARS = 2000


def history_entry(
    status: str, at: datetime, by: str = SYSTEM, note: str | None = None, reason: str | None = None
) -> dict[str, Any]:
    """The ``{at, status, by, note, reason}`` record a status change appends to a finding's
    history (``note``, cut to MAX_NOTE_CHARS, and ``reason`` only when given)."""
    entry: dict[str, Any] = {"at": at, "status": status, "by": by}
    if note:
        entry["note"] = note[:MAX_NOTE_CHARS]
    if reason:
        entry["reason"] = reason
    return entry
