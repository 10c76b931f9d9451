"""One page, no crawl: ``fetch_text(url)`` for `copytrack check URL`, ``fetch_page(url)``
for the re-check of a page after a takedown notice (tracker.scanning.rechecks), ``download(url)``
for the requests of a page rendered in a browser (crawler.rendering).

Both use a plain HTTP client (urllib) with the crawler's User-Agent and limits
(crawler.settings): DOWNLOAD_MAXSIZE on the body as sent and once decompressed,
DOWNLOAD_TIMEOUT on the whole download, REDIRECT_MAX_TIMES redirects, the limits on a
response's head (crawler.heads: its bytes, header lines and time). Every connection,
redirects included, is made by ``tracker.core.netguard.connect``: the host is resolved once and
only an address that passed the private-network rule is connected to. No proxy from the
environment is used (the rule would see the proxy, not the site). It is a user's one-off
look-up, like a browser's, so it does not consult robots.txt.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import time
import urllib.error
import urllib.request
import zlib
from dataclasses import dataclass
from http.client import HTTPResponse
from typing import IO, Any

from extractor import UnusableContent, decode_html, html_to_text
from extractor.books import book_format
from extractor.ocr import image_type
from tracker.core.config import CRAWL_DEFAULTS, Settings, crawl_limits
from tracker.core.netguard import Lookup, PrivateAddressError, system_lookup
from tracker.scanning.pages import PageInput

from . import settings as crawl_settings
from .connections import guarded_opener
from .digest import GONE_STATUSES, Digest, digest, image_page, names_a_book, with_images
from .heads import HEAD_LIMITS, HeadLimits, HeadRefused
from .images import article_images, inline_image, ocr_limits, parse_page
from .items import FetchedImage

__all__ = ["Download", "FetchError", "download", "fetch_page", "fetch_text"]

_CHUNK = 65536
# Content-Encodings fetch_text asks for and decompresses (wbits: gzip or zlib header, then
# raw deflate, which some servers send as "deflate").
_ACCEPT_ENCODING = "gzip, deflate"
_COMPRESSED = frozenset({"gzip", "x-gzip", "deflate"})
_WBITS = (zlib.MAX_WBITS | 32, -zlib.MAX_WBITS)


class FetchError(ValueError):
    """The URL could not be fetched, or holds no article text."""


class TooLarge(FetchError):
    """The URL's body is over the size cap."""


class _CountedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows at most ``max_redirects`` redirects, to http(s) URLs only. One instance per
    fetch: it keeps that fetch's chain. (Where a redirect leads is checked when it is
    connected to, like any URL.)"""

    def __init__(self, max_redirects: int = crawl_settings.REDIRECT_MAX_TIMES) -> None:
        self.max_redirects = max_redirects
        # urllib's own loop checks (HTTPError, "infinite loop") must not fire first.
        # (typeshed declares them class variables; urllib reads them from the instance.)
        self.max_repeats = self.max_redirections = max_redirects + 1  # type: ignore[misc]
        self.chain: list[str] = []

    def redirect_request(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
        headers: http.client.HTTPMessage, newurl: str,
    ) -> urllib.request.Request | None:  # fmt: skip
        self.chain = self.chain or [req.full_url]
        if len(self.chain) > self.max_redirects:
            raise FetchError(
                f"{self.chain[0]}: more than {self.max_redirects} redirects "
                f"({' → '.join(self.chain)} → {newurl}); open it in a browser and check the "
                "address it ends at, or save the page and check the file"
            )
        _check_scheme(newurl)
        self.chain.append(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _check_scheme(url: str) -> None:
    if not url.lower().startswith(("http://", "https://")):
        raise FetchError(f"{url}: only http and https URLs can be fetched")


def _too_large(url: str, max_bytes: int, what: str = "") -> FetchError:
    return TooLarge(
        f"{url}: larger than {max_bytes / 2**20:g} MB{what} (the crawler's DOWNLOAD_MAXSIZE): "
        "not an article page; save the article's text and check the file instead"
    )


def _read(response: HTTPResponse, url: str, max_bytes: int, timeout: float) -> bytes:
    """The body, refused past ``max_bytes`` or ``timeout`` seconds in all: the socket
    timeout alone lets a server trickle a byte at a time for ever."""
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > max_bytes:
        raise _too_large(url, max_bytes)
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read1(_CHUNK):
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(url, max_bytes)
        if time.monotonic() > deadline:
            raise FetchError(
                f"{url}: still downloading after {timeout:g} s (DOWNLOAD_TIMEOUT); try again "
                "later, or save the page and check the file"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _decompress(body: bytes, url: str, max_bytes: int) -> bytes:
    """A gzip or deflate body, inflated no further than ``max_bytes``: a few kilobytes can
    inflate to gigabytes (a compression bomb)."""
    problem: zlib.error | None = None
    for wbits in _WBITS:
        try:
            inflated = zlib.decompressobj(wbits).decompress(body, max_bytes + 1)
        except zlib.error as err:
            problem = err
            continue
        if len(inflated) > max_bytes:
            raise _too_large(url, max_bytes, " once decompressed")
        return inflated
    raise FetchError(f"{url}: its compressed body is corrupt ({problem}); try again later")


@dataclass(frozen=True)
class Download:
    """A fetched body (decompressed) and how it was answered."""

    body: bytes
    content_type: str | None
    final_url: str
    status: int
    headers: dict[str, str]


def download(url: str, allow_private: bool | None, timeout: float, max_bytes: int,
             lookup: Lookup, head: HeadLimits = HEAD_LIMITS) -> Download:  # fmt: skip
    """The body of ``url`` (decompressed), or FetchError; urllib's HTTPError is left to the
    caller (it may tell a gone page from a failure)."""
    if allow_private is None:
        allow_private = Settings.from_env().allow_private_networks
    _check_scheme(url)
    opener = guarded_opener(allow_private, lookup, _CountedRedirects(), limits=head)
    headers = {"User-Agent": crawl_settings.USER_AGENT, "Accept-Encoding": _ACCEPT_ENCODING}
    request = urllib.request.Request(url, headers=headers)
    try:
        with opener.open(request, timeout=timeout) as response:
            body = _read(response, url, max_bytes, timeout)
            answer = dict(response.headers.items())
            content_type = response.headers.get("Content-Type")
            encoding = (response.headers.get("Content-Encoding") or "identity").strip().lower()
            final_url: Any = response.url
            status = response.status
    except urllib.error.HTTPError:
        raise  # the callers tell a gone page from a failure (it is a URLError, too)
    except PrivateAddressError as err:  # this URL's host, or where it redirected
        raise FetchError(f"{url}: {err}") from None
    except HeadRefused as err:
        raise FetchError(
            f"{url}: {err}: not read further; if a browser shows the page, save it and check "
            "the file"
        ) from None
    except http.client.HTTPException as err:  # not HTTP: a bad status line, say
        raise FetchError(f"{url}: cannot fetch: not an HTTP answer ({err!r})") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise FetchError(f"{url}: cannot fetch: {reason}") from None
    if encoding in _COMPRESSED:
        body = _decompress(body, url, max_bytes)
    elif encoding != "identity":
        raise FetchError(f"{url}: sent in {encoding} encoding, which was not asked for")
    return Download(body, content_type, str(final_url), status, answer)


def fetch_text(
    url: str,
    allow_private: bool | None = None,
    timeout: float = crawl_settings.DOWNLOAD_TIMEOUT,
    max_bytes: int | None = None,
    lookup: Lookup = system_lookup,
) -> str:
    """Fetch one URL and return its article text, or a whole book's text when the URL names
    a book download (.txt, .zip, .epub, .pdf) or its bytes are one.

    ``allow_private`` defaults to COPYTRACK_ALLOW_PRIVATE_NETWORKS; ``lookup`` resolves
    host names (the system resolver); ``max_bytes`` defaults to DOWNLOAD_MAXSIZE, or
    COPYTRACK_BOOK_MAXSIZE for a URL naming a book, as the crawl does. Raises FetchError
    (a ValueError, its message starting with the URL) when the URL is refused,
    unreachable, too big, too slow, redirects too often or has no article text.
    """
    book = names_a_book(url)
    if max_bytes is None:
        max_bytes = crawl_settings.DOWNLOAD_MAXSIZE
        if book:
            max_bytes = int(CRAWL_DEFAULTS["COPYTRACK_BOOK_MAXSIZE"])
    try:
        got = download(url, allow_private, timeout, max_bytes, lookup)
    except urllib.error.HTTPError as err:
        raise FetchError(f"{url}: HTTP {err.code} {err.reason}") from None
    if book or book_format(got.body, got.content_type, got.final_url) in ("zip", "epub", "pdf"):
        found = digest(got.body, got.content_type, got.final_url, book=True)
        if found.skip:
            raise FetchError(f"{url}: {found.detail}")
        return found.text
    try:
        return html_to_text(got.body, got.content_type, got.final_url)
    except ValueError as err:
        raise FetchError(f"{url}: {err}") from None


def fetch_page(
    url: str,
    allow_private: bool | None = None,
    timeout: float = crawl_settings.DOWNLOAD_TIMEOUT,
    max_bytes: int = crawl_settings.DOWNLOAD_MAXSIZE,
    lookup: Lookup = system_lookup,
    *,
    ocr: bool = False,
) -> PageInput:
    """Fetch one URL as evidence, as a crawl stores it: its bytes, text and metadata;
    ``ocr``: with the text of its article's images (a page a campaign with ``ocr`` stored).

    A page without usable text comes back with its ``skip_reason``; one that answers
    404/410 comes back empty as gone (its copies were taken down). Raises FetchError
    when the URL is refused or cannot be fetched (any other HTTP error included).
    """
    try:
        got = download(url, allow_private, timeout, max_bytes, lookup)
    except urllib.error.HTTPError as err:
        if err.code not in GONE_STATUSES:
            raise FetchError(f"{url}: HTTP {err.code} {err.reason}") from None
        return PageInput(url=url, text="", status=err.code,
                         skip_reason=f"gone: HTTP {err.code} {err.reason}")  # fmt: skip
    found = digest(got.body, got.content_type, got.final_url)
    if ocr:
        found = _with_images(found, got, allow_private, timeout, lookup)
    return found.page(url, got.body, got.final_url, got.status, got.headers)


def _with_images(
    found: Digest, got: Download, allow_private: bool | None, timeout: float, lookup: Lookup
) -> Digest:
    """The page's digest with the text OCR reads in its article's images, as a campaign
    with ``ocr`` stored it. An image that cannot be fetched fails the fetch: without its
    text the page would look as if its copy were gone. A URL that is a picture is read
    itself."""
    limits = crawl_limits(os.environ)
    ocr = ocr_limits(limits)
    if image_type(got.body, got.content_type):
        return _ocr_read(*image_page(found, got.body, got.content_type, got.final_url, ocr))
    if not (got.content_type or "text/html").lower().startswith(("text/html", "application/xhtml")):
        return found
    try:
        page = parse_page(decode_html(got.body, got.content_type).text)
    except UnusableContent:
        return found
    urls, _ = article_images(
        page, got.final_url, int(limits["COPYTRACK_OCR_IMAGES"]), ocr.min_pixels
    )
    images = []
    for image_url in urls:
        if image_url.startswith("data:"):
            with contextlib.suppress(ValueError):  # the crawl could not read it either
                images.append(inline_image(image_url))
            continue
        try:
            image = download(image_url, allow_private, timeout, ocr.max_bytes, lookup)
        except TooLarge:
            continue  # over COPYTRACK_OCR_MAX_BYTES: the crawl did not read it either
        except urllib.error.HTTPError as err:
            raise FetchError(
                f"{image_url}: an image of the page: HTTP {err.code} {err.reason}"
            ) from None
        images.append(FetchedImage(image_url, image.content_type, image.body))
    return _ocr_read(*with_images(found, images, ocr))


def _ocr_read(found: Digest, refused: list[tuple[str, str, str]]) -> Digest:
    """The digest with its images read; FetchError when Tesseract could not run at all
    (not installed, say): the page would look as if its copy were gone."""
    for _url, reason, why in refused:
        if reason == "ocr_failed":
            raise FetchError(why)
    return found
