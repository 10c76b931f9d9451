"""Storing a downloaded page: the work of the extraction workers, one page per call.

`store_fetched` digests a page's bytes (crawler.digest: decode, extract, OCR its images),
stores it with its raw bytes, headers and metadata (tracker.scanning.pages.store_page), and
queues its scan when its text changed (`save_page`). It is a plain function, called by
`crawler.pipelines.EvidencePipeline` in its worker processes and by tests directly; this
module imports neither Scrapy nor the pipeline, so that the workers' forkserver
(`crawler.extract_preload`) imports only what a worker runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import replace

from bson import ObjectId
from kombu.exceptions import OperationalError
from pymongo.errors import DuplicateKeyError

from extractor.ocr import OcrLimits
from tracker.campaigns.outcomes import Problem
from tracker.context import Context, follow_servers, process_context
from tracker.core.failures import CONNECTION_ERRORS
from tracker.runtime.servers import ServerStartError
from tracker.scanning.chains import join_chain
from tracker.scanning.pages import PageInput, header, store_page
from tracker.tasks import enqueue_scan

from .digest import digest, image_page, with_images
from .items import FetchedImage, FetchedPage


def store_fetched(
    item: FetchedPage,
    campaign: str,
    run_id: ObjectId,
    cpu_seconds: float,
    images: Sequence[FetchedImage] = (),
    ocr: OcrLimits | None = None,
) -> list[str | Problem]:
    """Digest a downloaded page, with the text of its article's ``images`` read by OCR, and
    store it (queueing its scan); returns the run's counts, and a `Problem` for each image
    not read.

    Runs in a worker process (with connections of its own), so that all of a page's CPU
    work, storing included (hashes, compression, BSON, the task message), stays off the
    crawl's process: the reactor's thread would wait for the GIL meanwhile.
    """
    content_type = header(item.headers, "content-type")
    found = digest(item.body, content_type, item.final_url, cpu_seconds, book=item.book,
                   rendered=item.rendered)  # fmt: skip
    refused: list[str | Problem] = []
    if ocr is not None:
        # A link to a picture (chapter-3.png) is a page read by OCR; a page's images are too.
        found, not_read = image_page(found, item.body, content_type, item.final_url, ocr)
        if images:
            found, more = with_images(found, images, ocr)
            not_read += more
        refused = [Problem(url, "skipped", reason, why) for url, reason, why in not_read]
    page = found.page(item.url, item.body, item.final_url, item.status, item.headers,
                      campaign=campaign, run_id=run_id, next_url=item.next_url)  # fmt: skip
    # A page of a chapter cut into several; the pages of a listing ("第1页…第N页") are not.
    chained = bool(item.next_url or item.previous_url) and not found.listing
    page = replace(page, rendered=item.rendered, chained=chained, ip=item.ip_address)
    page = replace(page, redirected_from=tuple(item.redirected_from))
    counts: list[str | Problem] = ["pages.fetched", *refused]
    if found.skip:
        counts.append(f"skipped.{found.skip}")
    if found.images:
        counts.append("pages.read_by_ocr")
    try:
        ctx = process_context()
        counts += save_page(ctx, page)
        if chained:
            joined = join_chain(ctx, item.url)
            if joined is not None and joined[1]:
                enqueue_scan(joined[0])
                counts.append("scans_enqueued")
    except (*CONNECTION_ERRORS, OperationalError):
        # This process's servers are found again for the next try (the pipeline's).
        with contextlib.suppress(ServerStartError):
            follow_servers()
        raise
    return counts


def save_page(ctx: Context, page: PageInput) -> list[str]:
    """Store a page and queue its scan if its text changed; returns the run's counts."""
    try:
        page_id, changed = store_page(ctx, page)
    except DuplicateKeyError:
        # Two responses for one URL (a redirect and its target) raced to insert it.
        page_id, changed = store_page(ctx, page)
    counts = []
    if changed:
        enqueue_scan(page_id)
        counts.append("scans_enqueued")
    if not page.skip_reason:
        counts.append("pages.changed" if changed else "pages.unchanged")
    return counts
