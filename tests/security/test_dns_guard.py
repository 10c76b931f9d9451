"""The private-network rule holds when a pirate controls its own DNS.

The attack: a name whose first look-up fails (SERVFAIL) was allowed, and Scrapy (or
urllib, for `copytrack check URL`) resolved it again on its own, to 127.0.0.1; DNS
rebinding did the same. Now the rule applies to the one look-up whose answer is connected
to, and a failed look-up fetches nothing. Each test resolves test names with a
ScriptedLookup and counts the connections a loopback listener receives: a refused address
must receive none. Control cases (private networks allowed) show the same setup does
connect, so a zero is the guard's doing and not a broken test.
"""

from __future__ import annotations

import dataclasses

import pytest

from crawler.fetch import FetchError, fetch_text
from tests.processes import wait_until
from tests.security.fakes import ScriptedLookup, listening, scripted_crawl
from tracker.campaigns import (
    Campaign,
    crawl_log_path,
    save_campaign,
)
from tracker.context import Context
from tracker.core.netguard import (
    PrivateAddressError,
    UnresolvedHostError,
    check_url,
    checked_addresses,
    connect,
)

pytestmark = pytest.mark.security

FAIL_THEN_LOOPBACK: list[list[str] | None] = [None, ["127.0.0.1"]]


# ---------------------------------------------------------------------- the rule


def test_a_failed_look_up_is_a_refusal_and_every_answer_is_checked() -> None:
    lookup = ScriptedLookup(
        {
            "flaky.test": FAIL_THEN_LOOPBACK,
            "mixed.test": [["93.184.215.14", "10.0.0.7"]],
            "mapped.test": [["::ffff:169.254.169.254"]],
            "public.test": [["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]],
        }
    )
    with pytest.raises(UnresolvedHostError, match=r"flaky\.test does not resolve"):
        checked_addresses("flaky.test", lookup=lookup)
    with pytest.raises(PrivateAddressError, match=r"flaky\.test \(127\.0\.0\.1\) is a loopback"):
        checked_addresses("flaky.test", lookup=lookup)
    with pytest.raises(PrivateAddressError, match=r"10\.0\.0\.7"):  # one bad answer is enough
        checked_addresses("mixed.test", lookup=lookup)
    with pytest.raises(PrivateAddressError, match="link-local"):
        checked_addresses("mapped.test", lookup=lookup)
    assert [str(ip) for ip in checked_addresses("public.test", lookup=lookup)] == [
        "93.184.215.14",
        "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
    ]
    with pytest.raises(UnresolvedHostError):  # campaign seeds: no pass for a failed look-up
        check_url("http://nowhere.test/", lookup=lookup)


def test_connect_resolves_once_and_never_reaches_a_refused_address() -> None:
    with listening() as server:
        address = ("pirate.test", server.server_port)
        lookup = ScriptedLookup({"pirate.test": FAIL_THEN_LOOPBACK})
        with pytest.raises(UnresolvedHostError):
            connect(address, 5, lookup=lookup)
        with pytest.raises(PrivateAddressError):
            connect(address, 5, lookup=lookup)
        assert lookup.calls == {"pirate.test": 2} and server.connections == 0
        connect(address, 5, allow_private=True, lookup=lookup).close()  # the control
        assert lookup.calls == {"pirate.test": 3}
        # The listener accepts it on its own thread; the guard's refusals made none.
        wait_until(lambda: server.connections == 1, 10, "the control connection")


# ---------------------------------------------------------------------- copytrack check URL


def test_check_url_connects_to_the_address_it_checked() -> None:
    with listening() as server:
        url = f"http://pirate.test:{server.server_port}/a.html"
        lookup = ScriptedLookup({"pirate.test": FAIL_THEN_LOOPBACK})
        with pytest.raises(FetchError, match="does not resolve"):
            fetch_text(url, allow_private=False, lookup=lookup)
        with pytest.raises(FetchError, match=r"^http://pirate.test:\d+/a.html: .* loopback"):
            fetch_text(url, allow_private=False, lookup=lookup)
        assert server.connections == 0
        assert lookup.calls == {"pirate.test": 2}  # one look-up per fetch, none by urllib
        assert "这是第7段正文" in fetch_text(url, allow_private=True, lookup=lookup)
    assert server.connections == 1


def test_check_url_is_not_fooled_by_dns_rebinding() -> None:
    # The first answer is where the fetch goes; a second look-up (which rebinding would
    # answer differently) never happens, for the first request or for its redirect.
    with listening("127.0.0.2") as first, listening("127.0.0.3", first.server_port) as second:
        lookup = ScriptedLookup(
            {"pirate.test": [["127.0.0.2"], ["127.0.0.3"]], "mirror.test": [["127.0.0.2"]]}
        )
        first.redirect_to = f"http://mirror.test:{first.server_port}/a.html"
        text = fetch_text(
            f"http://pirate.test:{first.server_port}/redirect", allow_private=True, lookup=lookup
        )
    assert "这是第0段正文" in text
    assert first.paths == ["/redirect", "/a.html"] and second.connections == 0
    assert lookup.calls == {"pirate.test": 1, "mirror.test": 1}


# ---------------------------------------------------------------------- the crawler


def _campaign(ctx: Context, port: int) -> None:
    seeds = [f"http://pirate.test:{port}/{n}.html" for n in range(10)]
    # The seeds were checked when the campaign was saved; the DNS turns afterwards.
    lenient = dataclasses.replace(
        ctx, settings=dataclasses.replace(ctx.settings, allow_private_networks=True)
    )
    campaign = {"name": "rebind", "seeds": seeds, "delay": 0, "concurrency": 4}
    save_campaign(lenient, Campaign.from_dict(campaign))


@pytest.mark.parametrize(
    "answers",
    [FAIL_THEN_LOOPBACK, [["93.184.215.14", "169.254.169.254"]]],
    ids=["fail-then-loopback", "public-and-metadata"],
)
def test_a_crawl_never_connects_where_the_pirates_dns_points_inside(
    ctx: Context, answers: list[list[str] | None]
) -> None:
    with listening() as server:
        _campaign(ctx, server.server_port)
        run = scripted_crawl(ctx, "rebind", {"pirate.test": answers}, allow_private=False)
    assert server.connections == 0, crawl_log_path(ctx, run["_id"]).read_text()
    assert ctx.db.pages.count_documents({}) == 0
    assert run["state"] == "finished"
    assert run["skipped"]["private_address"] == 10, run  # reported as refusals


def test_the_crawl_resolves_through_the_scripted_dns(ctx: Context) -> None:
    """The control: allowed to crawl private networks, the same crawl reaches the listener
    through the scripted DNS (pirate.test exists nowhere else), so zero connections above
    are the guard's doing."""
    with listening() as server:
        _campaign(ctx, server.server_port)
        run = scripted_crawl(ctx, "rebind", {"pirate.test": [["127.0.0.1"]]}, allow_private=True)
    assert run["state"] == "finished" and server.connections > 0
    assert ctx.db.pages.count_documents({}) == 10
