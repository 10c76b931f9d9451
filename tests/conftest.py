"""Shared fixtures: one set of real embedded servers per test session.

Tests always use embedded servers in a temporary data dir, never the
COPYTRACK_*_URL of the environment: fixtures flush and drop data.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymongo
import pytest
import redis
from pymongo.database import Database

from testbed.testweb import RunningWeb, TestWeb, build_site, serve
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import open_ready
from tracker.runtime.servers import Endpoints, ensure_servers, stop_servers


@pytest.fixture(scope="session")
def embedded_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Data dir of the session's embedded servers."""
    return tmp_path_factory.mktemp("copytrack-data")


@pytest.fixture(scope="session")
def endpoints(embedded_data_dir: Path) -> Iterator[Endpoints]:
    """Embedded Valkey + SecantusDB on 127.0.0.1, started once, stopped at session end."""
    # Only COPYTRACK_DATA_DIR: configured URLs in the environment are ignored on purpose.
    settings = Settings.from_env({"COPYTRACK_DATA_DIR": str(embedded_data_dir)})
    try:
        yield ensure_servers(settings)
    finally:
        stop_servers(embedded_data_dir)


@pytest.fixture
def own(tmp_path: Path) -> Iterator[Settings]:
    """Settings of a fresh installation on embedded servers started for this test alone
    (for tests that stop or restart a server, which would break the session's)."""
    data_dir = tmp_path / "data"
    settings = Settings.from_env({"COPYTRACK_DATA_DIR": str(data_dir)})
    try:
        ensure_servers(settings)
        yield settings
    finally:
        stop_servers(data_dir)


@pytest.fixture
def redis_client(endpoints: Endpoints) -> Iterator[redis.Redis]:
    """A redis.Redis (bytes responses) on the embedded Valkey, database flushed first."""
    client = redis.Redis.from_url(endpoints.redis_url)
    client.flushdb()
    yield client
    client.close()


@pytest.fixture(scope="session")
def _session_mongo_client(endpoints: Endpoints) -> Iterator[pymongo.MongoClient[Any]]:
    client: pymongo.MongoClient[Any] = pymongo.MongoClient(endpoints.mongo_url)
    yield client
    client.close()


@pytest.fixture
def mongo_db(_session_mongo_client: pymongo.MongoClient[Any]) -> Database[Any]:
    """A fresh, uniquely named database on the embedded SecantusDB.

    Left in place, as every test's database is: SecantusDB drops a database by deleting
    its rows one at a time, which cost half of its CPU in the suite, and the session's
    data dir goes with the session's temporary folder."""
    return _session_mongo_client[f"test_{uuid.uuid4().hex[:16]}"]


@pytest.fixture
def tracker_env(
    endpoints: Endpoints, redis_client: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """COPYTRACK_* variables for a fresh installation on the session's servers: a database
    of its own (left in place, as `mongo_db`'s) and the Valkey database flushed.

    Set in os.environ too, so CLI commands and subprocesses use the same installation.
    """
    env = {
        "COPYTRACK_MONGO_URL": endpoints.mongo_url,
        "COPYTRACK_REDIS_URL": endpoints.redis_url,
        "COPYTRACK_MONGO_DB": f"test_{uuid.uuid4().hex[:16]}",
        "COPYTRACK_DATA_DIR": str(tmp_path / "data"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def ctx(tracker_env: dict[str, str]) -> Iterator[Context]:
    """An open tracker Context on an empty library and index."""
    context = open_ready(Settings.from_env(tracker_env))
    yield context
    context.close()


@pytest.fixture
def blocks_ctx(tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Context]:
    """`ctx` with every posting in Redis's blocks (``COPYTRACK_INDEX_SNAPSHOT=false``), for
    tests of that layout's own failures."""
    tracker_env["COPYTRACK_INDEX_SNAPSHOT"] = "false"
    monkeypatch.setenv("COPYTRACK_INDEX_SNAPSHOT", "false")
    context = open_ready(Settings.from_env(tracker_env))
    yield context
    context.close()


@pytest.fixture
def synonyms_ctx(tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Context]:
    """A context on an empty installation with the synonym stream on (COPYTRACK_SYNONYMS)."""
    monkeypatch.setenv("COPYTRACK_SYNONYMS", "true")  # and the CLI commands it runs
    context = open_ready(Settings.from_env({**tracker_env, "COPYTRACK_SYNONYMS": "true"}))
    yield context
    context.close()


@pytest.fixture
def crawl_ctx(tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Context]:
    """A context whose crawls may fetch loopback (the test web), on a fresh installation."""
    monkeypatch.setenv("COPYTRACK_ALLOW_PRIVATE_NETWORKS", "1")
    context = open_ready(Settings.from_env())
    yield context
    context.close()


@pytest.fixture
def screenshots(tmp_path: Path) -> Path:
    """Where a browser test saves its pictures: docs/ with COPYTRACK_UPDATE_SCREENSHOTS=1
    (the README's pictures are refreshed on request only), else the test's own temporary
    folder, so a test run leaves neither the tree nor the machine's temporary space fuller."""
    if os.environ.get("COPYTRACK_UPDATE_SCREENSHOTS") == "1":
        return Path(__file__).resolve().parent.parent / "docs"
    return tmp_path


@pytest.fixture(scope="module")
def web() -> TestWeb:
    """A test web of 20 works whose pirate site's pages answer slowly (half a second): a
    crawl of it lasts long enough to be interrupted (tests of crawls under faults)."""
    return build_site(n_masters=20, n_pages=60, n_real_pages=0, slow_seconds=0.5)


@pytest.fixture(scope="module")
def running(web: TestWeb) -> Iterator[RunningWeb]:
    """``web`` served on loopback."""
    with serve(web) as sites:
        yield sites


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked slow first: spread over the workers (pytest-xdist) from the start,
    they end with the quick ones instead of one of them running on alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
