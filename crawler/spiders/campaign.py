"""The campaign spider: seeds that are pages, sitemaps (or robots.txt) or RSS/Atom feeds.

A seed's kind is read from its response, so campaigns just list URLs. Sitemaps go
through SitemapSpider's parser (sitemap indexes, gzip, robots.txt ``Sitemap:`` lines),
feeds give their entries' links, pages are handed to the pipeline and their links
followed. Every request is canonicalized here; whether it is in the campaign's scope,
on a public address, allowed by robots.txt or due for a re-fetch is decided by the
downloader middlewares. Every URL that yields no page ends as a ``PageProblem`` item,
so the run counts it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

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
from scrapy.linkextractors import LinkExtractor
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.spiders import SitemapSpider
from scrapy.utils.sitemap import Sitemap
from twisted.internet.error import (
    ConnectionRefusedError,
    DNSLookupError,
    TCPTimedOutError,
    TimeoutError,
)
from twisted.python.failure import Failure

from ..items import NETWORK, FetchedPage, PageProblem
from ..middlewares import SEED, SOURCE, CrawlRefused
from ..urls import canonicalize

SITEMAP_ROOTS = frozenset({"urlset", "sitemapindex"})
FEED_ROOTS = frozenset({"rss", "feed", "RDF"})
# RSS 2.0 and RSS 1.0 <item><link>, Atom <entry><link href> (the alternate one).
FEED_LINKS = (
    "//*[local-name()='item']/*[local-name()='link']/text()",
    "//*[local-name()='entry']/*[local-name()='link'][not(@rel) or @rel='alternate']/@href",
)
_SNIFF = 1024
# Download handlers raise Scrapy's or Twisted's exceptions, depending on the handler.
_FAILURES: tuple[tuple[tuple[type[BaseException], ...], str], ...] = (
    ((DownloadTimeoutError, TimeoutError, TCPTimedOutError), "timeout"),
    ((CannotResolveHostError, DNSLookupError), "dns"),
    ((DownloadConnectionRefusedError, ConnectionRefusedError), "connection_refused"),
)


class CampaignSpider(SitemapSpider):
    """Crawls one campaign (``COPYTRACK_CAMPAIGN`` setting, set by ``crawler.run``)."""

    name = "campaign"
    sitemap_rules = (("", "parse_page"),)

    def __init__(self, campaign: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seeds = [canonicalize(seed) for seed in campaign["seeds"]]
        # Scope is the middlewares' job; the extractor only skips media and documents.
        self.link_extractor = LinkExtractor(canonicalize=False, unique=True)

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> CampaignSpider:
        campaign = crawler.settings.getdict("COPYTRACK_CAMPAIGN")
        if not campaign:
            raise ValueError("no campaign: run crawls with `python -m crawler.run`")
        return super().from_crawler(crawler, campaign, *args, **kwargs)

    async def start(self) -> AsyncIterator[Request]:
        for seed in self.seeds:
            yield self._request(seed, self.parse_seed, seed=True)

    def _request(self, url: str, callback: Any, seed: bool = False) -> Request:
        url = canonicalize(url)
        # One politeness slot (delay, concurrency, AutoThrottle) per origin: Scrapy keys
        # slots by host name, so sites on different ports of one host would share one.
        meta: dict[str, Any] = {"download_slot": urlsplit(url).netloc}
        if seed:
            meta[SEED] = True
        return Request(url, callback=callback, errback=self.on_error, meta=meta)

    # ------------------------------------------------------------------ callbacks

    def parse_seed(self, response: Response) -> Iterator[Any]:
        """A seed: a sitemap or robots.txt, a feed, or a page."""
        kind = _xml_root(self, response)
        if response.url.endswith("/robots.txt") or kind in SITEMAP_ROOTS:
            yield from self.parse_sitemap(response)
        elif kind in FEED_ROOTS:
            for xpath in FEED_LINKS:
                for link in response.xpath(xpath).getall():
                    yield self._request(response.urljoin(link.strip()), self.parse_page)
        else:
            yield from self.parse_page(response)

    def parse_sitemap(self, response: Response) -> Iterator[Request]:
        """Sitemap entries (and nested sitemaps), parsed by SitemapSpider."""
        for request in self._parse_sitemap(response):
            nested = request.callback == self._parse_sitemap
            yield self._request(request.url, self.parse_sitemap if nested else self.parse_page)

    def parse_page(self, response: Response) -> Iterator[Any]:
        """Hand the page to the pipeline and follow its links."""
        yield FetchedPage(
            url=canonicalize(response.url),
            final_url=response.url,
            status=response.status,
            headers=_headers(response),
            body=response.body,
            source=response.meta.get(SOURCE, NETWORK),
            redirected_from=list(response.meta.get("redirect_urls", [])),
        )
        # Binary bodies served as text/html hold no links, only NUL bytes for lxml.
        if isinstance(response, TextResponse) and b"\0" not in response.body[:_SNIFF]:
            for link in self.link_extractor.extract_links(response):
                yield self._request(link.url, self.parse_page)

    def on_error(self, failure: Failure) -> PageProblem:
        """Why a request gave no page, as an item for the run's counts."""
        request = failure.request  # type: ignore[attr-defined]
        return problem_of(failure, canonicalize(request.url))


def _xml_root(spider: SitemapSpider, response: Response) -> str | None:
    """Root element name of an XML (or gzipped XML) response, None for anything else."""
    body = spider._get_sitemap_body(response)
    if not body:
        return None
    try:
        return Sitemap(body).type
    except (StopIteration, ValueError):  # empty or unparsable document
        return None


def _headers(response: Response) -> dict[str, str]:
    # MongoDB field names cannot hold "." or start with "$".
    return {
        key: value
        for key, value in response.headers.to_unicode_dict().items()
        if "." not in key and not key.startswith("$")
    }


def problem_of(failure: Failure, url: str) -> PageProblem:
    """Classify a failed request: refused by policy (skipped) or failed, with a reason key."""
    error = failure.value
    if isinstance(error, HttpError):
        status = error.response.status
        return PageProblem(url, f"http_{status}", f"HTTP {status}", skipped=False, status=status)
    if isinstance(error, CrawlRefused):
        return PageProblem(url, error.reason, str(error), skipped=True)
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
