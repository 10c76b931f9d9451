"""A discover run's seeds: the library's distinctive sentences asked of a search engine,
within the day's query budget, answers cached.

Works are taken in turn, ``sample`` per run (each campaign goes on where its last run
stopped, round the library), ``SENTENCES_PER_WORK`` sentences each, quoted as phrases.
An answer is reused for ``CACHE_DAYS``: a run asks only what was not asked lately. The
budget (COPYTRACK_SEARCH_DAILY_QUERIES) is shared by every discover campaign and counted
in MongoDB, one atomic step per query, so parallel runs never overspend it. Results on a
site a campaign already crawls, or on a licensed domain, are not crawled again.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from ..campaigns.store import list_campaigns
from ..context import Context
from ..core.times import now
from ..findings.licensing import licensed_domain_of
from ..masters.library import masters_after
from .providers import SearchError, SearchProvider, SearchResult
from .sentences import distinctive_sentences

SENTENCES_PER_WORK = 2
RESULTS_PER_QUERY = 10
CACHE_DAYS = 30
CACHE = "search_cache"
BUDGET = "search_budget"
CURSORS = "discovery_cursors"


@dataclass
class Discovery:
    """What a discover run asked and found: the seeds it crawls, and its counts."""

    seeds: list[str] = field(default_factory=list)
    works: int = 0  # works whose sentences were looked up
    asked: int = 0  # queries sent to the search engine
    cached: int = 0  # queries answered from the cache
    over_budget: int = 0  # queries not asked: the day's budget was spent
    results: int = 0  # result URLs, before the known sites were left out
    known: int = 0  # results on sites a campaign crawls, or licensed
    error: str | None = None  # the search engine failed: nothing more was asked

    def to_doc(self) -> dict[str, Any]:
        return asdict(self)


def discover(ctx: Context, campaign: str, provider: SearchProvider, sample: int) -> Discovery:
    """Ask ``provider`` for the distinctive sentences of the next ``sample`` works of
    campaign ``campaign``'s turn; returns the result URLs to crawl and the counts."""
    found = Discovery()
    known = known_site(ctx)
    seeds: dict[str, None] = {}
    for master in _next_works(ctx, campaign, sample):
        found.works += 1
        for sentence in distinctive_sentences(
            ctx, master["_id"], master["text"], SENTENCES_PER_WORK
        ):
            results = _answer(ctx, provider, f'"{sentence}"', found)
            if results is None:
                continue
            for result in results[:RESULTS_PER_QUERY]:
                found.results += 1
                if known(urlsplit(result.url).netloc.lower()):
                    found.known += 1
                else:
                    seeds.setdefault(result.url)
        if found.error:
            break
    found.seeds = list(seeds)
    return found


def _answer(
    ctx: Context, provider: SearchProvider, query: str, found: Discovery
) -> list[SearchResult] | None:
    """The results for ``query``: cached, or asked within the budget (None: not asked)."""
    key = hashlib.sha256(f"{provider.name}\0{query}".encode()).hexdigest()
    fresh_since = now() - timedelta(days=CACHE_DAYS)
    cached = ctx.db[CACHE].find_one({"_id": key, "answered_at": {"$gte": fresh_since}})
    if cached is not None:
        found.cached += 1
        return [SearchResult(**r) for r in cached["results"]]
    if found.error or not spend_query(ctx, provider.name):
        found.over_budget += 0 if found.error else 1
        return None
    try:
        results = provider.search(query)
    except SearchError as err:
        found.error = str(err)
        return None
    found.asked += 1
    ctx.db[CACHE].replace_one(
        {"_id": key},
        {"provider": provider.name, "query": query, "answered_at": now(),
         "results": [asdict(r) for r in results]},
        upsert=True,
    )  # fmt: skip
    return results


def spend_query(ctx: Context, provider: str) -> bool:
    """Take one query from today's budget (UTC); False when it is spent."""
    budget = ctx.settings.search_daily_queries
    day = f"{now():%Y-%m-%d}:{provider}"
    try:
        taken = ctx.db[BUDGET].find_one_and_update(
            {"_id": day, "used": {"$lt": budget}},
            {"$inc": {"used": 1}},
            upsert=budget > 0,
            return_document=ReturnDocument.AFTER,
        )
    except DuplicateKeyError:  # today's count exists and is at the budget
        return False
    return taken is not None


def queries_left(ctx: Context, provider: str) -> int:
    """Queries today's budget still allows (UTC)."""
    used = ctx.db[BUDGET].find_one({"_id": f"{now():%Y-%m-%d}:{provider}"}) or {}
    return max(0, ctx.settings.search_daily_queries - used.get("used", 0))


def _next_works(ctx: Context, campaign: str, sample: int) -> list[dict[str, Any]]:
    """The ``sample`` masters after the campaign's cursor, round the library; the cursor
    moves past them."""
    cursor = ctx.db[CURSORS].find_one({"_id": campaign}) or {}
    works = masters_after(ctx, cursor.get("after", 0), sample, {"text": 1})
    if works:
        ctx.db[CURSORS].update_one(
            {"_id": campaign}, {"$set": {"after": works[-1]["_id"]}}, upsert=True
        )
    return works


def known_site(ctx: Context) -> Callable[[str], bool]:
    """Whether a host[:port] is known already: a sites campaign crawls it, or its domain is
    licensed (each licence looked up once)."""
    crawled = {
        domain
        for campaign in list_campaigns(ctx)
        if campaign.kind == "sites"
        for domain in campaign.domains()
    }

    @functools.cache
    def licensed(host: str) -> bool:
        return licensed_domain_of(ctx, host) is not None

    return lambda site: site in crawled or licensed(site.split(":")[0])
