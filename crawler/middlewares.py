"""Downloader middlewares: campaign scope, the private-network rule, re-fetch policy,
and the shared frontier's end-of-crawl handshake.

Order (crawler/settings.py): scope (50) and private network (60) before robots.txt
(100), so neither an off-scope nor a private host sees even a robots.txt request;
re-fetch policy (110) after it.
"""

from __future__ import annotations

import ipaddress
import logging
import time
import zlib
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import redis
from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import (
    CannotResolveHostError,
    DontCloseSpider,
    IgnoreRequest,
    NotConfigured,
)
from scrapy.http import Response
from scrapy.responsetypes import responsetypes
from scrapy.utils.httpobj import urlparse_cached
from scrapy_redis.connection import get_redis_from_settings
from twisted.internet.error import DNSLookupError

from tracker.core.netguard import PrivateAddressError, checked_addresses

from .items import NOT_MODIFIED, STORED
from .lookup import PageLookup, stored_pages
from .resolver import GuardedResolver
from .urls import UrlScope, canonicalize

#: Request meta keys set by the spider and these middlewares.
SEED = "copytrack_seed"  # a campaign seed: domain check only, never served from the store
SOURCE = "copytrack_source"  # items.STORED / items.NOT_MODIFIED when not a plain download
RENDER = "copytrack_render"  # an HTML answer is rendered in a browser (crawler.rendering)
IMAGE = "copytrack_image"  # an article's image fetched for OCR (crawler.images): any host
_CONDITIONAL = "copytrack_conditional"  # the stored page a conditional GET revalidates
_ROBOTS_PATH = "/robots.txt"

log = logging.getLogger(__name__)


class CrawlRefused(IgnoreRequest):
    """A request refused by copytrack's policy; ``reason`` is the run's counter key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class RenderFailed(Exception):
    """A page fetched but not rendered in the browser (crawler.rendering): its time ran out,
    or the browser failed."""


def _campaign(crawler: Crawler) -> dict[str, Any]:
    return crawler.settings.getdict("COPYTRACK_CAMPAIGN")


def campaign_domains(crawler: Crawler) -> list[str]:
    """The host[:port]s the crawl's campaign stays on: its allowed domains, or its seeds'."""
    campaign = _campaign(crawler)
    return campaign.get("allowed_domains") or [urlsplit(s).netloc for s in campaign["seeds"]]


class CampaignScopeMiddleware:
    """Keeps the crawl on the campaign's hosts (ports included) and URL patterns.

    Links are dropped when scheduled, before any request; redirects are checked when
    downloaded, so an off-scope redirect is reported (``skipped.redirect_off_scope``).
    """

    def __init__(self, scope: UrlScope, crawler: Crawler) -> None:
        self.scope = scope
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CampaignScopeMiddleware:
        campaign = _campaign(crawler)
        scope = UrlScope.build(
            campaign_domains(crawler), campaign.get("allow", []), campaign.get("deny", [])
        )
        middleware = cls(scope, crawler)
        crawler.signals.connect(middleware.request_scheduled, signal=signals.request_scheduled)
        return middleware

    def _allowed(self, request: Request) -> bool:
        if request.meta.get(IMAGE):  # part of its page, wherever it is hosted (a CDN)
            return True
        # Seeds and robots.txt files only need the right host: patterns are for links.
        if request.meta.get(SEED) or urlparse_cached(request).path == _ROBOTS_PATH:
            return self.scope.in_domains(request.url)
        return self.scope.allows(request.url)

    def request_scheduled(self, request: Request, spider: Any) -> None:
        """Drop an off-scope link before it reaches the scheduler."""
        if request.meta.get("redirect_urls") or self._allowed(request):
            return
        assert self.stats is not None
        self.stats.inc_value("copytrack/off_scope_links")
        raise IgnoreRequest(f"off scope: {request.url}")

    def process_request(self, request: Request) -> None:
        if not self._allowed(request):
            raise CrawlRefused("redirect_off_scope", f"redirected out of scope to {request.url}")


class PrivateNetworkMiddleware:
    """The private-network rule's side in the downloader (the rule itself is applied by
    ``crawler.resolver.GuardedResolver``, on the addresses Scrapy connects to).

    Refuses a URL whose host is a non-public IP literal before any request (robots.txt
    included); reports a request whose host the resolver refused as
    ``skipped.private_address`` rather than as a DNS failure; and refuses every request
    when the crawl runs without the guarded resolver (a settings mistake must not crawl
    unguarded). Off when COPYTRACK_ALLOW_PRIVATE_NETWORKS is set.
    """

    def __init__(self) -> None:
        self._resolver: GuardedResolver | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PrivateNetworkMiddleware:
        if crawler.settings.getbool("COPYTRACK_ALLOW_PRIVATE_NETWORKS"):
            raise NotConfigured
        return cls()

    def _guarded_resolver(self) -> GuardedResolver | None:
        if self._resolver is None:
            from twisted.internet import reactor  # the installed one, when the crawl runs

            installed = getattr(reactor, "nameResolver", None)
            self._resolver = installed if isinstance(installed, GuardedResolver) else None
        return self._resolver

    def process_request(self, request: Request) -> None:
        host = (urlparse_cached(request).hostname or "").strip("[]")
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        if literal is not None:
            try:
                checked_addresses(host)
            except PrivateAddressError as refused:
                raise CrawlRefused("private_address", str(refused)) from None
        if self._guarded_resolver() is None:
            raise CrawlRefused(
                "private_address",
                f"{request.url}: not fetched: the crawl's TWISTED_DNS_RESOLVER is not "
                "crawler.resolver.GuardedResolver, so the private-network rule cannot apply",
            )

    def process_exception(self, request: Request, exception: Exception) -> None:
        resolver = self._guarded_resolver()
        host = urlparse_cached(request).hostname or ""
        refusal = resolver.refusal(host) if resolver else None
        if refusal and isinstance(exception, (CannotResolveHostError, DNSLookupError)):
            raise CrawlRefused("private_address", refusal)


class RefetchPolicyMiddleware:
    """Re-fetch policy against the pages already stored (dedupe across runs).

    A page fetched less than the campaign's ``refetch_days`` ago, or since the failed run
    this one resumes began (``COPYTRACK_RESUME_SINCE``), is not requested again:
    its stored copy is answered instead, so its links are still followed. An older one
    is requested conditionally (``If-None-Match`` / ``If-Modified-Since`` from its stored
    ``ETag`` / ``Last-Modified``); a 304 is answered with the stored copy too. Seeds are
    always fetched: they are where new links appear. The pages a site has are read when
    the crawl first reaches it (`PageLookup`): one stored later, by another crawl, is
    fetched again.
    """

    def __init__(self, refetch_after: timedelta, resume_since: datetime | None = None) -> None:
        self.refetch_after = refetch_after
        self.resume_since = resume_since
        self.known = PageLookup(stored_pages, ("fetched_at", "headers", "status"), by_site=True)
        self.stored = PageLookup(stored_pages, ("raw_zlib", "headers", "final_url"))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RefetchPolicyMiddleware:
        days = float(_campaign(crawler).get("refetch_days") or 0)
        since = crawler.settings.get("COPYTRACK_RESUME_SINCE")
        if since:
            log.info("resuming a failed run: pages fetched since %s are not fetched again", since)
        return cls(timedelta(days=days), datetime.fromisoformat(since) if since else None)

    async def process_request(self, request: Request) -> Response | None:
        if request.meta.get(SEED) or request.meta.get(IMAGE):  # images are not pages
            return None
        if urlparse_cached(request).path == _ROBOTS_PATH:
            return None
        url = canonicalize(request.url)
        page = await self.known.get(url)
        if page is None or page.get("status") != 200:
            return None
        fetched_at = page["fetched_at"]
        resumed = self.resume_since is not None and fetched_at >= self.resume_since
        if resumed or datetime.now(UTC) - fetched_at < self.refetch_after:
            return await self._stored(request, url, STORED)
        headers = {k.lower(): v for k, v in (page.get("headers") or {}).items()}
        if "etag" in headers:
            request.headers["If-None-Match"] = headers["etag"]
        if "last-modified" in headers:
            request.headers["If-Modified-Since"] = headers["last-modified"]
        if "etag" in headers or "last-modified" in headers:
            request.meta[_CONDITIONAL] = url
        return None

    async def process_response(self, request: Request, response: Response) -> Response:
        url = request.meta.get(_CONDITIONAL)
        if response.status != 304 or url is None:
            return response
        return await self._stored(request, url, NOT_MODIFIED) or response

    async def _stored(self, request: Request, url: str, source: str) -> Response | None:
        """The stored copy as a response; None if the page was deleted meanwhile."""
        page = await self.stored.get(url)
        if page is None:
            return None
        body = zlib.decompress(page["raw_zlib"])
        headers = page.get("headers") or {}
        cls = responsetypes.from_args(headers=headers, url=page.get("final_url"), body=body)
        request.meta[SOURCE] = source
        return cls(url=page.get("final_url") or url, status=200, headers=headers, body=body,
                   request=request)  # fmt: skip


class SharedFrontierMiddleware:
    """With the Redis frontier: a crawl process whose share of the queue ran dry waits
    while another process of the run is still busy (and may queue new links).

    Every process marks the run busy (a Redis key that expires after ``grace`` seconds)
    when it sends a request or gets a response; an idle process stays open while the mark
    exists. When every process has been idle for ``grace`` seconds, all of them close.
    """

    def __init__(self, client: redis.Redis, key: str, grace: float) -> None:
        self.client = client
        self.key = key
        self.grace_ms = int(grace * 1000)
        self._marked = 0.0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SharedFrontierMiddleware:
        settings = crawler.settings
        middleware = cls(
            # Configured as the scheduler's (REDIS_URL, REDIS_PARAMS: reply and connect
            # timeouts): a Redis that stops answering fails the crawl, never hangs it.
            get_redis_from_settings(settings),
            settings["COPYTRACK_FRONTIER_BUSY_KEY"],
            settings.getfloat("COPYTRACK_FRONTIER_GRACE"),
        )
        crawler.signals.connect(middleware.spider_idle, signal=signals.spider_idle)
        return middleware

    def _mark_busy(self) -> None:
        now = time.monotonic()
        if now - self._marked > 1.0:  # one write a second is plenty
            self.client.set(self.key, "1", px=self.grace_ms)
            self._marked = now

    def process_request(self, request: Request) -> None:
        self._mark_busy()

    def process_response(self, request: Request, response: Response) -> Response:
        self._mark_busy()
        return response

    def spider_idle(self, spider: Any) -> None:
        if self.client.exists(self.key):
            raise DontCloseSpider
