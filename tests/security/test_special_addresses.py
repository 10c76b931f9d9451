"""The address rule let site-local IPv6 (fec0::/10), 6to4 (2002::/16,
which embeds an IPv4 address a relay would reach: 2002:c0a8:101:: is 192.168.1.1) and
192.0.0.8 (with the rest of 192.0.0.0/24, IETF protocol assignments) through, because
Python's ``ipaddress`` counts them as global.

Names resolve through a ScriptedLookup and sockets are never made (a stand-in for the
socket module records any attempt): the refusal must come before any connection.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import types

import pytest

from crawler.fetch import FetchError, fetch_text
from tests.security.fakes import ScriptedLookup
from tracker.core import netguard
from tracker.core.netguard import PrivateAddressError, checked_addresses

pytestmark = pytest.mark.security

REFUSED = {
    "fec0::1": "site-local",
    "feff:ffff::1": "site-local",
    "2002:c0a8:101::1": "6to4",  # 192.168.1.1
    "2002:7f00:1::1": "6to4",  # 127.0.0.1
    "2002:808:808::1": "6to4",  # a public IPv4 address, through a relay nobody should use
    "192.0.0.8": "special-purpose",  # the IPv4 dummy address
    "192.0.0.9": "special-purpose",  # PCP anycast
    "192.0.0.10": "special-purpose",  # TURN anycast
    "192.0.0.255": "special-purpose",
    "::ffff:192.0.0.8": "special-purpose",  # mapped: reaches 192.0.0.8
    "3fff::1": "documentation",
}
PUBLIC = ["93.184.215.14", "192.0.1.1", "2606:4700::1111", "2003::1", "2001:4860::8888"]


class _NoSockets:
    """Stands in for the socket module in tracker.core.netguard: records every socket asked for
    and connects nowhere."""

    AF_INET = socket.AF_INET
    AF_INET6 = socket.AF_INET6
    SOCK_STREAM = socket.SOCK_STREAM

    def __init__(self) -> None:
        self.attempts: list[tuple[int, int]] = []

    def socket(self, family: int, kind: int) -> types.SimpleNamespace:
        self.attempts.append((family, kind))
        raise ConnectionRefusedError("no sockets in this test")


@pytest.mark.parametrize(("address", "problem"), REFUSED.items(), ids=list(REFUSED))
def test_special_purpose_addresses_are_refused(address: str, problem: str) -> None:
    lookup = ScriptedLookup({"pirate.test": [[address]]})
    shown = re.escape(str(ipaddress.ip_address(address)))  # as Python writes it
    with pytest.raises(PrivateAddressError, match=rf"pirate\.test \({shown}\) is a {problem}"):
        checked_addresses("pirate.test", lookup=lookup)
    with pytest.raises(PrivateAddressError, match=f"is a {problem} address"):
        checked_addresses(address)  # an IP literal in a link: no look-up at all


def test_public_addresses_still_pass() -> None:
    lookup = ScriptedLookup({"site.test": [PUBLIC]})
    assert [str(ip) for ip in checked_addresses("site.test", lookup=lookup)] == PUBLIC


@pytest.mark.parametrize("address", ["fec0::1", "2002:c0a8:101::1", "192.0.0.8"])
def test_check_url_refuses_them_before_any_connection(
    address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sockets = _NoSockets()
    monkeypatch.setattr(netguard, "socket", sockets)
    lookup = ScriptedLookup({"pirate.test": [[address]]})
    url = "http://pirate.test/chapter-1.html"
    with pytest.raises(FetchError) as refused:
        fetch_text(url, allow_private=False, lookup=lookup)
    message = str(refused.value)
    assert message.startswith(f"{url}: pirate.test ({address}) is a ") and "\n" not in message
    assert sockets.attempts == []
