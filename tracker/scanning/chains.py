"""Chapters split over pages. Pirate sites cut one chapter into "第1页/共3页 … 下一页"
pages so that no page holds much of it; each page alone may copy too little to be found.
The crawler records where a page continues (``next_url``: rel=next, a 下一页 / next page
link, a ``_2.html`` sibling); here the pages of such a chain are joined, in order, into one
document that is scanned as the chapter it is. Each page stays stored as the evidence it
is; the joined document names them (``parts``) and lives at the first page's URL with
``#pages`` added.

A chain is joined again whenever one of its pages is stored, so it is complete once its
last page is in, in whatever order the pages came. Its pages are stored ``chained`` and
matched only as part of the joined chapter: alone, each would be a quotation-sized excerpt
of it, ten findings for one copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bson import ObjectId

from ..context import Context
from ..findings.captures import page_text
from .pages import PageInput, store_page

#: Pages one chapter may be cut into at most (a longer chain is cut here).
MAX_CHAIN = 50
#: What the first page's URL gets to name the joined document.
JOINED = "#pages"
_FIELDS = {"url": 1, "next_url": 1, "text": 1, "text_file": 1, "title": 1, "campaign": 1,
           "run_id": 1}  # fmt: skip


def chain_of(ctx: Context, url: str) -> list[Mapping[str, Any]]:
    """The stored pages of the chain ``url`` is in, first to last (one page: no chain)."""
    page = ctx.db.pages.find_one({"url": url}, _FIELDS)
    if page is None:
        return []
    seen = {url}
    while len(seen) < MAX_CHAIN:  # back to the first page
        before = ctx.db.pages.find_one({"next_url": page["url"]}, _FIELDS)
        if before is None or before["url"] in seen:
            break
        seen.add(before["url"])
        page = before
    chain = [page]
    while chain[-1].get("next_url") and len(chain) < MAX_CHAIN:
        after = ctx.db.pages.find_one({"url": chain[-1]["next_url"]}, _FIELDS)
        if after is None or after["url"] in {p["url"] for p in chain}:
            break
        chain.append(after)
    return chain


def join_chain(ctx: Context, url: str) -> tuple[ObjectId, bool] | None:
    """Store the joined document of the chain ``url`` is in; its (id, whether its text
    changed), or None when ``url`` is in no chain of two pages or more."""
    chain = chain_of(ctx, url)
    if len(chain) < 2:
        return None
    first = chain[0]
    joined = PageInput(
        url=first["url"] + JOINED,
        text="\n".join(page_text(ctx, page) for page in chain),
        final_url=first["url"],
        title=first.get("title"),
        extractor=f"joined:{len(chain)}",
        campaign=first.get("campaign"),
        run_id=first.get("run_id"),
        parts=tuple(page["url"] for page in chain),
    )
    return store_page(ctx, joined)


def join_run_chains(ctx: Context, run_id: ObjectId) -> list[ObjectId]:
    """Join again every chain a run stored pages of — its last page may have come in
    without saying that it continues another —; the documents to scan: joined ones whose
    text changed, and pages that said they continue but whose next page never came (they
    are scanned alone after all). Each chain is walked once."""
    covered: set[str] = set()
    changed = []
    query = {"run_id": run_id, "next_url": {"$exists": True}}
    for page in ctx.db.pages.find(query, {"url": 1}):
        if page["url"] in covered:
            continue
        chain = chain_of(ctx, page["url"])
        covered.update(p["url"] for p in chain)
        if len(chain) == 1:
            ctx.db.pages.update_one(
                {"_id": chain[0]["_id"]}, {"$unset": {"chained": "", "scanned_as": ""}}
            )
            changed.append(chain[0]["_id"])
        elif (joined := join_chain(ctx, chain[0]["url"])) and joined[1]:
            changed.append(joined[0])
    return changed
