"""The inverted index: one behaviour, two backends (in-memory and Redis/Valkey).

The Redis cases use the session's embedded Valkey (``redis_client`` from conftest), which
runs with hash-max-listpack-entries 1024 and hash-max-listpack-value 64 like production.
"""

from __future__ import annotations

import multiprocessing
import random
from concurrent.futures import ProcessPoolExecutor

import pytest
import redis

from tracker.index import (
    IndexVersionMismatch,
    InvertedIndex,
    MemoryIndex,
    RedisIndex,
    suggest_bucket_bits,
)


@pytest.fixture(params=["memory", "redis"])
def index(request: pytest.FixtureRequest) -> InvertedIndex:
    if request.param == "memory":
        return MemoryIndex()
    # 16 buckets: fingerprints share bucket hashes, as they do at scale.
    return RedisIndex(request.getfixturevalue("redis_client"), bucket_bits=4)


def test_add_lookup_and_count_hits(index: InvertedIndex) -> None:
    assert index.add(1, [10, 20, 30]) == 3
    assert index.add(2, [20, 30, 40, 2**64 - 1]) == 4

    assert index.lookup([30, 99, 10, 2**64 - 1, 30]) == [(1, 2), (), (1,), (2,), (1, 2)]
    # Repeated query fingerprints count once.
    assert index.count_hits([10, 20, 20, 40, 99]) == {1: 2, 2: 2}
    assert index.count_hits([]) == {}
    assert index.stats().postings == 7


def test_readding_adds_nothing(index: InvertedIndex) -> None:
    index.add(1, [10, 20])
    index.add(2, [20])

    assert index.add(1, [20, 10, 10]) == 0
    assert index.add(1, [10, 30]) == 1
    assert index.lookup([10, 20, 30]) == [(1,), (1, 2), (1,)]
    assert index.stats().postings == 4


def test_remove_drops_only_that_masters_postings(index: InvertedIndex) -> None:
    index.add(1, [10, 20])
    index.add(2, [20, 30])

    assert index.remove(1, [10, 20, 30]) == 2  # 30 never listed master 1
    assert index.lookup([10, 20, 30]) == [(), (2,), (2,)]
    assert index.remove(1, [10]) == 0
    assert index.remove(2, [20, 30]) == 2

    stats = index.stats()
    assert (stats.postings, stats.keys) == (0, 0)
    if isinstance(index, RedisIndex):  # empty fields and buckets are gone, only metadata stays
        assert list(index.client.scan_iter("ct:ix:*")) == [b"ct:ix:meta"]


def test_long_posting_lists_in_any_order(index: InvertedIndex) -> None:
    rng = random.Random(7)
    masters = list(range(0, 4000, 7))
    rng.shuffle(masters)  # out of order: inserts in the middle of sorted lists
    for master in masters:
        index.add(master, [5, 6] if master % 2 else [5])

    assert index.lookup([5, 6]) == [
        tuple(sorted(masters)),
        tuple(sorted(m for m in masters if m % 2)),
    ]
    assert index.add(masters[0], [5]) == 0

    keep = set(masters[:3])
    for master in masters[3:]:
        index.remove(master, [5, 6])
    assert index.lookup([5, 6]) == [tuple(sorted(keep)), tuple(sorted(m for m in keep if m % 2))]
    assert index.stats().postings == len(keep) + sum(m % 2 for m in keep)


def test_queries_longer_than_one_script_call(index: InvertedIndex) -> None:
    fingerprints = list(range(1, 5001))
    index.add(1, fingerprints[::2])
    index.add(2, fingerprints[1::2])

    assert index.lookup(fingerprints) == [(1,), (2,)] * 2500
    assert index.count_hits(fingerprints) == {1: 2500, 2: 2500}
    assert index.remove(1, fingerprints) == 2500


def test_max_df_stops_boilerplate(index: InvertedIndex) -> None:
    footer = list(range(1000, 1010))  # a site footer that 50 masters share

    def own(master: int) -> list[int]:
        return [10_000 + 100 * master + i for i in range(8)]

    for master in range(50):
        index.add(master, own(master) + footer)

    assert index.count_hits(footer, max_df=20) == {}
    assert index.count_hits(own(7) + footer, max_df=20) == {7: 8}
    # The cut is "longer than max_df": a list of exactly max_df ids still counts.
    assert index.count_hits(footer, max_df=50) == {m: 10 for m in range(50)}
    assert index.count_hits(footer, max_df=49) == {}
    assert index.count_hits(footer) == {m: 10 for m in range(50)}
    assert index.lookup(footer[:1]) == [tuple(range(50))]


def test_version_is_stored_on_empty_index_and_checked(index: InvertedIndex) -> None:
    index.ensure_version("fp1-aaa")
    index.add(1, [10])
    index.ensure_version("fp1-aaa")

    with pytest.raises(
        IndexVersionMismatch,
        match=r"built with version fp1-aaa.*current parameters are fp1-bbb.*copytrack reindex",
    ):
        index.ensure_version("fp1-bbb")

    index.remove(1, [10])  # an empty index takes the new version
    index.ensure_version("fp1-bbb")
    index.add(1, [10])
    index.clear()
    index.ensure_version("fp1-ccc")
    assert index.lookup([10]) == [()]


def test_unversioned_index_with_postings_is_refused(index: InvertedIndex) -> None:
    index.add(1, [10])
    with pytest.raises(IndexVersionMismatch, match=r"version \(none\)"):
        index.ensure_version("fp1-aaa")


def test_out_of_range_ids_are_rejected(index: InvertedIndex) -> None:
    for master in (-1, 2**32):
        with pytest.raises(ValueError, match="master id"):
            index.add(master, [1])
    for fingerprint in (-1, 2**64):
        with pytest.raises(ValueError, match="fingerprint"):
            index.add(1, [fingerprint])
    assert index.stats().postings == 0


def test_redis_layout_is_checked(redis_client: redis.Redis) -> None:
    RedisIndex(redis_client, bucket_bits=4).add(1, [10])
    other = RedisIndex(redis_client, bucket_bits=5)
    for call in (lambda: other.lookup([10]), lambda: other.add(2, [10])):
        with pytest.raises(IndexVersionMismatch, match=r"bucket_bits=4.*bucket_bits=5.*reindex"):
            call()
    with pytest.raises(ValueError, match="32 bits"):
        RedisIndex(redis_client, prefix="ct:narrow", fingerprint_bits=32).add(1, [2**32])


@pytest.mark.parametrize(("fingerprint_bits", "bucket_bits"), [(64, 0), (64, 16), (54, 13), (8, 3)])
def test_redis_layouts_keep_fingerprints_apart(
    redis_client: redis.Redis, fingerprint_bits: int, bucket_bits: int
) -> None:
    index = RedisIndex(redis_client, bucket_bits=bucket_bits, fingerprint_bits=fingerprint_bits)
    top = 2**fingerprint_bits - 1
    rng = random.Random(fingerprint_bits)
    fingerprints = sorted({0, 1, top, top - 1, *(rng.randrange(top) for _ in range(200))})
    for master, fingerprint in enumerate(fingerprints):
        index.add(master, [fingerprint])

    # Each fingerprint finds only its own master: (bucket, field) is unique per fingerprint.
    assert index.lookup(fingerprints) == [(master,) for master in range(len(fingerprints))]


def test_redis_prefixes_are_separate_indexes(redis_client: redis.Redis) -> None:
    first = RedisIndex(redis_client, prefix="a:ix", bucket_bits=4)
    second = RedisIndex(redis_client, prefix="b:ix", bucket_bits=8)
    first.add(1, [10])
    second.add(2, [10])
    first.clear()
    assert first.lookup([10]) == [()]
    assert second.lookup([10]) == [(2,)]


def test_redis_long_lists_spill_out_of_the_bucket_and_come_back(
    redis_client: redis.Redis,
) -> None:
    index = RedisIndex(redis_client, bucket_bits=0)  # one bucket: ct:ix:0
    index.add(1, range(100, 200))
    for master in range(1000, 1100):
        index.add(master, [7])

    # The bucket stays a listpack; the 101-id list lives in its own key.
    assert redis_client.object("encoding", "ct:ix:0") == b"listpack"
    assert index.stats().keys == 2
    assert index.lookup([7]) == [tuple(range(1000, 1100))]
    for master in range(1000, 1090):
        index.remove(master, [7])
    assert index.stats().keys == 1
    assert index.lookup([7]) == [tuple(range(1090, 1100))]


def test_redis_query_is_one_round_trip(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = RedisIndex(redis_client, bucket_bits=6)
    for master in range(20):
        index.add(master, range(master * 50, master * 50 + 300))
    query = list(range(0, 1500, 3))  # 500 fingerprints over all 64 buckets

    sends = []
    send = redis.connection.AbstractConnection.send_packed_command

    def counting_send(self: redis.connection.AbstractConnection, *args, **kwargs) -> None:
        sends.append(args)
        send(self, *args, **kwargs)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting_send)
    assert len(index.lookup(query)) == 500
    assert index.count_hits(query, max_df=3)
    assert len(sends) == 2


def test_redis_reloads_flushed_scripts(redis_client: redis.Redis) -> None:
    index = RedisIndex(redis_client, bucket_bits=4)
    index.add(1, [10])
    redis_client.script_flush()
    assert index.add(2, [10]) == 1
    assert index.lookup([10]) == [(1, 2)]


def _add_masters(url: str, masters: list[int], seed: int) -> None:
    """One worker process: add each master to overlapping fingerprints, in random order."""
    client = redis.Redis.from_url(url)
    index = RedisIndex(client, bucket_bits=4)
    rng = random.Random(seed)
    for master in masters:
        index.add(master, _shared_fingerprints(master))
        if rng.random() < 0.2:  # concurrent re-adds must stay no-ops
            index.add(master, _shared_fingerprints(master))
    client.close()


def _shared_fingerprints(master: int) -> list[int]:
    # 60 fingerprints in a pool of 200: every fingerprint is listed by many masters,
    # so workers keep rewriting the same fields and some lists spill out of their bucket.
    return random.Random(master).sample(range(1, 201), 60)


def test_redis_concurrent_workers_end_with_the_exact_union(redis_client: redis.Redis) -> None:
    kwargs = redis_client.connection_pool.connection_kwargs
    url = f"redis://{kwargs['host']}:{kwargs['port']}/{kwargs.get('db', 0)}"
    masters = list(range(1, 401))
    random.Random(3).shuffle(masters)
    workers = 4
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        jobs = [pool.submit(_add_masters, url, masters[w::workers], seed=w) for w in range(workers)]
        for job in jobs:
            job.result()

    expected = MemoryIndex()
    for master in masters:
        expected.add(master, _shared_fingerprints(master))
    index = RedisIndex(redis_client, bucket_bits=4)
    pool_fps = list(range(1, 201))
    assert index.lookup(pool_fps) == expected.lookup(pool_fps)
    assert index.stats().postings == expected.stats().postings == 400 * 60


def test_redis_bytes_per_posting(redis_client: redis.Redis) -> None:
    """200k postings of random 64-bit fingerprints over 20k masters cost ≤ 16 B each."""
    rng = random.Random(42)
    postings, masters = 200_000, 20_000
    index = RedisIndex(redis_client, bucket_bits=suggest_bucket_bits(postings))
    redis_client.execute_command("FLUSHDB", "SYNC")  # nothing left to free while measuring
    before = redis_client.info("memory")["used_memory"]
    for master in range(masters):
        index.add(master, [rng.getrandbits(64) for _ in range(postings // masters)])
    used = redis_client.info("memory")["used_memory"] - before

    stats = index.stats()
    assert stats.postings == postings
    assert stats.bytes_per_posting <= 16, stats
    assert used / postings <= 16, used
    buckets = [key for key in redis_client.scan_iter("ct:ix:*", count=1000) if key != b"ct:ix:meta"]
    assert len(buckets) == stats.keys == 2**index.bucket_bits
    assert {redis_client.object("encoding", key) for key in buckets[:50]} == {b"listpack"}
