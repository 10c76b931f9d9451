"""Delisting requests: the engines' forms as CSV, recorded per URL, re-checked through a
search provider (a SearXNG-shaped server on loopback)."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.enforcement.helpers import set_sender, store_finding
from tests.loopback import Handler, served
from tracker.context import Context
from tracker.core.times import now
from tracker.discovery.providers import SearxngProvider
from tracker.enforcement.delisting import (
    DELISTED,
    STILL_LISTED,
    export_delisting,
    recheck_delistings,
)
from tracker.findings import set_status
from tracker.findings.workflow import WorkflowError


def confirmed(ctx: Context, url: str, work: str) -> object:
    finding_id = store_finding(ctx, url, work)
    set_status(ctx, finding_id, "confirmed", "reviewer")
    return finding_id


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_an_export_lists_the_confirmed_urls_in_each_engines_form(ctx: Context) -> None:
    set_sender(ctx)
    confirmed(ctx, "http://pirate.test/a.html", "W-1")
    confirmed(ctx, "http://pirate.test/b.html", "W-2")
    store_finding(ctx, "http://pirate.test/new.html", "W-3")  # not confirmed: not asked
    google = export_delisting(ctx, "google", domain="pirate.test", by="reviewer")
    assert (google.urls, google.batches) == (2, 2)  # one request per work
    listed = rows(google.csv)
    assert [r["infringing_url"] for r in listed] == [
        "http://pirate.test/a.html", "http://pirate.test/b.html",
    ]  # fmt: skip
    assert "Test Press" in listed[0]["work_description"]
    baidu = rows(export_delisting(ctx, "baidu", work="W-1", by="reviewer").csv)
    assert [(r["侵权链接"], r["作品编号"], r["权利人"]) for r in baidu] == [
        ("http://pirate.test/a.html", "W-1", "Test Press")
    ]
    recorded = {(d["url"], d["engine"]) for d in ctx.db.delistings.find()}
    assert recorded == {
        ("http://pirate.test/a.html", "google"), ("http://pirate.test/b.html", "google"),
        ("http://pirate.test/a.html", "baidu"),
    }  # fmt: skip
    with pytest.raises(WorkflowError, match="no confirmed finding"):
        export_delisting(ctx, "bing", domain="elsewhere.test", by="reviewer")
    with pytest.raises(WorkflowError, match="unknown search engine"):
        export_delisting(ctx, "altavista", domain="pirate.test", by="reviewer")


class SearchHandler(Handler):
    """A SearXNG JSON API that lists ``server.listed`` URLs when asked for them."""

    def do_GET(self) -> None:
        query = parse_qs(urlsplit(self.path).query)["q"][0]
        results = [{"url": u, "title": "copy"} for u in self.server.listed if u == query]
        self.send_body(json.dumps({"results": results}).encode(), "application/json")


def test_requested_urls_are_rechecked_through_the_search_provider(ctx: Context) -> None:
    set_sender(ctx)
    confirmed(ctx, "http://pirate.test/a.html", "W-1")
    confirmed(ctx, "http://pirate.test/b.html", "W-1")
    export_delisting(ctx, "google", work="W-1", by="reviewer")
    with served(SearchHandler, listed={"http://pirate.test/a.html"}) as server:
        provider = SearxngProvider(f"http://127.0.0.1:{server.server_address[1]}")
        assert recheck_delistings(ctx, provider) == []  # not due before a week has passed
        checks = recheck_delistings(ctx, provider, now() + timedelta(days=8))
    assert {(c.url, c.state) for c in checks} == {
        ("http://pirate.test/a.html", STILL_LISTED), ("http://pirate.test/b.html", DELISTED),
    }  # fmt: skip
    kept = ctx.db.delistings.find_one({"url": "http://pirate.test/b.html"})
    assert kept["state"] == DELISTED and kept["checks"][0]["listed"] is False
