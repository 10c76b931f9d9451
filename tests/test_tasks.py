"""Celery hand-off with real workers: scans run in worker processes, survive killed workers.

Workers are subprocesses on the session's embedded servers (Redis db 0, flushed by the
``redis_client`` fixture; a fresh MongoDB database per test). Each runs in its own process
group, which is killed on the way out, pool processes included.

Task objects are used through their module (``tasks.reindex``), never imported by name:
test collection reads the attributes of module-level names, and reading a task's attributes
loads the app's configuration, before the ``ctx`` fixture could configure it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import kombu
import pytest
import redis
from bson import ObjectId
from pymongo.database import Database

from copytrack.commands.ops import COPYTRACK_COMMAND
from tests.adding import add_all
from tests.corpus import texts
from tests.processes import clean_env, installation_env, process_group, wait_until
from tracker import tasks
from tracker.celery_app import app, configure
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import open_ready
from tracker.masters.library import Work
from tracker.runtime.processes import records_dir
from tracker.runtime.servers import Endpoints
from tracker.scanning.pages import PageInput, store_page

CELERY_WORKER = [
    sys.executable, "-m", "celery", "-A", "tracker.tasks", "worker",
    "--queues", "scan", "--concurrency", "1", "--loglevel", "INFO",
    "--without-mingle", "--without-gossip",
]  # fmt: skip
AD = "\n更多精彩内容请关注本站"

# Runs in a fresh interpreter: what the app resolves, and whether importing it started
# anything (embedded servers would create the data dir).
BROKER_SCRIPT = """
import json, os
from pathlib import Path
import tracker.tasks
from tracker.celery_app import app
data_dir = Path(os.environ["COPYTRACK_DATA_DIR"])
touched = data_dir.exists() and any(data_dir.iterdir())
print(json.dumps({"touched_on_import": touched, "broker": app.conf.broker_url,
                  "backend": app.conf.result_backend,
                  "transport": app.conf.broker_transport_options}))
"""

# Test-only worker module (loaded with celery's -I): every scan, once its findings are
# recorded and before the page is marked scanned and the task acknowledged, notes
# "url pid" and stalls, so the test can kill the worker in the middle of the task.
STALL_HOOK = """
import os
import time

import tracker.scanning.pages

_record_findings = tracker.scanning.pages.record_findings


def _record_then_stall(ctx, page, *args, **kwargs):
    result = _record_findings(ctx, page, *args, **kwargs)
    with open(os.environ["STALL_MARKER"], "a") as fh:
        fh.write(f"{page['url']} {os.getpid()}\\n")
    time.sleep(600)
    return result


tracker.scanning.pages.record_findings = _record_then_stall
"""

# Test-only worker module (celery's -I): scans have time limits of 2 and 5 s (the test
# sends them with each task), and the scan of a page whose URL says "slow" outlasts them;
# "stubborn" also ignores the soft limit.
TIME_LIMIT_HOOK = """
import time

import tracker.scanning.pages
import tracker.tasks
from celery.exceptions import SoftTimeLimitExceeded

tracker.tasks.TIME_LIMITS["tracker.scan_page"] = (2, 5)
_record_findings = tracker.scanning.pages.record_findings


def _slow_record(ctx, page, *args, **kwargs):
    if "slow" in page["url"]:
        try:
            time.sleep(30)
        except SoftTimeLimitExceeded:
            if "stubborn" not in page["url"]:
                raise
            time.sleep(30)
    return _record_findings(ctx, page, *args, **kwargs)


tracker.scanning.pages.record_findings = _slow_record
"""


@pytest.fixture
def ctx(
    endpoints: Endpoints,
    redis_client: redis.Redis,
    mongo_db: Database[Any],
    tmp_path: Path,
) -> Iterator[Context]:
    """A context on a flushed Redis and a fresh database, with three works in the library."""
    settings = Settings.from_env(
        {
            "COPYTRACK_DATA_DIR": str(tmp_path / "data"),
            "COPYTRACK_MONGO_URL": endpoints.mongo_url,
            "COPYTRACK_REDIS_URL": endpoints.redis_url,
            "COPYTRACK_MONGO_DB": mongo_db.name,
        }
    )
    configure(app, endpoints, settings)
    context = open_ready(settings)
    add_all(
        context,
        [Work(text=text, external_id=f"news-{n}") for n, text in enumerate(texts("zh_news", 3))],
    )
    yield context
    context.close()


def _pirate_pages(ctx: Context, count: int) -> list[ObjectId]:
    """Pages copying the first ``count`` works, one each, with an ad after every paragraph."""
    copies = [AD.join(text.split("\n")) + AD for text in texts("zh_news", count)]
    return [
        store_page(ctx, PageInput(url=f"http://pirate.example/{n}", text=copy))[0]
        for n, copy in enumerate(copies)
    ]


def _resolved(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", BROKER_SCRIPT], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_app_finds_its_broker_lazily(endpoints: Endpoints, embedded_data_dir: Path) -> None:
    env = clean_env()
    # Configured URLs are used as they are, with the visibility timeout of the environment.
    url = "redis://127.0.0.1:1/5"
    configured = _resolved(
        {
            **env,
            "COPYTRACK_DATA_DIR": str(embedded_data_dir / "unused"),
            "COPYTRACK_REDIS_URL": url,
            "COPYTRACK_MONGO_URL": "mongodb://127.0.0.1:1/",
            "COPYTRACK_VISIBILITY_TIMEOUT": "120",
            "COPYTRACK_REDIS_PREFIX": "press",
        }
    )
    assert configured["touched_on_import"] is False
    assert configured["broker"] == configured["backend"] == url
    assert configured["transport"] == {
        "global_keyprefix": "press:celery:",
        "visibility_timeout": 120,
        "unacked_restore_interval": 12,
        "unacked_restore_throttle": 1,
        "unacked_mutex_expire": 10,
    }
    assert not (embedded_data_dir / "unused").exists()
    # No URLs: the embedded Valkey of the data dir (running here, so reused).
    embedded = _resolved({**env, "COPYTRACK_DATA_DIR": str(embedded_data_dir)})
    # Twice, so that kombu asks tracker.celery_app.follow_valkey after a failed connection.
    assert embedded["broker"] == f"{endpoints.redis_url};{endpoints.redis_url}"
    assert embedded["backend"] == endpoints.redis_url
    assert embedded["transport"]["visibility_timeout"] == 3600


def _findings(ctx: Context) -> dict[tuple[ObjectId, int], dict[str, Any]]:
    """Findings by (page, master); a duplicate key would make the counts below differ."""
    docs = list(ctx.db.findings.find({}, {"spans": 0, "history": 0}))
    found = {(d["page_id"], d["master_id"]): d for d in docs}
    assert len(found) == len(docs)
    return found


def test_worker_scans_an_enqueued_page_and_a_duplicate_changes_nothing(
    ctx: Context, tmp_path: Path
) -> None:
    (page_id,) = _pirate_pages(ctx, 1)
    first = tasks.enqueue_scan(page_id, keep_result=True)
    assert (
        ctx.redis.llen(ctx.keys.queue("scan")) == 1
    )  # routed to the scan queue, waiting for a worker
    log = tmp_path / "worker.log"
    cmd = [*COPYTRACK_COMMAND, "worker", "--queues", "scan", "--concurrency", "1"]
    env = installation_env(ctx.endpoints, ctx.settings)
    with process_group(cmd, env, log, log.parent) as worker:
        summary = first.get(timeout=40)
        assert summary["page_id"] == str(page_id)
        assert summary["scanned"] is True and summary["matches"] == 1
        assert summary["new"] == 1
        [finding] = _findings(ctx).values()
        assert finding["page_id"] == page_id and finding["master_id"] == 1

        # The same task again, as a redelivery would run it: the finding stays as it was.
        again = tasks.enqueue_scan(page_id, keep_result=True).get(timeout=20)
        assert again == {"page_id": str(page_id), "scanned": False, "matches": 1}
        [same] = _findings(ctx).values()
        assert same == finding

        # Queued as the crawl queues it: scanned, and no result of it kept in Redis.
        scanned_at = ctx.db.pages.find_one({"_id": page_id})["scanned_at"]
        quiet = tasks.enqueue_scan(page_id, force=True)
        rescanned = {"_id": page_id, "scanned_at": {"$gt": scanned_at}}
        wait_until(lambda: ctx.db.pages.find_one(rescanned), 20, "forced scan", log)
        assert ctx.redis.keys(f"*{first.id}*") and not ctx.redis.keys(f"*{quiet.id}*")

        worker.send_signal(signal.SIGTERM)  # warm shutdown
        assert worker.wait(timeout=20) == 0, log.read_text()
    assert not list(records_dir(ctx.settings.data_dir).glob("*.json"))  # its record is gone


def test_ingest_reindex_and_scan_of_a_deleted_page(ctx: Context, tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    work = asdict(Work(text=texts("zh_news", 4)[3], external_id="news-3"))
    cmd = [*COPYTRACK_COMMAND, "worker", "--concurrency", "1"]
    env = installation_env(ctx.endpoints, ctx.settings)
    with process_group(cmd, env, log, log.parent):
        added = tasks.ingest_work.delay(work).get(timeout=40)
        assert added == [{"external_id": "news-3", "master_id": 4, "status": "added"}]
        again = tasks.ingest_work.delay(work).get(timeout=20)
        assert again[0]["status"] == "unchanged"

        postings = ctx.index.stats().postings
        assert tasks.reindex.delay().get(timeout=30) == {"masters": 4, "postings": postings}

        gone = ObjectId()
        assert tasks.enqueue_scan(gone, keep_result=True).get(timeout=20) == {
            "page_id": str(gone),
            "scanned": False,
            "missing": True,
        }


def test_task_of_a_killed_worker_runs_again_and_nothing_is_lost(
    ctx: Context, tmp_path: Path
) -> None:
    pages = _pirate_pages(ctx, 3)
    (tmp_path / "stall_hook.py").write_text(STALL_HOOK)
    marker = tmp_path / "stalled.txt"
    marker.touch()
    log = tmp_path / "worker.log"

    def stalled(n: int) -> Callable[[], list[list[str]] | None]:
        def check() -> list[list[str]] | None:
            lines = [line.split() for line in marker.read_text().splitlines()]
            return lines if len(lines) >= n else None

        return check

    # The stalling worker keeps the default visibility timeout (1 h): nothing it holds
    # comes back on its own while the test runs, only through the mechanism under test.
    hooked = [*CELERY_WORKER, "--hostname", "stalling@%h", "-I", "stall_hook"]
    env = installation_env(
        ctx.endpoints, ctx.settings, PYTHONPATH=str(tmp_path), STALL_MARKER=str(marker)
    )
    with process_group(hooked, env, log, log.parent) as worker:
        for page_id in pages:
            tasks.enqueue_scan(page_id)
        [(_, pool_pid)] = wait_until(stalled(1), 40, "stalled scan", log)
        # Its pool process dies: the worker rejects the task back onto the queue
        # (reject_on_worker_lost), and a fresh pool process takes the next task.
        os.kill(int(pool_pid), signal.SIGKILL)
        lines = wait_until(stalled(2), 30, "second stalled scan", log)
        assert lines[1][1] != pool_pid
        # Then the whole worker dies, in the middle of a task it has not acknowledged.
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)

    # Every scan stalled, so no page is marked scanned; the interrupted ones have findings.
    scanned = {"scanned_as": {"$ne": None}}
    assert ctx.db.pages.count_documents(scanned) == 0
    before = _findings(ctx)
    stalled_pages = {ctx.db.pages.find_one({"url": line[0]})["_id"] for line in lines}
    assert stalled_pages == {page_id for page_id, _ in before}

    # The visibility timeout is the consumer's setting: the new worker (3 s, sweeping every
    # second) takes the dead worker's unacknowledged task back 3 s after its delivery.
    env = installation_env(ctx.endpoints, ctx.settings, COPYTRACK_VISIBILITY_TIMEOUT="3")
    with process_group([*CELERY_WORKER, "--hostname", "plain@%h"], env, log, log.parent):
        wait_until(
            lambda: ctx.db.pages.count_documents(scanned) == len(pages),
            40,
            "scan of every page",
            log,
        )
        wait_until(lambda: ctx.redis.hlen(ctx.keys.unacked) == 0, 10, "acknowledgement", log)

    after = _findings(ctx)
    # Exactly one finding per (page, master): each copy matched its own work only.
    assert sorted(after) == sorted(zip(pages, (1, 2, 3), strict=True))
    for key, old in before.items():
        assert after[key]["first_seen"] == old["first_seen"]
        assert after[key]["last_seen"] > old["last_seen"]  # written again by the rerun
    assert ctx.redis.llen(ctx.keys.queue("scan")) == 0


def _overdue(ctx: Context, page_ids: list[ObjectId], seconds: float) -> None:
    """As if the pages had been stored (and their scans queued) ``seconds`` ago."""
    when = datetime.now(UTC) - timedelta(seconds=seconds)
    ctx.db.pages.update_many({"_id": {"$in": page_ids}}, {"$set": {"fetched_at": when}})


def test_lost_scans_are_queued_again_and_only_those(ctx: Context) -> None:
    lost, queued, held = _pirate_pages(ctx, 3)
    timeout = ctx.settings.visibility_timeout
    # A scan queued just now is on its way, however long the queue: nothing is lost yet.
    _overdue(ctx, [lost, queued, held], timeout / 2)
    assert tasks.requeue_lost_scans(ctx) == []

    # A worker holds one scan (delivered, not acknowledged); another waits in the queue.
    ctx.redis.delete(ctx.keys.scan_sweep)
    _overdue(ctx, [lost, queued, held], timeout + 60)
    tasks.enqueue_scan(held)
    # (The "worker" stays connected: kombu puts what a closed channel held back in the queue.)
    with app.connection_for_read() as connection:
        delivered = connection.default_channel.basic_get("scan", no_ack=False)
        assert delivered is not None and delivered.payload[0] == [str(held)]
        tasks.enqueue_scan(queued)
        # While a scan waits in the queue, the overdue pages may be behind it.
        assert tasks.requeue_lost_scans(ctx) == []
        assert ctx.redis.llen(ctx.keys.queue("scan")) == 1
        ctx.redis.delete(ctx.keys.queue("scan"), ctx.keys.scan_sweep)  # that scan was lost too

        assert sorted(tasks.requeue_lost_scans(ctx)) == sorted([lost, queued])
        assert ctx.redis.llen(ctx.keys.queue("scan")) == 2
        # One look a sweep interval, whichever worker makes it.
        ctx.redis.delete(ctx.keys.queue("scan"))
        assert tasks.requeue_lost_scans(ctx) == []
        delivered.ack()


def test_kombu_records_a_held_scan_in_the_shape_delivered_scans_reads(ctx: Context) -> None:
    """kombu's unacked hash is no public interface: this fails, naming kombu's version and
    the entry, when a kombu release changes its shape."""
    page = ObjectId()
    tasks.enqueue_scan(page)
    with app.connection_for_read() as connection:
        delivered = connection.default_channel.basic_get("scan", no_ack=False)
        assert delivered is not None
        [entry] = ctx.redis.hvals(ctx.keys.unacked)
        try:
            held = tasks.delivered_scans(ctx)
        except tasks.UnknownDeliveryRecord as err:
            pytest.fail(str(err))
        assert held == {page}, (
            f"kombu {kombu.__version__} records a held scan as {entry[:300]!r}, which "
            "tracker.tasks.delivered_scans does not read: update it"
        )
        delivered.ack()


def test_a_delivery_record_of_another_shape_is_named_not_misread(ctx: Context) -> None:
    ctx.redis.hset(ctx.keys.unacked, "tag", json.dumps({"payload": "a future kombu's record"}))
    with pytest.raises(tasks.UnknownDeliveryRecord, match=rf"kombu {kombu.__version__} .*future"):
        tasks.delivered_scans(ctx)


def test_a_scan_past_its_time_limits_fails_with_its_reason_and_the_worker_goes_on(
    ctx: Context, tmp_path: Path
) -> None:
    warm, slow, stubborn, quick = (
        store_page(ctx, PageInput(url=f"http://pirate.example/{name}", text=text))[0]
        for name, text in zip(
            ("warm", "slow", "slow-stubborn", "quick"), texts("zh_news", 4), strict=True
        )
    )
    (tmp_path / "time_limit_hook.py").write_text(TIME_LIMIT_HOOK)
    log = tmp_path / "worker.log"
    hooked = [*CELERY_WORKER, "--hostname", "limited@%h", "-I", "time_limit_hook"]
    env = installation_env(ctx.endpoints, ctx.settings, PYTHONPATH=str(tmp_path))

    def failure(page_id: ObjectId) -> str | None:
        page = ctx.db.pages.find_one({"_id": page_id}) or {}
        return page.get("scan_failed", {}).get("reason")

    def scanned(page_id: ObjectId) -> int:
        return ctx.db.pages.count_documents({"_id": page_id, "scanned_at": {"$exists": 1}})

    def scan(page_id: ObjectId) -> None:
        tasks.scan_page.apply_async((str(page_id),), soft_time_limit=2, time_limit=5)

    with process_group(hooked, env, log, log.parent):
        # The pool process's first scan imports the extraction's modules: within the limits.
        tasks.enqueue_scan(warm)
        wait_until(lambda: scanned(warm), 60, "the first scan", log)
        for page_id in (slow, stubborn, quick):
            scan(page_id)
        reason = wait_until(lambda: failure(slow), 30, "the soft limit's failure", log)
        assert reason == "stopped at its soft time limit of 2 s"
        # Ignoring the soft limit, the pool process is killed: the worker records it.
        reason = wait_until(lambda: failure(stubborn), 30, "the hard limit's failure", log)
        assert reason == "killed at its hard time limit of 5 s"
        # A new pool process scans the next page; nothing is left queued or held.
        wait_until(lambda: scanned(quick), 60, "the scan after the killed one", log)
        wait_until(lambda: ctx.redis.hlen(ctx.keys.unacked) == 0, 10, "acknowledgement", log)
    assert ctx.redis.llen(ctx.keys.queue("scan")) == 0
    # The worker named its compiled loops when it started.
    assert "compiled loops: fingerprinter._sliding, " in log.read_text()
    for page_id in (slow, stubborn):
        page = ctx.db.pages.find_one({"_id": page_id})
        # Not due any more: the lost-scan sweep does not queue it again and again, while
        # `copytrack rescan` (pages never scanned with these parameters) takes it.
        assert "scan_due" not in page and "scanned_at" not in page
    _overdue(ctx, [slow, stubborn], ctx.settings.visibility_timeout + 60)
    assert tasks.requeue_lost_scans(ctx) == []


@pytest.mark.slow
def test_a_worker_queues_a_lost_scan_again(ctx: Context, tmp_path: Path) -> None:
    """A page stored long ago whose scan never reached the queue (a process killed between
    the two, or a broker killed as it handed the task over) is scanned by the workers."""
    [page_id] = _pirate_pages(ctx, 1)
    _overdue(ctx, [page_id], 3600)
    log = tmp_path / "worker.log"
    env = installation_env(ctx.endpoints, ctx.settings, COPYTRACK_VISIBILITY_TIMEOUT="20")
    worker = [*COPYTRACK_COMMAND, "worker", "--queues", "scan", "--concurrency", "1"]
    with process_group(worker, env, log, log.parent):
        wait_until(
            lambda: ctx.db.pages.find_one({"_id": page_id, "scanned_at": {"$ne": None}}),
            30,
            "scan of the page whose scan was lost",
            log,
        )
    assert _findings(ctx).keys() == {(page_id, 1)}
    assert "queued again the scans of 1 pages" in log.read_text()


def test_a_sweep_that_finds_no_server_logs_a_line_and_carries_on(
    endpoints: Endpoints, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    """On the worker's timer, a look for lost scans while Redis is down costs one warning
    (no traceback, no dead timer) and is tried again at the next interval."""
    monkeypatch.setenv("COPYTRACK_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("COPYTRACK_MONGO_URL", endpoints.mongo_url)
    monkeypatch.setenv("COPYTRACK_REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens
    sweep = tasks.LostScanSweep(parent=None)
    with caplog.at_level("WARNING", logger="tracker.tasks"):
        sweep.sweep()
        sweep.sweep()
    lines = [r.getMessage() for r in caplog.records if r.name == "tracker.tasks"]
    assert len(lines) == 2 and all(line.startswith("looking for lost scans: ") for line in lines)
    assert all(r.exc_info is None for r in caplog.records)
    assert sweep.ctx is None
