"""Re-checks after a takedown notice: once its deadline passed, is the copy gone?

The page is fetched again, stored as new evidence and scanned at once: a page that no
longer copies the work closes the finding ``removed`` (as any scan does), one that still
copies it keeps it ``notice_sent``. Either way each noticed finding of the page records
the re-check (tracker.findings.deadlines). A page that answers 404/410 is gone (the fetcher
hands it over empty); one that cannot be fetched at all (DNS, timeout, refused) is
``unreachable`` and tried again later.

The fetching is the crawler's: the shell passes its fetcher in (tracker does no HTTP).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from bson import ObjectId

from ..context import Context
from ..core.times import now as utc_now
from ..findings import NOTICE_SENT, SYSTEM, invalidate_dashboard
from ..findings.deadlines import GONE, OVERDUE, STILL_THERE, UNREACHABLE, record_check, stage_query
from .chains import join_chain
from .pages import PageInput, scan_page, store_page


class PageFetcher(Protocol):
    """Fetches a URL as the crawler would: its bytes, text and status (a 404/410 as an empty
    page with its ``skip_reason``); ``ocr``: with the text of its article's images, as a
    campaign with ``ocr`` stored it. Raises ValueError naming the URL when it cannot."""

    def __call__(self, url: str, *, ocr: bool = False) -> PageInput: ...


#: Pages re-checked in one go (one scheduler tick, one command): each is a fetch and a scan.
RECHECK_BATCH = 50


@dataclass(frozen=True)
class Recheck:
    """One page re-checked: its URL, what was found, for how many noticed findings, why."""

    page_id: ObjectId
    url: str
    outcome: str
    findings: int
    detail: str = ""


def due_pages(
    ctx: Context, at: datetime | None = None, limit: int = RECHECK_BATCH
) -> list[ObjectId]:
    """Pages with a finding whose notice deadline passed unchecked, earliest first."""
    due = ctx.db.findings.find(stage_query(OVERDUE, at or utc_now()), {"page_id": 1})
    pages: list[ObjectId] = []
    for finding in due.sort("notice_deadline", 1):
        if finding["page_id"] not in pages:
            pages.append(finding["page_id"])
            if len(pages) == limit:
                break
    return pages


def recheck_page(ctx: Context, page_id: ObjectId, fetch: PageFetcher, by: str = SYSTEM) -> Recheck:
    """Fetch a page again, store it, scan it, and record on each of its findings awaiting
    a notice's effect what was found. Raises LookupError when the page is not stored."""
    fields = {"url": 1, "campaign": 1, "run_id": 1, "next_url": 1, "parts": 1, "ocr_images": 1}
    page = ctx.db.pages.find_one({"_id": page_id}, fields)
    if page is None:
        raise LookupError(f"no page {page_id}")
    noticed = {"page_id": page_id, "status": NOTICE_SENT, "notice_deadline": {"$exists": True}}
    ids = [f["_id"] for f in ctx.db.findings.find(noticed, {"_id": 1})]
    at = utc_now()
    # A chapter joined from pages is re-checked as its pages, joined again.
    urls = page.get("parts") or [page["url"]]
    try:
        # Read as it was stored: a page whose text OCR read is read so again, or its copy
        # would look gone.
        fetched = [fetch(url, ocr=True) if page.get("ocr_images") else fetch(url) for url in urls]
    except ValueError as err:
        outcome, detail = UNREACHABLE, str(err)
    else:
        for n, (url, got) in enumerate(zip(urls, fetched, strict=True)):
            # New evidence under the page's own campaign and run, continuing where it
            # did: a re-check moves nothing.
            follows = urls[n + 1] if n + 1 < len(urls) else None
            store_page(ctx, replace(
                got, url=url, campaign=page.get("campaign"), run_id=page.get("run_id"),
                next_url=follows if page.get("parts") else page.get("next_url"),
            ))  # fmt: skip
        if page.get("parts"):
            join_chain(ctx, urls[0])
        scan_page(ctx, page_id)  # an unchanged text was scanned already: it still copies
        outcome = STILL_THERE
        detail = "; ".join(got.skip_reason for got in fetched if got.skip_reason)
        if not ids:  # a look without a notice: does the page still copy anything?
            copies = ctx.db.findings.count_documents({"page_id": page_id, "status": NOTICE_SENT})
            outcome = STILL_THERE if copies else GONE
    found = [
        record_check(ctx, finding, outcome, at, by, detail)
        for finding in ctx.db.findings.find({"_id": {"$in": ids}})
    ]
    outcomes = [o for o in found if o]
    if outcomes:
        invalidate_dashboard(ctx)
        outcome = STILL_THERE if STILL_THERE in outcomes else outcomes[0]
    return Recheck(page_id, page["url"], outcome, len(outcomes), detail)


def recheck_due(
    ctx: Context, fetch: PageFetcher, at: datetime | None = None, limit: int = RECHECK_BATCH
) -> list[Recheck]:
    """Re-check the pages whose notices' deadlines passed (at most ``limit``)."""
    return [recheck_page(ctx, page_id, fetch) for page_id in due_pages(ctx, at, limit)]
