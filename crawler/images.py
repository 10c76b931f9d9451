"""The images of a page's article, for campaigns that read them (``ocr``): which ones
(crawler.image_downloads fetches them in a crawl, crawler.fetch in a re-check).

Which: the ``<img>`` of the page's article (inside ``<article>``, ``<main>``, or a block
named content, chapter, article…), or, on a page that names no such block, every image
outside its header, navigation, footer, sidebars and links; icons, logos and banners are
left out by their names, tiny images by their size once read (extractor.ocr).

A picture inlined in the page (``data:image/png;base64,…``) is read too, without a fetch
(`inline_image`). No Scrapy here: the shell's one-page fetch (crawler.fetch) uses it too.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_to_bytes, urljoin, urlsplit

from lxml import html

from extractor.ocr import OcrLimits

from .items import FetchedImage

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


def article_images(
    root: Any, base_url: str, limit: int, min_pixels: int = 0
) -> tuple[list[str], int]:
    """The addresses of the article images of the page whose lxml tree is ``root`` (at
    most ``limit``, in document order), and how many more there were; an image whose
    ``width`` and ``height`` say it has fewer than ``min_pixels`` (an emoticon, a button)
    is not one."""
    inside: list[str] = []
    outside: list[str] = []
    for image in root.xpath("//img"):
        url = next((image.get(a).strip() for a in _SOURCES if image.get(a)), "")
        if not url or image.xpath(_CHROME_TAGS) or _pixels(image) < min_pixels:
            continue
        names = [" ".join((e.get("id") or "", e.get("class") or ""))
                 for e in image.xpath("ancestor-or-self::*")]  # fmt: skip
        if any(_CHROME_NAMES.search(name) for name in names):
            continue
        if url.startswith("data:"):  # a picture inlined in the page (base64)
            if not url[5:].lower().startswith("image/"):
                continue
        else:
            url = urljoin(base_url, url)
            if urlsplit(url).scheme not in ("http", "https"):
                continue
        in_article = image.xpath(_ARTICLE_TAGS) or any(_ARTICLE_NAMES.search(n) for n in names)
        (inside if in_article else outside).append(url)
    found = list(dict.fromkeys(inside or outside))
    return found[:limit], max(0, len(found) - limit)


def _pixels(image: Any) -> float:
    """The pixels an ``<img>``'s ``width`` and ``height`` give it; unknown: infinitely many."""
    sides = [(image.get(side) or "").strip().removesuffix("px") for side in ("width", "height")]
    if all(side.isascii() and side.isdigit() for side in sides):
        return int(sides[0]) * int(sides[1])
    return float("inf")


def inline_image(url: str) -> FetchedImage:
    """A ``data:image/…`` address's picture, named in the evidence by its type and size
    (the address is the picture itself); ValueError when it does not decode."""
    head, comma, data = url[5:].partition(",")
    if not comma:
        raise ValueError("a data: address without a comma")
    media, *params = head.split(";")
    try:
        body = (
            base64.b64decode(data, validate=False)
            if "base64" in (p.strip().lower() for p in params)
            else unquote_to_bytes(data)
        )
    except (binascii.Error, ValueError) as err:
        raise ValueError(f"an inline image that does not decode ({err})") from None
    name = f"data:{media.strip().lower()} ({len(body)} bytes inline in the page)"
    return FetchedImage(name, media.strip().lower() or None, body)
