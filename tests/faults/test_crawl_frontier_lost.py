"""A crawl on the shared Redis frontier (COPYTRACK_CRAWL_FRONTIER=redis) whose frontier keys
vanish under it (a FLUSHALL, an eviction): its seen-filter and busy mark gone, it fetches
pages again rather than lose any, and its run finishes with every page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.testweb import RunningWeb, TestWeb
from tests.pirate_site import reachable_articles, save_site_campaign
from tests.processes import wait_until
from tracker.campaigns import get_run, trigger_run, wait_for_run
from tracker.context import open_context
from tracker.core.config import Settings
from tracker.runtime.servers import stop_servers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    """An installation of its own whose crawls share their frontier in Redis."""
    data_dir = tmp_path / "data"
    yield Settings.from_env(
        {
            "COPYTRACK_DATA_DIR": str(data_dir),
            "COPYTRACK_ALLOW_PRIVATE_NETWORKS": "1",
            "COPYTRACK_CRAWL_FRONTIER": "redis",
        }
    )
    stop_servers(data_dir)


def test_a_crawl_whose_frontier_keys_vanish_still_stores_every_page(
    web: TestWeb, running: RunningWeb, settings: Settings
) -> None:
    ctx = open_context(settings)
    try:
        save_site_campaign(ctx, web, running, "frontier", delay=0.5, concurrency=1)
        run_id = trigger_run(ctx, "frontier")
        log = Path(get_run(ctx, run_id)["log"])
        frontier = f"{ctx.keys.frontier(run_id)}:*"
        wait_until(lambda: ctx.db.pages.count_documents({}) >= 4, 60, "pages", log)
        lost = list(ctx.redis.scan_iter(match=frontier))
        assert lost, "the crawl keeps no frontier in Redis"
        ctx.redis.delete(*lost)
        stored = ctx.db.pages.count_documents({})
        assert stored < len(reachable_articles(web, running)), "the crawl ended before the loss"

        run = wait_for_run(ctx, run_id, timeout=180)
        assert run["state"] == "finished", run.get("error")
        pages = {p["url"] for p in ctx.db.pages.find({}, {"url": 1})}
        assert reachable_articles(web, running) <= pages
    finally:
        ctx.close()
