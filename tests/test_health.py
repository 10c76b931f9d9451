"""tracker.monitoring.health: a real worker subprocess on the session's servers, and servers
that are down."""

from __future__ import annotations

import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pymongo
import pytest
import redis

from tests.corpus import texts
from tests.processes import wait_until, worker_process
from tracker import tasks
from tracker.celery_app import QUEUES, app, configure
from tracker.context import Context
from tracker.core.times import iso
from tracker.index import MemoryIndex
from tracker.masters.library import Work, add_work
from tracker.monitoring.health import LAST_SCAN_WINDOWS, health, server_health
from tracker.monitoring.loops import COMPILED_LOOPS
from tracker.runtime.servers import Endpoints
from tracker.scanning.pages import PageInput, store_page


def test_health_follows_a_scan_from_the_queue_to_a_worker(ctx: Context, tmp_path: Path) -> None:
    configure(app, ctx.endpoints, ctx.settings)
    [text] = texts("zh_news", 1)
    add_work(ctx, Work(text=text, external_id="news-0"))
    page_id, _ = store_page(ctx, PageInput(url="http://pirate.example/0", text=text))
    tasks.enqueue_scan(page_id)

    waiting = health(ctx, timeout=0.5)
    assert waiting["ok"] is True
    for server in waiting["servers"].values():
        assert server["ok"] is True and server["latency_ms"] >= 0
    assert waiting["queues"] == {**dict.fromkeys(QUEUES, 0), "scan": 1}
    assert waiting["in_progress"] == 0
    assert waiting["workers"] == [] and waiting["last_scan_at"] is None
    assert waiting["problems"] == ["no worker answered a ping within 0.5 s"]
    # The load balancers' probe: the servers alone, without a worker ping (which would
    # wait out its whole timeout, as above: no worker answers).
    start = time.monotonic()
    servers = server_health(ctx, timeout=10.0)
    assert time.monotonic() - start < 5.0
    assert {name: s["ok"] for name, s in servers.items()} == {"mongo": True, "redis": True}

    log = tmp_path / "worker.log"
    with worker_process(ctx, log) as worker:
        wait_until(
            lambda: ctx.db.pages.find_one({"_id": page_id, "scanned_at": {"$ne": None}}),
            60,
            "scan by the worker",
            log,
        )
        done = health(ctx, timeout=1.0)

    assert done["ok"] is True and done["problems"] == []
    assert done["workers"] == [f"copytrack-{worker.pid}@{socket.gethostname()}"]
    assert done["queues"] == dict.fromkeys(QUEUES, 0)
    scanned_at = ctx.db.pages.find_one({"_id": page_id})["scanned_at"]
    assert done["last_scan_at"].startswith(scanned_at.strftime("%Y-%m-%dT%H:%M:%S"))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_servers_down_are_reported_within_the_timeout(ctx: Context) -> None:
    port = _closed_port()
    endpoints = Endpoints(
        mongo_url=f"mongodb://127.0.0.1:{port}/?directConnection=true",
        redis_url=f"redis://127.0.0.1:{port}/0",
        embedded=False,
    )
    mongo: pymongo.MongoClient[dict] = pymongo.MongoClient(endpoints.mongo_url)
    down = Context(
        ctx.settings, endpoints, mongo["copytrack"], redis.Redis.from_url(endpoints.redis_url),
        MemoryIndex(),
    )  # fmt: skip
    try:
        start = time.monotonic()
        report = health(down, timeout=0.5)
        elapsed = time.monotonic() - start
    finally:
        down.close()
    assert elapsed < 3.0
    assert report["ok"] is False
    assert {name: s["ok"] for name, s in report["servers"].items()} == {
        "mongo": False,
        "redis": False,
    }
    assert report["queues"] is None and report["workers"] is None
    assert report["last_scan_at"] is None
    assert [p.split(":")[0] for p in report["problems"]] == [
        "mongo does not answer",
        "redis does not answer",
    ]


def test_the_report_names_the_compiled_loops_and_a_fallback_is_a_problem(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = health(ctx)
    assert report["compiled_loops"] == dict.fromkeys(COMPILED_LOOPS, True)
    assert not any("not compiled" in problem for problem in report["problems"])
    # As where the wheel was built without a C compiler: slower, still serving.
    slow = {**dict.fromkeys(COMPILED_LOOPS, True), "fingerprinter._align": False}
    monkeypatch.setattr("tracker.monitoring.health.compiled_loops", lambda: slow)
    report = health(ctx)
    assert report["compiled_loops"]["fingerprinter._align"] is False
    [problem] = [p for p in report["problems"] if "not compiled" in p]
    assert "fingerprinter._align" in problem and "numpy fallbacks" in problem
    assert report["ok"] == (
        report["index"]["ok"] and all(s["ok"] for s in report["servers"].values())
    )


def test_pages_waiting_too_long_for_their_scan_are_a_problem(ctx: Context) -> None:
    """A page stored over two visibility timeouts ago and still unscanned means no worker
    consumes the scan queue (or the workers cannot keep up): the report counts such pages
    and says what to check; a page stored just now is not overdue."""
    [text] = texts("zh_news", 1)
    old, _ = store_page(ctx, PageInput(url="http://pirate.example/old", text=text))
    store_page(ctx, PageInput(url="http://pirate.example/new", text=text))
    assert health(ctx, timeout=0.5)["scans_overdue"] == 0
    long_ago = datetime.now(UTC) - timedelta(seconds=2 * ctx.settings.visibility_timeout + 60)
    ctx.db.pages.update_one({"_id": old}, {"$set": {"fetched_at": long_ago}})

    report = health(ctx, timeout=0.5)
    assert report["scans_overdue"] == 1
    [overdue] = [p for p in report["problems"] if "wait for their scan" in p]
    assert overdue.startswith("1 page(s) stored over 2 h ago") and "copytrack worker" in overdue


def test_an_index_of_another_layout_is_a_problem_naming_the_reindex(ctx: Context) -> None:
    """After an upgrade that changes the index's layout every scan is refused: the report
    says so, and what to run, instead of all being well."""
    [text] = texts("zh_news", 1)
    add_work(ctx, Work(text=text, external_id="news-0"))
    assert health(ctx, timeout=0.5)["index"]["ok"] is True
    ctx.redis.hset(f"{ctx.index.prefix}:meta", "layout", "ix4:an older release's")

    report = health(ctx, timeout=0.5)
    assert report["ok"] is False and report["index"]["ok"] is False
    [problem] = [p for p in report["problems"] if p.startswith("index:")]
    assert "ix4:an older release's" in problem and "run `copytrack reindex`" in problem


def test_the_last_scan_is_the_latest_of_any_age(ctx: Context) -> None:
    """Looked for in windows back from now (`LAST_SCAN_WINDOWS`): the latest scan, a
    minute, days or years old, never an older one nor an unscanned page's time."""
    now = datetime.now(UTC)
    ages = [timedelta(days=900), timedelta(days=3), timedelta(minutes=1)]
    for n, age in enumerate(ages):
        ctx.db.pages.insert_one({"url": f"http://pirate.example/{n}", "scanned_at": now - age})
        later = {"url": "http://pirate.example/due", "fetched_at": now, "scan_due": True}
        ctx.db.pages.update_one({"url": later["url"]}, {"$set": later}, upsert=True)
        report = health(ctx, timeout=1.0)
        assert report["last_scan_at"] == iso(now - age), age
    assert LAST_SCAN_WINDOWS[-1] > timedelta(days=365 * 30)
