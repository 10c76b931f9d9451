"""Discovery: a ``discover`` campaign asks a search engine for the
library's distinctive sentences, crawls the results and proposes the sites that copy.

A local fake SearXNG answers like the real one (``/search?format=json``) with pages of a
loopback pirate site, of a site a campaign already crawls, and of a page that copies
nothing; a fake Brave Search API checks its key. Nothing reaches the internet. Real crawls
and scans on the embedded servers.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.admin_seed import PASSWORD, client, login
from tests.corpus import novel_chapters
from tests.loopback import Handler, served
from tracker.accounts.users import add_user
from tracker.campaigns import Campaign, CampaignError, save_campaign, trigger_run, wait_for_run
from tracker.campaigns.outcomes import run_health
from tracker.context import Context
from tracker.core.config import Settings
from tracker.discovery.proposals import proposed_sites
from tracker.discovery.providers import BraveProvider, SearchError, SearxngProvider
from tracker.discovery.searches import SENTENCES_PER_WORK, discover
from tracker.discovery.sentences import candidate_sentences
from tracker.masters.generation import open_ready
from tracker.masters.library import Work, add_works

CHAPTERS = [text[:1500] for text in novel_chapters(6)]
PIRATED = (0, 1, 2)  # chapters the pirate site copies
KNOWN = 3  # the chapter a site a campaign already crawls copies


def _article(text: str) -> bytes:
    paragraphs = "".join(f"<p>{line}</p>" for line in text.split("\n") if line.strip())
    return f"<html><body><article>{paragraphs}</article></body></html>".encode()


class _Site(Handler):
    """A site serving chapter ``n`` at /book/n.html (those in ``server.chapters``)."""

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path.startswith("/book/") and int(path[6:-5]) in self.server.chapters:  # type: ignore[attr-defined]
            self.send_body(_article(CHAPTERS[int(path[6:-5])]))
        elif path == "/about.html":
            self.send_body(_article("本站简介。" * 40))
        else:
            self.send_error(404)


class _FakeSearxng(Handler):
    """Answers a quoted sentence with the pages holding its chapter (and an unrelated page),
    like SearXNG's JSON API; records every query."""

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        params = parse_qs(parts.query)
        if parts.path != "/search" or params.get("format") != ["json"]:
            self.send_error(403)  # SearXNG refuses formats it is not set up for
            return
        query = params["q"][0]
        self.server.queries.append(query)  # type: ignore[attr-defined]
        sentence = query.strip('"')
        results = []
        for n, text in enumerate(CHAPTERS):
            if sentence in " ".join(text.split()):
                results += [
                    {"url": f"{base}/book/{n}.html", "title": f"第{n}章"}
                    for base in self.server.sites  # type: ignore[attr-defined]
                ]
        results.append({"url": f"{self.server.sites[0]}/about.html", "title": "about"})  # type: ignore[attr-defined]
        body = json.dumps({"query": query, "results": results}).encode()
        self.send_body(body, "application/json")


@pytest.fixture
def web() -> Iterator[dict[str, Any]]:
    """The pirate site, the already crawled site, and the fake SearXNG answering with both."""
    with (
        served(_Site, chapters=set(PIRATED)) as pirate,
        served(_Site, chapters={KNOWN}) as known,
        served(_FakeSearxng, queries=[]) as engine,
    ):
        sites = [f"http://127.0.0.1:{s.server_port}" for s in (pirate, known)]
        engine.sites = sites
        yield {"pirate": sites[0], "known": sites[1], "engine": engine,
               "searxng": f"http://127.0.0.1:{engine.server_port}"}  # fmt: skip


def _context(tracker_env: dict[str, str], **settings: Any) -> Context:
    base = Settings.from_env(tracker_env)
    return open_ready(dataclasses.replace(base, allow_private_networks=True, **settings))


@pytest.fixture
def library(tracker_env: dict[str, str], web: dict[str, Any]) -> Iterator[Context]:
    """Six works; a sites campaign crawling the known site; search through the fake."""
    ctx = _context(tracker_env, search_url=web["searxng"])
    add_works(ctx, [Work(text=text, external_id=f"ch{n}") for n, text in enumerate(CHAPTERS)])
    save_campaign(ctx, Campaign.from_dict({"name": "known", "seeds": [web["known"] + "/"]}))
    yield ctx
    ctx.close()


def test_sentences_are_of_a_searchable_length_and_come_from_the_work() -> None:
    sentences = candidate_sentences(CHAPTERS[0])
    assert len(sentences) >= SENTENCES_PER_WORK
    flat = " ".join(CHAPTERS[0].split())
    assert all(16 <= len(s) <= 64 and s in flat for s in sentences)


@pytest.mark.slow
def test_a_discover_run_crawls_the_results_and_proposes_the_site_that_copies(
    library: Context, web: dict[str, Any]
) -> None:
    ctx = library
    save_campaign(ctx, Campaign.from_dict({"name": "search", "kind": "discover", "sample": 6}))
    run = wait_for_run(ctx, trigger_run(ctx, "search"), timeout=240)
    assert run["state"] == "finished", run
    search = run["discovery"]
    assert search["works"] == 6 and search["asked"] == len(web["engine"].queries) == 12
    assert all(q.startswith('"') and q.endswith('"') for q in web["engine"].queries)
    # The known site's results are not crawled again; the pirate site's are.
    assert search["known"] >= 2 and not any(s.startswith(web["known"]) for s in search["seeds"])
    found = sorted(ctx.db.findings.distinct("master_external_id", {"campaign": "search"}))
    assert found == [f"ch{n}" for n in PIRATED]
    pirate_site = urlsplit(web["pirate"]).netloc
    [proposal] = proposed_sites(ctx, "search")
    assert (proposal.site, proposal.works, proposal.findings) == (pirate_site, 3, 3)

    add_user(ctx, "ada", PASSWORD, "admin")
    http = client(ctx)
    login(http, "ada")
    page = http.get("/campaigns/search").text
    assert "Sites found copying" in page and pirate_site in page
    new = http.get("/campaigns/new", params={"name": proposal.campaign_name,
                                             "seeds": proposal.seed}).text  # fmt: skip
    assert f"{web['pirate']}/</textarea>" in new and proposal.campaign_name in new
    assert "12 queries asked" in http.get(f"/runs/{run['_id']}").text

    # The next run looks up the same six works (the library, round): all from the cache.
    web["engine"].queries.clear()
    again = wait_for_run(ctx, trigger_run(ctx, "search"), timeout=240)
    assert again["discovery"]["cached"] == 12 and again["discovery"]["asked"] == 0
    assert web["engine"].queries == []


def test_the_daily_budget_is_never_overspent_and_the_run_says_so(
    tracker_env: dict[str, str], web: dict[str, Any]
) -> None:
    ctx = _context(tracker_env, search_url=web["searxng"], search_daily_queries=5)
    add_works(ctx, [Work(text=text, external_id=f"ch{n}") for n, text in enumerate(CHAPTERS)])
    engine = SearxngProvider(web["searxng"])
    first = discover(ctx, "search", engine, sample=6)
    assert (first.asked, first.over_budget) == (5, 7)
    second = discover(ctx, "other", engine, sample=6)  # the budget is shared
    assert second.asked == 0 and second.cached == 5 and second.over_budget == 7
    assert len(web["engine"].queries) == 5
    health = run_health({"state": "finished", "discovery": {**second.to_doc(), "seeds": []}})
    assert health.level == "warning" and "budget is spent" in health.message
    ctx.close()


class _FakeBrave(Handler):
    """Answers like the Brave Search API, for the right subscription token only."""

    def do_GET(self) -> None:
        self.server.urls.append(self.path)  # type: ignore[attr-defined]
        if self.headers.get("X-Subscription-Token") != "right-key":
            self.send_body(b'{"type": "ErrorResponse"}', "application/json", status=401)
            return
        results = [{"url": "http://127.0.0.1:1/book/0.html", "title": "第0章"}]
        self.send_body(json.dumps({"web": {"results": results}}).encode(), "application/json")


def test_the_commercial_provider_keeps_its_key_out_of_urls_errors_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with served(_FakeBrave, urls=[]) as server:
        endpoint = f"http://127.0.0.1:{server.server_port}/res/v1/web/search"
        [result] = BraveProvider("right-key", endpoint).search('"天下大势"')
        assert result.url == "http://127.0.0.1:1/book/0.html"
        wrong = BraveProvider("wrong-key-123", endpoint)
        with pytest.raises(SearchError) as refused:
            wrong.search('"天下大势"')
    assert "HTTP 401" in str(refused.value) and "API key" in str(refused.value)
    for text in (str(refused.value), repr(wrong), caplog.text, *server.urls):
        assert "wrong-key-123" not in text and "right-key" not in text


def test_a_discover_run_without_a_search_engine_fails_with_one_line(
    tracker_env: dict[str, str],
) -> None:
    ctx = _context(tracker_env)
    add_works(ctx, [Work(text=CHAPTERS[0], external_id="ch0")])
    save_campaign(ctx, Campaign.from_dict({"name": "search", "kind": "discover"}))
    run = wait_for_run(ctx, trigger_run(ctx, "search"), timeout=120)
    assert run["state"] == "failed"
    assert run["error"].startswith("no search engine: set COPYTRACK_SEARCH_URL")
    ctx.close()


def test_a_discover_campaign_takes_no_seeds_and_crawls_no_deeper_than_one() -> None:
    with pytest.raises(CampaignError, match="finds its own"):
        Campaign.from_dict({"name": "s", "kind": "discover", "seeds": ["http://a.example/"]})
    with pytest.raises(CampaignError, match="depth 0 or 1"):
        Campaign.from_dict({"name": "s", "kind": "discover", "max_depth": 2})
    assert Campaign.from_dict({"name": "s", "kind": "discover"}).max_depth == 0
