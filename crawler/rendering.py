"""Script-rendered pages: a campaign's ``render`` option runs each page's scripts in
Chromium (scrapy-playwright driving Debian's Chromium) before its text is extracted.

A page is first downloaded as any other (scope, robots.txt, the private-network rule,
size cap, limits on its head, redirects: the downloader middlewares and Scrapy's handler,
bounded as crawler.download_handler's). Only an HTML page answered 200 is then rendered,
from the bytes already fetched: Chromium fetches nothing itself. Every request its page
makes goes through a route that serves the document from those bytes and fetches the
page's scripts and data requests (XHR, fetch) here, under the private-network rule
(``crawler.fetch.download``: one look-up, the socket to the address that passed), the size
cap, the limits on a head and the download timeout, at most ``COPYTRACK_RENDER_REQUESTS``
per page; images, styles, fonts, media and frames are refused (the text needs none of
them). Whatever a page might still open around the route (a WebSocket, a prefetch, WebRTC
over TCP) meets a proxy that does not exist, loopback included; WebRTC sends no UDP.

Bounded in time (``COPYTRACK_RENDER_TIMEOUT`` to load, as much again for its scripts'
requests to be done) and concurrency (``COPYTRACK_RENDER_PAGES`` pages at once, one
browser). The rendered document is the page's capture, stored with ``rendered: true``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import urllib.error
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page, Route
from playwright.async_api import Request as BrowserRequest
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Headers, HtmlResponse, Response
from scrapy.settings import Settings as ScrapySettings
from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler
from scrapy_playwright.page import PageMethod

from tracker.core.config import ConfigError
from tracker.core.netguard import Lookup, system_lookup

from .download_handler import bound_heads, head_limited
from .fetch import FetchError, download
from .heads import HEAD_LIMITS, HeadLimits
from .middlewares import RENDER, RenderFailed, campaign_domains
from .urls import UrlScope

__all__ = ["PageRoute", "RenderOptions", "RenderingDownloadHandler", "render_settings"]

log = logging.getLogger(__name__)

#: What a page's scripts may fetch: the text of a chapter comes in by script or request.
_FETCHED_TYPES = frozenset({"script", "xhr", "fetch"})
#: Chromium's flags: no sandbox (it runs as the crawl's user, often root in containers),
#: nothing fetched in the background, every connection not served by the route sent to a
#: proxy on the discard port (nobody there), loopback not excepted; and WebRTC kept to the
#: proxy too, which UDP cannot go through: without it a page's RTCPeerConnection sends
#: STUN/TURN datagrams to any address it names. (Debian's Chromium takes this switch;
#: ``--force-webrtc-ip-handling-policy`` does nothing there.)
_CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)


@dataclass(frozen=True)
class RenderOptions:
    """How a page's own requests are fetched (the crawl's settings, carried in meta)."""

    allow_private: bool
    timeout: float
    max_bytes: int
    max_requests: int
    #: Only these sites' requests are fetched (COPYTRACK_RENDER_OFFSITE=0); None: any site.
    sites: UrlScope | None = None
    head: HeadLimits = HEAD_LIMITS


def chromium_path() -> Path:
    """Debian's Chromium (``COPYTRACK_CHROMIUM`` to use another build)."""
    return Path(os.environ.get("COPYTRACK_CHROMIUM") or "/usr/bin/chromium")


def render_settings(settings: ScrapySettings) -> dict[str, Any]:
    """The overrides of ``settings`` for a campaign that renders: the handler, the browser,
    its bounds (COPYTRACK_RENDER_PAGES, COPYTRACK_RENDER_TIMEOUT).

    ConfigError when Chromium is missing: a campaign that renders must not quietly crawl
    without.
    """
    chromium = chromium_path()
    if not os.access(chromium, os.X_OK):
        raise ConfigError(
            f"the campaign renders pages in a browser, but there is no Chromium at {chromium}: "
            "install Debian's (apt-get install chromium) or set COPYTRACK_CHROMIUM to its path"
        )
    handler = f"{__name__}.RenderingDownloadHandler"
    handlers = {**settings.getdict("DOWNLOAD_HANDLERS"), "http": handler, "https": handler}
    return {
        "COPYTRACK_RENDER": True,
        "DOWNLOAD_HANDLERS": handlers,
        "PLAYWRIGHT_BROWSER_TYPE": "chromium",
        "PLAYWRIGHT_LAUNCH_OPTIONS": {
            "executable_path": str(chromium),
            "headless": True,
            "args": list(_CHROMIUM_ARGS),
        },
        "PLAYWRIGHT_MAX_CONTEXTS": 1,
        "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": settings.getint("COPYTRACK_RENDER_PAGES"),
        # Service workers would fetch around the route.
        "PLAYWRIGHT_CONTEXTS": {"default": {"service_workers": "block"}},
        "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": settings.getfloat("COPYTRACK_RENDER_TIMEOUT")
        * 1000,
    }


class RenderingDownloadHandler(ScrapyPlaywrightDownloadHandler):
    """Scrapy's HTTP download first (with the limits on its head, as
    crawler.download_handler's); then, for a request marked ``RENDER`` answered 200 with
    HTML, the page rendered by Chromium from those bytes."""

    #: How host names are resolved for a page's requests; tests give a fake one.
    lookup: Lookup = staticmethod(system_lookup)

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = crawler.settings
        head = HeadLimits.from_settings(settings)
        bound_heads(self, head)
        self.timeout = settings.getfloat("COPYTRACK_RENDER_TIMEOUT")
        self.options = RenderOptions(
            allow_private=settings.getbool("COPYTRACK_ALLOW_PRIVATE_NETWORKS"),
            timeout=settings.getfloat("DOWNLOAD_TIMEOUT"),
            max_bytes=settings.getint("DOWNLOAD_MAXSIZE"),
            max_requests=settings.getint("COPYTRACK_RENDER_REQUESTS"),
            sites=None
            if settings.getint("COPYTRACK_RENDER_OFFSITE")
            else UrlScope.build(campaign_domains(crawler), (), ()),
            head=head,
        )

    async def download_request(self, request: Request) -> Response:
        # No "playwright" meta: Scrapy's HTTP download.
        fetched = await head_limited(super().download_request(request))
        if not request.meta.get(RENDER) or fetched.status != 200:
            return fetched
        if not isinstance(fetched, HtmlResponse):
            return fetched
        route = PageRoute(fetched, self.options, self.lookup)
        request.meta.update({
            "playwright": True,
            "playwright_page_init_callback": route.install,
            # Scripts that fetch the text after the load event: until they are done.
            "playwright_page_methods": [PageMethod(route.settle, self.timeout)],
        })  # fmt: skip
        try:
            rendered = await super().download_request(request)
        except PlaywrightError as err:
            why = str(err).strip().splitlines()[0]
            raise RenderFailed(f"{fetched.url}: fetched but not rendered: {why}") from None
        finally:
            for key in ("playwright", "playwright_page_init_callback", "playwright_page_methods"):
                request.meta.pop(key, None)
        # The DOM as text, in UTF-8 whatever the page was served in; the served headers
        # otherwise (a rendered page is re-checked and evidenced like any other).
        headers = fetched.headers.copy()
        headers["Content-Type"] = "text/html; charset=utf-8"
        return fetched.replace(
            body=rendered.text.encode("utf-8"),
            headers=headers,
            encoding="utf-8",
            flags=[*fetched.flags, "rendered"],
        )


#: A page is read once none of its requests has been in flight for this long (seconds):
#: its scripts ask for the text right after loading. (Chromium's "network idle" waits
#: 0.5 s, which here would be most of a page's time.)
QUIET = 0.25


class PageRoute:
    """Every request of one rendered page, served: the document from the response already
    fetched, scripts and data requests fetched under the crawl's rules (at most
    ``options.max_requests``), the rest refused; and when the page has gone quiet."""

    def __init__(
        self, fetched: Response, options: RenderOptions, lookup: Lookup = system_lookup
    ) -> None:
        self.fetched = fetched
        self.options = options
        self.lookup = lookup
        self.budget = options.max_requests
        self.pending = 0
        self.last_activity = time.monotonic()

    async def install(self, page: Page, request: Request | None = None) -> None:
        """scrapy-playwright's page init callback: the route, before the page loads."""
        self.page = page
        await page.route("**", self._serve)

    async def settle(self, page: Page, timeout: float) -> None:
        """Return once no request has been in flight for ``QUIET`` seconds, or after
        ``timeout`` seconds (a page that keeps asking is read as it stands)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.pending and time.monotonic() - self.last_activity >= QUIET:
                return
            await asyncio.sleep(0.05)

    async def _serve(self, route: Route, asked: BrowserRequest) -> None:
        self.last_activity = time.monotonic()
        if asked.is_navigation_request() and asked.frame == self.page.main_frame:
            if asked.url.split("#")[0] != self.fetched.url.split("#")[0]:
                await _abort(route)  # a script navigating away
            else:
                await _answer(route, status=200, headers=_plain(self.fetched.headers),
                              body=self.fetched.body)  # fmt: skip
            return
        options = self.options
        wanted = asked.resource_type in _FETCHED_TYPES and asked.method in ("GET", "HEAD")
        wanted = wanted and (options.sites is None or options.sites.in_domains(asked.url))
        if not wanted or self.budget <= 0:
            await _abort(route)
            return
        self.budget -= 1
        self.pending += 1
        try:
            got = await asyncio.to_thread(
                download, asked.url, options.allow_private, options.timeout,
                options.max_bytes, self.lookup, options.head,
            )  # fmt: skip
        except urllib.error.HTTPError as err:
            await _answer(route, status=err.code, headers={}, body=b"")
        except FetchError as err:  # refused, too big, too slow, unreachable
            log.info("%s: a request of the page not served: %s", self.fetched.url, err)
            await _abort(route)
        else:
            await _answer(route, status=got.status, headers=_plain(got.headers),
                          body=got.body)  # fmt: skip
        finally:
            self.pending -= 1
            self.last_activity = time.monotonic()


async def _answer(route: Route, **response: Any) -> None:
    with suppress(PlaywrightError):  # the page was closed meanwhile (its time was up)
        await route.fulfill(**response)


async def _abort(route: Route) -> None:
    with suppress(PlaywrightError):
        await route.abort("blockedbyclient")


def _plain(headers: Mapping[str, str] | Headers) -> dict[str, str]:
    """Headers as Chromium may be handed them: the body is given decompressed and whole."""
    unicode = headers.to_unicode_dict() if isinstance(headers, Headers) else headers
    text = cast(Mapping[str, str], unicode)  # Scrapy's text headers: str names and values
    dropped = {"content-encoding", "content-length", "transfer-encoding"}
    return {k: v for k, v in text.items() if k.lower() not in dropped}
