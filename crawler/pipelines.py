"""The evidence pipeline: page bytes → decoded text → article text → tracker → scan queue.

For every fetched page: decode (crawler.decoding) and extract (crawler.extraction) in
worker processes, store the page with its raw bytes, headers and metadata
(tracker.pages.store_page), and queue a scan (tracker.tasks.enqueue_scan) when its text
changed; an unchanged text is not scanned again. Pages without usable text (binary,
empty, undecodable, no main text, not HTML) are stored too, with ``skip_reason``, and
counted; so is every URL that gave no page (``PageProblem``). A page that had text and
now answers 404/410 is stored empty: its rescan marks its findings ``removed``.
The counts reach the run document every few seconds and at the end.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import socket
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bson import ObjectId
from pymongo.errors import DuplicateKeyError
from scrapy.crawler import Crawler

from tracker.campaigns import record_progress
from tracker.context import process_context
from tracker.pages import PageInput, store_page
from tracker.tasks import enqueue_scan

from .decoding import UnusableContent, decode_html
from .extraction import extract
from .items import NETWORK, NOT_MODIFIED, STORED, FetchedPage, PageProblem

#: Media types decoded as pages; anything else is stored as skipped ("not_html").
PAGE_TYPES = frozenset({"text/html", "application/xhtml+xml", "text/plain"})
#: Share of replaced (undecodable) characters above which a decoding is unusable.
MAX_REPLACED_SHARE = 0.01
GONE_STATUSES = frozenset({404, 410})


@dataclass(frozen=True)
class Digest:
    """What decoding and extraction made of a page's bytes."""

    text: str = ""
    title: str | None = None
    author: str | None = None
    date: str | None = None
    extractor: str | None = None
    encoding: str | None = None
    skip: str | None = None  # reason key when the page has no usable text
    detail: str = ""


def digest(body: bytes, content_type: str | None, url: str) -> Digest:
    """Decode and extract one page (runs in a worker process)."""
    media_type = (content_type or "text/html").split(";")[0].strip().lower()
    if media_type not in PAGE_TYPES:
        return Digest(skip="not_html", detail=f"Content-Type {media_type}")
    try:
        decoded = decode_html(body, content_type)
    except UnusableContent as err:
        reason = "empty" if str(err).startswith("empty") else "binary"
        return Digest(skip=reason, detail=str(err))
    if decoded.replaced > max(10, MAX_REPLACED_SHARE * len(decoded.text)):
        detail = f"{decoded.replaced} undecodable byte sequences as {decoded.encoding}"
        return Digest(encoding=decoded.encoding, skip="undecodable", detail=detail)
    found = extract(decoded.text, url)
    common = {"title": found.title, "author": found.author, "date": found.date}
    if not found.text:
        return Digest(**common, encoding=decoded.encoding, skip="no_main_text",
                      detail=found.reason or "")  # fmt: skip
    return Digest(found.text, **common, extractor=found.extractor, encoding=decoded.encoding)


class EvidencePipeline:
    """Stores every page of a run as evidence and hands changed texts to the scanners."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.run_id = ObjectId(settings["COPYTRACK_RUN_ID"])
        self.campaign = settings.getdict("COPYTRACK_CAMPAIGN")["name"]
        self.crawler_name = f"{socket.gethostname()}-{os.getpid()}"
        self.progress_every = settings.getfloat("COPYTRACK_PROGRESS_EVERY")
        self.processes = settings.getint("COPYTRACK_EXTRACT_PROCESSES") or os.cpu_count() or 1
        self.ctx = process_context()
        self.counts: Counter[str] = Counter()
        self._flushed = time.monotonic()
        self._pool: ProcessPoolExecutor | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> EvidencePipeline:
        return cls(crawler)

    def open_spider(self) -> None:
        # forkserver: the workers do not inherit the reactor's threads and sockets; its
        # server imports this module (trafilatura, lxml) once for all workers. Like any
        # multiprocessing program, one embedding a crawl needs `if __name__ == "__main__"`.
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])
        self._pool = ProcessPoolExecutor(self.processes, mp_context=context)

    async def close_spider(self) -> None:
        await self._flush()
        if self._pool is not None:
            self._pool.shutdown()

    async def process_item(self, item: Any) -> Any:
        if isinstance(item, PageProblem):
            counts = await asyncio.to_thread(self._problem, item)
        elif item.source == STORED:
            counts = ["skipped.fresh"]
        elif item.source == NOT_MODIFIED:
            await asyncio.to_thread(self._touch, item.url)
            counts = ["pages.fetched", "pages.unchanged"]
        else:
            assert item.source == NETWORK and self._pool is not None
            loop = asyncio.get_running_loop()
            content_type = _header(item.headers, "content-type")
            found = await loop.run_in_executor(
                self._pool, digest, item.body, content_type, item.final_url
            )
            counts = await asyncio.to_thread(self._store, item, found)
        # Added only now: a flush during the awaits above swaps self.counts.
        self.counts.update(counts)
        if time.monotonic() - self._flushed > self.progress_every:
            await self._flush()
        return item

    # ------------------------------------------------------------------ blocking parts
    # Run in threads (MongoDB and Redis calls must not stall the reactor); each returns
    # its counts, which only the reactor's thread adds up.

    def _save(self, page: PageInput, skip_reason: str | None) -> list[str]:
        try:
            page_id, changed = store_page(self.ctx, page)
        except DuplicateKeyError:
            # Two responses for one URL (a redirect and its target) raced to insert it.
            page_id, changed = store_page(self.ctx, page)
        if skip_reason:
            self.ctx.db.pages.update_one({"_id": page_id}, {"$set": {"skip_reason": skip_reason}})
        elif changed:
            self.ctx.db.pages.update_one(
                {"_id": page_id, "skip_reason": {"$exists": True}}, {"$unset": {"skip_reason": ""}}
            )
        counts = []
        if changed:
            enqueue_scan(page_id)
            counts.append("scans_enqueued")
        if not skip_reason:
            counts.append("pages.changed" if changed else "pages.unchanged")
        return counts

    def _store(self, item: FetchedPage, found: Digest) -> list[str]:
        page = PageInput(
            url=item.url,
            text=found.text,
            raw=item.body,
            final_url=item.final_url,
            status=item.status,
            headers=item.headers,
            title=found.title,
            author=found.author,
            published=found.date,
            encoding=found.encoding,
            extractor=found.extractor,
            campaign=self.campaign,
            run_id=self.run_id,
        )
        counts = ["pages.fetched"] + ([f"skipped.{found.skip}"] if found.skip else [])
        return counts + self._save(page, f"{found.skip}: {found.detail}" if found.skip else None)

    def _problem(self, item: PageProblem) -> list[str]:
        counts = [f"{'skipped' if item.skipped else 'failed'}.{item.reason}"]
        if item.status not in GONE_STATUSES:
            return counts
        known = self.ctx.db.pages.find_one({"url": item.url}, {"text": 1})
        if known and known.get("text"):
            gone = PageInput(
                url=item.url, text="", status=item.status, campaign=self.campaign,
                run_id=self.run_id,
            )  # fmt: skip
            counts += self._save(gone, f"gone: {item.detail}")
        return counts

    def _touch(self, url: str) -> None:
        self.ctx.db.pages.update_one({"url": url}, {"$set": {"fetched_at": datetime.now(UTC)}})

    async def _flush(self) -> None:
        counts, self.counts = self.counts, Counter()
        self._flushed = time.monotonic()
        if counts:
            await asyncio.to_thread(
                record_progress, self.ctx, self.run_id, counts, self.crawler_name
            )


def _header(headers: dict[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name), None)
