"""A fetched page's bytes made into its text and metadata, or the reason it has none: the
crawl's pipeline and the one-page fetch (crawler.fetch) read pages alike."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urlsplit

from extractor.books import book_format, book_text
from extractor.cpucap import CpuTimeExceeded, cpu_cap
from extractor.decoding import UnusableContent, decode_html
from extractor.extraction import extract
from extractor.ocr import ImageRefused, OcrLimits, image_type, read_image
from tracker.findings.captures import CapturedImage
from tracker.scanning.pages import PageInput

from .items import FetchedImage

#: Media types decoded as pages; anything else is stored as skipped ("not_html").
PAGE_TYPES = frozenset({"text/html", "application/xhtml+xml", "text/plain"})
#: A page answering so was taken down: stored empty, its scan closes its findings.
GONE_STATUSES = frozenset({404, 410})
#: Links to whole-book downloads: by their name, or by their words (pirate sites' "TXT下载",
#: "全本下载"). Such a download is read as a book (extractor.books), not as a page.
BOOK_URL = r"\.(?:txt|zip|epub|pdf)(?:[?#]|$)"
BOOK_WORDS = r"(?i)txt\s*下载|全本下载|全集下载|下载全本|epub\s*下载|下载\s*(?:txt|epub)"
_BOOK_NAME = re.compile(BOOK_URL, re.IGNORECASE)


def names_a_book(url: str) -> bool:
    """Whether a URL names a whole-book download (.txt, .zip, .epub, .pdf)."""
    return bool(_BOOK_NAME.search(url))


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
    listing: bool = False  # a list of headlines (extractor.Extracted.listing)
    images: tuple[CapturedImage, ...] = ()  # images whose text (OCR) is in ``text``

    def page(
        self, url: str, raw: bytes, final_url: str, status: int, headers: dict[str, str],
        campaign: str | None = None, run_id: Any = None, next_url: str | None = None,
    ) -> PageInput:  # fmt: skip
        """The page to store: its bytes and where they came from, with this text."""
        return PageInput(
            url=url,
            text=self.text,
            raw=raw,
            final_url=final_url,
            status=status,
            headers=headers,
            title=self.title,
            author=self.author,
            published=self.date,
            encoding=self.encoding,
            extractor=self.extractor,
            skip_reason=f"{self.skip}: {self.detail}" if self.skip else None,
            campaign=campaign,
            run_id=run_id,
            # A listing's next page is more headlines, not the rest of a chapter.
            next_url=None if self.listing else next_url,
            listing=self.listing,
            images=self.images,
        )


def digest(
    body: bytes,
    content_type: str | None,
    url: str,
    cpu_seconds: float = 0,
    book: bool = False,
    rendered: bool = False,
) -> Digest:
    """Decode and extract one page (runs in a worker process); ``book``: it was fetched as a
    whole-book download, so a plain-text body is a book's text; ``rendered``: its scripts
    have run (crawler.rendering), so a page without text is not one they would fill.

    ``cpu_seconds``: given up after this much CPU time (skip reason ``too_slow``); the
    cap needs the main thread. 0: no cap.
    """
    try:
        with cpu_cap(cpu_seconds):
            return _digest(body, content_type, url, book, rendered)
    except CpuTimeExceeded as err:
        return Digest(skip="too_slow", detail=f"decoding and extraction took {err}")


def _digest(body: bytes, content_type: str | None, url: str, book: bool, rendered: bool) -> Digest:
    kind = book_format(body, content_type, url)
    # A plain-text body is a book when its link or name says so; else a page served as
    # text/plain.
    if kind in ("zip", "epub", "pdf") or (kind == "txt" and (book or names_a_book(url))):
        return _book(body, content_type, url)
    media_type = (content_type or "text/html").split(";")[0].strip().lower()
    if media_type not in PAGE_TYPES:
        return Digest(skip="not_html", detail=f"Content-Type {media_type}")
    try:
        decoded = decode_html(body, content_type)
    except UnusableContent as err:
        reason = "empty" if str(err).startswith("empty") else "binary"
        return Digest(skip=reason, detail=str(err))
    if decoded.undecodable:
        detail = f"{decoded.replaced} undecodable byte sequences as {decoded.encoding}"
        return Digest(encoding=decoded.encoding, skip="undecodable", detail=detail)
    found = extract(decoded.text, url)
    common: dict[str, Any] = {"title": found.title, "author": found.author, "date": found.date,
              "listing": found.listing}  # fmt: skip
    if not found.text:
        # Its text may come by script: the run says so, a campaign can render it.
        skip = "needs_rendering" if found.scripted and not rendered else "no_main_text"
        return Digest(**common, encoding=decoded.encoding, skip=skip,
                      detail=found.reason or "")  # fmt: skip
    return Digest(found.text, **common, extractor=found.extractor, encoding=decoded.encoding)


def _book(body: bytes, content_type: str | None, url: str) -> Digest:
    """A whole-book download: its text, titled by its file name."""
    try:
        book = book_text(body, content_type, url)
    except UnusableContent as err:
        return Digest(skip="unreadable_book", detail=str(err))
    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1]) or None
    return Digest(book.text, title=name, extractor=f"book:{book.format}")


#: The skip reasons of an HTML page whose text may be all in its images.
_NO_TEXT = frozenset({"no_main_text", "needs_rendering"})


def with_images(
    found: Digest, images: Sequence[FetchedImage], limits: OcrLimits
) -> tuple[Digest, list[tuple[str, str, str]]]:
    """The page's digest with the text Tesseract reads in its article's images after its
    own (a page that is only images gets theirs), and the images not read: (address,
    reason key, why). Images too small to hold text (icons) are passed over silently."""
    if not images or (found.skip and found.skip not in _NO_TEXT):
        return found, []
    texts: list[str] = []
    kept: list[CapturedImage] = []
    refused: list[tuple[str, str, str]] = []
    for image in images:
        try:
            read = read_image(image.body, limits)
        except ImageRefused as err:
            if err.reason != "image_too_small":
                refused.append((image.url, err.reason, f"{image.url}: {err}"))
            continue
        if read.text:
            texts.append(read.text)
            kept.append(CapturedImage(image.url, image.content_type, image.body,
                                      read.width, read.height, len(read.text)))  # fmt: skip
    if not texts:
        return found, refused
    text = "\n\n".join([found.text, *texts] if found.text else texts)
    extractor = f"{found.extractor}+ocr" if found.text else "ocr"
    return replace(found, text=text, extractor=extractor, skip=None, detail="",
                   images=tuple(kept)), refused  # fmt: skip


def image_page(
    found: Digest, body: bytes, content_type: str | None, url: str, limits: OcrLimits
) -> tuple[Digest, list[tuple[str, str, str]]]:
    """A response that is itself a picture (a chapter list linking ``chapter-3.png``): its
    text read by OCR, as an article's image is (`with_images`), kept as the page's image;
    anything else, or a picture OCR gives nothing for, keeps its digest ``found``."""
    media = image_type(body, content_type)
    if media is None:
        return found, []
    bare = Digest(skip="no_main_text", detail=f"a picture ({media})")
    read, refused = with_images(bare, [FetchedImage(url, media, body)], limits)
    return (found if read.skip else read), refused


def ocr_spans(text: str, images: Sequence[CapturedImage]) -> list[tuple[int, int, str]]:
    """Where in a page's ``text`` each image's reading is (start, end, the image's
    address): `with_images` puts them after the page's own text, in order, a blank line
    apart."""
    spans = []
    start = len(text) - sum(image.chars for image in images) - 2 * (len(images) - 1)
    for image in images:
        spans.append((start, start + image.chars, image.url))
        start += image.chars + 2
    return spans
