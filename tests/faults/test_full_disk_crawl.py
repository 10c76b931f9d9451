"""The data dir's disk fills up during `campaign run --wait`, and is freed again later: no
page is dropped unsaid. Valkey refuses writes (MISCONF) and SecantusDB, once a write of its
failed, every request, until it is started again. A page that could not be stored is
stored again once there is room (the crawl waits, and starts the failed server again), so
the run finishes with every page and every finding; a run never says `finished` over
pages it lost."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from pymongo.errors import OperationFailure

from copytrack.commands.ops import COPYTRACK_COMMAND
from testbed.testweb import RunningWeb, TestWeb
from tests.adding import add_all
from tests.faults.helpers import copytrack, data_dir_env, fill_disk
from tests.pirate_site import SITE, reachable_articles, save_site_campaign
from tests.processes import wait_until
from tracker.campaigns import get_run, trigger_run, wait_for_run
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import open_ready
from tracker.masters.library import Work

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _write_until_storage_fails(ctx: Context) -> None:
    """Write to MongoDB until its storage fails (SecantusDB takes writes into the log it
    made room for ahead, ~10 MB, then answers InternalError), as a busy installation's other
    writers would."""
    junk = ctx.db.junk
    for n in range(1000):
        try:
            junk.insert_one({"_id": n, "bytes": os.urandom(100_000)})
        except OperationFailure as err:
            assert err.code == 1, err  # InternalError
            return
    pytest.fail("MongoDB took 100 MB on a full disk")


def test_a_disk_full_during_a_crawl_loses_no_page(
    small_disk: Path, tmp_path: Path, web: TestWeb, running: RunningWeb
) -> None:
    env = {**data_dir_env(small_disk), "COPYTRACK_ALLOW_PRIVATE_NETWORKS": "1"}
    ctx = open_ready(Settings.from_env(env))
    try:
        add_all(ctx, [Work(text=m["text"], external_id=m["id"]) for m in web.masters])
        save_site_campaign(ctx, web, running, "full", delay=0.5, concurrency=1)
    finally:
        ctx.close()
    log = tmp_path / "run.log"
    with (
        open(log, "wb") as out,
        subprocess.Popen(
            [*COPYTRACK_COMMAND, "campaign", "run", "full", "--wait"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        ) as run,
    ):
        ctx = open_ready(Settings.from_env(env))
        try:
            wait_until(lambda: ctx.db.pages.count_documents({}) >= 4, 60, "pages", log)
            filler = fill_disk(small_disk)
            _write_until_storage_fails(ctx)
        finally:
            ctx.close()
        time.sleep(10)  # pages fetched meanwhile find no room
        filler.unlink()
        code = run.wait(timeout=240)
    said = log.read_text()
    assert code == 0 and "finished" in said, said[-3000:]
    assert "Traceback" not in said, said
    ctx = open_ready(Settings.from_env(env))
    try:
        pages = {p["url"] for p in ctx.db.pages.find({}, {"url": 1})}
        assert reachable_articles(web, running) <= pages
        copies = {
            running.url(SITE, a["path"])
            for a in web.articles(reachable=True)
            if a["site"] == SITE and a["copies"]
        }
        found = {f["url"] for f in ctx.db.findings.find({}, {"url": 1})}
        assert copies <= found
    finally:
        ctx.close()
        copytrack(["down"], env)


def test_a_disk_that_stays_full_fails_the_run_naming_it(
    small_disk: Path, web: TestWeb, running: RunningWeb, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk stays full past the crawl's patience (5 s here): the page is counted as
    not stored, the crawl stops, and its run fails with one line naming the data dir, once
    there is room to record that."""
    env = {**data_dir_env(small_disk), "COPYTRACK_ALLOW_PRIVATE_NETWORKS": "1"}
    monkeypatch.setenv("COPYTRACK_STORE_PATIENCE", "5")  # the crawl's environment
    ctx = open_ready(Settings.from_env(env))
    try:
        save_site_campaign(ctx, web, running, "stuck", delay=0.5, concurrency=1)
        run_id = trigger_run(ctx, "stuck")
        log = Path(get_run(ctx, run_id)["log"])
        wait_until(lambda: ctx.db.pages.count_documents({}) >= 4, 60, "pages", log)
        filler = fill_disk(small_disk)
        time.sleep(20)  # the crawl tries, gives up, and tries to report it
        filler.unlink()
        run = wait_for_run(ctx, run_id, scan=False, timeout=120)
        assert run["state"] == "failed", run
        assert run["error"].startswith("pages could not be stored: the embedded"), run["error"]
        assert str(small_disk) in run["error"] and "free space" in run["error"]
        assert run["failed"]["not_stored"] >= 1
        problems = list(ctx.db.run_problems.find({"run_id": run_id, "reason": "not_stored"}))
        assert problems and all(str(small_disk) in p["detail"] for p in problems), [
            p["detail"] for p in problems
        ]
    finally:
        ctx.close()
        copytrack(["down"], env)
