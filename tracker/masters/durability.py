"""A barrier for what a command reports: wait until this process's writes are on disk.

A command prints what it stored (``added``) only once its writes are on disk in both
servers (`wait_durable`, or its halves), so nothing it reported is lost when a server is
killed or its disk fills. `library add` stores works only once their postings are on disk
(`wait_index_durable`), so a Redis that loses acknowledged postings leaves no work
registered without them, and before printing a batch waits for MongoDB alone
(`wait_documents_durable`).

- Redis writes acknowledged under ``appendfsync everysec`` reach the disk up to a second
  later. ``WAITAOF 1 0`` blocks until the append-only file is fsynced past the writes of
  its connection: the barrier first writes a key on that connection, after every write of
  the process it must cover, then waits. A Redis without an append-only file (a configured
  one kept in memory or by snapshots) promises no durability: nothing to wait for.
- MongoDB: the embedded SecantusDB fsyncs every commit (``--sync-on-commit``); a configured
  MongoDB does once a write asks for its journal, and its journal is written in order, so
  one journaled write covers every write before it.
"""

from __future__ import annotations

import itertools
import os
import socket

import redis
from pymongo import WriteConcern
from redis.cluster import ClusterNode, RedisCluster

from ..context import Context
from ..core.failures import free_space

_MARK_COLLECTION = "durability_marks"


class NotDurable(RuntimeError):
    """A server did not confirm that acknowledged writes are on disk."""


# A disk busy with other writes (an append-only-file rewrite, a large import) can take
# seconds to fsync; past this, the barrier reports the writes as not saved.
DURABLE_WAIT_SECONDS = 60.0


def wait_durable(ctx: Context, timeout: float = DURABLE_WAIT_SECONDS) -> None:
    """Return once every write this process made is on disk in Redis and MongoDB; raise
    NotDurable (or the server's error) otherwise."""
    wait_index_durable(ctx, timeout)
    wait_documents_durable(ctx)


def wait_documents_durable(ctx: Context) -> None:
    """Return once every write this process made is on disk in MongoDB (one journaled
    write after them); raise the server's error otherwise."""
    marks = ctx.db[_MARK_COLLECTION].with_options(write_concern=WriteConcern(w=1, j=True))
    marks.update_one({"_id": _mark(ctx)}, {"$inc": {"n": 1}}, upsert=True)


def wait_index_durable(ctx: Context, timeout: float = DURABLE_WAIT_SECONDS) -> None:
    """Return once every write this process made is on disk in Redis; raise NotDurable (or
    the server's error) otherwise."""
    mark = _mark(ctx)
    if _marked_on_disk(ctx.redis, mark, timeout) == 0:
        where = f" (data dir {ctx.settings.data_dir}, {free_space(ctx.settings.data_dir)})"
        raise NotDurable(
            f"Redis did not write its append-only file to disk within {timeout:g} s"
            f"{where if ctx.settings.embedded_redis else ''}: the works since the last "
            f"ones reported are not saved; free space and run the command again"
        )
    client = getattr(ctx.index, "client", None)  # a RedisIndex's, or a SnapshotIndex's
    if isinstance(client, RedisCluster):
        _wait_cluster(client, mark, timeout)


def _mark(ctx: Context) -> str:
    """The name of this process's durability mark (a key in Redis, a document in MongoDB)."""
    return ctx.keys.durability_mark(socket.gethostname(), os.getpid())


def _wait_cluster(cluster: RedisCluster, mark: str, timeout: float) -> None:
    """WAITAOF on every primary of the index's cluster, after a mark written on that node
    over the same connection: a node writes its append-only file in order, so once the
    mark is on disk so is every write the node took before it, over any connection (the
    one a WAITAOF goes over may not be the one another thread wrote over)."""
    for node in cluster.get_primaries():
        fsynced = _marked_on_disk(
            cluster.get_redis_connection(node), _key_on(cluster, node, mark), timeout
        )
        if fsynced is None:
            raise NotDurable(
                "the index cluster (COPYTRACK_INDEX_CLUSTER_URL) runs without its append-only "
                "file: nothing written there survives a restart; start its nodes with "
                "`appendonly yes` and run the command again"
            )
        if fsynced < 1:
            raise NotDurable(
                f"index cluster node {node.name} did not write its append-only file to disk "
                f"within {timeout:g} s (is appendonly on?): the works since the last ones "
                "reported are not saved; fix the node and run the command again"
            )


def _marked_on_disk(client: redis.Redis, key: str, timeout: float) -> int | None:
    """Write ``key``, then wait until the server's append-only file is on disk past it: 1
    once it is, 0 if not within ``timeout``, None for a server without one."""
    pipe = client.pipeline(transaction=False)
    pipe.set(key, 1, ex=600)
    pipe.execute_command("WAITAOF", 1, 0, int(timeout * 1000))
    try:
        _, (fsynced, _replicas) = pipe.execute()
    except redis.ResponseError as err:
        if "appendonly is disabled" not in str(err):
            raise
        return None
    return min(int(fsynced), 1)


def _key_on(cluster: RedisCluster, node: ClusterNode, mark: str) -> str:
    """``mark`` with a hash tag that puts it on ``node``."""
    keys = (f"{mark}:{{{tag}}}" for tag in itertools.count())
    return next(key for key in keys if cluster.get_node_from_key(key).name == node.name)
