"""The crawl's HTTP(S) download handler: Scrapy's (Twisted's HTTP/1.1 client) with the
limits of crawler.heads on every response's head.

Twisted's parser keeps every header line until the blank line that ends the head, with no
bound on their number or on the time they take; Scrapy's size cap counts the body only.
``HeadLimits`` are applied where the lines are parsed, in a subclass of Scrapy's lenient
parser (Scrapy swaps the parser's class in the same way, the one place a protocol's
parser can be chosen). A head that breaks a limit ends its connection and fails its
request with ``HeadRefused``, which the run counts under its reason
(``failed.headers_too_large``, ``failed.headers_too_slow``) and does not retry.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable
from typing import Any, cast

from scrapy import Request
from scrapy.core.downloader.handlers.http11 import (
    HTTP11DownloadHandler,
    _LenientHTTP11ClientFactory,
    _LenientHTTP11ClientProtocol,
    _LenientHTTPClientParser,
)
from scrapy.crawler import Crawler
from scrapy.exceptions import DownloadFailedError
from scrapy.http import Response
from twisted.internet.interfaces import IDelayedCall
from twisted.python.failure import Failure
from twisted.web._newclient import HEADER, STATUS, ResponseFailed

from .heads import HeadCount, HeadLimits, HeadRefused

__all__ = ["HeadLimitedDownloadHandler", "bound_heads", "head_limited"]


class _HeadLimitedParser(_LenientHTTPClientParser):
    """Scrapy's response parser, counting the head's lines and its time. Its state is set
    by ``_HeadLimitedProtocol.request`` right after the class is swapped."""

    count: HeadCount
    give_up: Any  # the protocol's _giveUp: ends the connection, fails the request
    timer: IDelayedCall | None

    def dataReceived(self, data: bytes) -> None:
        seconds = self.count.limits.seconds
        if self.timer is None and seconds and self.state in (STATUS, HEADER):
            from twisted.internet import reactor

            self.timer = reactor.callLater(seconds, self._too_slow)
        super().dataReceived(data)

    def lineReceived(self, line: bytes) -> None:
        self.count.line(line)  # raises HeadRefused: the protocol gives the request up
        super().lineReceived(line)

    def lineLengthExceeded(self, line: bytes) -> None:
        raise HeadRefused.line_too_long(self.MAX_LENGTH)

    def allHeadersReceived(self) -> None:
        if not 100 <= self.response.code < 200:  # an interim response's head is not the end
            self._stop_timer()
        super().allHeadersReceived()

    def connectionLost(self, reason: Failure | None = None) -> None:
        self._stop_timer()
        super().connectionLost(reason)

    def _stop_timer(self) -> None:
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None

    def _too_slow(self) -> None:
        self.timer = None
        if self.state in (STATUS, HEADER):
            self.give_up(Failure(HeadRefused.too_slow(self.count.limits.seconds)))


class _HeadLimitedProtocol(_LenientHTTP11ClientProtocol):
    def __init__(self, quiescent_callback: Any, limits: HeadLimits) -> None:
        super().__init__(quiescent_callback)
        self.limits = limits

    def request(self, request: Any) -> Any:
        answered = super().request(request)
        parser = self._parser
        assert parser is not None  # always there: see _LenientHTTP11ClientProtocol.request
        parser.__class__ = _HeadLimitedParser
        limited = cast(_HeadLimitedParser, parser)  # of that class from now on
        limited.count = HeadCount(self.limits)
        limited.give_up = self._giveUp
        limited.timer = None
        return answered


class _HeadLimitedFactory(_LenientHTTP11ClientFactory):
    def __init__(self, limits: HeadLimits, quiescent_callback: Any, metadata: Any) -> None:
        super().__init__(quiescent_callback, metadata)
        self.limits = limits

    def buildProtocol(self, addr: Any) -> _HeadLimitedProtocol:
        return _HeadLimitedProtocol(self._quiescentCallback, self.limits)


def bound_heads(handler: HTTP11DownloadHandler, limits: HeadLimits) -> None:
    """Make ``handler``'s new connections apply ``limits`` to every response's head."""
    # Twisted types the pool's factory as a class; it only calls it.
    handler._pool._factory = functools.partial(_HeadLimitedFactory, limits)  # type: ignore[assignment]


async def head_limited(download: Awaitable[Response]) -> Response:
    """``download``'s response; when a limit on its head failed it, that refusal
    (HeadRefused) instead of Scrapy's DownloadFailedError, which would be retried."""
    try:
        return await download
    except DownloadFailedError as err:
        cause = err.__cause__
        reasons = cause.reasons if isinstance(cause, ResponseFailed) else []
        for reason in reasons:
            if isinstance(reason.value, HeadRefused):
                raise reason.value from None
        raise


class HeadLimitedDownloadHandler(HTTP11DownloadHandler):
    """Scrapy's HTTP/1.1 handler with the head limits (COPYTRACK_MAX_HEADER_BYTES,
    COPYTRACK_MAX_HEADERS, COPYTRACK_HEADER_SECONDS) on every response."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        bound_heads(self, HeadLimits.from_settings(crawler.settings))

    async def download_request(self, request: Request) -> Response:
        return await head_limited(super().download_request(request))
