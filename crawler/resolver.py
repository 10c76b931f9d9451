"""The crawl's DNS resolver: every address Scrapy connects to passes the private-network rule.

Scrapy resolves each host itself when it connects (``TWISTED_DNS_RESOLVER``, installed on
the reactor). A check before that, with a look-up of its own, can be answered differently
from the connection's (a failed look-up first, then 127.0.0.1; or DNS rebinding). So the
rule sits here, on the one look-up whose answer is connected to: every address of a name
must be public (tracker.core.netguard), else the name resolves to nothing and no connection is
made; a name that does not resolve gives nothing either. Refusals are remembered per host
so that ``PrivateNetworkMiddleware`` reports them as ``skipped.private_address`` rather
than as DNS failures.

Answers are cached for the crawl like Scrapy's own resolver does (``DNSCACHE_ENABLED``,
``DNSCACHE_SIZE``); only checked answers are cached, so a cached answer is safe to reuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scrapy.crawler import Crawler
from scrapy.utils.datatypes import LocalCache
from twisted.internet import defer, threads
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.interfaces import (
    IAddress,
    IHostnameResolver,
    IHostResolution,
    IResolutionReceiver,
)
from twisted.python.failure import Failure
from zope.interface import implementer

from tracker.core.netguard import (
    IPAddress,
    Lookup,
    PrivateAddressError,
    checked_addresses,
    system_lookup,
)

__all__ = ["GuardedResolver"]


@implementer(IHostResolution)
class _Resolution:
    def __init__(self, name: str) -> None:
        self.name = name

    def cancel(self) -> None:  # Twisted's endpoints never cancel a resolution
        raise NotImplementedError


@implementer(IHostnameResolver)
class GuardedResolver:
    """An IHostnameResolver that resolves in the reactor's thread pool and hands Twisted
    only the addresses ``tracker.core.netguard.checked_addresses`` allows."""

    #: The system look-up; tests give a subclass a fake one (no real DNS, no real hosts).
    lookup: Lookup = staticmethod(system_lookup)

    def __init__(self, reactor: Any, allow_private: bool, cache_size: int, timeout: float) -> None:
        self.reactor = reactor
        self.allow_private = allow_private
        self.timeout = timeout
        self._cache: LocalCache[str, list[IPAddress]] = LocalCache(cache_size)
        self._refusals: LocalCache[str, str] = LocalCache(10_000)

    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: Any) -> GuardedResolver:
        settings = crawler.settings
        cache = settings.getint("DNSCACHE_SIZE") if settings.getbool("DNSCACHE_ENABLED") else 0
        return cls(
            reactor,
            settings.getbool("COPYTRACK_ALLOW_PRIVATE_NETWORKS"),
            cache,
            settings.getfloat("DNS_TIMEOUT"),
        )

    def install_on_reactor(self) -> None:
        # Also replaces reactor.resolver (the simple one) with an adapter of this one.
        self.reactor.installNameResolver(self)

    def refusal(self, host: str) -> str | None:
        """Why the last look-up of ``host`` was refused by the rule, None if it was not."""
        return self._refusals.get(host)

    def _resolve(self, host: str) -> list[IPAddress]:
        # Runs in a thread: the system resolver blocks.
        return checked_addresses(host, self.allow_private, self.lookup)

    def _resolved(self, host: str) -> defer.Deferred[list[IPAddress]]:
        if host in self._cache:
            return defer.succeed(self._cache[host])
        pool = self.reactor.getThreadPool()
        found = threads.deferToThreadPool(self.reactor, pool, self._resolve, host)
        found.addTimeout(self.timeout, self.reactor)

        def remember(addresses: list[IPAddress]) -> list[IPAddress]:
            self._refusals.pop(host, None)
            if self._cache.limit:
                self._cache[host] = addresses
            return addresses

        def refused(failure: Failure) -> Failure:
            if failure.check(PrivateAddressError):
                self._refusals[host] = str(failure.value)
            else:
                self._refusals.pop(host, None)
            return failure

        return found.addCallbacks(remember, refused)

    def resolveHostName(
        self,
        resolutionReceiver: IResolutionReceiver,
        hostName: str,
        portNumber: int = 0,
        addressTypes: Sequence[type[IAddress]] | None = None,
        transportSemantics: str = "TCP",
    ) -> IHostResolution:
        resolution = _Resolution(hostName)
        resolutionReceiver.resolutionBegan(resolution)

        def deliver(addresses: list[IPAddress]) -> None:
            for ip in addresses:
                kind = IPv6Address if ip.version == 6 else IPv4Address
                if addressTypes is None or kind in addressTypes:
                    resolutionReceiver.addressResolved(kind("TCP", str(ip), portNumber))

        # Refused or unresolved: no address at all, so Twisted connects nowhere and fails
        # the request with its DNS lookup error.
        self._resolved(hostName).addCallbacks(deliver, lambda _: None).addBoth(
            lambda _: resolutionReceiver.resolutionComplete()
        )
        return resolution
