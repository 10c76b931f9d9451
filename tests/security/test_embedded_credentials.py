"""The embedded servers refuse a local process that lacks the data dir's secret.

The attack: any process of the machine connected to the embedded SecantusDB and Valkey on
loopback, read a user's session epoch from MongoDB and wrote a session key into Valkey,
which gave it an admin session. Each test here is that process, on a fresh installation.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pymongo
import pymongo.errors
import pytest
import redis

from tracker.embedded_credentials import SECRET_FILE, VALKEY_CONFIG
from tracker.processes import proc_info
from tracker.servers import MONGO, VALKEY, ServerStatus, ensure_servers, server_status

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
