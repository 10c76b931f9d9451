"""The match store: one finding per (page, master), updated on every scan, never duplicated."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from pymongo import UpdateOne

from .context import Context
from .matcher import Match

#: Workflow states a reviewer moves a finding through.
STATUSES = ("new", "confirmed", "dismissed", "notice_sent", "removed", "licensed")
_CLOSED = ("dismissed", "removed", "licensed")


@dataclass(frozen=True)
class RecordResult:
    new: int
    updated: int
    removed: int


def _finding_fields(match: Match) -> dict[str, Any]:
    return {
        "master_external_id": match.master.external_id,
        "master_title": match.master.title,
        "score": match.score,
        "hits": match.hits,
        "master_coverage": match.master_coverage,
        "suspect_coverage": match.suspect_coverage,
        "spans": [list(span) for span in match.spans],
    }


def record_findings(
    ctx: Context, page: dict[str, Any], matches: list[Match], run_id: Any = None
) -> RecordResult:
    """Upsert the findings of one scanned page; copies that disappeared become ``removed``.

    Keyed by (page, master): a re-scan updates ``last_seen`` and the evidence and keeps
    ``first_seen`` and the reviewer's status, so a redelivered task changes nothing.
    """
    now = datetime.now(UTC)
    page_fields = {
        "url": page["url"],
        "domain": urlsplit(page["url"]).hostname or "",
        "campaign": page.get("campaign"),
        "page_sha256": page.get("content_sha256"),
        "last_seen": now,
    }
    if run_id is not None:
        page_fields["run_id"] = run_id
    ops = [
        UpdateOne(
            {"page_id": page["_id"], "master_id": match.master.id},
            {
                "$set": {**page_fields, **_finding_fields(match)},
                "$setOnInsert": {
                    "first_seen": now,
                    "status": "new",
                    "history": [{"at": now, "status": "new", "by": "copytrack"}],
                },
            },
            upsert=True,
        )
        for match in matches
    ]
    new = updated = 0
    if ops:
        result = ctx.db.findings.bulk_write(ops, ordered=False)
        new, updated = result.upserted_count, result.matched_count
    gone = ctx.db.findings.update_many(
        {
            "page_id": page["_id"],
            "master_id": {"$nin": [m.master.id for m in matches]},
            "status": {"$nin": list(_CLOSED)},
        },
        {
            "$set": {"status": "removed", "last_checked": now},
            "$push": {
                "history": {
                    "at": now,
                    "status": "removed",
                    "by": "copytrack",
                    "note": "the page no longer copies this work",
                }
            },
        },
    )
    return RecordResult(new=new, updated=updated, removed=gone.modified_count)


def list_findings(
    ctx: Context, campaign: str | None = None, status: str | None = None, limit: int = 0
) -> list[dict[str, Any]]:
    """Findings, newest first, optionally of one campaign or status."""
    query: dict[str, Any] = {}
    if campaign:
        query["campaign"] = campaign
    if status:
        query["status"] = status
    return list(ctx.db.findings.find(query).sort("last_seen", -1).limit(limit))
