"""The private-network rule: no request to loopback, private or link-local addresses.

A crawler that follows links and redirects chosen by other people's sites must not be
turned against the machines next to it (SSRF: cloud metadata at 169.254.169.254, admin
consoles on 10.x, services on 127.0.0.1). Host names are resolved and every address they
resolve to must be public. ``COPYTRACK_ALLOW_PRIVATE_NETWORKS=1`` lifts the rule (tests,
the local test web, intranet crawls).

The check resolves the name itself, so a host whose DNS answer changes between the check
and the connection (DNS rebinding) is not covered; the crawler re-checks every request,
redirects included.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

__all__ = ["PrivateAddressError", "address_problem", "check_host", "check_url"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class PrivateAddressError(ValueError):
    """A URL's host is, or resolves to, a non-public address."""


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
    return None


def _addresses(host: str) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    # Drop an IPv6 zone ("fe80::1%eth0") before parsing.
    return [ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in infos]


def check_host(host: str) -> None:
    """Raise PrivateAddressError if ``host`` is or resolves to a non-public address.

    Raises OSError (socket.gaierror) when the name does not resolve.
    """
    for ip in _addresses(host.strip("[]")):
        problem = address_problem(ip)
        if problem:
            shown = host if host == str(ip) else f"{host} ({ip})"
            raise PrivateAddressError(
                f"{shown} is a {problem} address; set COPYTRACK_ALLOW_PRIVATE_NETWORKS=1 "
                "to crawl private networks"
            )


def check_url(url: str, allow_private: bool = False) -> None:
    """Refuse ``url`` unless its host is public or ``allow_private`` is set.

    Raises PrivateAddressError, ValueError for a URL without host, OSError when the host
    name does not resolve.
    """
    host = urlsplit(url).hostname
    if not host:
        raise ValueError(f"{url!r} has no host name")
    if not allow_private:
        check_host(host)
