"""urllib handlers whose every connection is made by ``tracker.netguard.connect``.

The host of each request (redirects included) is resolved once, by the private-network
rule, and the socket goes to an address that passed it: there is no second look-up that
DNS rebinding could answer differently. HTTPS still checks the certificate against the
host name. No proxy is used: through one, the rule would see the proxy, not the site.
"""

from __future__ import annotations

import functools
import http.client
import socket
import urllib.request
from collections.abc import Callable
from typing import Any

from tracker.netguard import Lookup, connect

__all__ = ["guarded_opener"]

#: socket.create_connection's signature, with the fetch's policy bound.
Connect = Callable[..., socket.socket]


def _guarded(connection_class: type[http.client.HTTPConnection], connect: Connect) -> Any:
    """A factory of ``connection_class`` instances whose socket comes from ``connect``."""

    def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
        connection = connection_class(host, **kwargs)
        # The one place http.client opens its socket (HTTPS wraps it afterwards).
        connection._create_connection = connect  # type: ignore[attr-defined]
        return connection

    return make


class _GuardedHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, connect: Connect) -> None:
        super().__init__()
        self.connect = connect

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_guarded(http.client.HTTPConnection, self.connect), req)


class _GuardedHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, connect: Connect) -> None:
        super().__init__()
        self.connect = connect

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        factory = _guarded(http.client.HTTPSConnection, self.connect)
        return self.do_open(factory, req, context=self._context)


def guarded_opener(
    allow_private: bool, lookup: Lookup, *handlers: urllib.request.BaseHandler
) -> urllib.request.OpenerDirector:
    """An opener for http(s) URLs under the private-network rule, plus ``handlers``.

    A refused host raises tracker.netguard.PrivateAddressError out of ``open``; one that
    does not resolve, urllib's URLError with an UnresolvedHostError as its reason.
    """
    bound = functools.partial(connect, allow_private=allow_private, lookup=lookup)
    return urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        _GuardedHTTPHandler(bound),
        _GuardedHTTPSHandler(bound),
        *handlers,
    )
