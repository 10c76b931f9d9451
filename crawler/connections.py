"""urllib handlers whose every connection is made by ``tracker.core.netguard.connect`` and
whose every response's head is read under ``crawler.heads.HeadLimits``.

The host of each request (redirects included) is resolved once, by the private-network
rule, and the socket goes to an address that passed it: there is no second look-up that
DNS rebinding could answer differently. HTTPS still checks the certificate against the
host name. No proxy is used: through one, the rule would see the proxy, not the site.

http.client bounds a head to 100 header lines of 64 KB, but not in time: a server sending
a byte of it every 29 s holds a fetch for ever, each read within the socket's timeout. So
the head's lines are counted as they are read, and a watchdog shuts the socket down when
the head is not whole in time.
"""

from __future__ import annotations

import functools
import http.client
import socket
import threading
import urllib.request
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from tracker.core.netguard import Lookup, connect

from .heads import HEAD_LIMITS, HeadCount, HeadLimits, HeadRefused

__all__ = ["guarded_opener"]

#: socket.create_connection's signature, with the fetch's policy bound.
Connect = Callable[..., socket.socket]


class _CountedLines:
    """A response's file as http.client reads its head from it, every line counted."""

    def __init__(self, fp: Any, count: HeadCount) -> None:
        self._fp = fp
        self._count = count

    def readline(self, limit: int = -1) -> bytes:
        line = self._fp.readline(limit)
        self._count.line(line)
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fp, name)


class _Watchdog:
    """Shuts ``sock`` down (both ways) after ``seconds`` unless stopped first: a read
    blocked on it then returns."""

    def __init__(self, sock: socket.socket, seconds: float) -> None:
        self.sock = sock
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        if seconds:
            self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        with suppress(OSError):  # closed meanwhile
            # socket.socket's own: an SSL socket's would drop its TLS state under a reader.
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)

    def stop(self) -> bool:
        """Stop it; whether it fired (the socket is shut down then)."""
        self._timer.cancel()
        if self._timer.is_alive():
            self._timer.join()
        return self.fired


class _HeadLimitedResponse(http.client.HTTPResponse):
    """http.client's response, its head (interim 1xx heads before it included) read under
    ``limits``, from the first byte on: waiting for that byte is the socket timeout's."""

    def __init__(self, sock: socket.socket, *args: Any, limits: HeadLimits, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        self._socket = sock
        self._limits = limits

    def begin(self) -> None:
        if self.headers is not None:
            return  # already begun
        fp = self.fp
        fp.peek(1)
        self.fp = _CountedLines(fp, HeadCount(self._limits))
        watchdog = _Watchdog(self._socket, self._limits.seconds)
        try:
            super().begin()
        except http.client.LineTooLong as err:
            raise HeadRefused(
                "headers_too_large", f"the server sent too long a header line ({err})"
            ) from None
        except (OSError, http.client.HTTPException):
            if watchdog.stop():  # it shut the socket down under the read
                raise HeadRefused.too_slow(self._limits.seconds) from None
            raise
        finally:
            fired = watchdog.stop()
            if self.fp is not None:  # None: http.client closed it (no body to read)
                self.fp = fp
        if fired:  # just as the head came whole: the socket is shut down all the same
            raise HeadRefused.too_slow(self._limits.seconds)


def _guarded(
    connection_class: type[http.client.HTTPConnection], connect: Connect, limits: HeadLimits
) -> Any:
    """A factory of ``connection_class`` instances whose socket comes from ``connect`` and
    whose responses' heads are read under ``limits``."""

    def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
        connection = connection_class(host, **kwargs)
        # The one place http.client opens its socket (HTTPS wraps it afterwards).
        connection._create_connection = connect  # type: ignore[attr-defined]
        # typeshed types it as a class; http.client only calls it.
        connection.response_class = functools.partial(  # type: ignore[assignment]
            _HeadLimitedResponse, limits=limits
        )
        return connection

    return make


class _GuardedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, connect: Connect, limits: HeadLimits) -> None:
        super().__init__()
        self.connect = connect
        self.limits = limits

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        factory = _guarded(http.client.HTTPConnection, self.connect, self.limits)
        return self.do_open(factory, req)


class _GuardedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, connect: Connect, limits: HeadLimits) -> None:
        super().__init__()
        self.connect = connect
        self.limits = limits

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        factory = _guarded(http.client.HTTPSConnection, self.connect, self.limits)
        # The default TLS context, as urllib's own handler uses when given none.
        return self.do_open(factory, req)


def guarded_opener(
    allow_private: bool,
    lookup: Lookup,
    *handlers: urllib.request.BaseHandler,
    limits: HeadLimits = HEAD_LIMITS,
) -> urllib.request.OpenerDirector:
    """An opener for http(s) URLs under the private-network rule and the head ``limits``,
    plus ``handlers``.

    A refused host raises tracker.core.netguard.PrivateAddressError out of ``open``; one that
    does not resolve, urllib's URLError with an UnresolvedHostError as its reason; a head
    over a limit, crawler.heads.HeadRefused.
    """
    bound = functools.partial(connect, allow_private=allow_private, lookup=lookup)
    return urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        _GuardedHTTPHandler(bound, limits),
        _GuardedHTTPSHandler(bound, limits),
        *handlers,
    )
