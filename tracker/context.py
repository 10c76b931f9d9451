"""Everything a tracker operation needs: settings, MongoDB, Redis, the index, parameters.

CLI commands, Celery tasks and the admin open one ``Context`` per process; pure domain
functions take it as their first argument, so tests can build one on their own servers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import redis
from pymongo.database import Database
from redis.cluster import RedisCluster

from fingerprinter import CHECK_BITS, DEFAULT_PARAMS, FingerprintParams

from .core.config import Settings
from .core.failures import room_to_restart
from .core.keys import RedisKeys
from .core.store import ensure_indexes
from .core.times import mongo_client
from .index import InvertedIndex, RedisIndex
from .index.snapshot import SNAPSHOT_LAYOUT, SnapshotIndex
from .runtime.servers import Endpoints, ensure_servers


@dataclass
class Context:
    """Open connections and parameters of one copytrack installation."""

    settings: Settings
    endpoints: Endpoints
    db: Database[Any]
    redis: redis.Redis
    index: InvertedIndex
    params: FingerprintParams = DEFAULT_PARAMS
    # (monotonic time, masters counted then): see tracker.masters.library.library_size
    library_count: tuple[float, int] | None = field(default=None, init=False, repr=False)
    # What the domain keeps in memory for this context, by name (the masters' cache of
    # tracker.masters.master_cache): the wiring holds it without knowing what it is.
    kept: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    @property
    def keys(self) -> RedisKeys:
        """This installation's Redis keys."""
        return RedisKeys(self.settings.redis_prefix)

    def close(self) -> None:
        self.db.client.close()
        self.redis.close()
        index = self.index.delta if isinstance(self.index, SnapshotIndex) else self.index
        if isinstance(index, RedisIndex) and index.client is not self.redis:
            index.client.close()


# How long a Redis command may take to answer before the server counts as not answering.
# Explicit: redis-py 8 gives up after 5 s by default, and a durability barrier waits for
# the disk (`tracker.masters.durability`, up to DURABLE_WAIT_SECONDS) — a `library add` of a
# million works failed with "does not answer" while its disk was busy.
REDIS_REPLY_SECONDS = 120.0
REDIS_CONNECT_SECONDS = 10.0
_REDIS_TIMEOUTS = {
    "socket_timeout": REDIS_REPLY_SECONDS,
    "socket_connect_timeout": REDIS_CONNECT_SECONDS,
}


def open_index(
    settings: Settings, client: redis.Redis, params: FingerprintParams
) -> RedisIndex | SnapshotIndex:
    """The index: in ``client``'s Redis, or on the Redis Cluster of
    COPYTRACK_INDEX_CLUSTER_URL when set (each index script stays in one hash slot); with
    COPYTRACK_INDEX_SNAPSHOT, a snapshot in the data dir beside a delta there."""
    index_client: redis.Redis | RedisCluster = client
    if settings.index_cluster_url:
        index_client = RedisCluster.from_url(settings.index_cluster_url, **_REDIS_TIMEOUTS)
    prefix = RedisKeys(settings.redis_prefix).index
    blocks = RedisIndex(
        index_client,
        prefix=prefix,
        fingerprint_bits=params.value_bits,
        check_bits=CHECK_BITS,
        cache_bytes=settings.index_cache_mb * 2**20,
        layout_tag=SNAPSHOT_LAYOUT if settings.index_snapshot else "",
    )
    if settings.index_snapshot:
        return SnapshotIndex(
            blocks, settings.data_dir / "index-snapshot", settings.index_snapshot_in_redis
        )
    return blocks


def fingerprint_params(settings: Settings) -> FingerprintParams:
    """The installation's fingerprint parameters: the defaults, with the synonym stream
    when ``COPYTRACK_SYNONYMS`` turns it on (another fingerprint version: a reindex)."""
    return replace(DEFAULT_PARAMS, synonyms=True) if settings.synonyms else DEFAULT_PARAMS


def open_context(
    settings: Settings | None = None,
    params: FingerprintParams | None = None,
    check_index: bool = True,
) -> Context:
    """Connect (starting embedded servers when no URLs are configured) and check the
    index's parameters.

    Raises ``IndexVersionMismatch`` when the index was built with other parameters;
    ``check_index=False`` is for ``reindex``, which rebuilds it. Whether the index is the
    library's is the library's to say: `tracker.masters.generation.open_ready` opens a
    context and checks that; processes that outlive a lost index leave the check to each
    operation (`tracker.masters.generation.require`).
    """
    settings = settings or Settings.from_env()
    params = params or fingerprint_params(settings)
    endpoints = ensure_servers(settings)
    client = mongo_client(endpoints.mongo_url, retryWrites=True, serverSelectionTimeoutMS=10_000)
    db = client[settings.mongo_db]
    ensure_indexes(db)
    redis_client = redis.Redis.from_url(
        endpoints.redis_url, health_check_interval=30, **_REDIS_TIMEOUTS
    )
    index = open_index(settings, redis_client, params)
    ctx = Context(settings, endpoints, db, redis_client, index, params)
    if check_index:
        with closed_on_error(ctx):
            index.ensure_version(params.version)
    return ctx


@contextmanager
def closed_on_error(ctx: Context) -> Iterator[Context]:
    """``ctx``, closed if the block raises: a check that refuses a context it was given
    leaves no connection open."""
    try:
        yield ctx
    except BaseException:
        ctx.close()
        raise


@lru_cache(maxsize=1)
def process_context() -> Context:
    """The context of this process (Celery workers, the admin, crawls), opened on first use.
    Each operation checks the index generation (a scan refuses an index that is not the
    library's), so that the process outlives a lost index and reports it."""
    return open_context()


def _servers_moved(ctx: Context, restart_failed: bool = False) -> bool:
    return _found(ctx.settings, restart_failed) != ctx.endpoints


def _found(settings: Settings, restart_failed: bool) -> Endpoints:
    """The servers where they run now; a failed one started again if asked to and its data
    dir has room for it again."""
    restart = restart_failed and room_to_restart(Path(settings.data_dir))
    return ensure_servers(settings, replace_unanswering=restart)


def reconnected(ctx: Context, restart_failed: bool = False) -> Context:
    """After a connection failure in a long-running process: ``ctx`` again once the
    embedded servers that died run again, each on its port, where ctx's clients reconnect
    by themselves; or, if one had to take another port, a new context there (ctx is
    closed). Configured servers are left to their operators. ``restart_failed``: after an
    error saying a server's storage failed (`tracker.core.failures.storage_failed`), an embedded
    server that runs but does not answer is started again too, once its data dir has room
    again (never on a mere timeout: a busy server is not a broken one)."""
    if not _servers_moved(ctx, restart_failed):
        return ctx
    ctx.close()
    return open_context(ctx.settings, ctx.params, check_index=False)


def follow_servers(restart_failed: bool = False) -> None:
    """`reconnected` for this process's context (Celery tasks, crawls): if a server moved,
    the context is dropped and the next `process_context()` opens one where it is now."""
    if not process_context.cache_info().currsize:
        _found(Settings.from_env(), restart_failed)
    elif _servers_moved(ctx := process_context(), restart_failed):
        process_context.cache_clear()
        ctx.close()
