"""Findings stored as scans store them, for the enforcement tests that start from findings."""

from __future__ import annotations

import zlib
from datetime import datetime
from typing import Any

from bson import ObjectId

from tracker.context import Context
from tracker.core.times import now
from tracker.findings.notices import set_notice_sender
from tracker.findings.status import NEW, history_entry


def store_finding(
    ctx: Context, url: str, work: str = "W-1", *, score: float = 0.9, copied_chars: int = 400,
    status: str = NEW, seen: datetime | None = None, ip: str | None = None,
    campaign: str = "pirates", raw: bytes = b"<p>copied</p>", **extra: Any,
) -> ObjectId:  # fmt: skip
    """A finding of ``url`` copying work ``work`` (its page stored too, captured as
    ``raw``); its id."""
    seen = seen or now()
    domain = url.split("/")[2].split(":")[0]
    page_id = ctx.db.pages.insert_one({
        "url": url, "ip": ip, "fetched_at": seen, "text": "", "raw_sha256": "00" * 32,
        "raw_zlib": zlib.compress(raw), "raw_bytes": len(raw),
    }).inserted_id  # fmt: skip
    return ctx.db.findings.insert_one({
        "page_id": page_id, "master_id": abs(hash(work)) % 10**6, "master_external_id": work,
        "master_title": f"The work {work}", "url": url, "domain": domain, "site": domain,
        "campaign": campaign, "score": score, "copied_chars": copied_chars, "status": status,
        "first_seen": seen, "last_seen": seen, "history": [history_entry(NEW, seen)],
        "changed_at": now(), **extra,
    }).inserted_id  # fmt: skip


def set_sender(ctx: Context) -> None:
    set_notice_sender(ctx, organization="Test Press", email="rights@press.example")
