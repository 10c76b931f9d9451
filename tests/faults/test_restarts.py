"""Servers killed, restarted or wiped under a working installation.

Every test runs on embedded servers of its own (a fresh data dir), since killing the
session's servers would break the other tests, and feeds tasks to the queue through a
Celery app of its own for the same reason. Workers are `copytrack worker` subprocesses in
their own process group; those of an embedded installation get only its data dir, as a
user's do, and follow a server that died through it.
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from copytrack.commands.ops import COPYTRACK_COMMAND
from testbed import attacks
from tests.corpus import texts
from tests.faults.helpers import (
    SCAN_WORKER,
    embedded_env,
    findings_of,
    kill_server,
    pirate_copies,
    scanned,
    send_scans,
    server,
    store_pages,
)
from tests.processes import installation_env, process_group, wait_until
from tracker.context import Context, reconnected
from tracker.core.config import Settings
from tracker.index.snapshot import SnapshotIndex
from tracker.masters.durability import wait_durable
from tracker.masters.generation import open_ready
from tracker.masters.library import Work, add_work, fingerprint_values
from tracker.matching.matcher import match_text
from tracker.runtime.servers import MONGO, VALKEY, ensure_servers

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
#: A task whose acknowledgement was lost with a killed server comes back within the test.
VISIBILITY = "20"


def _index_content(ctx: Context) -> Any:
    """What of the index must survive. Blocks: every key (under ``ctx.keys.index``) with its
    value; the generation is left out: it names the build, and a rebuild is a new one by
    design; so are a shard's ``born`` and ``writes``, which say when and how often it
    changed. A block is a set of fixed-size records in the order they were added: compared
    as a set. A snapshot (named anew by each compaction): every posting the index gives
    for every fingerprint of every work in the library."""
    if isinstance(ctx.index, SnapshotIndex):
        postings = set()
        for master in ctx.db.masters.find({}, {"text": 1}):
            found = ctx.index.postings(fingerprint_values(ctx, master["text"]).values)
            postings |= set(zip(found.master.tolist(), found.place.tolist(),
                                found.exact.tolist(), strict=True))  # fmt: skip
        return sorted(postings)
    content: dict[bytes, Any] = {}
    record = ctx.index.record_bytes
    for key in ctx.redis.scan_iter(match=f"{ctx.keys.index}*", count=1000):
        if ctx.redis.type(key) == b"hash":
            content[key] = ctx.redis.hgetall(key)
            for bookkeeping in (b"generation", b"born", b"writes"):
                content[key].pop(bookkeeping, None)
        else:
            value = ctx.redis.get(key)
            content[key] = sorted(value[i : i + record] for i in range(0, len(value), record))
    return content


def _library(ctx: Context, works: list[str]) -> list[int]:
    return [add_work(ctx, Work(text=t, external_id=f"news-{n}"))[0].master_id
            for n, t in enumerate(works)]  # fmt: skip


def _copies_stored(ctx: Context, per_work: int) -> tuple[list[str], list, set]:
    """Three works added, per_work pages copying each and 30 unrelated ones stored: the
    copies, every page, and the findings their scans are to make."""
    works = texts("zh_news", 3)
    masters = _library(ctx, works)
    copies = pirate_copies(works, per_work)
    pages = store_pages(ctx, copies + texts("zh_news", 40)[10:], "pirate")
    return copies, pages, {(page, masters[n % 3]) for n, page in enumerate(pages[: len(copies)])}


def test_killed_servers_come_back_on_their_ports(own: Settings) -> None:
    before = {name: server(own, name) for name in (MONGO, VALKEY)}
    for name in before:
        kill_server(own, name)
    endpoints = ensure_servers(own)
    after = {name: server(own, name) for name in (MONGO, VALKEY)}
    for name in before:
        assert after[name].answering and after[name].pid != before[name].pid
        # The same address: every process still holding the old URL reconnects by itself.
        assert after[name].port == before[name].port and after[name].url == before[name].url
    assert endpoints.redis_url == before[VALKEY].url


@pytest.mark.parametrize("snapshot", [False, True], ids=["blocks", "snapshot"])
def test_redis_restart_keeps_the_index_and_the_queued_tasks(
    own: Settings, tmp_path: Path, snapshot: bool
) -> None:
    own = replace(own, index_snapshot=snapshot)
    works = texts("zh_news", 4)
    ctx = open_ready(own)
    try:
        _library(ctx, works[:3])
        copies = pirate_copies(works[:3], 1)
        pages = store_pages(ctx, copies + texts("zh_news", 10)[5:8], "pirate")
        before = [match_text(ctx, text) for text in copies]
        index = _index_content(ctx)
        assert index  # something to lose
        send_scans(ctx.endpoints.redis_url, pages[:3])
    finally:
        ctx.close()

    # SIGTERM: Valkey writes out its AOF and exits; the restarted one reads it back.
    kill_server(own, VALKEY, signal.SIGTERM)
    ensure_servers(own)
    ctx = open_ready(own)
    try:
        assert _index_content(ctx) == index
        assert [match_text(ctx, text) for text in copies] == before
        assert ctx.redis.llen(ctx.keys.queue("scan")) == 3
        add_work(ctx, Work(text=works[3], external_id="news-3"))
        [copy_of_4th] = pirate_copies(works[3:], 1)
        pages += store_pages(ctx, [copy_of_4th], "late")
        send_scans(ctx.endpoints.redis_url, pages[3:])
        grown = _index_content(ctx)
        # What a command reports after this barrier survives even a crash.
        wait_durable(ctx)
    finally:
        ctx.close()

    kill_server(own, VALKEY)
    endpoints = ensure_servers(own)
    ctx = open_ready(own)
    log = tmp_path / "worker.log"
    try:
        assert _index_content(ctx) == grown
        assert ctx.redis.llen(ctx.keys.queue("scan")) == len(pages) == 7
        env = installation_env(endpoints, own, COPYTRACK_VISIBILITY_TIMEOUT=VISIBILITY)
        with process_group(SCAN_WORKER, env, log):
            wait_until(lambda: scanned(ctx) == len(pages), 60, "scan of every page", log)
            wait_until(lambda: ctx.redis.hlen(ctx.keys.unacked) == 0, 10, "acknowledgements", log)
        masters = {m["external_id"]: m["_id"] for m in ctx.db.masters.find({}, {"external_id": 1})}
        copied = [masters[f"news-{n}"] for n in range(4)]
        assert findings_of(ctx) == set(zip([*pages[:3], pages[6]], copied, strict=True))
        assert ctx.redis.llen(ctx.keys.queue("scan")) == 0
    finally:
        ctx.close()


@pytest.mark.parametrize("victim", [VALKEY, MONGO])
def test_a_worker_carries_on_when_a_server_is_killed(
    own: Settings, tmp_path: Path, victim: str
) -> None:
    """kill -9 of Valkey or SecantusDB under a busy worker, and no command run afterwards:
    the worker starts the server again (its broker connection, or a task's retry, finds it
    dead), on its port, and every queued scan is done once."""
    ctx = open_ready(own)
    log = tmp_path / "worker.log"
    try:
        copies, pages, expected = _copies_stored(ctx, 40)
        before = [match_text(ctx, text) for text in copies[:3]]
        send_scans(ctx.endpoints.redis_url, pages)
        wait_durable(ctx)  # the queued scans are on disk: the kill cannot take them
        port = server(own, victim).port

        env = embedded_env(own, COPYTRACK_VISIBILITY_TIMEOUT=VISIBILITY)
        with process_group(SCAN_WORKER, env, log):
            wait_until(lambda: scanned(ctx) >= 1, 60, "first scan", log)
            assert scanned(ctx) < len(pages) - 10, "the scans ran too fast to be interrupted"
            kill_server(own, victim)
            wait_until(lambda: server(own, victim).answering, 60, f"{victim} back", log)
            assert server(own, victim).port == port
            # This process's clients find the server again on its own.
            assert [match_text(ctx, text) for text in copies[:3]] == before
            wait_until(lambda: scanned(ctx) == len(pages), 120, "scan of every page", log)
            wait_until(lambda: ctx.redis.hlen(ctx.keys.unacked) == 0, 60, "acknowledgements", log)
        assert findings_of(ctx) == expected
        assert ctx.redis.llen(ctx.keys.queue("scan")) == 0
    finally:
        ctx.close()


def test_a_worker_stopped_by_sigterm_mid_scan_leaves_every_scan_done_once(
    own: Settings, tmp_path: Path
) -> None:
    """SIGTERM to a busy worker (as `docker compose stop` or systemd sends it), not kill -9:
    it ends within seconds, starts no server on the way out, and the scans it had taken
    but not done go back to the queue; the next worker does each once."""
    ctx = open_ready(own)
    log = tmp_path / "worker.log"
    try:
        _, pages, expected = _copies_stored(ctx, 30)
        send_scans(ctx.endpoints.redis_url, pages)
        servers = {name: server(own, name).pid for name in (MONGO, VALKEY)}

        env = embedded_env(own, COPYTRACK_VISIBILITY_TIMEOUT=VISIBILITY)
        with process_group(SCAN_WORKER, env, log) as worker:
            wait_until(lambda: scanned(ctx) >= 1, 60, "first scan", log)
            worker.send_signal(signal.SIGTERM)
            # ~2 s on a quiet machine; more than 30 once, with six test workers on two cores.
            wait_until(lambda: worker.poll() is not None, 60, "the worker's exit", log)
            assert worker.returncode == 0, log.read_text(errors="replace")[-2000:]
        stopped_at = scanned(ctx)
        assert stopped_at < len(pages), "the scans ran too fast to be interrupted"
        assert {name: server(own, name).pid for name in servers} == servers
        assert findings_of(ctx) <= expected

        with process_group(SCAN_WORKER, env, log):
            wait_until(lambda: scanned(ctx) == len(pages), 120, "scan of every page", log)
            wait_until(lambda: ctx.redis.hlen(ctx.keys.unacked) == 0, 60, "acknowledgements", log)
        assert findings_of(ctx) == expected  # each once (findings_of refuses a twin)
        assert ctx.redis.llen(ctx.keys.queue("scan")) == 0
    finally:
        ctx.close()


@pytest.mark.parametrize("snapshot", [False, True], ids=["blocks", "snapshot"])
def test_reindex_after_flushall_restores_identical_results(own: Settings, snapshot: bool) -> None:
    own = replace(own, index_snapshot=snapshot)
    library = texts("zh_news", 20)
    unrelated = texts("zh_news", 103)[100:]
    rng = random.Random(5)
    suspects = [
        *(attacks.combine(attacks.reflow(text), rng) for text in library[:4]),
        *(attacks.excerpt(text, rng, fraction=0.5, filler=unrelated[0]) for text in library[4:6]),
        *unrelated,
    ]
    ctx = open_ready(own)
    try:
        _library(ctx, library)
        index = _index_content(ctx)
        assert index  # something to lose
        before = [match_text(ctx, text) for text in suspects]
        assert [len(found) for found in before] == [1] * 6 + [0] * 3

        ctx.redis.flushall()
        assert ctx.index.stats().postings == 0
        done = subprocess.run(
            [*COPYTRACK_COMMAND, "reindex"],
            env=embedded_env(own),
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


def test_a_server_moved_to_another_port_is_followed(own: Settings) -> None:
    """When its port was taken while it was down, a server comes back elsewhere, and a
    long-running process's context follows it (`tracker.context.reconnected`)."""
    ctx = open_ready(own)
    try:
        port = kill_server(own, VALKEY)
        with socket.socket() as squatter:
            # Its old connections may still be in TIME_WAIT on that port.
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            squatter.bind(("127.0.0.1", port))
            squatter.listen()
            moved = reconnected(ctx)
        assert moved is not ctx and server(own, VALKEY).port != port
        assert moved.endpoints.redis_url == server(own, VALKEY).url
        assert moved.redis.ping()
        moved.close()
    finally:
        ctx.close()
