"""COPYTRACK_CRAWL_DISPATCH=queue with real processes: a run waits ``queued`` for a worker of
the crawl queue, holding its campaign; a `copytrack worker` crawls it in a child process; a
crawl process that cannot start, exits early or is killed under the worker fails its run at
once, and the next run resumes it; a task delivered again does nothing."""

from __future__ import annotations

import signal
import socket
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from testbed.testweb import RunningWeb, TestWeb, build_site, serve
from tests.adding import add_all
from tests.pirate_site import RUN_TIMEOUT, campaign_show, reachable_articles, save_site_campaign
from tests.processes import kill_crawl, process_state, wait_until, worker_process

# Tasks by their module: pytest's collection would read a task imported here, and that
# configures the Celery app (starting embedded servers in ./.copytrack).
from tracker import tasks
from tracker.campaigns import (
    HEARTBEAT_STALE,
    QUEUE_WAIT,
    CampaignBusy,
    crawl_queued_run,
    dispatch,
    get_campaign,
    get_run,
    refresh_run,
    save_campaign,
    trigger_run,
    wait_for_run,
)
from tracker.celery_app import app, configure
from tracker.context import Context
from tracker.masters.library import Work
from tracker.monitoring.health import health
from tracker.runtime.processes import proc_stat

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[TestWeb, RunningWeb]]:
    web = build_site(n_masters=20, n_pages=60, n_real_pages=0, slow_seconds=0.5)
    with serve(web) as running:
        yield web, running


@pytest.fixture
def queue_ctx(crawl_ctx: Context, monkeypatch: pytest.MonkeyPatch) -> Context:
    """crawl_ctx sending its runs to the crawl queue (of the session's Redis)."""
    monkeypatch.setenv("COPYTRACK_CRAWL_DISPATCH", "queue")  # for the CLI commands
    monkeypatch.setattr(crawl_ctx, "settings", replace(crawl_ctx.settings, crawl_dispatch="queue"))
    configure(app, crawl_ctx.endpoints, crawl_ctx.settings)
    return crawl_ctx


def _parent(pid: int) -> int:
    stat = proc_stat(pid)
    assert stat is not None, f"no process {pid}"
    return int(stat[1])


def test_without_a_crawler_worker_a_run_stays_queued_and_holds_its_campaign(
    queue_ctx: Context, site: tuple[TestWeb, RunningWeb]
) -> None:
    ctx = queue_ctx
    save_site_campaign(ctx, *site, "waits")
    run_id = trigger_run(ctx, "waits")
    run = get_run(ctx, run_id)
    # Nothing was started here: the run and its task wait for a crawler.
    assert run["state"] == "queued" and "pid" not in run and run["crawl_processes"] == []
    assert health(ctx, timeout=0.2)["queues"]["crawl"] == 1
    # Long without a heartbeat, yet no crawl died: a queued run has none to give.
    stale = datetime.now(UTC) - 10 * HEARTBEAT_STALE
    ctx.db.runs.update_one({"_id": run_id}, {"$set": {"heartbeat_at": stale}})
    with pytest.raises(TimeoutError, match="still queued after 3 s"):
        wait_for_run(ctx, run_id, poll=0.5, timeout=3)
    with pytest.raises(CampaignBusy) as busy:
        trigger_run(ctx, "waits")
    assert busy.value.run_id == str(run_id)
    [line] = [line for line in campaign_show("waits").splitlines() if str(run_id) in line]
    assert " queued " in line

    # Queued past QUEUE_WAIT (no crawler ever came): failed, and the campaign is free.
    waited = datetime.now(UTC) - QUEUE_WAIT - timedelta(minutes=1)
    ctx.db.runs.update_one({"_id": run_id}, {"$set": {"started_at": waited}})
    failed = refresh_run(ctx, run_id)
    assert failed["state"] == "failed"
    assert failed["error"].startswith("no crawler worker took it from the crawl queue within 24 h")
    assert not ctx.redis.exists(ctx.keys.campaign_lock("waits"))
    # A crawler taking the task after all does nothing.
    late = crawl_queued_run(ctx, "waits", run_id)
    assert late == {"run_id": str(run_id), "crawled": False, "state": "failed"}
    assert "pid" not in get_run(ctx, run_id)


@pytest.mark.parametrize(
    ("command", "error"),
    [
        (["/nonexistent/python"], "cannot start the crawl process: [Errno 2]"),
        ([sys.executable, "-c", "raise SystemExit(3)"], "the crawl process exited with status 3"),
    ],
)
def test_a_crawl_process_that_fails_to_start_or_report_fails_its_run(
    queue_ctx: Context,
    site: tuple[TestWeb, RunningWeb],
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    error: str,
) -> None:
    save_site_campaign(queue_ctx, *site, "broken")
    run_id = trigger_run(queue_ctx, "broken")
    monkeypatch.setattr(dispatch, "CRAWL_COMMAND", command)
    done = crawl_queued_run(queue_ctx, "broken", run_id, worker="crawler-test")
    assert done == {"run_id": str(run_id), "crawled": True, "state": "failed"}
    run = get_run(queue_ctx, run_id)
    assert run["error"].startswith(error) and run["worker"] == "crawler-test"
    assert not queue_ctx.redis.exists(queue_ctx.keys.campaign_lock("broken"))


def test_a_crawler_worker_crawls_queued_runs_and_a_killed_crawl_is_resumed(
    queue_ctx: Context, site: tuple[TestWeb, RunningWeb], tmp_path: Path
) -> None:
    ctx, (web, running) = queue_ctx, site
    add_all(ctx, [Work(text=m["text"], external_id=m["id"]) for m in web.masters])
    # One request at a time, a quarter of a second apart: slow enough to kill midway.
    save_site_campaign(ctx, web, running, "fleet", delay=0.25, concurrency=1)
    first = trigger_run(ctx, "fleet")
    with pytest.raises(CampaignBusy):
        trigger_run(ctx, "fleet")  # not while it is queued

    log = tmp_path / "worker.log"
    # Two pool processes: one waits for the crawl, the other scans and takes more tasks.
    with worker_process(ctx, log, queues="crawl,scan", concurrency=2) as worker:
        name = f"copytrack-{worker.pid}@{socket.gethostname()}"
        wait_until(lambda: ctx.db.pages.count_documents({"run_id": first}) >= 3, 60, "pages", log)
        killed = get_run(ctx, first)
        assert killed["state"] == "running" and killed["worker"] == name
        assert _parent(_parent(killed["pid"])) == worker.pid  # a child of its pool process
        with pytest.raises(CampaignBusy):
            trigger_run(ctx, "fleet")  # nor while it runs
        kill_crawl(killed["pid"])
        # The worker waiting for the crawl fails the run, with why, and frees the campaign.
        wait_until(
            lambda: not ctx.redis.exists(ctx.keys.campaign_lock("fleet")),
            10,
            "the campaign freed",
            log,
        )
        killed = get_run(ctx, first)
        assert killed["state"] == "failed"
        assert killed["error"].startswith("the crawl process was killed by signal 9")

        fast = replace(get_campaign(ctx, "fleet"), delay=0, concurrency=4)
        save_campaign(ctx, fast, replace=True)
        second = trigger_run(ctx, "fleet")
        # No scanning here: the worker's other pool process scans while the crawl runs.
        run = wait_for_run(ctx, second, scan=False, timeout=RUN_TIMEOUT)
        assert run["state"] == "finished", run.get("error")
        assert run["resumes"] == first and run["worker"] == name
        assert f"resumes {first}  crawled by {name}" in campaign_show("fleet")
        assert run["findings"]["new"] > 0
        # Delivered again (a dead worker's task), a crawl task finds its run done: no-op.
        for run_id, state in ((first, "failed"), (second, "finished")):
            again = tasks.crawl_run.delay("fleet", str(run_id)).get(timeout=30)
            assert again == {"run_id": str(run_id), "crawled": False, "state": state}
    assert get_run(ctx, second)["pid"] == run["pid"]  # and started no crawl process

    pages = list(ctx.db.pages.find({}, {"url": 1, "scanned_at": 1}))
    assert reachable_articles(web, running) <= {p["url"] for p in pages}
    assert all(p.get("scanned_at") for p in pages)
    copies = {running.url(a["site"], a["path"]) for a in web.articles() if a["copies"]}
    found = {f["url"] for f in ctx.db.findings.find({}, {"url": 1})}
    stored_copies = copies & {p["url"] for p in pages}
    assert stored_copies and len(stored_copies & found) >= 0.9 * len(stored_copies)


def test_a_crawler_worker_told_to_stop_stops_its_crawl_within_its_grace_period(
    queue_ctx: Context, site: tuple[TestWeb, RunningWeb], tmp_path: Path
) -> None:
    ctx, (web, running) = queue_ctx, site
    # Slow enough that the crawl is far from done when the worker is told to stop.
    save_site_campaign(ctx, web, running, "deploy", delay=0.25, concurrency=1)
    run_id = trigger_run(ctx, "deploy")
    log = tmp_path / "worker.log"
    with worker_process(ctx, log, queues="crawl", concurrency=1) as worker:
        wait_until(lambda: ctx.db.pages.count_documents({"run_id": run_id}) >= 3, 60, "pages", log)
        crawl_pid = get_run(ctx, run_id)["pid"]
        worker.send_signal(signal.SIGTERM)  # as `docker compose stop` does
        # Its warm shutdown waits for the crawl task, which ends as its crawl does.
        assert worker.wait(timeout=30) == 0, log.read_text()[-3000:]
    assert f"asked crawl process {crawl_pid} to stop" in log.read_text()
    assert process_state(crawl_pid) in ("Z", None)

    run = get_run(ctx, run_id)
    assert run["state"] == "failed"
    assert run["error"] == "interrupted (the crawl process was asked to stop)"
    assert not ctx.redis.exists(
        ctx.keys.campaign_lock("deploy")
    )  # the next run may start, and resume it
    # Every page it stored is counted: its counts were recorded on the way out (a chapter
    # joined from pages is no page fetched).
    fetched = {"run_id": run_id, "parts": {"$exists": False}}
    assert run["pages"]["fetched"] == ctx.db.pages.count_documents(fetched) >= 3
    assert "Received SIGTERM, shutting down gracefully" in Path(run["log"]).read_text()
