"""The evidence pipeline: page bytes → decoded text → article text → tracker → scan queue.

For every fetched page, in worker processes (the crawl's process keeps to the network):
decode (extractor.decoding) and extract (extractor.extraction), store the page with its raw
bytes, headers and metadata, and queue a scan when its text changed (crawler.storing); an
unchanged text is not scanned again. Pages without usable text (binary, empty, undecodable,
no main text, not HTML, over ``COPYTRACK_EXTRACT_CPU_SECONDS`` of extraction) are stored
too, with ``skip_reason``, and counted; so is every URL that gave no page
(``PageProblem``). A page that had text and now answers 404/410 is stored empty: its rescan
marks its findings ``removed``. A page served from the store (fetched recently, or a 304)
whose text was never scanned (its run died first) is scanned as this run's. The counts
reach the run document every few seconds and at the end.

Back-pressure: while the scan queue holds ``COPYTRACK_SCAN_QUEUE_MAX`` tasks, the crawl
is paused (`ScanBackoff`) instead of filling Redis faster than the workers empty it.

A page that cannot be stored (a server down or restarting on another port, a full disk) is
stored again, the servers looked for between tries (this process and each worker process
follow them as the Celery workers do), for ``COPYTRACK_STORE_PATIENCE`` seconds; then it
is counted (``failed.not_stored``), the crawl stops, and its run fails naming the failure:
a run never finishes over pages it dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import multiprocessing
import os
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from functools import partial
from typing import Any

import redis
from bson import ObjectId
from kombu.exceptions import OperationalError
from pymongo.errors import PyMongoError
from scrapy import Request, signals
from scrapy.crawler import Crawler

from tracker.campaigns import claim_unscanned, reason_key, record_progress
from tracker.campaigns.outcomes import KEPT_PER_CRAWLER, Problem, record_problems
from tracker.celery_app import ROUTES
from tracker.context import Context, follow_servers, process_context
from tracker.core.config import Settings
from tracker.core.failures import describe, storage_failed
from tracker.runtime.servers import ServerStartError
from tracker.scanning.chains import join_run_chains
from tracker.scanning.pages import PageInput
from tracker.tasks import enqueue_scan

from .digest import GONE_STATUSES
from .extraction_server import start_extraction_server
from .image_downloads import fetch_images
from .images import ocr_limits
from .items import (
    NETWORK,
    NOT_MODIFIED,
    STORED,
    DroppedLinks,
    FetchedImage,
    FetchedPage,
    PageProblem,
)
from .lookup import PageLookup, stored_pages
from .storing import save_page, store_fetched
from .urls import canonicalize

#: The Celery queue of the scans this pipeline sends.
SCAN_QUEUE = ROUTES["tracker.scan_page"]["queue"]
#: Seconds between readings of the scan queue's depth while the crawl is paused.
BACKOFF_POLL = 1.0
#: Seconds after which a reading is stale anyway: other processes fill the queue too.
DEPTH_REFRESH = 5.0
#: What storing a page (or a run's counts) meets when a server is down, restarting on
#: another port, or out of disk: worth trying again once the servers are found.
STORE_ERRORS = (PyMongoError, redis.RedisError, OperationalError, OSError)
#: The pauses between two tries of storing a page (the last repeated), for
#: COPYTRACK_STORE_PATIENCE seconds.
STORE_PAUSES = (1.0, 2.0, 4.0, 8.0, 15.0)
#: The crawl's stat holding why it stopped storing pages (crawler.run fails the run so).
NOT_STORED_STAT = "copytrack/not_stored"

log = logging.getLogger(__name__)


def _failure(err: BaseException) -> str:
    """A storing failure in one line, naming the server and its data dir (`describe`); a
    scan that could not be queued is Redis's failure, in kombu's words."""
    if isinstance(err, OperationalError):
        text = str(err)
        err = (
            redis.ResponseError(text) if text.startswith("MISCONF") else redis.ConnectionError(text)
        )
    return describe(err, Settings.from_env()) or f"{type(err).__name__}: {err}"


class ScanBackoff:
    """Pauses the crawl while the scan queue is full: a crawl outrunning the workers would
    grow Redis without limit (``noeviction``: until writes fail).

    Each item that may queue a scan first reserves room (`reserve`) and hands it back when
    stored (`release`). The depth is known as its last reading plus the scans queued since
    plus the reservations, so Redis is read only when that reaches ``bound`` (or the
    reading is DEPTH_REFRESH old). A queue found full, once the items being stored have
    queued their scans or not, pauses the engine (no new requests) and holds every item
    back until the workers have taken the queue down to half the bound. A crawl process
    alone on the queue thus never takes it past the bound.
    """

    def __init__(
        self, crawler: Crawler, client: redis.Redis, queue_key: str, bound: int, label: str
    ) -> None:
        self.crawler = crawler
        self.client = client
        self.queue_key = queue_key
        self.bound = bound  # 0: no bound
        self.low = bound // 2
        self.label = label  # who is paused, for the log
        self._depth = 0  # at the last reading
        self._queued = 0  # scans queued since the last reading
        self._reserved = 0  # items storing now, each possibly queueing a scan
        self._read_at = -DEPTH_REFRESH
        self._lock = asyncio.Lock()
        self._released = asyncio.Event()

    def _expected(self) -> int:
        return self._depth + self._queued + self._reserved

    async def _read(self) -> None:
        # Scans queued (released) while the reading is out may have been queued after it:
        # they stay counted. Only those released before it are surely in it.
        counted = self._queued
        try:
            self._depth = await asyncio.to_thread(self.client.llen, self.queue_key)
        except redis.RedisError as err:  # the stores that follow find the servers again
            log.warning("the scan queue's depth is unknown for now (%s)", err)
            return
        self._queued -= counted
        self._read_at = time.monotonic()

    async def reserve(self, scans: int = 1) -> None:
        """Wait until the scan queue has room for ``scans`` more scans, and take it (a page
        of a chapter cut into several may queue its chapter's scan too)."""
        if not self.bound:
            return
        # One item at a time: the others wait here while the crawl is paused.
        async with self._lock:
            stale = time.monotonic() - self._read_at > DEPTH_REFRESH
            if stale or self._expected() + scans > self.bound:
                await self._read()
            if self._expected() + scans > self.bound:
                # Items being stored may queue a scan or not: full only if they did.
                while self._reserved:
                    self._released.clear()
                    await self._released.wait()
                await self._read()
                if self._depth + scans > self.bound:
                    await self._back_off()
            self._reserved += scans

    def release(self, queued: int, scans: int = 1) -> None:
        """Hand back a reservation of ``scans``; ``queued``: the scans the item queued."""
        if self.bound:
            self._reserved -= scans
            self._queued += queued
            self._released.set()

    async def _back_off(self) -> None:
        assert self.crawler.engine is not None
        engine = self.crawler.engine
        engine.pause()
        log.warning(
            "%s paused: the scan queue holds %d tasks (bound %d); resuming once it is down to %d",
            self.label,
            self._depth,
            self.bound,
            self.low,
        )
        start = time.monotonic()
        try:
            # A crawl asked to stop lets its last items through rather than hang.
            while self._expected() > self.low and engine.running:
                await asyncio.sleep(BACKOFF_POLL)
                await self._read()
        finally:
            engine.unpause()
        log.warning(
            "%s resumed after %.0f s: the scan queue holds %d tasks",
            self.label,
            time.monotonic() - start,
            self._depth,
        )


class EvidencePipeline:
    """Stores every page of a run as evidence and hands changed texts to the scanners."""

    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.run_id = ObjectId(settings["COPYTRACK_RUN_ID"])
        self.campaign = settings.getdict("COPYTRACK_CAMPAIGN")["name"]
        self.crawler_name = f"{socket.gethostname()}-{os.getpid()}"
        self.progress_every = settings.getfloat("COPYTRACK_PROGRESS_EVERY")
        self.processes = settings.getint("COPYTRACK_EXTRACT_PROCESSES") or os.cpu_count() or 1
        self.niceness = settings.getint("COPYTRACK_EXTRACT_NICENESS")
        self.cpu_seconds = settings.getfloat("COPYTRACK_EXTRACT_CPU_SECONDS")
        self.store_patience = settings.getfloat("COPYTRACK_STORE_PATIENCE")
        # Campaigns with ``ocr``: the images of each page's article are read (crawler.images).
        self.ocr = ocr_limits(settings) if settings.getbool("COPYTRACK_OCR") else None
        self.not_stored = ""  # why the last page not stored was not (`_stored`)
        self._closing: asyncio.Future[None] | None = None  # the crawl stopping, if it is
        self.crawler = crawler
        ctx = process_context()
        self.backoff = ScanBackoff(
            crawler,
            ctx.redis,
            ctx.keys.queue(SCAN_QUEUE),
            ctx.settings.scan_queue_max,
            f"crawl of campaign {self.campaign} (run {self.run_id})",
        )
        # Whether a page now answering 404/410 had text.
        self.texts = PageLookup(stored_pages, ("text", "text_file"), by_site=True)
        self.counts: Counter[str] = Counter()
        self.problems: list[Problem] = []  # URLs skipped or failed, for the run page
        self._problems_kept = 0
        self._flushed = time.monotonic()
        self._pool: ProcessPoolExecutor | None = None
        self._pool_started: asyncio.Future[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> EvidencePipeline:
        pipeline = cls(crawler)
        crawler.signals.connect(pipeline.request_dropped, signal=signals.request_dropped)
        return pipeline

    def request_dropped(self, request: Request) -> None:
        """A request the scheduler dropped as seen already: a redirect back to a URL of its
        own chain (to itself, say) is the URL's only outcome, counted as a redirect loop."""
        chain = request.meta.get("redirect_urls") or []
        target = canonicalize(request.url)
        if any(canonicalize(url) == target for url in chain):
            detail = " → ".join([*chain, request.url])
            self.counts["failed.redirect_loop"] += 1
            self._keep(Problem(canonicalize(chain[0]), "failed", "redirect_loop", detail))

    @property
    def ctx(self) -> Context:
        """This process's context as it is now (another once the servers moved)."""
        return process_context()

    async def open_spider(self) -> None:
        # forkserver: the workers do not inherit the reactor's threads and sockets; its
        # server imports this module (trafilatura, lxml) and warms trafilatura's caches
        # once for all workers. Like any multiprocessing program, one embedding a crawl
        # needs `if __name__ == "__main__"`.
        context = multiprocessing.get_context("forkserver")
        self._pool = ProcessPoolExecutor(self.processes, mp_context=context)
        # Started now, from a thread: the first worker waits a second or more for the
        # forkserver's imports, which would block the reactor (and inflate the latencies
        # AutoThrottle measures) if the first page started it.
        self._pool_started = asyncio.ensure_future(asyncio.to_thread(self._start_workers))

    def _start_workers(self) -> None:
        assert self._pool is not None
        start_extraction_server(self.niceness)  # unless `python -m crawler` did
        # One task per worker, all in flight at once: each one starts another worker.
        for started in [self._pool.submit(os.getpid) for _ in range(self.processes)]:
            started.result()

    async def close_spider(self) -> None:
        # The chapters cut into pages, joined once more now that all their pages are in.
        for joined in await asyncio.to_thread(join_run_chains, self.ctx, self.run_id):
            await self.backoff.reserve()
            enqueue_scan(joined)
            self.backoff.release(1)
            self.counts["scans_enqueued"] += 1
        for pause in STORE_PAUSES:  # the last counts, while the servers may take them
            await self._flush()
            if not (self.counts or self.problems):
                break
            await asyncio.sleep(pause)
        if self._pool is not None:
            assert self._pool_started is not None
            # Not before the workers have started (had they failed, every page said so).
            await asyncio.wait([self._pool_started])
            self._pool.shutdown()

    async def process_item(self, item: Any) -> Any:
        if isinstance(item, DroppedLinks):  # links not followed: counted, the page named
            self.counts[f"skipped.{item.reason}"] += item.count
            self._keep(Problem(item.url, "skipped", item.reason, f"{item.count} links"))
            return item
        counts: list[str] = []
        save: Callable[[], Awaitable[list[Any]]] | None = None
        if isinstance(item, PageProblem):
            counts.append(f"{'skipped' if item.skipped else 'failed'}.{item.reason}")
            if item.status in GONE_STATUSES:
                known = await self.texts.get(item.url)
                # It had text (in its document, or a book's in GridFS): stored empty, rescanned.
                if known and (known.get("text") or known.get("text_file")):
                    save = partial(asyncio.to_thread, self._gone, item)
        elif item.source in (STORED, NOT_MODIFIED):
            save = partial(asyncio.to_thread, self._reuse, item)
        else:
            assert item.source == NETWORK and self._pool_started is not None
            images = await self._images(item)
            await asyncio.shield(self._pool_started)  # an item cancelled leaves it be
            loop = asyncio.get_running_loop()
            save = partial(
                loop.run_in_executor,
                self._pool,
                store_fetched,
                item,
                self.campaign,
                self.run_id,
                self.cpu_seconds,
                images,
                self.ocr,
            )
        if save is not None:
            # A page's own scan, and its chapter's: any page may join a chain, even one that
            # links to no other (the last part, which an earlier part's next link named).
            scans = 2 if isinstance(item, FetchedPage) else 1
            await self.backoff.reserve(scans)
            queued = scans  # unless it says otherwise: a save that failed midway may have queued
            try:
                for count in await self._stored(save, item):
                    if isinstance(count, Problem):  # an image not read: its own URL
                        self._count_problem(count)
                    else:
                        counts.append(count)
                queued = counts.count("scans_enqueued")
            finally:
                self.backoff.release(queued, scans)
        # Added only now: a flush during the awaits above swaps self.counts.
        self.counts.update(counts)
        for key in counts:
            outcome, _, reason = key.partition(".")
            if outcome in ("skipped", "failed"):
                detail = item.detail if isinstance(item, PageProblem) else ""
                if reason == "not_stored":
                    detail = self.not_stored
                status = item.status
                self._keep(Problem(item.url, outcome, reason_key(reason), detail, status))
        if time.monotonic() - self._flushed > self.progress_every:
            await self._flush()
        return item

    async def _images(self, item: FetchedPage) -> list[FetchedImage]:
        """The page's article images, fetched; those that gave nothing, and those over
        COPYTRACK_OCR_IMAGES, counted as the run's problems."""
        if self.ocr is None:
            return []
        if item.images_over_limit:
            detail = f"{item.images_over_limit} images over COPYTRACK_OCR_IMAGES, not read"
            self._count_problem(Problem(item.url, "skipped", "ocr_images_over_limit", detail))
        fetched = await fetch_images(self.crawler, item, self.ocr.max_bytes) if item.images else []
        for problem in fetched:
            if isinstance(problem, PageProblem):
                outcome = "skipped" if problem.skipped else "failed"
                self._count_problem(Problem(problem.url, outcome, problem.reason, problem.detail))
        return [image for image in fetched if isinstance(image, FetchedImage)]

    def _count_problem(self, problem: Problem) -> None:
        self.counts[f"{problem.outcome}.{reason_key(problem.reason)}"] += 1
        self._keep(problem)

    async def _stored(self, save: Callable[[], Awaitable[list[Any]]], item: Any) -> list[Any]:
        """The counts of ``save()``, tried again while it fails to store (for
        ``store_patience`` seconds, the servers looked for between tries); past that, the
        item counted as not stored and the crawl stopped, its run to fail naming the
        failure."""
        waited = 0.0
        for attempt in itertools.count():
            try:
                return await save()
            except STORE_ERRORS as err:
                failure = _failure(err)
                if waited >= self.store_patience:
                    break
                pause = STORE_PAUSES[min(attempt, len(STORE_PAUSES) - 1)]
                log.warning("%s could not be stored (%s); trying again in %g s",
                            item.url, failure, pause)  # fmt: skip
                await asyncio.to_thread(self._follow, err)
                await asyncio.sleep(pause)
                waited += pause
        log.error("%s not stored after %g s of tries: %s; stopping the crawl",
                  item.url, waited, failure)  # fmt: skip
        self.not_stored = failure  # the detail of its problem (`process_item`)
        assert self.crawler.stats is not None and self.crawler.engine is not None
        if not self.crawler.stats.get_value(NOT_STORED_STAT):
            self.crawler.stats.set_value(NOT_STORED_STAT, failure)
            # Not awaited here: closing waits for the items under way, this one included.
            self._closing = asyncio.ensure_future(
                self.crawler.engine.close_spider_async(reason="not_stored")
            )
        return ["failed.not_stored"]

    def _follow(self, err: BaseException | None = None) -> None:
        """Find this process's servers again (they may have moved; after ``err`` saying a
        server's storage failed, as on a full disk, it is started again); the scan queue's
        depth is read there from then on."""
        with contextlib.suppress(ServerStartError, *STORE_ERRORS):
            follow_servers(restart_failed=err is not None and storage_failed(err))
            self.backoff.client = self.ctx.redis

    # ------------------------------------------------------------------ blocking parts
    # Run in threads (MongoDB and Redis calls must not stall the reactor); each returns
    # its counts, which only the reactor's thread adds up (as those of store_fetched).

    def _gone(self, item: PageProblem) -> list[str]:
        """A page that had text and now answers 404/410: stored empty."""
        assert item.status is not None  # one of GONE_STATUSES
        gone = PageInput(
            url=item.url, text="", status=item.status, campaign=self.campaign,
            run_id=self.run_id, skip_reason=f"gone: {item.detail}",
        )  # fmt: skip
        return save_page(self.ctx, gone)

    def _reuse(self, item: FetchedPage) -> list[str]:
        """A page answered from the store: fetched recently, or unchanged (304)."""
        if item.source == NOT_MODIFIED:
            self.ctx.db.pages.update_one(
                {"url": item.url}, {"$set": {"fetched_at": datetime.now(UTC)}}
            )
            counts = ["pages.fetched", "pages.unchanged"]
        else:
            counts = ["skipped.fresh"]
        page_id = claim_unscanned(self.ctx, item.url, self.run_id)
        if page_id is not None:
            enqueue_scan(page_id)
            counts.append("scans_enqueued")
        return counts

    def _keep(self, problem: Problem) -> None:
        if self._problems_kept < KEPT_PER_CRAWLER:
            self._problems_kept += 1
            self.problems.append(problem)

    async def _flush(self) -> None:
        """The counts and problems gathered since the last flush onto the run; kept for
        the next flush if the servers cannot take them now."""
        counts, self.counts = self.counts, Counter()
        problems, self.problems = self.problems, []
        self._flushed = time.monotonic()
        try:
            if problems:  # before the counts: a count on the run page has its URLs listed
                await asyncio.to_thread(record_problems, self.ctx, self.run_id, problems)
                problems = []
            if counts:
                await asyncio.to_thread(
                    record_progress, self.ctx, self.run_id, counts, self.crawler_name
                )
        except STORE_ERRORS as err:
            log.warning("the run's counts could not be recorded (%s): kept for the next try", err)
            self.counts.update(counts)
            self.problems[:0] = problems
            await asyncio.to_thread(self._follow)
