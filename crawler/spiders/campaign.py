"""The campaign spider: seeds that are pages, sitemaps (or robots.txt) or RSS/Atom feeds.

A seed's kind is read from its response, so campaigns just list URLs. Sitemaps are read
with Scrapy's sitemap support (sitemap indexes, gzip, robots.txt ``Sitemap:`` lines),
feeds give their entries' links, pages are handed to the pipeline and their links
followed (a ``<meta http-equiv="refresh">`` target among them: the page itself is always
kept), up to ``COPYTRACK_MAX_LINKS_PER_PAGE`` per page (``COPYTRACK_MAX_SITEMAP_URLS``
per sitemap); links not followed (over that limit, or no URL a request can be made of)
are counted as ``DroppedLinks`` items. Every
request is canonicalized here; whether it is in the campaign's scope, on a public
address, allowed by robots.txt or due for a re-fetch is decided by the downloader
middlewares. Every URL that yields no page ends as a ``PageProblem`` item, so the run
counts it.
"""

from __future__ import annotations

import gzip
import re
import struct
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast
from urllib.parse import urlsplit

from lxml import etree
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
    IgnoreRequest,
)
from scrapy.http import Response, TextResponse
from scrapy.link import Link
from scrapy.linkextractors import IGNORED_EXTENSIONS, LinkExtractor
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.spiders import SitemapSpider
from scrapy.spiders.sitemap import iterloc
from scrapy.utils.response import get_meta_refresh
from scrapy.utils.sitemap import Sitemap, sitemap_urls_from_robots
from scrapy.utils.url import url_has_any_extension
from twisted.internet.error import (
    ConnectionRefusedError,
    DNSLookupError,
    TCPTimedOutError,
    TimeoutError,
)
from twisted.python.failure import Failure

from extractor.decoding import sniff_binary
from tracker.scanning.chains import MAX_CHAIN

from ..digest import BOOK_URL, BOOK_WORDS
from ..heads import HeadRefused
from ..images import article_images
from ..items import NETWORK, DroppedLinks, FetchedPage, PageProblem
from ..middlewares import RENDER, SEED, SOURCE, CrawlRefused, RenderFailed
from ..urls import canonicalize

SITEMAP_ROOTS = frozenset({"urlset", "sitemapindex"})
#: Request meta of a whole-book download.
BOOK = "copytrack_book"
#: Request meta of a page continuing another (its URL): a chapter cut into pages.
PREVIOUS = "copytrack_previous"
#: Request meta: how many of the hops to this page went to a chapter's next page. They do
#: not count against the campaign's depth: the pages of a chapter are one page to a reader.
CHAIN_HOPS = "copytrack_chain_hops"
#: A link to the rest of a chapter cut into pages, by its words ("下一章", the next chapter,
#: is not one).
_NEXT_PAGE_WORDS = re.compile(r"(?:下一页|下页|下一頁|下頁|next\s*page)\s*[>›»]*", re.IGNORECASE)
_NEXT_PAGE_ANCHORS = (
    "//a[@href][contains(., '下一页') or contains(., '下页') or contains(., '下一頁')"
    " or contains(., '下頁') or contains(translate(., 'NEXTPAG', 'nextpag'), 'next')]"
)
_BOOK_LINK_URL = re.compile(BOOK_URL, re.IGNORECASE)
_BOOK_LINK_WORDS = re.compile(BOOK_WORDS)
_SKIPPED_EXTENSIONS = frozenset(f".{extension}" for extension in IGNORED_EXTENSIONS)
#: Links followed when the campaign reads images (``ocr``): a chapter posted as a picture.
_PICTURE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp"})
#: ``X.html`` continues in ``X_2.html``, ``X_2.html`` in ``X_3.html``.
_PAGE_NUMBER = re.compile(r"^(?P<stem>.+?)(?:_(?P<n>\d{1,3}))?(?P<ext>\.s?html?)$")
FEED_ROOTS = frozenset({"rss", "feed", "RDF"})
# RSS 2.0 and RSS 1.0 <item><link>, Atom <entry><link href> (the alternate one).
FEED_LINKS = (
    "//*[local-name()='item']/*[local-name()='link']/text()",
    "//*[local-name()='entry']/*[local-name()='link'][not(@rel) or @rel='alternate']/@href",
)
# What gunzip and inflate raise on a body that does not decompress.
_CORRUPT_COMPRESSION = (zlib.error, EOFError, gzip.BadGzipFile, struct.error)
# Download handlers raise Scrapy's or Twisted's exceptions, depending on the handler.
_FAILURES: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((DownloadTimeoutError, TimeoutError, TCPTimedOutError), "timeout"),
    ((CannotResolveHostError, DNSLookupError), "dns"),
    ((DownloadConnectionRefusedError, ConnectionRefusedError), "connection_refused"),
    ((RenderFailed,), "render_failed"),
    (_CORRUPT_COMPRESSION, "bad_compression"),
)
# The messages of Scrapy's IgnoreRequest for its two limits (RedirectMiddleware,
# HttpCompressionMiddleware); tests/test_crawl_limits.py checks them against the real ones.
_REDIRECT_LIMIT = "max redirections reached"
_DECOMPRESSED_LIMIT = "exceeded DOWNLOAD_MAXSIZE"


class CampaignSpider(SitemapSpider):
    """Crawls one campaign (``COPYTRACK_CAMPAIGN`` setting, set by ``crawler.run``).

    From SitemapSpider it takes the reading of sitemap bodies (gzip, DOWNLOAD_MAXSIZE);
    the entries are turned into requests here, so a bad one is counted and skipped
    instead of ending the callback and losing the rest of the sitemap.
    """

    name = "campaign"
    #: Images of a page's article read by OCR (the campaign's ``ocr``); 0: none.
    ocr_images = 0
    ocr_min_pixels = 0  # smaller ones (by their width and height) are not fetched
    skipped_extensions = _SKIPPED_EXTENSIONS  # links to media and documents: not followed

    def __init__(
        self,
        campaign: dict[str, Any],
        max_links: int,
        max_sitemap_urls: int,
        book_maxsize: int = 64 * 1024 * 1024,
        render: bool = False,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.seeds = [canonicalize(seed) for seed in campaign["seeds"]]
        self.max_links = max_links
        self.max_sitemap_urls = max_sitemap_urls
        self.max_depth: int | None = campaign.get("max_depth")
        self.render = render  # pages (not books) are rendered in a browser when HTML
        # Scope is the middlewares' job. One pass over a page's links: whole-book downloads
        # (by their name or their words) apart, then the media and documents skipped.
        self.link_extractor = LinkExtractor(canonicalize=False, unique=True, deny_extensions=())
        self.continued: dict[str, str] = {}  # page → the page it continues (seen so far)
        self.book_meta = {
            "download_maxsize": book_maxsize,
            "download_warnsize": book_maxsize,
            BOOK: True,
        }

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> CampaignSpider:
        campaign = crawler.settings.getdict("COPYTRACK_CAMPAIGN")
        if not campaign:
            raise ValueError("no campaign: run crawls with `python -m crawler`")
        max_links = crawler.settings.getint("COPYTRACK_MAX_LINKS_PER_PAGE")
        max_sitemap_urls = crawler.settings.getint("COPYTRACK_MAX_SITEMAP_URLS")
        book_maxsize = crawler.settings.getint("COPYTRACK_BOOK_MAXSIZE")
        render = crawler.settings.getbool("COPYTRACK_RENDER")
        spider = super().from_crawler(
            crawler, campaign, max_links, max_sitemap_urls, book_maxsize, render, *args, **kwargs
        )
        if crawler.settings.getbool("COPYTRACK_OCR"):
            spider.ocr_images = crawler.settings.getint("COPYTRACK_OCR_IMAGES")
            spider.ocr_min_pixels = crawler.settings.getint("COPYTRACK_OCR_MIN_PIXELS")
            spider.skipped_extensions = _SKIPPED_EXTENSIONS - _PICTURE_EXTENSIONS
        return spider

    async def start(self) -> AsyncIterator[Request]:
        for seed in self.seeds:
            yield self._request(seed, self.parse_seed, seed=True)

    def _request(
        self, url: str, callback: Any, seed: bool = False, meta: dict[str, Any] | None = None
    ) -> Request:
        """A request for ``url`` (with ``meta``); ValueError if no request can be made of it."""
        url = canonicalize(url)
        # One politeness slot (delay, concurrency, AutoThrottle) per origin: Scrapy keys
        # slots by host name, so sites on different ports of one host would share one.
        meta = {**(meta or {}), "download_slot": urlsplit(url).netloc}
        if seed:
            meta[SEED] = True
        if self.render and not meta.get(BOOK):
            meta[RENDER] = True
        return Request(url, callback=callback, errback=self.on_error, meta=meta)

    # ------------------------------------------------------------------ callbacks

    def parse_seed(self, response: Response) -> Iterator[Any]:
        """A seed: a sitemap or robots.txt, a feed, or a page."""
        xml = self._xml(response)
        kind = xml.type if xml else None
        if response.url.endswith("/robots.txt") or kind in SITEMAP_ROOTS:
            yield from self._sitemap_entries(response, xml)
        elif kind in FEED_ROOTS and isinstance(response, TextResponse):
            links = [
                link.strip() for xpath in FEED_LINKS for link in response.xpath(xpath).getall()
            ]
            yield from self._follow_links(response, links, self.parse_page, self.max_links)
        else:
            yield from self.parse_page(response)

    def parse_sitemap(self, response: Response) -> Iterator[Request | PageProblem | DroppedLinks]:
        """A nested sitemap (listed by robots.txt or a sitemap index)."""
        xml = self._xml(response)
        if response.url.endswith("/robots.txt") or (xml and xml.type in SITEMAP_ROOTS):
            yield from self._sitemap_entries(response, xml)
            return
        detail = f"{response.url}: not a sitemap, corrupt, or over DOWNLOAD_MAXSIZE unzipped"
        self.logger.warning(detail)
        yield PageProblem(canonicalize(response.url), "invalid_sitemap", detail, skipped=False)

    def _sitemap_entries(
        self, response: Response, xml: Sitemap | None
    ) -> Iterator[Request | DroppedLinks]:
        """The URLs a sitemap or sitemap index lists (up to COPYTRACK_MAX_SITEMAP_URLS), or
        the sitemaps a robots.txt names."""
        if response.url.endswith("/robots.txt") or xml is None:  # its Sitemap: lines
            # No base_url: _follow_links resolves them, where a bad one is only counted.
            sitemaps = list(sitemap_urls_from_robots(response.body))
            yield from self._follow_links(response, sitemaps, self.parse_sitemap)
            return
        nested = xml.type == "sitemapindex"
        callback = self.parse_sitemap if nested else self.parse_page
        urls = list(iterloc(xml))
        yield from self._follow_links(
            response, urls, callback, self.max_sitemap_urls, "COPYTRACK_MAX_SITEMAP_URLS"
        )

    def _xml(self, response: Response) -> Sitemap | None:
        """An XML (or gzipped XML) response, parsed lazily; None for anything else."""
        try:
            body = self._get_sitemap_body(response)
            return Sitemap(body) if body else None
        # A corrupt gzip body (SitemapSpider lets gunzip's errors out); an empty or
        # unparsable document.
        except (*_CORRUPT_COMPRESSION, StopIteration, ValueError, etree.LxmlError):
            return None

    def parse_page(self, response: Response) -> Iterator[Any]:
        """Hand the page to the pipeline and follow its links (first the page that
        continues it, if it is cut into several)."""
        text_page = (
            response
            if isinstance(response, TextResponse) and sniff_binary(response.body) is None
            else None
        )
        next_url = _next_page(text_page) if text_page is not None else None
        here = canonicalize(response.url)
        if next_url is not None:
            self.continued[next_url] = here
        images: list[str] = []
        over = 0
        if self.ocr_images and text_page is not None:
            images, over = article_images(
                text_page.selector.root, text_page.url, self.ocr_images, self.ocr_min_pixels
            )
        yield FetchedPage(
            url=canonicalize(response.url),
            final_url=response.url,
            status=response.status,
            headers=_headers(response),
            body=response.body,
            source=response.meta.get(SOURCE, NETWORK),
            redirected_from=list(response.meta.get("redirect_urls", [])),
            book=response.meta.get(BOOK, False),
            rendered="rendered" in response.flags,
            next_url=next_url,
            # Reached by its "下一页" link, or by another after that link was seen.
            previous_url=response.meta.get(PREVIOUS) or self.continued.get(here),
            ip_address=str(response.ip_address) if response.ip_address else None,
            images=images,
            images_over_limit=over,
        )
        # Past its depth, a chapter's pages are followed as far as a chain is joined.
        if next_url is not None and response.meta.get(CHAIN_HOPS, 0) < MAX_CHAIN - 1:
            meta = {PREVIOUS: here, CHAIN_HOPS: response.meta.get(CHAIN_HOPS, 0) + 1}
            yield from self._follow_links(
                response, [next_url], self.parse_page, meta=meta, next_page=True
            )
        # Binary bodies served as text/html hold no links. The decoder's rule: a few stray
        # NUL bytes do not make a page binary (nor stop its links from being followed).
        if text_page is not None and not self._at_max_depth(response):
            found = self.link_extractor.extract_links(text_page)
            books, links = _books_and_pages(found, self.skipped_extensions)
            # First: a book linked as a page too would be fetched under the page's cap.
            yield from self._follow_links(
                response, books, self.parse_page, self.max_links, meta=self.book_meta
            )
            links = [url for url in _refresh_target(text_page) + links if url not in books]
            yield from self._follow_links(response, links, self.parse_page, self.max_links)

    def _at_max_depth(self, response: Response) -> bool:
        """Whether links of ``response`` would be a hop past the campaign's depth.

        Checked before its links are extracted: on a deep crawl the last level is most of
        the pages, and making requests of their links only for DEPTH_LIMIT to drop them
        took the crawl process a third of its time. It also makes depth 0 mean the seeds
        only (to Scrapy a DEPTH_LIMIT of 0 is no limit).
        """
        if self.max_depth is None:
            return False
        hops = response.meta.get("depth", 0) - response.meta.get(CHAIN_HOPS, 0)
        return hops >= self.max_depth

    def _follow_links(
        self,
        response: Response,
        links: list[str],
        callback: Any,
        limit: int = 0,
        limit_name: str = "COPYTRACK_MAX_LINKS_PER_PAGE",
        meta: dict[str, Any] | None = None,
        next_page: bool = False,
    ) -> Iterator[Request | DroppedLinks]:
        """Requests for the first ``limit`` usable links (0: all), relative ones resolved
        against the response's URL; counts of the others (the log names ``limit_name``).
        ``next_page``: the link to the rest of the page's chapter, followed at any depth.

        A link no request can be made of (``mailto:``, a bad port or IPv6 address) is
        skipped and counted, so it cannot stop the page's other links from being followed.
        """
        if self._at_max_depth(response) and not next_page:
            return
        followed = unusable = 0
        for n, url in enumerate(links):
            if limit and followed == limit:
                self.logger.warning(
                    "%s has %d links: following the first %d (%s)",
                    response.url, len(links), limit, limit_name,
                )  # fmt: skip
                yield DroppedLinks(canonicalize(response.url), len(links) - n, "links_over_limit")
                break
            try:
                request = self._request(response.urljoin(url), callback, meta=meta)
            except ValueError:
                unusable += 1
                continue
            followed += 1
            yield request
        if unusable:
            self.logger.info("%s: %d links no request can be made of", response.url, unusable)
            yield DroppedLinks(canonicalize(response.url), unusable, "bad_url")

    def on_error(self, failure: Failure) -> PageProblem:
        """Why a request gave no page, as an item for the run's counts."""
        request = failure.request  # type: ignore[attr-defined]  # set by Scrapy, not Twisted
        problem = problem_of(failure, canonicalize(request.url))
        if problem.reason == "too_many_redirects":  # Scrapy logs it at DEBUG only
            self.logger.warning(problem.detail)
        return problem


def _books_and_pages(
    links: list[Link], skipped: frozenset[str] = _SKIPPED_EXTENSIONS
) -> tuple[list[str], list[str]]:
    """The links to whole-book downloads, and the links to pages (not to other media or
    documents, whose extensions ``skipped`` names: Scrapy's list)."""
    books: list[str] = []
    pages: list[str] = []
    for link in links:
        if _BOOK_LINK_URL.search(link.url) or _BOOK_LINK_WORDS.search(link.text):
            books.append(link.url)
        elif not url_has_any_extension(link.url, skipped):
            pages.append(link.url)
    return books, pages


def _next_page(response: TextResponse) -> str | None:
    """Where a page continues, on the same site: its rel=next, a 下一页 / next page link, or
    its ``_2.html`` sibling (``_3`` of ``_2``) when it links to it."""
    here = urlsplit(response.url)
    found = response.xpath(
        "//link[contains(concat(' ', normalize-space(@rel), ' '), ' next ')]/@href"
        " | //a[contains(concat(' ', normalize-space(@rel), ' '), ' next ')]/@href"
    ).getall()
    # Only the anchors that may say so are looked at: a list page has hundreds.
    for anchor in response.xpath(_NEXT_PAGE_ANCHORS):
        if _NEXT_PAGE_WORDS.fullmatch(" ".join(anchor.xpath(".//text()").getall()).strip()):
            found.append(anchor.attrib["href"])
    numbered = _PAGE_NUMBER.match(here.path)
    if numbered:
        n = int(numbered["n"] or 1) + 1
        sibling = f"{numbered['stem']}_{n}{numbered['ext']}"
        name = sibling.rsplit("/", 1)[-1]
        if "'" not in name:  # only the links that may name it are looked at
            hrefs = response.xpath(f"//a[contains(@href, '{name}')]/@href").getall()
            found += [h for h in hrefs if urlsplit(response.urljoin(h)).path == sibling]
    for href in found:
        url = urlsplit(response.urljoin(href.strip()))
        if url.scheme in ("http", "https") and url.netloc == here.netloc and url.path != here.path:
            return canonicalize(url.geturl())
    return None


def _refresh_target(response: TextResponse) -> list[str]:
    """Where a ``<meta http-equiv="refresh">`` leads, as one more link to follow (first,
    so the link limit never drops it).

    Never instead of the page: a pirate page can show a whole copy to its visitors for the
    90 s before its refresh, or refresh to nowhere (``javascript:``) or to another site;
    the page is stored and scanned like any other (METAREFRESH_ENABLED is off).
    """
    _, url = get_meta_refresh(response)
    if url and urlsplit(response.urljoin(url)).scheme in ("http", "https"):
        return [url]
    return []


def _headers(response: Response) -> dict[str, str]:
    # MongoDB field names cannot hold "." or start with "$".
    # Scrapy types them loosely; its text headers are str names and values.
    text = cast(dict[str, str], response.headers.to_unicode_dict())
    return {key: value for key, value in text.items() if "." not in key and not key.startswith("$")}


def problem_of(failure: Failure, url: str) -> PageProblem:
    """Classify a failed request: refused by policy (skipped) or failed, with a reason key."""
    error = failure.value
    if isinstance(error, HttpError):
        status = error.response.status
        return PageProblem(url, f"http_{status}", f"HTTP {status}", skipped=False, status=status)
    if isinstance(error, CrawlRefused):
        return PageProblem(url, error.reason, str(error), skipped=True)
    if isinstance(error, HeadRefused):  # the server's doing: a failure, not a policy
        return PageProblem(url, error.reason, str(error), skipped=False)
    if isinstance(error, IgnoreRequest) and str(error) == _REDIRECT_LIMIT:
        request = failure.request  # type: ignore[attr-defined]  # set by Scrapy, not Twisted
        chain = [*request.meta.get("redirect_urls", []), request.url]
        detail = (
            f"{chain[0]}: more than {len(chain) - 1} redirects, not followed "
            f"({' → '.join(chain)} → …); REDIRECT_MAX_TIMES is the limit"
        )
        return PageProblem(canonicalize(chain[0]), "too_many_redirects", detail, skipped=True)
    if isinstance(error, IgnoreRequest) and _DECOMPRESSED_LIMIT in str(error):
        return PageProblem(url, "too_large_decompressed", str(error), skipped=True)
    if isinstance(error, IgnoreRequest):
        # RobotsTxtMiddleware's refusal is a plain IgnoreRequest.
        reason = "robots" if "robots.txt" in str(error) else "ignored"
        return PageProblem(url, reason, str(error), skipped=True)
    if isinstance(error, DownloadCancelledError):  # over DOWNLOAD_MAXSIZE
        return PageProblem(url, "too_large", str(error), skipped=True)
    for kinds, reason in _FAILURES:
        if isinstance(error, kinds):
            return PageProblem(url, reason, str(error), skipped=False)
    return PageProblem(url, type(error).__name__, str(error), skipped=False)
