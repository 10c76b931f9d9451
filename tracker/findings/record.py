"""The match store: one finding per (page, master), updated on every scan, never duplicated."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from pymongo import UpdateOne

from ..context import Context
from ..matcher import Match
from .status import CLOSED, NEW, REMOVED, history_entry

#: Set on a finding that a scan closed (``removed``): the status to reopen it with if the
#: page copies the work again. A reviewer's change of status drops it.
REOPEN_AS = "reopen_as"
_GONE = "the page no longer copies this work"
_BACK = "the page copies this work again"


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
        "copied_chars": match.copied_chars,
    }


def site_of(url: str) -> str:
    """The host of a URL with its port when it names one: sites on one host but other
    ports (a test web, a mirror on :8080) are told apart; ``domain`` (the host alone)
    groups them for licensing and filters."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # a port that is no number: the host alone
        port = None
    host = parts.hostname or ""
    return f"{host}:{port}" if port else host


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
        "site": site_of(page["url"]),
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
                    "status": NEW,
                    "history": [history_entry(NEW, now)],
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
        _reopen(ctx, page["_id"], [m.master.id for m in matches], now)
    removed = _close_gone(ctx, page["_id"], [m.master.id for m in matches], now)
    return RecordResult(new=new, updated=updated, removed=removed)


def _ids_by(ctx: Context, query: dict[str, Any], field: str) -> dict[str, list[Any]]:
    """Ids of the findings matching query, grouped by the value of field (usually none)."""
    groups: dict[str, list[Any]] = {}
    for finding in ctx.db.findings.find(query, {field: 1}):
        groups.setdefault(finding[field], []).append(finding["_id"])
    return groups


def _close_gone(ctx: Context, page_id: Any, matched: list[int], now: datetime) -> int:
    """Mark ``removed`` the open findings of the page for works it no longer copies,
    remembering each one's status to reopen it with."""
    query = {"page_id": page_id, "master_id": {"$nin": matched}, "status": {"$nin": list(CLOSED)}}
    removed = 0
    for status, ids in _ids_by(ctx, query, "status").items():
        removed += ctx.db.findings.update_many(
            {"_id": {"$in": ids}, "status": status},
            {
                "$set": {"status": REMOVED, "last_checked": now, REOPEN_AS: status},
                "$push": {
                    "history": history_entry(
                        REMOVED, now, note="the page no longer copies this work"
                    )
                },
            },
        ).modified_count
    return removed


def _reopen(ctx: Context, page_id: Any, matched: list[int], now: datetime) -> None:
    """Give findings that a scan closed their status back: the page copies the work again."""
    query = {
        "page_id": page_id,
        "master_id": {"$in": matched},
        "status": REMOVED,
        REOPEN_AS: {"$exists": True},
    }
    for status, ids in _ids_by(ctx, query, REOPEN_AS).items():
        ctx.db.findings.update_many(
            {"_id": {"$in": ids}, "status": REMOVED},
            {
                "$set": {"status": status, "last_checked": now},
                "$unset": {REOPEN_AS: ""},
                "$push": {
                    "history": history_entry(status, now, note="the page copies this work again")
                },
            },
        )


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
