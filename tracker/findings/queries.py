"""Which findings a reviewer asks for: filters read from a request, their MongoDB query, a
page of results and a finding's neighbours in that list.

The admin (web pages, JSON API) and the command line share these, so a filter means the
same everywhere and an export holds exactly what a reviewer sees.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from typing import TYPE_CHECKING, Any

from bson import ObjectId
from bson.errors import InvalidId

from ..context import Context
from ..core.store import all_of, find_in
from ..core.times import now
from ..masters.library import find_masters
from .deadlines import NOTICE_STAGES, stage_query
from .status import STATUSES

if TYPE_CHECKING:
    from .catalogue import Catalogue

#: Sort keys a findings list accepts; ``-key`` sorts descending.
_WITH_PORT = re.compile(r"[^:]+:\d{1,5}")
SORT_KEYS = (
    "last_seen",
    "first_seen",
    "score",
    "hits",
    "master_coverage",
    "copied_chars",
    "domain",
)


DEFAULT_SORT = "-last_seen"

#: Which findings by how much they copy (``size``): copies only (the reviewer's queue),
#: the quotation-sized ones kept out of it (fewer than `tracker.matching.matcher.QUOTATION_CHARS`
#: characters), or both.
SIZES = ("copies", "quotations", "any")
DEFAULT_SIZE = "copies"


MAX_PER_PAGE = 200


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
    # Characters of the work copied: a quotation-sized excerpt or a copy.
    min_copied: int | None = None
    max_copied: int | None = None
    since: date | None = None  # first seen on or after
    until: date | None = None  # first seen on or before
    page_id: ObjectId | None = None  # the findings of one page (a whole book copies many works)
    notice: str | None = None  # where their takedown notice stands (deadlines.NOTICE_STAGES)
    size: str = DEFAULT_SIZE  # copies, quotation-sized findings, or any (SIZES)
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
            "min_copied": self.min_copied,
            "max_copied": self.max_copied,
            "since": self.since,
            "until": self.until,
            "page_id": self.page_id,
            "notice": self.notice,
            "size": self.size if self.size != DEFAULT_SIZE else None,
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


def _characters(params: Mapping[str, str], name: str) -> int | None:
    """A whole number of characters in parameter ``name``; None if not given."""
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()) or int(raw) > 10**9:
        raise FilterError(f"{name}={raw!r}: give a whole number of characters")
    return int(raw)


def _date(params: Mapping[str, str], name: str) -> date | None:
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise FilterError(f"{name}={raw!r}: give a date as YYYY-MM-DD") from None


#: Longest search and domain a filter takes: escaped for a ``$regex``, each stays under the
#: 1,000 characters of pattern the embedded MongoDB accepts (a host name has at most 253,
#: and may have a port after it).
MAX_SEARCH_CHARS = 200
MAX_DOMAIN_CHARS = 260


def _limited(params: Mapping[str, str], name: str, limit: int) -> str | None:
    """The text of parameter ``name``, at most ``limit`` characters; None if not given."""
    raw = (params.get(name) or "").strip()
    if len(raw) > limit:
        raise FilterError(f"{name} has {len(raw):,} characters: give at most {limit}")
    return raw or None


def parse_filter(params: Mapping[str, str]) -> FindingFilter:
    """A FindingFilter from query parameters; raises FilterError naming a bad parameter.

    ``status`` may list several statuses separated by commas.
    """
    statuses = tuple(s for s in (params.get("status") or "").replace(" ", "").split(",") if s)
    for status in statuses:
        if status not in STATUSES:
            raise FilterError(f"status={status!r}: use one of {', '.join(STATUSES)}")
    notice = (params.get("notice") or "").strip() or None
    if notice is not None and notice not in NOTICE_STAGES:
        raise FilterError(f"notice={notice!r}: use one of {', '.join(NOTICE_STAGES)}")
    size = (params.get("size") or DEFAULT_SIZE).strip()
    if size not in SIZES:
        raise FilterError(f"size={size!r}: use one of {', '.join(SIZES)}")
    sort = (params.get("sort") or DEFAULT_SORT).strip()
    if sort.lstrip("-") not in SORT_KEYS:
        raise FilterError(f"sort={sort!r}: use one of {', '.join(SORT_KEYS)} (prefix - to reverse)")

    def text(name: str) -> str | None:
        return (params.get(name) or "").strip() or None

    return FindingFilter(
        status=statuses,
        work=text("work"),
        q=_limited(params, "q", MAX_SEARCH_CHARS),
        domain=(_limited(params, "domain", MAX_DOMAIN_CHARS) or "").lower() or None,
        campaign=text("campaign"),
        min_score=_share(params, "min"),
        max_score=_share(params, "max"),
        min_copied=_characters(params, "min_copied"),
        max_copied=_characters(params, "max_copied"),
        since=_date(params, "since"),
        until=_date(params, "until"),
        page_id=parse_object_id(page_id, "page") if (page_id := text("page_id")) else None,
        notice=notice,
        size=size,
        sort=sort,
    )


def day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def domain_query(domain: str) -> dict[str, Any]:
    """Findings on ``domain`` or any of its subdomains; with a port (``host:8001``), on
    that site alone."""
    if _WITH_PORT.fullmatch(domain):
        return {"site": domain}
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


def size_query(size: str) -> dict[str, Any]:
    """Findings of one of SIZES; one recorded before sizes were kept counts as a copy."""
    if size == "quotations":
        return {"quotation": True}
    return {"quotation": {"$ne": True}} if size == "copies" else {}


def finding_query(ctx: Context, flt: FindingFilter) -> dict[str, Any]:
    """The MongoDB query of a filter (an unknown work matches nothing)."""
    clauses: list[dict[str, Any]] = [size_query(flt.size)]
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
    if flt.notice:
        clauses.append(stage_query(flt.notice, now()))
    for field, low, high in (("score", flt.min_score, flt.max_score),
                             ("copied_chars", flt.min_copied, flt.max_copied)):  # fmt: skip
        bounds = {op: value for op, value in (("$gte", low), ("$lte", high)) if value is not None}
        if bounds:
            clauses.append({field: bounds})
    seen: dict[str, datetime] = {}
    if flt.since:
        seen["$gte"] = day_start(flt.since)
    if flt.until:  # its last moment: the day after 9999-12-31 is no date
        seen["$lte"] = datetime.combine(flt.until, time.max, tzinfo=UTC)
    if seen:
        clauses.append({"first_seen": seen})
    return all_of([clause for clause in clauses if clause])


def sort_spec(sort: str) -> list[tuple[str, int]]:
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


def _works(ctx: Context, flt: FindingFilter) -> list[int] | None:
    """The works a filter's ``work`` names (a catalogue asks the library)."""
    return [m["_id"] for m in find_masters(ctx, flt.work)] if flt.work else None


def find_findings(
    ctx: Context,
    flt: FindingFilter,
    page: int = 1,
    per_page: int = 50,
    catalogue: Catalogue | None = None,
) -> FindingPage:
    """A page of findings matching the filter, in the filter's order (history left out);
    listed and counted by ``catalogue`` when given, the page's findings read by id."""
    per_page = max(1, min(per_page, MAX_PER_PAGE))
    page = max(1, page)
    if catalogue is not None:
        ids, total = catalogue.page(flt, page, per_page, _works(ctx, flt))
        read = find_in(ctx.db.findings, "_id", ids, {"history": 0, "spans": 0})
        found = {finding["_id"]: finding for finding in read}
        return FindingPage([found[i] for i in ids if i in found], total, page, per_page)
    query = finding_query(ctx, flt)
    total = ctx.db.findings.count_documents(query)
    cursor = (
        ctx.db.findings.find(query, {"history": 0, "spans": 0})
        .sort(sort_spec(flt.sort))
        .skip((page - 1) * per_page)
        .limit(per_page)
    )
    return FindingPage(list(cursor), total, page, per_page)


def matching_ids(
    ctx: Context, flt: FindingFilter, catalogue: Catalogue | None = None
) -> list[ObjectId]:
    """The ids of every finding matching the filter, in its order (a bulk change of a whole
    list); from ``catalogue`` when given."""
    if catalogue is not None:
        return catalogue.ordered(flt, _works(ctx, flt))
    found = ctx.db.findings.find(finding_query(ctx, flt), {"_id": 1}).sort(sort_spec(flt.sort))
    return [finding["_id"] for finding in found]


def hidden_quotations(ctx: Context, flt: FindingFilter, catalogue: Catalogue | None = None) -> int:
    """How many quotation-sized findings a filter of copies leaves out (0 for another
    size): the list says so, with a link that shows them. Counted by ``catalogue`` when
    given (a search counted by MongoDB scans every finding: minutes at 100,000)."""
    if flt.size != DEFAULT_SIZE:
        return 0
    quotations = replace(flt, size="quotations")
    if catalogue is not None:
        return catalogue.page(quotations, 1, 1, _works(ctx, quotations))[1]
    return ctx.db.findings.count_documents(finding_query(ctx, quotations))


#: Findings of a list looked at for a finding's neighbours: past them, no previous/next.
NEIGHBOURS_SCANNED = 5000


@dataclass(frozen=True)
class Neighbours:
    """Where a finding sits in a filtered list: the findings before and after it."""

    previous: ObjectId | None
    next: ObjectId | None
    position: int | None  # 1-based; None when the finding is not in the list (any more)
    total: int


def neighbours(
    ctx: Context, flt: FindingFilter, finding_id: ObjectId, catalogue: Catalogue | None = None
) -> Neighbours:
    """The findings before and after ``finding_id`` in the filter's order, so a reviewer
    goes through a list one finding after another (in all of it, with ``catalogue``)."""
    if catalogue is not None:
        return catalogue.neighbours(flt, finding_id, _works(ctx, flt))
    query = finding_query(ctx, flt)
    ids = [
        f["_id"]
        for f in ctx.db.findings.find(query, {"_id": 1})
        .sort(sort_spec(flt.sort))
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
