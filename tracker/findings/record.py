"""The match store: one finding per (page, master), updated on every scan, never duplicated."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from pymongo import UpdateOne
from pymongo.errors import BulkWriteError

from ..context import Context
from ..core.store import CHANGED_AT, changed, delete_findings, find_in
from ..masters.library import REMOVING
from ..matching.matcher import Match
from .queries import size_query
from .status import CLOSED, NEW, REMOVED, SYSTEM, history_entry

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
        # Out of the reviewer's queue unless asked for (queries.FindingFilter.size).
        "quotation": match.quotation,
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


def _page_fields(page: dict[str, Any], now: datetime, run_id: Any) -> dict[str, Any]:
    """What a page's findings hold of the page and of the scan."""
    fields = {
        "url": page["url"],
        "domain": urlsplit(page["url"]).hostname or "",
        "site": site_of(page["url"]),
        "campaign": page.get("campaign"),
        "page_sha256": page.get("content_sha256"),
        # The page's title, searched in the admin's findings catalogue with the work's.
        "page_title": page.get("title") or "",
        "last_seen": now,
        CHANGED_AT: now,
    }
    if run_id is not None:
        fields["run_id"] = run_id
    return fields


def _first_fields(now: datetime) -> dict[str, Any]:
    """What a finding holds from its first scan on."""
    return {"first_seen": now, "status": NEW, "history": [history_entry(NEW, now)]}


def _upserts(
    page: dict[str, Any], matches: list[Match], now: datetime, run_id: Any
) -> list[UpdateOne]:
    """The upserts of a scanned page's findings, keyed by (page, master)."""
    page_fields = _page_fields(page, now, run_id)
    return [
        UpdateOne(
            {"page_id": page["_id"], "master_id": match.master.id},
            {"$set": {**page_fields, **_finding_fields(match)}, "$setOnInsert": _first_fields(now)},
            upsert=True,
        )
        for match in matches
    ]


#: MongoDB's error of a write a unique index refused.
_DUPLICATE_KEY = 11000


def record_first_scans(
    ctx: Context, scans: Sequence[tuple[dict[str, Any], list[Match]]], run_id: Any = None
) -> int:
    """`record_findings` of many pages at once, for pages without findings yet (a first
    crawl's scans): their findings inserted in one bulk write. A page that has findings
    already, or copies a work being removed, is recorded by `record_findings` (what it no
    longer copies is closed), and so is one whose findings a concurrent scan recorded
    meanwhile (the unique (page, master) index refuses the insert). Returns how many
    findings are new.

    Inserts, not upserts: on SecantusDB 10,000 findings (1,000 pages a call) were
    recorded in 14 s rather than 49 (1.4 ms a finding, not 4.9)."""
    pages = [page["_id"] for page, _ in scans]
    known = {f["page_id"] for f in find_in(ctx.db.findings, "page_id", pages, {"page_id": 1})}
    works = sorted({match.master.id for _, matches in scans for match in matches})
    present = {
        m["_id"]
        for m in find_in(ctx.db.masters, "_id", works, {"state": 1})
        if m.get("state") != REMOVING
    }
    now, docs, new = datetime.now(UTC), [], 0
    first = {page["_id"]: (page, matches) for page, matches in scans}
    for page, matches in scans:
        if page["_id"] in known or any(m.master.id not in present for m in matches):
            new += record_findings(ctx, page, matches, run_id).new
            continue
        page_fields = _page_fields(page, now, run_id)
        docs += [
            {"page_id": page["_id"], "master_id": match.master.id, **page_fields,
             **_finding_fields(match), **_first_fields(now)}
            for match in matches
        ]  # fmt: skip
    if not docs:
        return new
    try:
        inserted = len(ctx.db.findings.insert_many(docs, ordered=False).inserted_ids)
    except BulkWriteError as err:
        errors = err.details.get("writeErrors", [])
        if any(e.get("code") != _DUPLICATE_KEY for e in errors):
            raise
        inserted = err.details.get("nInserted", 0)
        for page_id in dict.fromkeys(docs[e["index"]]["page_id"] for e in errors):
            new += record_findings(ctx, *first[page_id], run_id).new
    # A work removed between the look at the library above and the insert: its removal
    # may have deleted its findings before these were written.
    pages_of: dict[int, set[Any]] = {}
    for doc in docs:
        pages_of.setdefault(doc["master_id"], set()).add(doc["page_id"])
    return new + max(0, inserted - _drop_of_removed_works(ctx, pages_of))


def record_findings(
    ctx: Context,
    page: dict[str, Any],
    matches: list[Match],
    run_id: Any = None,
    keep_open: Callable[[list[int]], Collection[int]] | None = None,
) -> RecordResult:
    """Upsert the findings of one scanned page; copies that disappeared become ``removed``.

    Keyed by (page, master): a re-scan updates ``last_seen`` and the evidence and keeps
    ``first_seen`` and the reviewer's status, so a redelivered task changes nothing.
    ``keep_open``, given the works whose open findings of the page would be closed, names
    those to stay open (it may refuse the scan: `tracker.matching.index_audit.audit_works`).
    A finding of a work removed meanwhile (`tracker.scanning.library_edits`) is not kept.
    """
    now = datetime.now(UTC)
    ops = _upserts(page, matches, now, run_id)
    new = updated = 0
    matched = [m.master.id for m in matches]
    if ops:
        result = ctx.db.findings.bulk_write(ops, ordered=False)
        new, updated = result.upserted_count, result.matched_count
        new = max(0, new - _drop_of_removed(ctx, page["_id"], matched))
        _reopen(ctx, page["_id"], matched, now)
    removed = _close_gone(ctx, page["_id"], matched, now, keep_open)
    return RecordResult(new=new, updated=updated, removed=removed)


def _drop_of_removed(ctx: Context, page_id: Any, matched: list[int]) -> int:
    """Delete the page's findings nobody decided on of works removed since they matched
    (marked removing, or gone); returns how many. The removal marks a work before it
    deletes its findings: read after the findings were written, the mark shows every
    removal that could have missed them."""
    return _drop_of_removed_works(ctx, {master_id: {page_id} for master_id in matched})


def _drop_of_removed_works(ctx: Context, pages_of: dict[int, set[Any]]) -> int:
    """`_drop_of_removed` of many pages: ``pages_of`` each work's pages just written."""
    present = {  # by id alone, which the embedded MongoDB answers from its index at once
        m["_id"]
        for m in find_in(ctx.db.masters, "_id", sorted(pages_of), {"state": 1})
        if m.get("state") != REMOVING
    }
    removed = [master_id for master_id in pages_of if master_id not in present]
    if not removed:
        return 0
    return delete_findings(
        ctx.db,
        {
            "page_id": {"$in": list({p for m in removed for p in pages_of[m]})},
            "master_id": {"$in": removed},
            "work_deleted": {"$exists": False},
            "history": {"$not": {"$elemMatch": {"by": {"$ne": SYSTEM}}}},
        },
    )


def _ids_by(findings: Iterable[dict[str, Any]], field: str) -> dict[str, list[Any]]:
    """Ids of the findings, grouped by the value of field (usually one)."""
    groups: dict[str, list[Any]] = {}
    for finding in findings:
        groups.setdefault(finding[field], []).append(finding["_id"])
    return groups


def _close_gone(
    ctx: Context,
    page_id: Any,
    matched: list[int],
    now: datetime,
    keep_open: Callable[[list[int]], Collection[int]] | None,
) -> int:
    """Mark ``removed`` the open findings of the page for works it no longer copies (but
    those of the works ``keep_open`` names), remembering each one's status to reopen it
    with."""
    query = {"page_id": page_id, "master_id": {"$nin": matched}, "status": {"$nin": list(CLOSED)}}
    closing = list(ctx.db.findings.find(query, {"master_id": 1, "status": 1}))
    if closing and keep_open is not None:
        kept = set(keep_open(sorted({f["master_id"] for f in closing})))
        closing = [f for f in closing if f["master_id"] not in kept]
    removed = 0
    for status, ids in _ids_by(closing, "status").items():
        removed += ctx.db.findings.update_many(
            {"_id": {"$in": ids}, "status": status},
            changed(
                {
                    "$set": {"status": REMOVED, "last_checked": now, REOPEN_AS: status},
                    "$push": {
                        "history": history_entry(
                            REMOVED, now, note="the page no longer copies this work"
                        )
                    },
                },
                now,
            ),
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
    for status, ids in _ids_by(ctx.db.findings.find(query, {REOPEN_AS: 1}), REOPEN_AS).items():
        ctx.db.findings.update_many(
            {"_id": {"$in": ids}, "status": REMOVED},
            changed(
                {
                    "$set": {"status": status, "last_checked": now},
                    "$unset": {REOPEN_AS: ""},
                    "$push": {
                        "history": history_entry(
                            status, now, note="the page copies this work again"
                        )
                    },
                },
                now,
            ),
        )


def list_findings(
    ctx: Context,
    campaign: str | None = None,
    status: str | None = None,
    limit: int = 0,
    size: str = "any",
) -> list[dict[str, Any]]:
    """Findings, newest first, optionally of one campaign, status or size
    (`queries.SIZES`)."""
    query: dict[str, Any] = size_query(size)
    if campaign:
        query["campaign"] = campaign
    if status:
        query["status"] = status
    return list(ctx.db.findings.find(query).sort("last_seen", -1).limit(limit))
