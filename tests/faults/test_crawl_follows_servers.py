"""A crawl under way when both embedded servers die and come back on other ports (theirs
were taken meanwhile): it finds them there, as the workers do, stores every page there, and
its run stays true (running, then finished), never `failed: interrupted` while it runs."""

from __future__ import annotations

import fcntl
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from testbed.testweb import RunningWeb, TestWeb
from tests.faults.helpers import kill_server, server
from tests.pirate_site import reachable_articles, save_site_campaign
from tests.processes import wait_until
from tracker.campaigns import get_run, trigger_run, wait_for_run
from tracker.core.config import Settings
from tracker.masters.generation import open_ready
from tracker.runtime.servers import LOCK_FILE, MONGO, VALKEY, ensure_servers, stop_servers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _moved(settings: Settings) -> None:
    """Kill both servers and start them again on other ports: their own are taken while
    they come back (no process can start one meanwhile: the data dir's lock is held)."""
    with ExitStack() as taken, open(settings.data_dir / LOCK_FILE, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in (VALKEY, MONGO):
            port = kill_server(settings, name)
            squatter = taken.enter_context(socket.socket())
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            squatter.bind(("127.0.0.1", port))
            squatter.listen()
        fcntl.flock(lock, fcntl.LOCK_UN)
        ensure_servers(settings)
    # The old ports refuse connections again once the squatters are gone.


@pytest.fixture(params=["memory", "redis"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    """An installation of its own on embedded servers (the test moves them), whose
    campaigns may crawl the test web, keeping their frontier in memory or in Redis."""
    data_dir = tmp_path / "data"
    yield Settings.from_env(
        {
            "COPYTRACK_DATA_DIR": str(data_dir),
            "COPYTRACK_ALLOW_PRIVATE_NETWORKS": "1",
            "COPYTRACK_CRAWL_FRONTIER": request.param,
        }
    )
    stop_servers(data_dir)


def test_a_running_crawl_follows_servers_to_their_new_ports(
    web: TestWeb, running: RunningWeb, settings: Settings
) -> None:
    ctx = open_ready(settings)
    ports = {name: server(settings, name).port for name in (MONGO, VALKEY)}
    try:
        save_site_campaign(ctx, web, running, "moving", delay=0.5, concurrency=1)
        run_id = trigger_run(ctx, "moving")
        log = Path(get_run(ctx, run_id)["log"])
        wait_until(lambda: ctx.db.pages.count_documents({}) >= 4, 60, "pages", log)
    finally:
        ctx.close()

    _moved(settings)
    assert all(server(settings, name).port != ports[name] for name in ports)
    ctx = open_ready(settings)
    try:
        stored = ctx.db.pages.count_documents({})
        assert stored < len(reachable_articles(web, running)), "the crawl ended before the move"
        wait_until(lambda: ctx.db.pages.count_documents({}) > stored + 3, 60, "pages", log)
        assert get_run(ctx, run_id)["state"] == "running"
        run = wait_for_run(ctx, run_id, timeout=120)
        assert run["state"] == "finished", run.get("error")
        pages = {p["url"] for p in ctx.db.pages.find({}, {"url": 1})}
        assert reachable_articles(web, running) <= pages
        assert run["pages"]["fetched"] >= len(reachable_articles(web, running))
    finally:
        ctx.close()
