"""A crawl under stress, with real processes: it pauses while the scan queue is full, and a
crawl killed mid-run is recorded as interrupted and resumed by the next run."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from bson import ObjectId

from crawler.urls import canonicalize
from testbed.testweb import RunningWeb, TestWeb
from tests.adding import add_all
from tests.pirate_site import (
    RUN_TIMEOUT,
    SITE,
    campaign_show,
    reachable_articles,
    save_site_campaign,
)
from tests.processes import kill_crawl, process_state, wait_until, worker_process
from tracker.campaigns import (
    NotRunning,
    get_campaign,
    get_run,
    stop_run,
    trigger_run,
    wait_for_run,
)
from tracker.campaigns.runs import crawl_died, crawl_process_record
from tracker.context import Context
from tracker.masters.library import Work

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@contextlib.contextmanager
def _deepest(ctx: Context, queue: str) -> Iterator[list[int]]:
    """Samples the queue's length every 10 ms while the block runs; yields [max seen]."""
    deepest, stop = [0], threading.Event()

    def sample() -> None:
        while not stop.wait(0.01):
            deepest[0] = max(deepest[0], ctx.redis.llen(ctx.keys.queue(queue)))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        yield deepest
    finally:
        stop.set()
        sampler.join()


def test_a_crawl_pauses_while_the_scan_queue_is_full(
    crawl_ctx: Context,
    web: TestWeb,
    running: RunningWeb,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    bound = 4
    # The crawl process works with the settings of the context that starts it.
    monkeypatch.setattr(crawl_ctx, "settings", replace(crawl_ctx.settings, scan_queue_max=bound))
    save_site_campaign(crawl_ctx, web, running, "backoff", delay=0, concurrency=4)
    with _deepest(crawl_ctx, "scan") as deepest:
        run_id = trigger_run(crawl_ctx, "backoff")
        crawl_log = Path(get_run(crawl_ctx, run_id)["log"])
        # No worker: the queue fills up to the bound, and the crawl stops there.
        paused = "paused: the scan queue holds"
        wait_until(lambda: paused in crawl_log.read_text(), 30, "pause", crawl_log)
        stored = crawl_ctx.db.pages.count_documents({})
        time.sleep(2)
        assert crawl_ctx.db.pages.count_documents({}) == stored
        assert get_run(crawl_ctx, run_id)["state"] == "running"
        # Full, or one short: a page of a chapter cut into pages needs room for two scans.
        assert bound - 1 <= crawl_ctx.redis.llen(crawl_ctx.keys.queue("scan")) <= bound
        assert stored < len(reachable_articles(web, running))

        # Workers drain the queue: the crawl goes on, pausing again whenever it is full.
        with worker_process(crawl_ctx, tmp_path / "worker.log"):
            run = wait_for_run(crawl_ctx, run_id, timeout=RUN_TIMEOUT)
    assert bound - 1 <= deepest[0] <= bound  # never past the bound
    assert run["state"] == "finished", run.get("error")
    pages = {p["url"] for p in crawl_ctx.db.pages.find({}, {"url": 1})}
    assert reachable_articles(web, running) <= pages
    # A scan per page; a chapter joined from several pages (the list's pages here) is
    # joined, and scanned, again as its pages come in.
    fetched = crawl_ctx.db.pages.count_documents({"parts": {"$exists": False}})
    joined = crawl_ctx.db.pages.find({"parts": {"$exists": True}}, {"parts": 1})
    assert fetched <= run["scans_enqueued"] <= fetched + sum(len(p["parts"]) for p in joined)
    log_text = crawl_log.read_text()
    assert f"crawl of campaign backoff (run {run_id}) resumed after" in log_text


def test_a_killed_crawl_is_resumed_without_refetching_what_it_stored(
    crawl_ctx: Context, web: TestWeb, running: RunningWeb
) -> None:
    add_all(crawl_ctx, [Work(text=m["text"], external_id=m["id"]) for m in web.masters])
    # One request at a time, a quarter of a second apart: slow enough to kill midway.
    save_site_campaign(crawl_ctx, web, running, "resume", delay=0.25, concurrency=1)
    first = trigger_run(crawl_ctx, "resume")
    pid = get_run(crawl_ctx, first)["pid"]
    wait_until(lambda: crawl_ctx.db.pages.count_documents({"run_id": first}) >= 6, 30, "pages")
    kill_crawl(pid)
    # The pages it fetched (a chapter joined from several pages was fetched as those).
    fetched = {"run_id": first, "parts": {"$exists": False}}
    stored = {p["url"] for p in crawl_ctx.db.pages.find(fetched, {"url": 1})}
    assert not reachable_articles(web, running) <= stored, "the crawl ended before the kill"

    # The dead crawl's lock has not expired yet, but the campaign can run again at once;
    # the killed crawl, not reaped yet, is a zombie: dead all the same.
    assert crawl_ctx.redis.exists(crawl_ctx.keys.campaign_lock("resume"))
    assert process_state(pid) == "Z"
    log_start = len(running.requests)
    second = trigger_run(crawl_ctx, "resume")
    killed = get_run(crawl_ctx, first)
    assert killed["state"] == "failed" and killed["error"].startswith("interrupted")
    run = wait_for_run(crawl_ctx, second, timeout=RUN_TIMEOUT)
    assert run["state"] == "finished", run.get("error")
    assert run["resumes"] == first
    assert f"resumes {first}" in campaign_show("resume")

    # (a) Nothing the killed crawl stored was requested again, but seeds always are.
    seeds = {canonicalize(seed) for seed in get_campaign(crawl_ctx, "resume").seeds}
    requested = {canonicalize(running.url(r.site, r.path)) for r in running.requests[log_start:]}
    assert not (stored - seeds) & requested
    assert run["skipped"]["fresh"] >= len(stored - seeds)
    # (b) The crawl is complete, and every page is scanned, those of the killed run too.
    pages = list(crawl_ctx.db.pages.find({}, {"url": 1, "scanned_at": 1}))
    assert reachable_articles(web, running) <= {p["url"] for p in pages}
    assert all(p.get("scanned_at") for p in pages)
    # (c) One document per page, one finding per page and work; the copies are found.
    assert len({p["url"] for p in pages}) == len(pages)
    findings = list(crawl_ctx.db.findings.find({}, {"page_id": 1, "master_id": 1, "url": 1}))
    assert len({(f["page_id"], f["master_id"]) for f in findings}) == len(findings)
    copies = {
        running.url(SITE, a["path"])
        for a in web.articles(reachable=True)
        if a["site"] == SITE and a["copies"]
    }
    found = {f["url"] for f in findings}
    assert len(copies & found) >= 0.9 * len(copies)
    assert copies & found & stored, "no copy stored by the killed run was scanned"


def test_a_run_whose_crawl_died_is_failed_without_waiting_for_its_heartbeat(
    crawl_ctx: Context, web: TestWeb, running: RunningWeb
) -> None:
    save_site_campaign(crawl_ctx, web, running, "dies", delay=0.25, concurrency=1)
    run_id = trigger_run(crawl_ctx, "dies")
    pid = get_run(crawl_ctx, run_id)["pid"]
    wait_until(lambda: get_run(crawl_ctx, run_id)["state"] == "running", 30, "crawl start")
    kill_crawl(pid)
    # Whoever looks at the run sees it failed at once, not after the heartbeat's 90 s.
    [line] = [line for line in campaign_show("dies").splitlines() if str(run_id) in line]
    assert " failed " in line and "error: interrupted" in line
    assert not crawl_ctx.redis.exists(crawl_ctx.keys.campaign_lock("dies"))


def test_a_crawl_looked_at_the_moment_it_starts_has_not_died() -> None:
    """Right after `launch_crawl` records a crawl process, the run's first poll may look
    at it before the kernel has put its command line in place: it still runs."""
    run_id = ObjectId()
    started_too_early = 0
    for _ in range(100):
        # What launch_crawl does, with a process that only carries the run id.
        proc = subprocess.Popen(["sh", "-c", "sleep 5", "crawl", str(run_id)])
        run = {"_id": run_id, "crawl_processes": [crawl_process_record(proc.pid)]}
        started_too_early += crawl_died(run)
        proc.kill()
        proc.wait()
        assert crawl_died(run), "a crawl process that ended still counts as running"
    assert started_too_early == 0, f"{started_too_early} of 100 starting crawls counted dead"


def test_a_stopped_run_is_recorded_cancelled_and_its_crawl_ends(
    crawl_ctx: Context, web: TestWeb, running: RunningWeb
) -> None:
    save_site_campaign(crawl_ctx, web, running, "stopped", delay=0.25, concurrency=1)
    run_id = trigger_run(crawl_ctx, "stopped")
    pid = get_run(crawl_ctx, run_id)["pid"]
    wait_until(lambda: get_run(crawl_ctx, run_id)["state"] == "running", 30, "crawl start")
    stopped = stop_run(crawl_ctx, "stopped", "ada")
    assert stopped["state"] == "cancelled" and stopped["cancelled"]["by"] == "ada"
    # Told to stop, the crawl ends after the requests under way, well before the site's end.
    wait_until(lambda: process_state(pid) in ("Z", None), 60, f"end of crawl pid {pid}")
    run = get_run(crawl_ctx, run_id)
    assert run["state"] == "cancelled" and "error" not in run
    assert run["pages"]["fetched"] < len(reachable_articles(web, running))
    with pytest.raises(NotRunning):
        stop_run(crawl_ctx, "stopped", "ada")
    # The campaign runs again at once, afresh.
    again = wait_for_run(crawl_ctx, trigger_run(crawl_ctx, "stopped"), timeout=RUN_TIMEOUT)
    assert again["state"] == "finished" and "resumes" not in again
