"""Fault tolerance with real processes: servers restarted or wiped under a working installation.

Every test runs on embedded servers of its own (a fresh data dir), since restarting the
session's servers would break the other tests, and feeds tasks to the queue through a
Celery app of its own for the same reason: the module-level app of tracker.celery_app keeps
its first broker. Workers are `copytrack worker` subprocesses in their own process group.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bson import ObjectId
from celery import Celery

from copytrack.commands.ops import COPYTRACK_COMMAND
from testbed import attacks
from tests.corpus import texts
from tests.processes import installation_env, process_group, wait_until
from tracker.celery_app import ROUTES
from tracker.config import Settings
from tracker.context import Context, open_context
from tracker.library import Work, add_work
from tracker.matcher import match_text
from tracker.pages import PageInput, store_page
from tracker.servers import (
    MONGO,
    STATE_FILE,
    VALKEY,
    Endpoints,
    ensure_servers,
    server_status,
)

pytestmark = pytest.mark.timeout(150)

# Seconds SecantusDB stays down once it has exited: beyond pymongo's 10 s server selection,
# so the scan under way fails and Celery retries it.
MONGO_DOWN = 11.0


# `copytrack worker` on the scan queue.
SCAN_WORKER = [*COPYTRACK_COMMAND, "worker", "--queues", "scan", "--concurrency", "1"]


def _env(endpoints: Endpoints, settings: Settings) -> dict[str, str]:
    # A safety net: a task whose acknowledgement got lost comes back within the test.
    return installation_env(endpoints, settings, COPYTRACK_VISIBILITY_TIMEOUT="20")


def _send_scans(redis_url: str, page_ids: list[ObjectId]) -> None:
    """Queue scans as tracker.tasks.enqueue_scan does (same task name, same route)."""
    sender = Celery("fault-tests", broker=redis_url, set_as_current=False)
    sender.conf.task_routes = ROUTES
    try:
        for page_id in page_ids:
            sender.send_task("tracker.scan_page", args=[str(page_id)])
    finally:
        sender.close()


def _copies(works: list[str], per_work: int, seed: int = 3) -> list[str]:
    """``per_work`` pirated copies of each work: ads sprinkled in, each copy differently."""
    rng = random.Random(seed)
    return [attacks.insert_ads(attacks.reflow(w), rng) for _ in range(per_work) for w in works]


def _store(ctx: Context, pages: list[str], prefix: str) -> list[ObjectId]:
    return [
        store_page(ctx, PageInput(url=f"http://{prefix}.example/{n}", text=text))[0]
        for n, text in enumerate(pages)
    ]


def _findings(ctx: Context) -> set[tuple[ObjectId, int]]:
    docs = list(ctx.db.findings.find({}, {"page_id": 1, "master_id": 1}))
    found = {(d["page_id"], d["master_id"]) for d in docs}
    assert len(found) == len(docs), "duplicate findings"
    return found


def _index_content(ctx: Context) -> dict[bytes, Any]:
    """Every key of the index (prefix ``ct:ix``) with its value: what must survive."""
    content: dict[bytes, Any] = {}
    for key in ctx.redis.scan_iter(match=b"ct:ix*", count=1000):
        is_hash = ctx.redis.type(key) == b"hash"
        content[key] = ctx.redis.hgetall(key) if is_hash else ctx.redis.get(key)
    return content


def _scanned(ctx: Context) -> int:
    return ctx.db.pages.count_documents({"scanned_at": {"$ne": None}})


def _server(settings: Settings, name: str) -> Any:
    return next((s for s in server_status(settings.data_dir) if s.name == name), None)


def _restart_valkey(settings: Settings, sig: signal.Signals) -> Endpoints:
    """Signal the embedded Valkey, wait for it to exit, start it again on its data (its AOF)."""
    os.kill(_server(settings, VALKEY).pid, sig)
    wait_until(lambda: not _server(settings, VALKEY).alive, 20, "valkey exit")
    return ensure_servers(settings)


def test_redis_restart_keeps_the_index_and_the_queued_tasks(own: Settings, tmp_path: Path) -> None:
    works = texts("zh_news", 4)
    ctx = open_context(own)
    try:
        for n, text in enumerate(works[:3]):
            add_work(ctx, Work(text=text, external_id=f"news-{n}"))
        copies = _copies(works[:3], 1)
        pages = _store(ctx, copies + texts("zh_news", 10)[5:8], "pirate")
        before = [match_text(ctx, text) for text in copies]
        index = _index_content(ctx)
        _send_scans(ctx.endpoints.redis_url, pages[:3])
    finally:
        ctx.close()

    # SIGTERM: Valkey writes out its AOF and exits; the restarted one reads it back.
    _restart_valkey(own, signal.SIGTERM)
    ctx = open_context(own)
    try:
        assert _index_content(ctx) == index
        assert [match_text(ctx, text) for text in copies] == before
        assert ctx.redis.llen("scan") == 3
        # Writes at least a second old survive even a crash (appendfsync everysec).
        add_work(ctx, Work(text=works[3], external_id="news-3"))
        [copy_of_4th] = _copies(works[3:], 1)
        pages += _store(ctx, [copy_of_4th], "late")
        _send_scans(ctx.endpoints.redis_url, pages[3:])
        grown = _index_content(ctx)
        time.sleep(1.5)
    finally:
        ctx.close()

    endpoints = _restart_valkey(own, signal.SIGKILL)
    ctx = open_context(own)
    log = tmp_path / "worker.log"
    try:
        assert _index_content(ctx) == grown
        assert ctx.redis.llen("scan") == len(pages) == 7
        with process_group(SCAN_WORKER, _env(endpoints, own), log):
            wait_until(lambda: _scanned(ctx) == len(pages), 60, "scan of every page", log)
            wait_until(lambda: ctx.redis.hlen("unacked") == 0, 10, "acknowledgements", log)
        masters = {m["external_id"]: m["_id"] for m in ctx.db.masters.find({}, {"external_id": 1})}
        copied = [masters[f"news-{n}"] for n in range(4)]
        assert _findings(ctx) == set(zip([*pages[:3], pages[6]], copied, strict=True))
        assert ctx.redis.llen("scan") == 0
    finally:
        ctx.close()


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
    except OSError:
        return False
    return True


def _stop_secantus(pid: int, port: int, gone: Callable[[], bool]) -> None:
    """SIGTERM SecantusDB and wait until it has exited (SIGKILL after 30 s).

    SecantusDB now and then misses a SIGTERM (its main thread, which runs the handler,
    sleeps in a wait without timeout), so the signal is sent again, every second, while the
    server still accepts connections: it closes its socket first thing when it stops. Each
    connection also wakes its accept thread, which would otherwise hold the exit back 2 s.
    """
    deadline = time.monotonic() + 30
    sent = -math.inf
    while not gone():
        now = time.monotonic()
        if now > deadline:
            os.kill(pid, signal.SIGKILL)
            wait_until(gone, 10, "SecantusDB killed")
            return
        if _accepts(port) and now - sent > 1:
            os.kill(pid, signal.SIGTERM)
            sent = now
        time.sleep(0.1)


def _restart_mongo_on_its_port(settings: Settings, down: float) -> subprocess.Popen[bytes]:
    """Stop the embedded SecantusDB, keep it down ``down`` more seconds, start it on its port.

    The same address, as a restarted production server keeps, is what lets running clients
    reconnect (ensure_servers would pick a new port). The command comes from the state file.
    """
    entry = json.loads((settings.data_dir / STATE_FILE).read_text())["servers"][MONGO]
    _stop_secantus(entry["pid"], entry["port"], lambda: not _server(settings, MONGO).alive)
    time.sleep(down)
    with open(entry["log"], "ab") as out:
        return subprocess.Popen(
            entry["cmd"],
            cwd=settings.data_dir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def test_mongo_restart_worker_and_matcher_reconnect_and_no_scan_is_lost(
    own: Settings, tmp_path: Path
) -> None:
    works = texts("zh_news", 3)
    ctx = open_context(own)
    log = tmp_path / "worker.log"
    restarted: subprocess.Popen[bytes] | None = None
    port = _server(own, MONGO).port
    try:
        for n, text in enumerate(works):
            add_work(ctx, Work(text=text, external_id=f"news-{n}"))
        # Enough work that the worker is still busy when the server has stopped (a few s).
        copies = _copies(works, 100)
        pages = _store(ctx, copies + texts("zh_news", 70)[10:], "pirate")
        expected = {(page, n % 3 + 1) for n, page in enumerate(pages[: len(copies)])}
        before = [match_text(ctx, text) for text in copies[:3]]

        with process_group(SCAN_WORKER, _env(ctx.endpoints, own), log):
            _send_scans(ctx.endpoints.redis_url, pages)
            wait_until(lambda: _scanned(ctx) >= 1, 60, "first scan", log)
            restarted = _restart_mongo_on_its_port(own, MONGO_DOWN)
            assert _scanned(ctx) < len(pages), "every scan ran before the restart"
            # The matcher's client (this process) finds the server again on its own.
            assert [match_text(ctx, text) for text in copies[:3]] == before
            wait_until(lambda: _scanned(ctx) == len(pages), 90, "scan of every page", log)
            wait_until(lambda: ctx.redis.hlen("unacked") == 0, 10, "acknowledgements", log)

        # Scans that met the server down failed and were retried by Celery.
        assert "Retry in" in log.read_text(errors="replace")
        assert _findings(ctx) == expected
        assert ctx.redis.llen("scan") == 0
    finally:
        ctx.close()
        if restarted is not None:
            _stop_secantus(restarted.pid, port, lambda: restarted.poll() is not None)


def test_reindex_after_flushall_restores_identical_results(own: Settings) -> None:
    library = texts("zh_news", 20)
    unrelated = texts("zh_news", 103)[100:]
    rng = random.Random(5)
    suspects = [
        *(attacks.combine(attacks.reflow(text), rng) for text in library[:4]),
        *(attacks.excerpt(text, rng, fraction=0.5, filler=unrelated[0]) for text in library[4:6]),
        *unrelated,
    ]
    ctx = open_context(own)
    try:
        for n, text in enumerate(library):
            add_work(ctx, Work(text=text, external_id=f"news-{n}"))
        index = _index_content(ctx)
        before = [match_text(ctx, text) for text in suspects]
        assert [len(found) for found in before] == [1] * 6 + [0] * 3

        ctx.redis.flushall()
        assert ctx.index.stats().postings == 0
        done = subprocess.run(
            [*COPYTRACK_COMMAND, "reindex"],
            env=_env(ctx.endpoints, own),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "reindexed 20 masters" in done.stdout

        assert _index_content(ctx) == index
        assert [match_text(ctx, text) for text in suspects] == before
    finally:
        ctx.close()
