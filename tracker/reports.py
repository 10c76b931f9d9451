"""Reading the match store: finding filters, matched passages, dashboard figures, CSV, reports.

The admin (web pages, JSON API) and the command line share these, so a filter means the
same everywhere and an export holds exactly what a reviewer sees.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from itertools import islice
from typing import Any

from bson import ObjectId
from bson.errors import InvalidId

from .context import Context
from .findings import STATUSES
from .library import find_masters
from .times import iso

#: Statuses a reviewer still has to act on (or wait on).
OPEN_STATUSES = ("new", "confirmed", "notice_sent")
#: Sort keys a findings list accepts; ``-key`` sorts descending.
SORT_KEYS = ("last_seen", "first_seen", "score", "hits", "master_coverage", "domain")
DEFAULT_SORT = "-last_seen"
MAX_PER_PAGE = 200
DASHBOARD_MAX_AGE_S = 60
DAYS_CHARTED = 30


class FilterError(ValueError):
    """A findings filter parameter that cannot be understood, naming it."""


def parse_object_id(value: str, what: str = "finding") -> ObjectId:
    """An ObjectId from its 24-hex form; raises FilterError naming ``what`` otherwise."""
    try:
        return ObjectId(value)
    except (InvalidId, TypeError):
        raise FilterError(f"{value!r} is not a {what} id (24 hexadecimal digits)") from None


@dataclass(frozen=True)
class FindingFilter:
    """Which findings to list; every field is optional (None matches everything)."""

    status: tuple[str, ...] = ()
    work: str | None = None  # external id, integer master id or work id
    q: str | None = None  # words in the work's title or id, the page's title or URL
    domain: str | None = None  # also matches its subdomains
    campaign: str | None = None
    min_score: float | None = None
    max_score: float | None = None
    since: date | None = None  # first seen on or after
    until: date | None = None  # first seen on or before
    page_id: ObjectId | None = None  # the findings of one page (a whole book copies many works)
    sort: str = DEFAULT_SORT

    def as_params(self) -> dict[str, str]:
        """The filter as query parameters (for links that keep it)."""
        params = {
            "status": ",".join(self.status),
            "work": self.work,
            "q": self.q,
            "domain": self.domain,
            "campaign": self.campaign,
            "min_score": self.min_score,
            "max_score": self.max_score,
            "since": self.since,
            "until": self.until,
            "page_id": self.page_id,
            "sort": self.sort if self.sort != DEFAULT_SORT else None,
        }
        return {key: str(value) for key, value in params.items() if value not in (None, "")}


def _bounded(params: Mapping[str, str], name: str, top: float, what: str) -> float | None:
    """The number in parameter ``name``, between 0 and ``top``; None if not given."""
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= top:
        raise FilterError(f"{name}={raw!r}: give {what} between 0 and {top:g}")
    return value


def _share(params: Mapping[str, str], name: str) -> float | None:
    """A score bound given as a fraction (``min_score=0.8``) or, as the admin's form
    asks people for it, a percentage (``min_pct=80``)."""
    fraction = _bounded(params, f"{name}_score", 1, "a number")
    if fraction is not None:
        return fraction
    percent = _bounded(params, f"{name}_pct", 100, "a percentage")
    return None if percent is None else percent / 100


def _date(params: Mapping[str, str], name: str) -> date | None:
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise FilterError(f"{name}={raw!r}: give a date as YYYY-MM-DD") from None


def parse_filter(params: Mapping[str, str]) -> FindingFilter:
    """A FindingFilter from query parameters; raises FilterError naming a bad parameter.

    ``status`` may list several statuses separated by commas.
    """
    statuses = tuple(s for s in (params.get("status") or "").replace(" ", "").split(",") if s)
    for status in statuses:
        if status not in STATUSES:
            raise FilterError(f"status={status!r}: use one of {', '.join(STATUSES)}")
    sort = (params.get("sort") or DEFAULT_SORT).strip()
    if sort.lstrip("-") not in SORT_KEYS:
        raise FilterError(f"sort={sort!r}: use one of {', '.join(SORT_KEYS)} (prefix - to reverse)")

    def text(name: str) -> str | None:
        return (params.get(name) or "").strip() or None

    return FindingFilter(
        status=statuses,
        work=text("work"),
        q=text("q"),
        domain=(text("domain") or "").lower() or None,
        campaign=text("campaign"),
        min_score=_share(params, "min"),
        max_score=_share(params, "max"),
        since=_date(params, "since"),
        until=_date(params, "until"),
        page_id=parse_object_id(text("page_id"), "page") if text("page_id") else None,
        sort=sort,
    )


def _day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def domain_query(domain: str) -> dict[str, Any]:
    """Findings on ``domain`` or any of its subdomains."""
    return {"$or": [{"domain": domain}, {"domain": {"$regex": rf"\.{re.escape(domain)}$"}}]}


#: Pages whose title matches a search, at most: a search as common as "the" is cut here.
SEARCH_PAGES = 10_000


def _search(ctx: Context, words: str) -> dict[str, Any]:
    """Findings whose work title or id, page URL or page title contains ``words`` (any
    case): "红楼梦" finds the findings of every chapter titled so."""
    pattern = {"$regex": re.escape(words), "$options": "i"}
    titled = ctx.db.pages.find({"title": pattern}, {"_id": 1}).limit(SEARCH_PAGES)
    return {
        "$or": [
            {"master_title": pattern},
            {"master_external_id": pattern},
            {"url": pattern},
            {"page_id": {"$in": [page["_id"] for page in titled]}},
        ]
    }


def finding_query(ctx: Context, flt: FindingFilter) -> dict[str, Any]:
    """The MongoDB query of a filter (an unknown work matches nothing)."""
    clauses: list[dict[str, Any]] = []
    if flt.status:
        clauses.append({"status": {"$in": list(flt.status)}})
    if flt.work:
        ids = [m["_id"] for m in find_masters(ctx, flt.work)]
        clauses.append({"master_id": {"$in": ids}})
    if flt.q:
        clauses.append(_search(ctx, flt.q))
    if flt.domain:
        clauses.append(domain_query(flt.domain))
    if flt.campaign:
        clauses.append({"campaign": flt.campaign})
    if flt.page_id:
        clauses.append({"page_id": flt.page_id})
    score: dict[str, float] = {}
    if flt.min_score is not None:
        score["$gte"] = flt.min_score
    if flt.max_score is not None:
        score["$lte"] = flt.max_score
    if score:
        clauses.append({"score": score})
    seen: dict[str, datetime] = {}
    if flt.since:
        seen["$gte"] = _day_start(flt.since)
    if flt.until:  # its last moment: the day after 9999-12-31 is no date
        seen["$lte"] = datetime.combine(flt.until, time.max, tzinfo=UTC)
    if seen:
        clauses.append({"first_seen": seen})
    return {"$and": clauses} if clauses else {}


def _sort_spec(sort: str) -> list[tuple[str, int]]:
    key = sort.lstrip("-")
    # _id breaks ties, so pages never repeat or skip a finding.
    return [(key, -1 if sort.startswith("-") else 1), ("_id", -1)]


@dataclass(frozen=True)
class FindingPage:
    """One page of a findings list."""

    items: list[dict[str, Any]]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))


def find_findings(
    ctx: Context, flt: FindingFilter, page: int = 1, per_page: int = 50
) -> FindingPage:
    """A page of findings matching the filter, in the filter's order (history left out)."""
    per_page = max(1, min(per_page, MAX_PER_PAGE))
    page = max(1, page)
    query = finding_query(ctx, flt)
    total = ctx.db.findings.count_documents(query)
    cursor = (
        ctx.db.findings.find(query, {"history": 0, "spans": 0})
        .sort(_sort_spec(flt.sort))
        .skip((page - 1) * per_page)
        .limit(per_page)
    )
    return FindingPage(list(cursor), total, page, per_page)


#: Findings of a list looked at for a finding's neighbours: past them, no previous/next.
NEIGHBOURS_SCANNED = 5000


@dataclass(frozen=True)
class Neighbours:
    """Where a finding sits in a filtered list: the findings before and after it."""

    previous: ObjectId | None
    next: ObjectId | None
    position: int | None  # 1-based; None when the finding is not in the list (any more)
    total: int


def neighbours(ctx: Context, flt: FindingFilter, finding_id: ObjectId) -> Neighbours:
    """The findings before and after ``finding_id`` in the filter's order, so a reviewer
    goes through a list one finding after another."""
    query = finding_query(ctx, flt)
    ids = [
        f["_id"]
        for f in ctx.db.findings.find(query, {"_id": 1})
        .sort(_sort_spec(flt.sort))
        .limit(NEIGHBOURS_SCANNED)
    ]
    total = ctx.db.findings.count_documents(query)
    if finding_id not in ids:
        return Neighbours(None, ids[0] if ids else None, None, total)
    at = ids.index(finding_id)
    return Neighbours(
        ids[at - 1] if at > 0 else None,
        ids[at + 1] if at + 1 < len(ids) else None,
        at + 1,
        total,
    )


@dataclass(frozen=True)
class Passage:
    """One matched passage: where it is in the work and on the page, and both texts."""

    index: int
    master_start: int
    master_end: int
    page_start: int
    page_end: int
    master_text: str
    page_text: str


def _clip(text: str, width: int | None) -> str:
    text = text.strip()
    if width is None or len(text) <= width:
        return text
    return text[: width - 1] + "…"


def passages(
    finding: Mapping[str, Any],
    master_text: str,
    page_text: str,
    width: int | None = None,
) -> list[Passage]:
    """The finding's matched passages in page order, texts clipped to ``width`` characters."""
    spans = sorted(finding.get("spans") or [], key=lambda s: (s[2], s[0]))
    return [
        Passage(
            i,
            ms,
            me,
            ss,
            se,
            _clip(master_text[ms:me], width),
            _clip(page_text[ss:se], width),
        )
        for i, (ms, me, ss, se) in enumerate(spans)
    ]


# ---------------------------------------------------------------- dashboard


def invalidate_dashboard(ctx: Context) -> None:
    """Drop the cached dashboard figures (after a reviewer changed statuses)."""
    ctx.redis.delete(ctx.keys.dashboard)


def _compute_dashboard(ctx: Context, now: datetime) -> dict[str, Any]:
    findings = ctx.db.findings
    by_status = {s: 0 for s in STATUSES}
    for row in findings.aggregate([{"$group": {"_id": "$status", "n": {"$sum": 1}}}]):
        by_status[row["_id"]] = row["n"]
    first_day = (now - timedelta(days=DAYS_CHARTED - 1)).date()
    per_day = dict.fromkeys(
        ((first_day + timedelta(days=n)).isoformat() for n in range(DAYS_CHARTED)), 0
    )
    for row in findings.aggregate(
        [
            {"$match": {"first_seen": {"$gte": _day_start(first_day)}}},
            {
                "$group": {
                    "_id": {"$dateToString": {"format": "%Y-%m-%d", "date": "$first_seen"}},
                    "n": {"$sum": 1},
                }
            },
        ]
    ):
        if row["_id"] in per_day:
            per_day[row["_id"]] = row["n"]
    live = {"status": {"$nin": ["dismissed", "licensed"]}}
    top_domains = [
        {"domain": row["_id"], "findings": row["n"], "works": len(row["works"])}
        for row in findings.aggregate(
            [
                {"$match": live},
                {
                    "$group": {
                        "_id": "$domain",
                        "n": {"$sum": 1},
                        "works": {"$addToSet": "$master_id"},
                    }
                },
                {"$sort": {"n": -1, "_id": 1}},
                {"$limit": 10},
            ]
        )
    ]
    top_works = [
        {
            "master_id": row["_id"],
            "external_id": row["external_id"],
            "title": row["title"],
            "pages": row["n"],
            "domains": len(row["domains"]),
        }
        for row in findings.aggregate(
            [
                {"$match": live},
                {
                    "$group": {
                        "_id": "$master_id",
                        "n": {"$sum": 1},
                        "external_id": {"$first": "$master_external_id"},
                        "title": {"$first": "$master_title"},
                        "domains": {"$addToSet": "$domain"},
                    }
                },
                {"$sort": {"n": -1, "_id": 1}},
                {"$limit": 10},
            ]
        )
    ]
    week_ago = now - timedelta(days=7)
    return {
        "computed_at": now.isoformat(),
        "by_status": by_status,
        "open": sum(by_status[s] for s in OPEN_STATUSES),
        "new_this_week": findings.count_documents({"first_seen": {"$gte": week_ago}}),
        "per_day": [{"day": day, "findings": n} for day, n in per_day.items()],
        "top_domains": top_domains,
        "top_works": top_works,
        "works": ctx.db.masters.estimated_document_count(),
    }


def dashboard(ctx: Context, max_age_s: int = DASHBOARD_MAX_AGE_S) -> dict[str, Any]:
    """Dashboard figures, aggregated at most once per ``max_age_s`` (cached in Redis).

    The aggregations scan the findings; caching keeps a busy dashboard from scanning on
    every request, and a status change drops the cache so reviewers see their own work.
    """
    cached = ctx.redis.get(ctx.keys.dashboard)
    if cached is not None:
        return json.loads(cached)
    figures = _compute_dashboard(ctx, datetime.now(UTC))
    ctx.redis.set(ctx.keys.dashboard, json.dumps(figures), ex=max_age_s)
    return figures


def recent_runs(ctx: Context, limit: int = 10) -> list[dict[str, Any]]:
    """The latest runs of all campaigns, newest first."""
    return list(ctx.db.runs.find().sort([("started_at", -1), ("_id", -1)]).limit(limit))


# ---------------------------------------------------------------- CSV export

CSV_COLUMNS = (
    ("id", lambda f: str(f["_id"])),
    ("status", lambda f: f.get("status")),
    ("work_id", lambda f: f.get("master_external_id")),
    ("work_title", lambda f: f.get("master_title")),
    ("domain", lambda f: f.get("domain")),
    ("url", lambda f: f.get("url")),
    ("campaign", lambda f: f.get("campaign")),
    ("dismiss_reason", lambda f: f.get("dismiss_reason")),
    ("score", lambda f: f.get("score")),
    ("work_coverage", lambda f: f.get("master_coverage")),
    ("page_coverage", lambda f: f.get("suspect_coverage")),
    ("hits", lambda f: f.get("hits")),
    ("first_seen", lambda f: iso(f.get("first_seen"))),
    ("last_seen", lambda f: iso(f.get("last_seen"))),
    # Two hashes, named for what they hash: the captured bytes (the evidence file) and
    # the text extracted from them (what was matched).
    ("page_capture_sha256", lambda f: f.get("capture_sha256")),
    ("page_text_sha256", lambda f: f.get("page_sha256")),
)
# A spreadsheet runs a cell starting with these as a formula (or DDE command).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "|", "%")


def safe_cell(value: Any) -> str:
    """A CSV cell that a spreadsheet shows as text, never evaluates (formula injection)."""
    if value is None:
        return ""
    if isinstance(value, bool | int | float):
        return str(value)
    text = str(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def findings_csv(ctx: Context, flt: FindingFilter, batch: int = 500) -> Iterator[str]:
    """The filtered findings as CSV text chunks: a BOM (so Excel reads UTF-8), header, rows."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([name for name, _ in CSV_COLUMNS])
    yield "\ufeff" + _drain(buffer)
    cursor = ctx.db.findings.find(finding_query(ctx, flt), {"history": 0, "spans": 0}).sort(
        _sort_spec(flt.sort)
    )
    while chunk := list(islice(cursor, batch)):
        captures = {
            page["_id"]: page.get("raw_sha256")
            for page in ctx.db.pages.find(
                {"_id": {"$in": [f["page_id"] for f in chunk]}}, {"raw_sha256": 1}
            )
        }
        for finding in chunk:
            finding["capture_sha256"] = captures.get(finding["page_id"])
            writer.writerow([safe_cell(get(finding)) for _, get in CSV_COLUMNS])
        yield _drain(buffer)


def _drain(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text


# ---------------------------------------------------------------- printable reports


@dataclass
class Report:
    """A printable report: a subject, summary figures, and its findings grouped."""

    kind: str  # "work" or "domain"
    subject: str
    generated_at: datetime
    summary: dict[str, int]
    groups: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    master: dict[str, Any] | None = None


def _summary(findings: list[dict[str, Any]]) -> dict[str, int]:
    counts = {s: 0 for s in STATUSES}
    for finding in findings:
        counts[finding["status"]] = counts.get(finding["status"], 0) + 1
    pages = len({finding.get("page_id") or finding.get("url") for finding in findings})
    return {"total": len(findings), "pages": pages, **counts}


def _grouped(
    findings: list[dict[str, Any]], label: Callable[[dict[str, Any]], str]
) -> list[tuple[str, list[dict[str, Any]]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for finding in findings:
        groups.setdefault(label(finding), []).append(finding)
    return sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))


_REPORT_FIELDS = {"history": 0, "spans": 0}


def _work_label(finding: dict[str, Any]) -> str:
    external_id = finding.get("master_external_id") or str(finding.get("master_id"))
    title = finding.get("master_title")
    return f"{title} ({external_id})" if title else external_id


def work_report(ctx: Context, work: str) -> Report | None:
    """Where a work (external id, master id or work id) was found, grouped by domain."""
    masters = find_masters(ctx, work)
    if not masters:
        return None
    findings = list(
        ctx.db.findings.find(
            {"master_id": {"$in": [m["_id"] for m in masters]}}, _REPORT_FIELDS
        ).sort([("score", -1), ("_id", 1)])
    )
    master = masters[0]
    return Report(
        kind="work",
        subject=master.get("title") or master["external_id"],
        generated_at=datetime.now(UTC),
        summary=_summary(findings),
        groups=_grouped(findings, lambda f: f.get("domain") or "—"),
        master={k: v for k, v in master.items() if k != "text"},
    )


def domain_report(ctx: Context, domain: str) -> Report:
    """What a domain (and its subdomains) copies, grouped by work."""
    domain = domain.lower()
    findings = list(
        ctx.db.findings.find(domain_query(domain), _REPORT_FIELDS).sort([("score", -1), ("_id", 1)])
    )
    return Report(
        kind="domain",
        subject=domain,
        generated_at=datetime.now(UTC),
        summary=_summary(findings),
        groups=_grouped(findings, _work_label),
    )
