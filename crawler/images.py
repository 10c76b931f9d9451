"""The images of a page's article, for campaigns that read them (``ocr``): which ones
(crawler.image_downloads fetches them in a crawl, crawler.fetch in a re-check).

Which: the ``<img>`` of the page's article (inside ``<article>``, ``<main>``, or a block
named content, chapter, article…), or, on a page that names no such block, every image
outside its header, navigation, footer, sidebars and links; icons, logos and banners are
left out by their names, tiny images by their size once read (extractor.ocr).

No Scrapy here: the shell's one-page fetch (crawler.fetch) uses it too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

from lxml import html

from extractor.ocr import OcrLimits

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


def parse_page(text: str) -> Any:
    """A decoded HTML page as the lxml tree `article_images` reads."""
    return html.document_fromstring(text or "<html></html>")


def article_images(root: Any, base_url: str, limit: int) -> tuple[list[str], int]:
    """The addresses of the article images of the page whose lxml tree is ``root`` (at
    most ``limit``, in document order), and how many more there were."""
    inside: list[str] = []
    outside: list[str] = []
    for image in root.xpath("//img"):
        url = next((image.get(a).strip() for a in _SOURCES if image.get(a)), "")
        if not url or url.startswith("data:") or image.xpath(_CHROME_TAGS):
            continue
        names = [" ".join((e.get("id") or "", e.get("class") or ""))
                 for e in image.xpath("ancestor-or-self::*")]  # fmt: skip
        if any(_CHROME_NAMES.search(name) for name in names):
            continue
        url = urljoin(base_url, url)
        if urlsplit(url).scheme not in ("http", "https"):
            continue
        in_article = image.xpath(_ARTICLE_TAGS) or any(_ARTICLE_NAMES.search(n) for n in names)
        (inside if in_article else outside).append(url)
    found = list(dict.fromkeys(inside or outside))
    return found[:limit], max(0, len(found) - limit)
