"""Stored pages looked up in batches (crawler.lookup) on the real MongoDB server: the
answers are those of one find_one per URL, in far fewer queries."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pymongo
import pytest
from pymongo import monitoring
from pymongo.collection import Collection
from pymongo.database import Database

from crawler import lookup
from crawler.lookup import PageLookup
from tracker.runtime.servers import Endpoints

SITE = "http://pirate.example:8080"
OTHER = "http://other.example"


class FindCounter(monitoring.CommandListener):
    """Counts the find commands a client sends."""

    def __init__(self) -> None:
        self.finds = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.finds += event.command_name == "find"

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture
def counted(endpoints: Endpoints, mongo_db: Database[Any]) -> Iterator[tuple[Collection, Any]]:
    """The pages of a fresh database (40 on SITE, one on OTHER), through a counted client."""
    mongo_db.pages.insert_many(
        [{"url": f"{SITE}/a/{n}.html", "text": f"text {n}", "status": 200} for n in range(40)]
        + [{"url": f"{OTHER}/x.html", "text": "", "status": 404}]
    )
    counter = FindCounter()
    client: pymongo.MongoClient[Any] = pymongo.MongoClient(
        endpoints.mongo_url, event_listeners=[counter]
    )
    yield client[mongo_db.name].pages, counter
    client.close()


def _get_all(pages: PageLookup, urls: list[str]) -> list[dict[str, Any] | None]:
    async def all_at_once() -> list[dict[str, Any] | None]:
        return list(await asyncio.gather(*(pages.get(url) for url in urls)))

    return asyncio.run(all_at_once())


def test_lookups_made_together_share_queries_and_match_find_one(counted: Any) -> None:
    collection, counter = counted
    urls = [f"{SITE}/a/{n}.html" for n in range(0, 60, 2)] + [f"{OTHER}/x.html", f"{OTHER}/y"]
    found = _get_all(PageLookup(collection, ("text", "status")), urls)
    assert counter.finds == 1  # asked for together: one query, not one per URL (32)

    for url, page in zip(urls, found, strict=True):
        expected = collection.find_one({"url": url}, {"url": 1, "text": 1, "status": 1})
        assert page == expected, url
    assert sum(page is not None for page in found) == 21  # 20 on SITE, one on OTHER


def test_more_urls_than_a_batch_take_a_query_per_batch(
    counted: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection, counter = counted
    monkeypatch.setattr(lookup, "BATCH", 7)
    found = _get_all(PageLookup(collection, ("text",)), [f"{SITE}/a/{n}.html" for n in range(30)])
    assert [page["text"] for page in found] == [f"text {n}" for n in range(30)]  # in order
    assert counter.finds == 5  # ceil(30 / 7)


def test_by_site_answers_unstored_urls_without_a_query(counted: Any) -> None:
    collection, counter = counted
    pages = PageLookup(collection, ("status",), by_site=True)
    urls = [f"{SITE}/a/{n}.html" for n in (1, 2)] + [f"{SITE}/new/{n}" for n in range(30)]
    found = _get_all(pages, urls)
    assert [p["status"] for p in found[:2]] == [200, 200] and found[2:] == [None] * 30
    assert counter.finds == 2  # the site's URLs, then the two stored pages

    # A page stored after the site was read counts as not stored (documented).
    collection.insert_one({"url": f"{SITE}/late.html", "status": 200})
    assert _get_all(pages, [f"{SITE}/late.html"]) == [None]


def test_a_site_with_too_many_pages_is_looked_up_url_by_url(
    counted: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection, _ = counted
    monkeypatch.setattr(lookup, "SITE_URLS_MAX", 10)  # SITE has 40
    pages = PageLookup(collection, ("text",), by_site=True)
    found = _get_all(pages, [f"{SITE}/a/3.html", f"{SITE}/a/99.html"])
    assert found[0] is not None and found[0]["text"] == "text 3" and found[1] is None


def test_a_failed_query_fails_each_lookup_and_the_next_one_asks_again(
    endpoints: Endpoints, mongo_db: Database[Any]
) -> None:
    mongo_db.pages.insert_one({"url": f"{SITE}/a/1.html", "status": 200})
    client: pymongo.MongoClient[Any] = pymongo.MongoClient(endpoints.mongo_url)
    pages = PageLookup(client[mongo_db.name].pages, ("status",), by_site=True)
    client.close()  # every query now fails
    with pytest.raises(pymongo.errors.InvalidOperation):
        _get_all(pages, [f"{SITE}/a/1.html", f"{SITE}/a/2.html"])
    # The site's failed reading is not kept: with a working collection it is read again.
    pages.pages = lambda: mongo_db.pages
    assert _get_all(pages, [f"{SITE}/a/1.html"])[0]["status"] == 200
