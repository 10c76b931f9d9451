"""The private-network rule: no connection to loopback, private or link-local addresses.

A crawler that follows links and redirects chosen by other people's sites must not be
turned against the machines next to it (SSRF: cloud metadata at 169.254.169.254, admin
consoles on 10.x, services on 127.0.0.1). ``COPYTRACK_ALLOW_PRIVATE_NETWORKS=1`` lifts
the rule (tests, the local test web, intranet crawls).

The rule is applied to the addresses a connection is made to, not to a separate look-up
before it: a pirate controls the DNS of its own domains and can answer a check with a
public address and the connection with 127.0.0.1 (DNS rebinding), or fail the check's
look-up and answer the next one. So a host name is resolved once per connection
(``checked_addresses``), every address must be public, and the connection goes to those
addresses (``connect``; the crawler's resolver, crawler/resolver.py, does the same for
Scrapy). A name that does not resolve is refused like a private one: nothing is fetched.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

__all__ = [
    "PrivateAddressError",
    "UnresolvedHostError",
    "address_problem",
    "check_url",
    "checked_addresses",
    "connect",
    "system_lookup",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
#: host name -> the address strings it resolves to; raises OSError when it does not resolve.
Lookup = Callable[[str], Sequence[str]]


class PrivateAddressError(ValueError):
    """A URL's host is, or resolves to, a non-public address."""


class UnresolvedHostError(OSError):
    """A host name that does not resolve (or resolves to nothing usable): nothing is fetched."""


#: Special-purpose ranges (IANA's registries) that Python's ``ipaddress`` (3.11) counts as
#: global. A 6to4 address embeds an IPv4 one (2002:c0a8:101:: is 192.168.1.1) that a relay
#: would reach; no one serves web pages on 6to4 any more (RFC 7526): all of it is refused,
#: as is all of 192.0.0.0/24 (IETF protocol assignments: 192.0.0.8, NAT64 discovery, ...).
_SPECIAL_RANGES: tuple[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network], ...] = (
    ("site-local", ipaddress.ip_network("fec0::/10")),
    ("6to4", ipaddress.ip_network("2002::/16")),
    ("special-purpose", ipaddress.ip_network("192.0.0.0/24")),
    ("documentation", ipaddress.ip_network("3fff::/20")),
)


def address_problem(ip: IPAddress) -> str | None:
    """Why ``ip`` may not be fetched (``"loopback"``, ``"private"``, …), None if public."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 reaches 127.0.0.1
    for problem, flag in (
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("unspecified", ip.is_unspecified),  # 0.0.0.0 connects to this host
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
        # Shared (carrier-grade NAT), documentation and other special ranges.
        ("non-global", not ip.is_global),
    ):
        if flag:
            return problem
    for problem, network in _SPECIAL_RANGES:
        if ip.version == network.version and ip in network:
            return problem
    return None


def system_lookup(host: str) -> list[str]:
    """The addresses the system resolver gives for ``host`` (TCP), in its order."""
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


def _parse(address: str) -> IPAddress:
    # Drop an IPv6 zone ("fe80::1%eth0") before parsing.
    return ipaddress.ip_address(address.partition("%")[0])


def _resolve(host: str, lookup: Lookup) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass  # a name
    try:
        addresses = list(dict.fromkeys(_parse(answer) for answer in lookup(host)))
    except (OSError, UnicodeError, ValueError) as err:
        raise UnresolvedHostError(f"{host} does not resolve ({err})") from None
    if not addresses:
        raise UnresolvedHostError(f"{host} does not resolve (no addresses)")
    return addresses


def checked_addresses(
    host: str, allow_private: bool = False, lookup: Lookup = system_lookup
) -> list[IPAddress]:
    """The addresses to connect to for ``host``, each one allowed by the rule.

    One look-up (none for an IP literal). Raises PrivateAddressError if any address is
    not public (unless ``allow_private``), UnresolvedHostError if the name does not
    resolve: a failed look-up is a refusal, never a pass.
    """
    host = host.strip("[]")
    addresses = _resolve(host, lookup)
    if not allow_private:
        for ip in addresses:
            if problem := address_problem(ip):
                shown = host if host == str(ip) else f"{host} ({ip})"
                raise PrivateAddressError(
                    f"{shown} is a {problem} address; set COPYTRACK_ALLOW_PRIVATE_NETWORKS=1 "
                    "to crawl private networks"
                )
    return addresses


def check_url(url: str, allow_private: bool = False, lookup: Lookup = system_lookup) -> None:
    """Refuse ``url`` unless its host resolves, to public addresses only (or ``allow_private``).

    For checking what a user typed (campaign seeds); a fetch must ``connect`` instead, so
    that what is checked is what is connected to. Raises PrivateAddressError, ValueError
    for a URL without host, UnresolvedHostError (an OSError) when the host does not resolve.
    """
    host = urlsplit(url).hostname
    if not host:
        raise ValueError(f"{url!r} has no host name")
    if not allow_private:
        checked_addresses(host, lookup=lookup)


def connect(
    address: tuple[str, int],
    timeout: object = None,
    source_address: tuple[str, int] | None = None,
    *,
    allow_private: bool = False,
    lookup: Lookup = system_lookup,
) -> socket.socket:
    """A TCP connection to ``address`` (host, port) through ``checked_addresses``.

    Takes ``socket.create_connection``'s arguments, so an ``http.client`` connection can
    use it: the host is resolved once, and only an address that passed the rule is
    connected to, each in turn until one answers.
    """
    host, port = address
    last_error: OSError | None = None
    for ip in checked_addresses(host, allow_private, lookup):
        family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            # http.client passes socket's "global default" sentinel when it has no timeout.
            if isinstance(timeout, int | float):
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect((str(ip), port))
        except OSError as err:
            sock.close()
            last_error = err
            continue
        return sock
    assert last_error is not None  # checked_addresses returns at least one address
    raise last_error
