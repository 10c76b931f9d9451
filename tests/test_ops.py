"""`copytrack status | up | down` on real servers and real worker processes."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from bson import ObjectId
from click.testing import CliRunner
from pymongo.database import Database

from copytrack.cli import main
from copytrack.commands.ops import COPYTRACK_COMMAND
from fingerprinter import CHECK_BITS, DEFAULT_PARAMS
from tests.processes import clean_env, wait_until
from tracker.celery_app import sender_app
from tracker.core.config import Settings
from tracker.core.keys import RedisKeys
from tracker.index import RedisIndex
from tracker.runtime.processes import descendants, proc_stat, recorded, records_dir, stack_processes
from tracker.runtime.servers import free_port, server_status, stop_servers

pytestmark = pytest.mark.slow


def _status(data_dir: Path, *args: str, **extra: str) -> tuple[int, str]:
    """Exit status and output of `copytrack status ARGS`, run in this process."""
    # None unsets: only COPYTRACK_DATA_DIR (and extra) of copytrack's variables apply.
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("COPYTRACK_")}
    env.update(COPYTRACK_DATA_DIR=str(data_dir), **extra)
    result = CliRunner().invoke(main, ["status", *args], env=env)
    return result.exit_code, result.output


def _figure(output: str, label: str) -> int:
    """The number printed after ``label`` at the start of a status line."""
    match = re.search(rf"^\s+{label}\s+(\d+)", output, re.MULTILINE)
    assert match, f"no {label!r} line in:\n{output}"
    return int(match.group(1))


def _alive(pid: int) -> bool:
    """True for a live process; a zombie counts as gone."""
    stat = proc_stat(pid)
    return stat is not None and stat[0] != "Z"


def _tree(pid: int) -> set[int]:
    """pid and all its descendants."""
    return {pid, *descendants(pid)}


def _workers(data_dir: Path) -> list[str]:
    """Names of the workers that answer a ping on the data dir's embedded Redis."""
    urls = [s.url for s in server_status(data_dir) if s.name == "valkey" and s.answering]
    if not urls:
        return []
    probe = sender_app("probe", urls[0], Settings())
    try:
        return [name for reply in probe.control.ping(timeout=0.5) for name in reply]
    finally:
        probe.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """A data dir for a stack of its own; whatever still runs on it is killed afterwards."""
    path = tmp_path / "data"
    yield path
    for proc in stack_processes(path):
        for pid in _tree(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    stop_servers(path)


@contextlib.contextmanager
def _background(
    args: list[str], data_dir: Path, log: Path, **extra: str
) -> Iterator[subprocess.Popen[str]]:
    """`copytrack ARGS` in its own session, output to log; killed with its children if it
    still runs on the way out."""
    with open(log, "a") as err:
        proc = subprocess.Popen(
            [*COPYTRACK_COMMAND, *args],
            env=clean_env(COPYTRACK_DATA_DIR=str(data_dir), **extra),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:  # only then is proc.pid still certainly this process
            for pid in _tree(proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=10)


def _down(data_dir: Path) -> str:
    """Output of `copytrack down`, run as its own process as a user would."""
    done = subprocess.run(
        [*COPYTRACK_COMMAND, "down"],
        env=clean_env(COPYTRACK_DATA_DIR=str(data_dir)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _assert_all_stopped(pids: set[int], data_dir: Path) -> None:
    wait_until(lambda: not [p for p in pids if _alive(p)], 10, "exit of every process")
    assert server_status(data_dir) == []
    assert not list(records_dir(data_dir).glob("*.json"))


def test_status_reports_servers_queues_and_counts(
    embedded_data_dir: Path, redis_client: redis.Redis, mongo_db: Database[Any]
) -> None:
    mongo_db.masters.insert_many([{"_id": 1}, {"_id": 2}])
    scanned_at = datetime(2025, 1, 31, 12, 0, 0)
    mongo_db.pages.insert_many([{"url": f"http://x.example/{n}"} for n in range(3)])
    mongo_db.pages.update_one({}, {"$set": {"scanned_at": scanned_at}})
    mongo_db.findings.insert_one({"page_id": 1, "master_id": 1})
    keys = RedisKeys(Settings().redis_prefix)
    redis_client.rpush(keys.queue("scan"), b"t1", b"t2")
    redis_client.rpush(keys.queue("crawl"), b"t3")
    index = RedisIndex(redis_client, keys.index, DEFAULT_PARAMS.value_bits, CHECK_BITS)
    # As the library leaves it: the parameters it was built with, and the build recorded
    # on both sides (`tracker.masters.generation`).
    index.ensure_version(DEFAULT_PARAMS.version)
    index.add(1, [10, 20, 30])
    index.set_generation("build-1")
    mongo_db.index_state.insert_one({"_id": "index", "generation": "build-1", "postings": 3})
    try:
        # The session's embedded servers, found through their data dir.
        blocks = {"COPYTRACK_MONGO_DB": mongo_db.name, "COPYTRACK_INDEX_SNAPSHOT": "false"}
        code, output = _status(embedded_data_dir, **blocks)
        json_code, json_output = _status(embedded_data_dir, "--json", **blocks)
    finally:
        redis_client.flushdb()
    assert code == 0, output
    for server in server_status(embedded_data_dir):
        line = rf"{server.name}\s+pid {server.pid}\s+port {server.port}\s+answering"
        assert re.search(line, output), output
    queued = {q: _figure(output, q) for q in ("ingest", "scan", "crawl", "maintenance")}
    assert queued == {"ingest": 0, "scan": 2, "crawl": 1, "maintenance": 0}
    assert _figure(output, "in progress") == 0
    counts = {c: _figure(output, c) for c in ("masters", "pages", "findings", "postings")}
    assert counts == {"masters": 2, "pages": 3, "findings": 1, "postings": 3}
    assert re.search(r"^workers \(answered a ping\)\n  none$", output, re.MULTILINE), output
    assert re.search(r"^last scan\s+2025-01-31T12:00:00\+00:00$", output, re.MULTILINE), output
    assert re.search(r"^scans overdue\s+0$", output, re.MULTILINE), output
    assert re.search(r"^problems\n  no worker answered a ping within 1 s$", output, re.M), output

    # --json: the same figures, for scripts and monitoring.
    assert json_code == 0, json_output
    report = json.loads(json_output)
    assert report["ok"] is True and report["workers"] == []
    assert report["queues"] == {"ingest": 0, "scan": 2, "crawl": 1, "maintenance": 0}
    assert report["in_progress"] == 0
    assert report["last_scan_at"] == "2025-01-31T12:00:00+00:00"
    assert report["problems"] == ["no worker answered a ping within 1 s"]


def test_status_lists_open_crawls_and_flags_a_silent_one(
    embedded_data_dir: Path, redis_client: redis.Redis, mongo_db: Database[Any]
) -> None:
    now = datetime.now(UTC)
    busy, silent, done = ObjectId(), ObjectId(), ObjectId()
    mongo_db.runs.insert_many([
        {"_id": busy, "campaign": "news", "state": "running", "worker": "copytrack-7@crawler-1",
         "started_at": now - timedelta(minutes=5), "heartbeat_at": now, "pages": {"fetched": 12}},
        {"_id": silent, "campaign": "novels", "state": "running",
         "started_at": now - timedelta(hours=1), "heartbeat_at": now - timedelta(minutes=10)},
        {"_id": done, "campaign": "old", "state": "finished", "started_at": now - timedelta(days=1),
         "heartbeat_at": now - timedelta(days=1)},
    ])  # fmt: skip
    code, output = _status(embedded_data_dir, COPYTRACK_MONGO_DB=mongo_db.name)
    json_code, json_output = _status(embedded_data_dir, "--json", COPYTRACK_MONGO_DB=mongo_db.name)

    assert code == 0, output  # a silent crawl is a problem to look at, not an outage
    section = output.split("crawls (runs not yet ended)\n")[1].split("\nlast scan")[0]
    lines = section.splitlines()
    assert len(lines) == 2 and "old" not in section  # ended runs are not listed
    assert lines[0].split()[:5] == ["novels", "running", "run", str(silent), "0"]  # oldest first
    assert re.search(rf"news +running +run {busy} +12 pages .* on copytrack-7@crawler-1$", lines[1])
    silent_problem = f"crawl of campaign novels (run {silent}) has sent no heartbeat for"
    assert silent_problem in output

    report = json.loads(json_output)
    assert json_code == 0 and [c["run_id"] for c in report["crawls"]] == [str(silent), str(busy)]
    crawl = report["crawls"][1]
    assert crawl["pages_fetched"] == 12 and crawl["worker"] == "copytrack-7@crawler-1"
    assert crawl["heartbeat_age_s"] < 60 <= report["crawls"][0]["heartbeat_age_s"]
    assert [p for p in report["problems"] if p.startswith(silent_problem)]


def test_status_without_servers_says_so_and_starts_nothing(data_dir: Path) -> None:
    code, output = _status(data_dir)
    assert code == 1
    assert "mongo        not running" in output and "valkey       not running" in output
    not_running = "embedded mongo and valkey not running (`copytrack up` starts it)"
    assert f"problems\n  {not_running}" in output
    code, output = _status(data_dir, "--json")
    assert code == 1
    report = json.loads(output)
    assert report["ok"] is False and report["queues"] is None and report["workers"] is None
    assert report["problems"] == [not_running]
    assert server_status(data_dir) == []


def test_up_comes_up_and_sigint_stops_everything_it_started(data_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "up.log"
    with _background(["up", "-c", "1", "--admin-port", str(free_port())], data_dir, log) as up:
        wait_until(lambda: _workers(data_dir), 60, "worker answering a ping")
        code, output = _status(data_dir)
        assert code == 0, output
        assert len(re.findall(r"answering", output)) == 2
        assert re.search(rf"^\s+up\s+pid {up.pid}\s", output, re.MULTILINE), output
        assert re.search(r"^\s+worker\s+pid \d+", output, re.MULTILINE), output
        # The worker `up` started answers the health report's ping.
        assert re.search(r"^workers \(answered a ping\)\n  copytrack-\d+@", output, re.M), output
        assert re.search(r"^problems\n  none$", output, re.MULTILINE), output
        started = _tree(up.pid)
        assert len(started) >= 5  # up, two servers, the worker and its pool process

        up.send_signal(signal.SIGINT)
        out, _ = up.communicate(timeout=60)
        assert up.returncode == 0, log.read_text()
    assert "copytrack is up" in out
    assert all(name in out for name in ("mongo", "valkey", "worker", "scheduler", "admin")), out
    _assert_all_stopped(started, data_dir)


def test_down_stops_a_background_stack(data_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "stack.log"
    # Crawls dispatched to crawler workers: `up` starts one beside the scan worker.
    args = ["up", "-c", "1", "--admin-port", str(free_port())]
    with _background(args, data_dir, log, COPYTRACK_CRAWL_DISPATCH="queue") as up:
        wait_until(lambda: len(_workers(data_dir)) == 2, 60, "worker and crawler of up answering")
        # One more worker, on its own: it finds the servers `up` started in the data dir.
        with _background(["worker", "-c", "1"], data_dir, log) as extra:
            wait_until(lambda: len(_workers(data_dir)) == 3, 60, "third worker answering a ping")
            started = _tree(up.pid) | _tree(extra.pid)

            stopped = _down(data_dir)
            assert f"stopped worker (pid {extra.pid})" in stopped
            assert f"stopped up (pid {up.pid})" in stopped
            assert extra.wait(timeout=60) == 0, log.read_text()
        assert up.wait(timeout=60) == 0, log.read_text()
    _assert_all_stopped(started, data_dir)

    assert "nothing was running" in _down(data_dir)


def test_hosts_sharing_a_data_dir_see_only_their_own_processes(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Containers sharing the volume each have their own pids: `down` in one must never
    # signal a pid recorded by another.
    monkeypatch.setenv("COPYTRACK_DATA_DIR", str(data_dir))
    monkeypatch.setattr("socket.gethostname", lambda: "crawler-1")
    with recorded(data_dir, "worker"):
        [proc] = stack_processes(data_dir)
        assert (proc.pid, proc.role) == (os.getpid(), "worker")
        monkeypatch.setattr("socket.gethostname", lambda: "worker-1")
        assert stack_processes(data_dir) == []
        assert "nothing was running" in CliRunner().invoke(main, ["down"]).output
        monkeypatch.setattr("socket.gethostname", lambda: "crawler-1")
        assert [p.pid for p in stack_processes(data_dir)] == [os.getpid()]  # still recorded
