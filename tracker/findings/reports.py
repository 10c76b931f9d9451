"""Printable reports: the findings of one work, or of one domain, grouped for a reader."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..context import Context
from ..masters.library import find_masters
from .queries import domain_query
from .status import CONFIRMED, NOTICE_SENT, REMOVED, STATUSES

#: Findings a reviewer has judged to be copies: what a domain report shows by default.
REVIEWED: tuple[str, ...] = (CONFIRMED, NOTICE_SENT, REMOVED)
#: Findings a domain report lists a page (the summary counts them all).
REPORT_PAGE = 200


@dataclass
class Report:
    """A printable report: a subject, summary figures, and its findings grouped."""

    kind: str  # "work" or "domain"
    subject: str
    generated_at: datetime
    summary: dict[str, int]
    groups: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    master: dict[str, Any] | None = None
    #: A domain report: "reviewed" or "all" findings in its detail, which page of how many,
    #: how many findings its detail covers, and each group's size over every page.
    scope: str = "all"
    page: int = 1
    pages: int = 1
    listed: int = 0
    group_sizes: dict[str, int] = field(default_factory=dict)


_REPORT_FIELDS = {"history": 0, "spans": 0}


def _work_label(finding: dict[str, Any]) -> str:
    external_id = finding.get("master_external_id") or str(finding.get("master_id"))
    title = finding.get("master_title")
    return f"{title} ({external_id})" if title else external_id


def work_report(
    ctx: Context, work: str, page: int = 1, per_page: int | None = REPORT_PAGE
) -> Report | None:
    """Where a work (external id, master id or work id) was found, grouped by domain: the
    summary counts every finding, the detail lists ``per_page`` a page (``None``: all of
    them, as a PDF does)."""
    masters = find_masters(ctx, work)
    if not masters:
        return None
    query = {"master_id": {"$in": [m["_id"] for m in masters]}}
    master = masters[0]
    report = Report(
        kind="work",
        subject=master.get("title") or master["external_id"],
        generated_at=datetime.now(UTC),
        summary=_counted_summary(ctx, query),
        master={k: v for k, v in master.items() if k != "text"},
    )
    return _paged(ctx, report, query, "domain", lambda row: row["_id"] or "—", page, per_page)


def _counted_summary(ctx: Context, query: dict[str, Any]) -> dict[str, int]:
    """The summary of every finding matching ``query``, counted by the database (a report
    of 100,000 findings holds none of them)."""
    counts = {s: 0 for s in STATUSES}
    for row in ctx.db.findings.aggregate(
        [{"$match": query}, {"$group": {"_id": "$status", "n": {"$sum": 1}}}]
    ):
        counts[row["_id"]] = row["n"]
    pages = 0
    for row in ctx.db.findings.aggregate(
        [
            {"$match": query},
            {"$group": {"_id": "$page_id"}},
            {"$group": {"_id": None, "n": {"$sum": 1}}},
        ]
    ):
        pages = row["n"]
    return {"total": sum(counts.values()), "pages": pages, **counts}


def domain_report(
    ctx: Context,
    domain: str,
    scope: str = "reviewed",
    page: int = 1,
    per_page: int | None = REPORT_PAGE,
) -> Report:
    """What a domain (and its subdomains) copies, grouped by work: the summary counts every
    finding; the detail lists the reviewed ones (``scope="all"``: every one), ``per_page``
    a page (``None``: all of them, as a PDF does)."""
    domain = domain.lower()
    query = _on_domain(ctx, domain)
    detail = query if scope == "all" else {**query, "status": {"$in": list(REVIEWED)}}
    report = Report(
        kind="domain",
        subject=domain,
        generated_at=datetime.now(UTC),
        summary=_counted_summary(ctx, query),
        scope="all" if scope == "all" else "reviewed",
    )
    return _paged(ctx, report, detail, "master_id", _row_work_label, page, per_page)


def _on_domain(ctx: Context, domain: str) -> dict[str, Any]:
    """`queries.domain_query` with its subdomains named: the report asks MongoDB many
    times, and a pattern over every finding's domain is a scan of them all each time
    (minutes a page at 100,000 findings on SecantusDB); the domains are indexed."""
    query = domain_query(domain)
    if "site" in query:
        return query
    tail = "." + domain
    names = [d for d in ctx.db.findings.distinct("domain") if d == domain or d.endswith(tail)]
    return {"domain": {"$in": names or [domain]}}


def _row_work_label(row: dict[str, Any]) -> str:
    return _work_label(
        {"master_id": row["_id"], "master_title": row["title"],
         "master_external_id": row["external_id"]}
    )  # fmt: skip


def _paged(
    ctx: Context,
    report: Report,
    detail: dict[str, Any],
    key: str,
    label_of: Callable[[dict[str, Any]], str],
    page: int,
    per_page: int | None,
) -> Report:
    """``report`` with one page of the findings matching ``detail``, grouped by ``key``
    (largest group first), ``per_page`` a page (``None``: all of them)."""
    # Group sizes first (one row a group), so a page reads its rows group by group from
    # the database instead of sorting every finding in memory.
    sizes: dict[Any, int] = {}
    labels: dict[Any, str] = {}
    for row in ctx.db.findings.aggregate(
        [
            {"$match": detail},
            {
                "$group": {
                    "_id": f"${key}",
                    "n": {"$sum": 1},
                    "title": {"$first": "$master_title"},
                    "external_id": {"$first": "$master_external_id"},
                }
            },
        ]
    ):
        sizes[row["_id"]] = row["n"]
        labels[row["_id"]] = label_of(row)
    order = sorted(sizes, key=lambda g: (-sizes[g], labels[g]))
    listed = sum(sizes.values())
    size = per_page or max(listed, 1)
    pages = max(1, -(-listed // size))
    page = min(max(page, 1), pages)
    start, end = (page - 1) * size, page * size
    groups: list[tuple[str, list[dict[str, Any]]]] = []
    before = 0
    for group in order:
        first, last = max(start - before, 0), min(end - before, sizes[group])
        before += sizes[group]
        if first >= last:
            if before >= end:
                break
            continue
        rows = (
            ctx.db.findings.find({**detail, key: group}, _REPORT_FIELDS)
            .sort([("score", -1), ("_id", 1)])
            .skip(first)
            .limit(last - first)
        )
        groups.append((labels[group], list(rows)))
    report.groups = groups
    report.page, report.pages, report.listed = page, pages, listed
    report.group_sizes = {labels[g]: sizes[g] for g in order}
    return report
