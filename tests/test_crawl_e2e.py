"""End to end on real servers: the test web's library, a campaign over its sites, findings
checked against the generator's ground truth; re-runs, schedules and the run lock."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from copytrack.cli import main
from fingerprinter import align
from testbed.testweb import CORPUS_DIR, RunningWeb, TestWeb, build_site, serve
from testbed.testweb.generator import _documents
from testbed.testweb.listings import build_news_mirror
from tests.loopback import served
from tracker.campaigns import (
    Campaign,
    CampaignBusy,
    get_run,
    run_due_campaigns,
    save_campaign,
    trigger_run,
    wait_for_run,
)
from tracker.context import Context

pytestmark = pytest.mark.slow

RECALL = 0.95
RUN_TIMEOUT = 240
ZH_TEXT = "这是一篇足够长的文章正文，用来检验条件请求：内容没有变化时服务器回答304。" * 3


@pytest.fixture(scope="module")
def web() -> TestWeb:
    return build_site(slow_seconds=1.0, n_real_pages=4)


@pytest.fixture(scope="module")
def running(web: TestWeb) -> Iterator[RunningWeb]:
    with serve(web) as sites:
        yield sites


def seeds(web: TestWeb, running: RunningWeb) -> list[str]:
    """Every site's home page, sitemap and feed: all three kinds of seed."""
    found = []
    for site, base in running.base_urls.items():
        info = web.truth["sites"][site]
        found += [f"{base}/", base + info["sitemap"], base + info["feed"]]
    return found


def corpus_text(doc_id: str) -> str:
    """Text of a corpus document (``S-zh_news-00012``) or "" for real web pages."""
    if doc_id.startswith("webpages:"):
        return ""
    name = doc_id.split("-")[1]
    return next(d["text"] for d in _documents(CORPUS_DIR, name) if d["id"] == doc_id)


def cli(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def test_a_campaign_finds_the_copies_of_the_test_web(
    crawl_ctx: Context, web: TestWeb, running: RunningWeb, tmp_path: Path
) -> None:
    web.write(tmp_path)
    cli("library", "add", str(tmp_path / "masters.jsonl"), "--no-progress")
    definition = {
        "name": "testweb",
        "seeds": seeds(web, running),
        "delay": 0,
        "concurrency": 8,
        "notes": "the generated pirate sites",
    }
    campaign_file = tmp_path / "campaign.yaml"
    campaign_file.write_text(yaml.safe_dump({"campaigns": [definition]}))
    cli("campaign", "import", str(campaign_file))

    cli("campaign", "run", "testweb", "--wait", "--timeout", str(RUN_TIMEOUT))
    # Every finding the run recorded, quotation-sized ones too (the run counts them all).
    listed = cli("findings", "--json", "--campaign", "testweb", "--size", "any")
    findings = [json.loads(line) for line in listed.output.splitlines()]
    # By default the command lists copies, as the admin's queue does.
    queue = cli("findings", "--json", "--campaign", "testweb").output.splitlines()
    quotations = crawl_ctx.db.findings.count_documents({"campaign": "testweb", "quotation": True})
    assert len(queue) == len(findings) - quotations
    found = {(f["url"], f["master_id"]) for f in findings}
    assert all(f["status"] == "new" and f["first_seen"] and f["last_seen"] for f in findings)

    articles = {running.url(a["site"], a["path"]): a for a in web.articles()}
    expected = {
        (url, master) for url, a in articles.items() if a["reachable"] for master in a["copies"]
    }
    recall = len(expected & found) / len(expected)
    assert recall >= RECALL, sorted(expected - found)
    gbk = {(url, m) for url, m in expected if articles[url]["encoding"] == "gbk"}
    assert gbk and len(gbk & found) / len(gbk) >= RECALL
    # An unrelated page may only match a work its source text really shares a passage
    # with (two agency stories repeating one background sentence), never by accident.
    masters = {m["id"]: m["text"] for m in web.masters}
    for finding in findings:
        article = articles.get(finding["url"])
        if article and not article["copies"]:
            sources = [corpus_text(doc_id) for doc_id in article["others"]]
            shared = max(align(masters[finding["master_id"]], s).master_coverage for s in sources)
            assert shared >= 0.8 * finding["master_coverage"], finding
    assert not [r for r in running.requests if r.path.startswith("/private/")]

    [run] = crawl_ctx.db.runs.find({"campaign": "testweb"})
    assert run["state"] == "finished" and run["findings"]["new"] == len(findings)
    assert run["skipped"]["robots"] >= len(web.articles(reachable=False))
    assert run["skipped"]["binary"] == 1 and run["skipped"]["too_large"] == 1
    assert run["failed"]["http_404"] >= 1 and run["failed"]["http_500"] >= 1
    binary = crawl_ctx.db.pages.find_one({"url": running.url("mixed-blog", "/media/cover.html")})
    assert binary["skip_reason"].startswith("binary") and binary["raw_bytes"] > 0

    # Nothing changed on the sites: the second run fetches again, rescans nothing.
    scanned = {p["_id"]: p["scanned_at"] for p in crawl_ctx.db.pages.find({}, {"scanned_at": 1})}
    cli("campaign", "run", "testweb", "--wait", "--timeout", str(RUN_TIMEOUT))
    second = crawl_ctx.db.runs.find_one({"campaign": "testweb"}, sort=[("started_at", -1)])
    assert second["pages"]["fetched"] >= run["pages"]["fetched"] - 2  # the slow page may vary
    assert second["pages"]["changed"] == 0 and second["scans_enqueued"] == 0
    assert second["findings"] == {"new": 0, "updated": 0}
    after = {p["_id"]: p["scanned_at"] for p in crawl_ctx.db.pages.find({}, {"scanned_at": 1})}
    assert after == scanned

    # With refetch_days, pages fetched that recently are not requested at all.
    save_campaign(crawl_ctx, Campaign.from_dict({**definition, "refetch_days": 1}), replace=True)
    log_start = len(running.requests)
    cli("campaign", "run", "testweb", "--wait", "--timeout", str(RUN_TIMEOUT))
    third = crawl_ctx.db.runs.find_one({"campaign": "testweb"}, sort=[("started_at", -1)])
    assert third["skipped"]["fresh"] >= len(expected) * 0.9
    requested = {r.path for r in running.requests[log_start:]}
    assert not requested & {a["path"] for a in web.articles(reachable=True)}
    show = cli("campaign", "show", "testweb").output
    assert str(third["_id"]) in show and "fresh" in show


def small_campaign(name: str, running: RunningWeb, **extra: Any) -> Campaign:
    return Campaign.from_dict(
        {"name": name, "seeds": [running.url("clean-site")], "max_pages": 3, "delay": 0, **extra}
    )


def test_two_concurrent_triggers_start_one_run(crawl_ctx: Context, running: RunningWeb) -> None:
    save_campaign(crawl_ctx, small_campaign("race", running))
    barrier = threading.Barrier(2)
    outcomes: list[Any] = []

    def trigger() -> None:
        barrier.wait()
        try:
            outcomes.append(trigger_run(crawl_ctx, "race"))
        except CampaignBusy as busy:
            outcomes.append(busy)

    threads = [threading.Thread(target=trigger) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    [busy] = [o for o in outcomes if isinstance(o, CampaignBusy)]
    [run_id] = [o for o in outcomes if not isinstance(o, CampaignBusy)]
    assert busy.run_id == str(run_id)
    assert wait_for_run(crawl_ctx, run_id, timeout=RUN_TIMEOUT)["state"] == "finished"
    assert crawl_ctx.db.runs.count_documents({"campaign": "race"}) == 1
    # Once it is over, the lock is free again.
    second = trigger_run(crawl_ctx, "race")
    assert wait_for_run(crawl_ctx, second, timeout=RUN_TIMEOUT)["state"] == "finished"


def test_a_scheduled_campaign_fires_once_per_fire_time(
    crawl_ctx: Context, running: RunningWeb
) -> None:
    save_campaign(crawl_ctx, small_campaign("hourly", running, schedule="0 * * * *"))
    save_campaign(crawl_ctx, small_campaign("manual", running))
    save_campaign(crawl_ctx, small_campaign("off", running, schedule="* * * * *", enabled=False))
    created = crawl_ctx.db.campaigns.find_one({"name": "hourly"})["created_at"]
    assert run_due_campaigns(crawl_ctx, created) == []  # no fire time since it was created

    later = created + timedelta(hours=2)
    [run_id] = run_due_campaigns(crawl_ctx, later)
    assert run_due_campaigns(crawl_ctx, later) == []  # that fire time is taken
    run = wait_for_run(crawl_ctx, run_id, timeout=RUN_TIMEOUT)
    assert run["campaign"] == "hourly" and run["trigger"] == "schedule"
    assert run["state"] == "finished" and run["pages"]["fetched"] >= 1
    assert get_run(crawl_ctx, str(run_id))["_id"] == run_id
    [again] = run_due_campaigns(crawl_ctx, later + timedelta(hours=1))
    assert wait_for_run(crawl_ctx, again, timeout=RUN_TIMEOUT)["state"] == "finished"


REVALIDATED = {
    "/": '<html><body><a href="/a.html">A</a> <a href="/b.html">B</a></body></html>',
    **{f"/{n}.html": f"<html><body><article><h1>{n}</h1><p>{ZH_TEXT}</p></article>"
       "</body></html>" for n in "ab"},
}  # fmt: skip


def _etag(path: str) -> str:
    return f'"{len(REVALIDATED[path])}"'


class _Revalidating(BaseHTTPRequestHandler):
    """A site that sends ETags and answers If-None-Match with 304; logs what it got."""

    server: Any

    def do_GET(self) -> None:
        body = REVALIDATED.get(self.path)
        if body is None:
            self.send_response(404)
            self.end_headers()
            return
        self.server.log.append((self.path, self.headers.get("If-None-Match")))
        if self.headers.get("If-None-Match") == _etag(self.path):
            self.send_response(304)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("ETag", _etag(self.path))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


def test_known_pages_are_revalidated_with_their_etag(crawl_ctx: Context) -> None:
    with served(_Revalidating, log=[]) as server:
        seed = f"http://127.0.0.1:{server.server_port}/"
        save_campaign(crawl_ctx, Campaign.from_dict({"name": "etag", "seeds": [seed], "delay": 0}))
        for _ in range(2):
            run = wait_for_run(crawl_ctx, trigger_run(crawl_ctx, "etag"), timeout=RUN_TIMEOUT)
            assert run["state"] == "finished"
    first, second = server.log[:3], server.log[3:]  # type: ignore[attr-defined]
    assert all(etag is None for _, etag in first)
    # The seed is fetched in full; the pages are revalidated and answer 304.
    assert sorted(second) == [("/", None), *((p, _etag(p)) for p in ("/a.html", "/b.html"))]
    assert run["pages"] == {"fetched": 3, "changed": 0, "unchanged": 2}
    assert run["skipped"] == {"no_main_text": 1} and run["scans_enqueued"] == 0


def test_a_news_mirror_listing_the_librarys_headlines_has_no_finding_on_its_listings(
    crawl_ctx: Context, tmp_path: Path
) -> None:
    """The library's headlines and first lines over 5 paginated listing pages ("第1页 …
    下一页"), a tag, an archive and a search page, and 20 copied articles with related-
    articles blocks: every copy is found, and no listing page has a finding of any size
    (nor is the listing's pagination joined as a chapter)."""
    web = build_news_mirror()
    web.write(tmp_path)
    cli("library", "add", str(tmp_path / "masters.jsonl"), "--no-progress")
    with serve(web) as sites:
        base = sites.base_urls["news-mirror"]
        campaign = {"name": "mirror", "seeds": [f"{base}/"], "delay": 0, "concurrency": 8}
        campaign_file = tmp_path / "campaign.yaml"
        campaign_file.write_text(yaml.safe_dump({"campaigns": [campaign]}))
        cli("campaign", "import", str(campaign_file))
        cli("campaign", "run", "mirror", "--wait", "--timeout", str(RUN_TIMEOUT))
    findings = list(crawl_ctx.db.findings.find({"campaign": "mirror"}))
    truth = {base + a["path"]: a for a in web.articles()}
    listings = {url for url, a in truth.items() if a["kind"] != "article"}
    on_listings = [f for f in findings if f["url"].split("#")[0] in listings]
    assert on_listings == [], [(f["url"], f["master_external_id"]) for f in on_listings]
    copies = {(url, m) for url, a in truth.items() for m in a["copies"]}
    found = {(f["url"], f["master_external_id"]) for f in findings if not f.get("quotation")}
    assert len(copies) == 20 and copies <= found, sorted(copies - found)
    fetched = {p["url"]: p for p in crawl_ctx.db.pages.find({}, {"url": 1, "listing": 1})}
    assert all(fetched[url].get("listing") for url in listings)
    assert not crawl_ctx.db.pages.find_one({"url": {"$regex": "#pages$"}})
