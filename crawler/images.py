"""The images of a page's article, for campaigns that read them (``ocr``): which ones, and
fetching them through the crawl's own downloader.

Which: the ``<img>`` of the page's article (inside ``<article>``, ``<main>``, or a block
named content, chapter, article…), or, on a page that names no such block, every image
outside its header, navigation, footer, sidebars and links; icons, logos and banners are
left out by their names, tiny images by their size once read (extractor.ocr).

Fetched with ``engine.download_async``: every downloader middleware applies (the
private-network rule, robots.txt, redirects), under ``COPYTRACK_OCR_MAX_BYTES`` each; an
image is part of its page, so it may come from another host than the campaign's (a CDN).
An image that gives nothing is a problem of the run, naming it; its page is stored anyway.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import TextResponse
from twisted.python.failure import Failure

from extractor.ocr import OcrLimits

from .items import FetchedImage, FetchedPage, PageProblem
from .middlewares import IMAGE
from .urls import canonicalize

#: Where an article's images are not: the page's chrome.
_CHROME_TAGS = (
    "ancestor-or-self::*[self::header or self::nav or self::footer or self::aside or self::a]"
)
_CHROME_NAMES = re.compile(
    r"nav|menu|header|footer|sidebar|banner|logo|icon|avatar|\bads?\b|advert|share|social|"
    r"comment|qrcode",
    re.IGNORECASE,
)
_ARTICLE_TAGS = "ancestor::*[self::article or self::main]"
_ARTICLE_NAMES = re.compile(r"content|chapter|article|txt|text|read|post|entry|main", re.I)
#: Where lazy-loading pages put an image's address until a script moves it to ``src``.
_SOURCES = ("data-original", "data-src", "data-lazy-src", "src")


def ocr_limits(limits: Mapping[str, Any]) -> OcrLimits:
    """What one image may cost, from the crawl limits (tracker.core.config CRAWL_LIMITS)."""
    return OcrLimits(
        max_bytes=int(limits["COPYTRACK_OCR_MAX_BYTES"]),
        max_pixels=int(limits["COPYTRACK_OCR_MAX_PIXELS"]),
        min_pixels=int(limits["COPYTRACK_OCR_MIN_PIXELS"]),
        cpu_seconds=float(limits["COPYTRACK_OCR_CPU_SECONDS"]),
    )


def article_images(response: TextResponse, limit: int) -> tuple[list[str], int]:
    """The addresses of the page's article images (at most ``limit``, in document order)
    and how many more there were."""
    inside: list[str] = []
    outside: list[str] = []
    for image in response.xpath("//img"):
        url = next((image.attrib[a].strip() for a in _SOURCES if image.attrib.get(a)), "")
        if not url or url.startswith("data:") or image.xpath(_CHROME_TAGS):
            continue
        names = [" ".join((e.attrib.get("id", ""), e.attrib.get("class", "")))
                 for e in image.xpath("ancestor-or-self::*")]  # fmt: skip
        if any(_CHROME_NAMES.search(name) for name in names):
            continue
        url = response.urljoin(url)
        if urlsplit(url).scheme not in ("http", "https"):
            continue
        in_article = image.xpath(_ARTICLE_TAGS) or any(_ARTICLE_NAMES.search(n) for n in names)
        (inside if in_article else outside).append(url)
    found = list(dict.fromkeys(inside or outside))
    return found[:limit], max(0, len(found) - limit)


async def fetch_images(crawler: Crawler, item: FetchedPage, max_bytes: int) -> list[Any]:
    """The page's images (`FetchedImage`) fetched, and a `PageProblem` (naming the image
    and its page) for each that gave nothing."""
    assert crawler.engine is not None
    out: list[Any] = []
    for url in item.images:
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
