"""The embedded servers refuse a local process that lacks the data dir's secret.

The attack: any process of the machine connected to the embedded SecantusDB and Valkey on
loopback, read a user's session epoch from MongoDB and wrote a session key into Valkey,
which gave it an admin session. Each test here is that process, on a fresh installation.
"""

from __future__ import annotations

import json
import stat
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pymongo
import pymongo.errors
import pytest
import redis

from tracker.core.config import Settings
from tracker.runtime import servers
from tracker.runtime.embedded_credentials import SECRET_FILE, VALKEY_CONFIG
from tracker.runtime.processes import kill, proc_info
from tracker.runtime.servers import (
    MONGO,
    VALKEY,
    ServerStatus,
    ensure_servers,
    free_port,
    server_status,
    stop_servers,
    valkey_binary,
)

pytestmark = pytest.mark.security


def _servers(data_dir: Path) -> dict[str, ServerStatus]:
    return {s.name: s for s in server_status(data_dir)}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_valkey_refuses_a_client_without_the_secret(own) -> None:
    valkey = _servers(own.data_dir)[VALKEY]
    intruder = redis.Redis(host="127.0.0.1", port=valkey.port, socket_timeout=5)
    with pytest.raises(redis.AuthenticationError):
        intruder.set("copytrack:session:forged", "admin")
    with pytest.raises(redis.AuthenticationError):
        intruder.keys("*")
    wrong = redis.Redis(host="127.0.0.1", port=valkey.port, password="guess", socket_timeout=5)
    with pytest.raises(redis.AuthenticationError):
        wrong.ping()
    # The URL the runtime hands out works.
    assert redis.Redis.from_url(ensure_servers(own).redis_url).ping()


def test_mongodb_refuses_a_client_without_the_secret(own) -> None:
    endpoints = ensure_servers(own)
    owner: pymongo.MongoClient[dict] = pymongo.MongoClient(endpoints.mongo_url)
    owner[own.mongo_db].users.insert_one({"name": "alice", "session_epoch": "secret-epoch"})
    port = _servers(own.data_dir)[MONGO].port
    for url in (
        f"mongodb://127.0.0.1:{port}/?directConnection=true",
        f"mongodb://copytrack:guess@127.0.0.1:{port}/?directConnection=true&authSource=admin",
    ):
        intruder: pymongo.MongoClient[dict] = pymongo.MongoClient(
            url, serverSelectionTimeoutMS=3000
        )
        with pytest.raises(pymongo.errors.PyMongoError, match="authentication"):
            intruder[own.mongo_db].users.find_one({"name": "alice"})
        with pytest.raises(pymongo.errors.PyMongoError, match="authentication"):
            intruder.admin.command("createUser", "intruder", pwd="x", roles=["root"])
        intruder.close()
    assert owner[own.mongo_db].users.find_one({"name": "alice"})["session_epoch"] == "secret-epoch"
    owner.close()


def test_the_secret_is_readable_by_its_owner_only_and_on_no_command_line(own) -> None:
    data_dir = own.data_dir
    secret = (data_dir / SECRET_FILE).read_text().strip()
    assert len(secret) >= 32
    for path in (data_dir / SECRET_FILE, data_dir / VALKEY / VALKEY_CONFIG):
        assert _mode(path) == 0o600, f"{path} has mode {oct(_mode(path))}"
    # The state file holds the URLs, with the secret.
    assert _mode(data_dir / "servers.json") == 0o600
    assert secret in json.loads((data_dir / "servers.json").read_text())["servers"][VALKEY]["url"]
    # Every local user can read a process's command line.
    for server in _servers(data_dir).values():
        info = proc_info(server.pid)
        assert info is not None and secret not in info[1], server.name


def test_a_secret_file_made_with_loose_permissions_is_tightened(own) -> None:
    path = own.data_dir / SECRET_FILE
    path.chmod(0o644)
    ensure_servers(own)
    assert _mode(path) == 0o600


def _wait_answering(url: str, probe: Callable[[str], object]) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            probe(url)
            return
        except (redis.RedisError, pymongo.errors.PyMongoError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_servers_an_earlier_release_left_open_are_restarted_with_the_secret(
    tmp_path: Path,
) -> None:
    """A data dir of a release without credentials: its servers run open, recorded with
    URLs without a secret. The next command restarts them with it; the data stays."""
    data_dir = tmp_path / "data"
    for sub in (VALKEY, MONGO, "logs"):
        (data_dir / sub).mkdir(parents=True)
    port = {VALKEY: free_port(), MONGO: free_port()}
    old = {
        VALKEY: (
            [str(valkey_binary()), "--bind", "127.0.0.1", "--port", str(port[VALKEY]),
             "--dir", str(data_dir / VALKEY), "--appendonly", "yes", "--save", ""],
            f"redis://127.0.0.1:{port[VALKEY]}/0",
        ),
        MONGO: (
            servers._mongo_open_cmd(port[MONGO], data_dir),
            f"mongodb://127.0.0.1:{port[MONGO]}/?directConnection=true",
        ),
    }  # fmt: skip
    procs = {
        name: subprocess.Popen(cmd, cwd=data_dir, stdout=subprocess.DEVNULL,
                               stderr=subprocess.STDOUT, start_new_session=True)
        for name, (cmd, _) in old.items()
    }  # fmt: skip
    settings = Settings.from_env({"COPYTRACK_DATA_DIR": str(data_dir)})
    try:
        servers._write_state(
            data_dir,
            {name: {"pid": procs[name].pid, "port": port[name], "url": url, "cmd": cmd}
             for name, (cmd, url) in old.items()},
        )  # fmt: skip
        _wait_answering(old[VALKEY][1], lambda url: redis.Redis.from_url(url).set("k", "kept"))
        _wait_answering(
            old[MONGO][1],
            lambda url: pymongo.MongoClient(url, serverSelectionTimeoutMS=1000).db.c.insert_one(
                {"_id": "kept"}
            ),
        )

        endpoints = ensure_servers(settings)

        for proc in procs.values():
            assert proc.wait(timeout=30) is not None  # the open servers were stopped
        secret = (data_dir / SECRET_FILE).read_text().strip()
        assert secret in endpoints.redis_url and secret in endpoints.mongo_url
        assert redis.Redis.from_url(endpoints.redis_url).get("k") == b"kept"
        owner: pymongo.MongoClient[dict] = pymongo.MongoClient(endpoints.mongo_url)
        assert owner.db.c.find_one({"_id": "kept"}) == {"_id": "kept"}
        owner.close()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(old[VALKEY][1]).get("k")
        intruder: pymongo.MongoClient[dict] = pymongo.MongoClient(
            old[MONGO][1], serverSelectionTimeoutMS=3000
        )
        with pytest.raises(pymongo.errors.PyMongoError, match="authentication"):
            intruder.db.c.find_one()
        intruder.close()
    finally:
        stop_servers(data_dir)
        for proc in procs.values():
            if proc.poll() is None:
                kill(proc.pid)
                proc.wait(timeout=10)
