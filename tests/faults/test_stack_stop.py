"""`copytrack down` under a running `copytrack up` with a crawl under way: it returns once
every process of the stack is gone, the crawl included, and nothing that was being stopped
starts the servers again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from copytrack.commands.ops import COPYTRACK_COMMAND
from testbed.testweb import RunningWeb, TestWeb
from tests.adding import add_all
from tests.faults.helpers import copytrack, data_dir_env, servers_of
from tests.pirate_site import save_site_campaign
from tests.processes import process_group, process_state, wait_until
from tracker.campaigns import get_run, trigger_run
from tracker.core.config import Settings
from tracker.masters.generation import open_ready
from tracker.masters.library import Work
from tracker.runtime.servers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def test_down_under_up_stops_the_stack_crawls_included(
    tmp_path: Path, web: TestWeb, running: RunningWeb
) -> None:
    data = tmp_path / "data"
    env = {**data_dir_env(data), "COPYTRACK_ALLOW_PRIVATE_NETWORKS": "1"}
    log = tmp_path / "up.log"
    up_command = [*COPYTRACK_COMMAND, "up", "--concurrency", "1", "--admin-port", str(free_port())]
    with process_group(up_command, env, log) as up:
        wait_until(lambda: "copytrack is up" in log.read_text(), 90, "the stack", log)
        ctx = open_ready(Settings.from_env(env))
        try:
            add_all(
                ctx, [Work(text=m["text"], external_id=m["id"]) for m in web.masters]
            )  # the worker has copies to find: it is busy
            save_site_campaign(ctx, web, running, "slow", delay=1.0, concurrency=1)
            run_id = trigger_run(ctx, "slow")
            crawl = get_run(ctx, run_id)["pid"]
            wait_until(lambda: ctx.db.pages.count_documents({}) >= 4, 60, "pages", log)
            assert process_state(crawl) not in (None, "Z"), "the crawl ended before `down`"
        finally:
            ctx.close()

        down = copytrack(["down"], env, timeout=180)
        assert down.returncode == 0, down.stderr
        # Everything it stopped is gone as it returns (`up` exiting), and stays gone.
        up.wait(timeout=5)
        for _ in range(4):
            assert servers_of(data) == [], log.read_text()[-3000:]
            time.sleep(2)
        assert not (data / "servers.json").exists()
        assert process_state(crawl) in (None, "Z")
        assert f"stopped crawl (pid {crawl})" in down.stdout and "stopped up" in down.stdout
    ctx = open_ready(Settings.from_env(env))  # servers again, for a look at the run
    try:
        run = get_run(ctx, run_id)
        assert run["state"] == "failed" and run["error"].startswith("interrupted"), run
    finally:
        ctx.close()
        copytrack(["down"], env)
