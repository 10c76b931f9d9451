"""Fetching the images of a page's article in a crawl (crawler.images says which), for
campaigns that read them (``ocr``).

Fetched with ``engine.download_async``: every downloader middleware applies (the
private-network rule, robots.txt, redirects), under ``COPYTRACK_OCR_MAX_BYTES`` each; an
image is part of its page, so it may come from another host than the campaign's (a CDN).
An image that gives nothing is a problem of the run, naming it; its page is stored anyway.
Images are not pages: the campaign's ``max_pages`` does not count them (`PageCloseSpider`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.extensions.closespider import CloseSpider
from scrapy.http import Response
from twisted.python.failure import Failure

from .images import inline_image
from .items import FetchedImage, FetchedPage, PageProblem
from .middlewares import IMAGE
from .urls import canonicalize


async def fetch_images(crawler: Crawler, item: FetchedPage, max_bytes: int) -> list[Any]:
    """The page's images (`FetchedImage`) fetched, and a `PageProblem` (naming the image
    and its page) for each that gave nothing."""
    assert crawler.engine is not None
    out: list[Any] = []
    for url in item.images:
        if url.startswith("data:"):
            try:
                out.append(inline_image(url))
            except ValueError as err:
                out.append(_image_problem(url[:40] + "…", item, "unreadable", str(err), False))
            continue
        meta = {IMAGE: True, "download_slot": urlsplit(url).netloc,
                "download_maxsize": max_bytes, "download_warnsize": max_bytes}  # fmt: skip
        try:
            response = await crawler.engine.download_async(Request(url, meta=meta))
        except Exception as err:  # every failure the downloader has is one image's problem
            from .spiders.campaign import problem_of  # the spider's classification

            problem = problem_of(_failure(err, url), canonicalize(url))
            out.append(_image_problem(url, item, problem.reason, problem.detail, problem.skipped))
            continue
        if response.status != 200:
            out.append(_image_problem(url, item, f"http_{response.status}",
                                      f"HTTP {response.status}", skipped=False))  # fmt: skip
            continue
        content_type = (response.headers.get("Content-Type") or b"").decode("latin-1") or None
        out.append(FetchedImage(url, content_type, response.body))
    return out


def _failure(err: Exception, url: str) -> Failure:
    failure = Failure(err)
    failure.request = Request(url)  # type: ignore[attr-defined]  # as Scrapy's errbacks have
    return failure


def _image_problem(
    url: str, item: FetchedPage, reason: str, detail: str, skipped: bool
) -> PageProblem:
    """An image's problem on the run: its address, its reason key (``image_…``) and its
    page in the detail."""
    return PageProblem(url, f"image_{reason.removeprefix('image_')}",
                       f"image of {item.url}: {detail}", skipped=skipped)  # fmt: skip


class PageCloseSpider(CloseSpider):
    """Scrapy's CloseSpider (``CLOSESPIDER_PAGECOUNT``: the campaign's ``max_pages``), with
    an article's images left out of the count: they are part of their page, and a campaign
    of 10 pages would otherwise stop after its first two chapters of five pictures."""

    def page_count(self, response: Response, request: Request, spider: Spider) -> None:
        if not request.meta.get(IMAGE):
            super().page_count(response, request, spider)
