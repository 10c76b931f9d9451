"""The distributed frontier: two crawl processes of one run share one Redis queue and
seen-URL filter (scrapy-redis), each page is fetched once, and both do part of the work."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from crawler.run import frontier_keys
from testbed.testweb import RunningWeb, build_site, serve
from tests.processes import kill_crawl, wait_until
from tracker.campaigns import (
    Campaign,
    launch_crawl,
    refresh_run,
    save_campaign,
    start_run,
    wait_for_run,
)
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import open_ready

pytestmark = pytest.mark.slow


@pytest.fixture
def running() -> Iterator[RunningWeb]:
    # Half the usual pages, no real pages (their dead links only add 404s).
    with serve(build_site(n_masters=20, n_pages=80, n_real_pages=0, slow_seconds=0.5)) as sites:
        yield sites


@pytest.fixture
def crawl_ctx(tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Context]:
    monkeypatch.setenv("COPYTRACK_ALLOW_PRIVATE_NETWORKS", "1")
    monkeypatch.setenv("COPYTRACK_CRAWL_FRONTIER", "redis")
    context = open_ready(Settings.from_env())
    yield context
    context.close()


def test_two_processes_share_one_frontier(crawl_ctx: Context, running: RunningWeb) -> None:
    seeds = [running.url(site) for site in running.base_urls]
    # Per site one request at a time with a delay: the crawl lasts ~6 s, longer than a
    # crawl process takes to start on a busy machine, so the second one gets a share.
    campaign = Campaign.from_dict(
        {"name": "shared", "seeds": seeds, "delay": 0.25, "concurrency": 1}
    )
    save_campaign(crawl_ctx, campaign)
    run_id = start_run(crawl_ctx, "shared")
    first = launch_crawl(crawl_ctx, "shared", run_id)
    second = launch_crawl(crawl_ctx, "shared", run_id)
    run = wait_for_run(crawl_ctx, run_id, timeout=240)
    assert first.wait(timeout=60) == 0 and second.wait(timeout=60) == 0
    assert run["state"] == "finished", run.get("error")

    # Both processes fetched pages, and their shares add up to the run's total.
    shares = run["crawlers"]
    assert len(shares) == 2 and min(shares.values()) > 0
    assert sum(shares.values()) == run["pages"]["fetched"]
    # One seen filter: no page was requested twice (robots.txt once per process; the
    # 500 page is retried by design).
    requests = Counter(
        (r.site, r.path) for r in running.requests if r.path not in ("/robots.txt",)
        and r.status != 500
    )  # fmt: skip
    assert max(requests.values()) == 1, [k for k, n in requests.items() if n > 1]
    fetched = {"run_id": run_id, "parts": {"$exists": False}}  # not the joined chapters
    assert crawl_ctx.db.pages.count_documents(fetched) == run["pages"]["fetched"]
    # The last process cleared the run's frontier.
    assert not crawl_ctx.redis.exists(*frontier_keys(crawl_ctx.keys, run_id).values())


def test_the_frontier_of_a_run_that_died_is_dropped_when_it_fails(
    crawl_ctx: Context, running: RunningWeb
) -> None:
    seeds = [running.url(site) for site in running.base_urls]
    campaign = Campaign.from_dict({"name": "dies", "seeds": seeds, "delay": 0.25, "concurrency": 1})
    save_campaign(crawl_ctx, campaign)
    run_id = start_run(crawl_ctx, "dies")
    crawl = launch_crawl(crawl_ctx, "dies", run_id)
    keys = list(frontier_keys(crawl_ctx.keys, run_id).values())
    wait_until(lambda: crawl_ctx.db.pages.count_documents({"run_id": run_id}) >= 2, 60, "pages")
    assert crawl_ctx.redis.exists(*keys) >= 2  # requests waiting, URLs seen
    kill_crawl(crawl.pid)  # no chance to clean up after itself
    assert refresh_run(crawl_ctx, run_id)["state"] == "failed"
    # Its requests would otherwise stay in Redis for good: the next run has a frontier of
    # its own and resumes from the pages stored.
    assert not crawl_ctx.redis.exists(*keys)
