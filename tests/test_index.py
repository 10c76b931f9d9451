"""The inverted index: one behaviour, two backends (in-memory and Redis/Valkey).

The Redis cases use the session's embedded Valkey (``redis_client`` from conftest), with
Redis' default settings like production.
"""

from __future__ import annotations

import multiprocessing
import random
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
import redis

from tracker.index import (
    LOAD,
    MIN_LEVEL,
    PLACES,
    SHARDS,
    IndexVersionMismatch,
    InvertedIndex,
    MemoryIndex,
    RedisIndex,
    places_of,
    record_search,
    redis_index,
)
from tracker.index.linear_hashing import block_of, grown, split_blocks


@pytest.fixture(params=["memory", "redis"])
def index(request: pytest.FixtureRequest) -> InvertedIndex:
    if request.param == "memory":
        return MemoryIndex()
    return RedisIndex(request.getfixturevalue("redis_client"), "test:ix")


@pytest.fixture(params=["compiled loop", "numpy passes"])
def search(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How a Redis lookup finds its records in the blocks it read: both ways must agree."""
    if request.param == "numpy passes":
        monkeypatch.setattr(record_search, "_compiled_matching_records", None)
    return request.param


def test_the_install_builds_the_compiled_record_search() -> None:
    assert record_search._compiled_matching_records is not None, (
        "tracker/index/_record_search.pyx was not built: run `make .venv/.installed` "
        "(it needs a C compiler and Python's headers)"
    )


@pytest.mark.parametrize("record_bytes", [9, 11, 12, 13])
def test_the_compiled_record_search_finds_the_numpy_records(
    record_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Random blocks of few distinct bytes (many near-equal keys), keys of 4-8 bytes with
    # check bits masked off, queries that share blocks, empty blocks and blocks not stored.
    rng = np.random.default_rng(record_bytes)
    alphabet = np.array([0, 1, 0x80, 0xC1], dtype=np.uint8)  # masked bits set, and not
    blocks = [rng.choice(alphabet, n * record_bytes).tobytes() for n in rng.integers(0, 40, 60)]
    blocks[::7] = [b""] * len(blocks[::7])
    blocks[3::7] = [None] * len(blocks[3::7])  # a lookup's MGET reply for a missing key
    of_block = np.sort(np.concatenate((np.arange(60), rng.integers(0, 60, 200))))
    head_mask = np.uint64(min(2 ** (8 * (record_bytes - 5)), 2**64) - 1 - 0xC0)
    wanted = rng.choice(alphabet, len(of_block)).astype(np.uint64) & head_mask
    planted = []
    for q in range(0, len(of_block), 3):  # a third ask for a record their block has
        block = blocks[of_block[q]]
        if block:
            at = int(rng.integers(len(block) // record_bytes)) * record_bytes
            wanted[q] = np.uint64(int.from_bytes(block[at : at + 8], "little")) & head_mask
            planted.append((q, block[at : at + record_bytes]))
    args = (blocks, record_bytes, of_block, wanted, head_mask)
    query, rows = record_search.matching_records(*args)
    found = sorted(zip(query.tolist(), map(bytes, rows), strict=True))
    assert set(planted) <= set(found)
    monkeypatch.setattr(record_search, "_compiled_matching_records", None)
    query, rows = record_search.matching_records(*args)
    assert found == sorted(zip(query.tolist(), map(bytes, rows), strict=True))


def test_the_record_search_finds_every_posting_of_a_common_key(search: str) -> None:
    # A fingerprint shared by many works (under the document-frequency cut) has as many
    # records in its block: far more hits than queries, each one found, in order.
    record_bytes, head_mask = 12, np.uint64(2**56 - 1)
    common = bytes(range(1, 8))
    block = b"".join(common + i.to_bytes(4, "big") + b"\x01" for i in range(300))
    other = bytes(range(11, 23)) * 5
    of_block = np.array([0, 0, 1, 1, 1], dtype=np.int64)
    key = np.uint64(int.from_bytes(common + b"\x00", "little"))
    wanted = np.array([key, 7, key, 0, key], dtype=np.uint64)
    query, rows = record_search.matching_records([other, block], record_bytes, of_block,
                                                 wanted, head_mask)  # fmt: skip
    assert query.tolist() == [2] * 300 + [4] * 300
    ids = [int.from_bytes(bytes(row[7:11]), "big") for row in rows]
    assert ids == list(range(300)) * 2


def test_blocks_kept_in_an_array_of_objects_are_searched_as_a_list_is(search: str) -> None:
    # A reader's kept blocks come as a numpy array of objects, a block not stored as None.
    record_bytes, head_mask = 12, np.uint64(2**56 - 1)
    records = [bytes([n] * 7) + n.to_bytes(4, "big") + b"\x01" for n in range(1, 7)]
    blocks = [records[0] + records[1], None, records[2] + records[3] + records[4], b""]
    kept = np.full(len(blocks), None, dtype=object)
    for at, block in enumerate(blocks):
        kept[at] = block
    of_block = np.array([0, 1, 2, 2, 3], dtype=np.int64)
    wanted = np.array([int.from_bytes(records[n][:8], "little") & int(head_mask)
                       for n in (1, 0, 4, 2, 5)], dtype=np.uint64)  # fmt: skip
    from_list = record_search.matching_records(blocks, record_bytes, of_block, wanted,
                                               head_mask)  # fmt: skip
    from_array = record_search.matching_records(kept, record_bytes, of_block, wanted, head_mask)
    assert from_list[0].tolist() == from_array[0].tolist() == [0, 2, 3]
    assert from_list[1].tobytes() == from_array[1].tobytes() == records[1] + records[4] + records[2]


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
    if isinstance(index, RedisIndex):  # empty blocks are gone, only metadata stays
        blocks = [k for k in index.client.scan_iter(f"{index.prefix}:*") if k.count(b":") == 3]
        assert blocks == []


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


def test_postings_carry_positions_and_document_frequencies(index: InvertedIndex) -> None:
    index.add_many([(1, [10, 20]), (2, [20, 30]), (3, [20])])
    found = index.postings([30, 20, 99, 10], max_df=2)
    rows = sorted(zip(found.query.tolist(), found.master.tolist(), found.df.tolist(), strict=True))
    assert rows == [(0, 2, 1), (3, 1, 1)]  # 20 is in 3 masters: over max_df
    every = index.postings([20], max_df=None)
    assert sorted(every.master.tolist()) == [1, 2, 3]
    assert every.df.tolist() == [3, 3, 3]


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_a_posting_keeps_its_check_and_a_lookup_compares_it(
    request: pytest.FixtureRequest, backend: str, search: str
) -> None:
    bits, check_bits = 54, 6
    index: InvertedIndex = (
        MemoryIndex(bits, check_bits)
        if backend == "memory"
        else RedisIndex(request.getfixturevalue("redis_client"), "test:ix", bits, check_bits)
    )
    rng = random.Random(7)
    values = rng.sample(range(2**bits), 3000)  # enough to split blocks
    checks = [rng.randrange(2**check_bits) for _ in values]
    tagged = [v | c << bits for v, c in zip(values, checks, strict=True)]
    index.add_many([(n % 50, [fp]) for n, fp in enumerate(tagged)])

    other = [v | (c + 1) % 2**check_bits << bits for v, c in zip(values, checks, strict=True)]
    asked = tagged + other
    found = index.postings(asked)
    # A posting is found by the fingerprint alone, whatever check the query carries, and
    # is exact only when the checks agree.
    assert found.query.tolist() == list(range(len(asked)))
    assert found.master.tolist() == [n % 50 for n in range(len(values))] * 2
    assert found.exact.tolist() == [True] * len(values) + [False] * len(values)
    assert index.lookup(values[:3]) == [(0,), (1,), (2,)]
    # A master is removed with the fingerprints it was added with.
    assert index.remove(0, asked[: len(values) : 50]) == len(values) // 50
    assert index.lookup(values[:2]) == [(), (1,)]
    with pytest.raises(ValueError, match="54 bits and 6 check bits"):
        index.postings([2**60])


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_a_posting_keeps_its_place_in_the_work(
    request: pytest.FixtureRequest, backend: str
) -> None:
    """Each posting gives back the place it was added with (0 when none was given), through
    block splits and fresh adds; adding a fingerprint again keeps the first place and adds
    nothing, as does giving it twice in one add; removing needs no place; a place out of
    range is refused, naming the range."""
    index: InvertedIndex = (
        MemoryIndex(54)
        if backend == "memory"
        else RedisIndex(request.getfixturevalue("redis_client"), "test:ix", 54)
    )
    rng = random.Random(3)
    values = rng.sample(range(2**54), 4000)  # enough to split blocks
    places = [rng.randrange(1, PLACES + 1) for _ in values]
    index.add_many([(1, values[:2000], places[:2000])], fresh=True)
    index.add_many([(2, values[2000:3000], places[2000:3000]), (3, values[3000:])])
    found = index.postings(values)
    assert found.query.tolist() == list(range(len(values)))
    assert found.place.tolist() == places[:3000] + [0] * 1000
    assert index.add(1, values[:10], [1] * 10) == 0
    assert index.postings(values[:10]).place.tolist() == places[:10]
    assert index.remove(1, values[:10]) == 10
    assert index.lookup(values[:1]) == [()]
    with pytest.raises(ValueError, match=f"within 0..{PLACES}"):
        index.add(4, values[:2], [1, PLACES + 1])
    assert places_of(np.array([0, 31, 32, 32 * PLACES])).tolist() == [1, 1, 2, 1]
    # Given twice in one add (out of order, as a caller may): one posting, the first place.
    twice = [values[5], values[4], values[5]]
    assert index.add_many([(5, twice, [7, 8, 9]), (6, values[4:6], [3, 4])], fresh=True) == 4
    found = index.postings(values[4:6])
    pairs = sorted(zip(found.master.tolist(), found.place.tolist(), strict=True))
    assert pairs == [(5, 7), (5, 8), (6, 3), (6, 4)]


def test_a_first_add_touching_a_few_shards_then_more(redis_client: redis.Redis) -> None:
    """A new process's first add of a short work (a few fingerprints: a few shards) and
    then of another: the shards the first did not touch are read when first needed."""
    index = RedisIndex(redis_client, "test:ix")
    assert index.add_many([(1, [10, 20])], fresh=True) == 2
    assert index.add_many([(2, list(range(100, 400)))], fresh=True) == 300
    assert index.lookup([10, 20, 150]) == [(1,), (1,), (2,)]


def test_redis_layout_is_checked(redis_client: redis.Redis) -> None:
    RedisIndex(redis_client, "test:ix", fingerprint_bits=64).add(1, [10])
    other = RedisIndex(redis_client, "test:ix", fingerprint_bits=54)
    for call in (lambda: other.lookup([10]), lambda: other.add(2, [10])):
        with pytest.raises(
            IndexVersionMismatch, match=r"fingerprint_bits=64.*fingerprint_bits=54.*reindex"
        ):
            call()
    with pytest.raises(ValueError, match="32 bits"):
        RedisIndex(redis_client, prefix="ct:narrow", fingerprint_bits=32).add(1, [2**32])


@pytest.mark.parametrize("fingerprint_bits", [64, 54, 32])
def test_redis_layouts_keep_fingerprints_apart(
    redis_client: redis.Redis, fingerprint_bits: int, search: str
) -> None:
    index = RedisIndex(redis_client, "test:ix", fingerprint_bits=fingerprint_bits)
    top = 2**fingerprint_bits - 1
    rng = random.Random(fingerprint_bits)
    fingerprints = sorted({0, 1, top, top - 1, *(rng.randrange(top) for _ in range(3000))})
    index.add_many([(master, [fp]) for master, fp in enumerate(fingerprints)])

    # Each fingerprint finds only its own master, also after blocks split.
    assert index.lookup(fingerprints) == [(master,) for master in range(len(fingerprints))]


def _unmixed(x: int, bits: int) -> int:
    """The fingerprint that RedisIndex mixes into x (its mixer's steps undone in reverse)."""
    mask, shift = 2**bits - 1, bits // 2
    for constant in reversed(redis_index._MIX):
        x ^= x >> shift  # an xor-shift by half the width or more is its own inverse
        x = x * pow(int(constant), -1, 2**bits) & mask
    return x


@pytest.mark.parametrize("fingerprint_bits", [64, 54])
def test_redis_keys_alike_in_their_low_bytes_stay_apart(
    redis_client: redis.Redis, fingerprint_bits: int, search: str
) -> None:
    """A lookup compares a few bytes of each record's key first: two fingerprints of one
    block whose keys differ only above those bytes still find only their own masters."""
    index = RedisIndex(redis_client, "test:ix", fingerprint_bits=fingerprint_bits)
    mixed = random.Random(3).getrandbits(fingerprint_bits)
    key_bit = redis_index.SHARD_BITS + MIN_LEVEL + 33  # past the low 32 bits of the key
    alike = [mixed, mixed ^ (1 << key_bit), mixed ^ (1 << (key_bit + 4))]
    fingerprints = [_unmixed(x, fingerprint_bits) for x in alike]
    assert index._mixed(fingerprints).tolist() == alike
    index.add(1, fingerprints[:1])
    assert index.lookup(fingerprints) == [(1,), (), ()]
    index.add_many([(2, fingerprints[1:2]), (3, fingerprints[2:])])
    assert index.lookup(fingerprints) == [(1,), (2,), (3,)]


def test_redis_prefixes_are_separate_indexes(redis_client: redis.Redis) -> None:
    first = RedisIndex(redis_client, prefix="a:ix")
    second = RedisIndex(redis_client, prefix="b:ix")
    first.add(1, [10])
    second.add(2, [10])
    first.clear()
    assert first.lookup([10]) == [()]
    assert second.lookup([10]) == [(2,)]


def test_redis_blocks_split_as_the_index_grows(redis_client: redis.Redis) -> None:
    """Past LOAD postings per block a shard splits blocks: a bigger index has more blocks of
    the same size, every posting is still found, and removals find them after the splits."""
    index = RedisIndex(redis_client, "test:ix")
    start_blocks = SHARDS * 2**MIN_LEVEL
    rng = random.Random(5)
    # 2.5 x LOAD postings per first block: every shard splits past twice as many blocks.
    masters = {
        m: [rng.getrandbits(64) for _ in range(40)] for m in range(start_blocks * LOAD // 16)
    }
    index.add_many(list(masters.items()))

    stats = index.stats()
    assert stats.postings == 40 * len(masters)
    assert start_blocks * 2 < stats.keys <= stats.postings / LOAD * 1.3
    sample = [fp for m in range(0, len(masters), 97) for fp in masters[m]]
    owners = [m for m in range(0, len(masters), 97) for _ in masters[m]]
    assert [ids for ids in index.lookup(sample)] == [(m,) for m in owners]
    removed = range(0, len(masters), 16)
    for m in removed:
        assert index.remove(m, masters[m]) == 40
    assert index.stats().postings == 40 * (len(masters) - len(removed))
    assert index.lookup(masters[1][:3]) == [(1,)] * 3
    assert index.lookup(masters[0][:3]) == [()] * 3


def test_a_reader_routing_with_an_old_layout_still_finds_every_posting(
    redis_client: redis.Redis,
) -> None:
    """A worker reads the shards' state once and keeps it; another process then grows the
    index past several splits. The worker's next lookup, routed to blocks that have since
    split, sees the newer state read back with the blocks and routes again: nothing is
    missed."""
    reader = RedisIndex(redis_client, "test:ix")
    writer = RedisIndex(redis_client, "test:ix")
    rng = random.Random(7)
    # 2.5 x LOAD postings per first block, as in the test above.
    masters = {
        m: [rng.getrandbits(64) for _ in range(40)]
        for m in range(SHARDS * 2**MIN_LEVEL * LOAD // 16)
    }
    writer.add(0, masters[0])
    assert reader.lookup(masters[0]) == [(0,)] * 40  # the reader's state: no split yet
    writer.add_many([(m, fps) for m, fps in masters.items() if m])
    assert writer.stats().keys > SHARDS * 2**MIN_LEVEL  # blocks have split

    sample = [fp for m in range(0, len(masters), 13) for fp in masters[m]]
    owners = [(m,) for m in range(0, len(masters), 13) for _ in masters[m]]
    assert reader.lookup(sample) == owners


def test_a_reader_keeping_blocks_sees_every_change_another_process_makes(
    redis_client: redis.Redis,
) -> None:
    """A worker keeps the blocks it read (cache_bytes) and reads them again only once their
    shard changed: what another process adds, removes, splits or clears shows at once."""
    reader = RedisIndex(redis_client, "test:ix", cache_bytes=2**22)
    writer = RedisIndex(redis_client, "test:ix")
    rng = random.Random(3)
    fps = [rng.getrandbits(64) for _ in range(500)]
    writer.add(1, fps)
    for _ in range(2):  # the first read learns the shards' versions, the second keeps
        assert reader.lookup(fps) == [(1,)] * 500
    before = _keys_read(redis_client)
    assert reader.lookup(fps) == [(1,)] * 500
    assert _keys_read(redis_client) - before == SHARDS  # the shards' states, no block

    writer.clear()
    writer.add(7, fps)  # a new index: as many writes so far as the old one had
    assert reader.lookup(fps) == [(7,)] * 500
    writer.add(2, fps[:10])
    assert reader.lookup(fps[:10]) == [(2, 7)] * 10
    writer.remove(7, fps)
    assert reader.lookup(fps) == [(2,)] * 10 + [()] * 490
    # Past several splits: every block of the reader's moved.
    writer.add_many([(m, [rng.getrandbits(64) for _ in range(50)]) for m in range(10, 3000)])
    assert reader.lookup(fps[:12]) == [(2,)] * 10 + [()] * 2


def test_a_reader_keeps_its_latest_blocks_within_its_budget(redis_client: redis.Redis) -> None:
    """Blocks past the budget are dropped oldest first and read again when asked for; the
    answers stay those of a reader that keeps nothing."""
    writer = RedisIndex(redis_client, "test:ix")
    rng = random.Random(5)
    pages = [[rng.getrandbits(64) for _ in range(200)] for _ in range(8)]
    for n, page in enumerate(pages):
        writer.add(n + 1, page)
    reader = RedisIndex(redis_client, "test:ix", cache_bytes=150_000)  # about four pages
    plain = RedisIndex(redis_client, "test:ix")
    for _ in range(2):
        for page in pages:
            assert reader.lookup(page) == plain.lookup(page)
    reader.lookup(pages[-1])
    before = _keys_read(redis_client)
    reader.lookup(pages[-1])  # the blocks just read: kept
    assert _keys_read(redis_client) - before == SHARDS
    before = _keys_read(redis_client)
    assert reader.lookup(pages[0]) == [(1,)] * 200  # the first page's: dropped, read again
    assert _keys_read(redis_client) - before > SHARDS


def test_a_reader_keeps_no_blocks_once_the_index_outgrows_its_budget(
    redis_client: redis.Redis,
) -> None:
    """Blocks are kept while the budget holds half of what keeping the whole index would
    take: with less, most reads would miss. A reader whose index grows past that keeps none
    and reads every block from Redis, with the same answers."""
    writer = RedisIndex(redis_client, "test:ix")
    rng = random.Random(7)
    page = [rng.getrandbits(64) for _ in range(200)]
    writer.add(1, page)
    reader = RedisIndex(redis_client, "test:ix", cache_bytes=150_000)

    def blocks_read() -> int:
        before = _keys_read(redis_client)
        assert reader.lookup(page) == [(1,)] * 200
        return _keys_read(redis_client) - before - SHARDS  # the shards' states aside

    blocks_read()  # learns the shards' versions and sizes
    blocks_read()  # keeps
    assert blocks_read() == 0
    # 2,000 more postings: keeping them all would take ~2 × 160 bytes each, past 2 × 150 KB.
    writer.add_many([(m, [rng.getrandbits(64) for _ in range(200)]) for m in range(2, 12)])
    blocks_read()  # the page's blocks changed: read again (a split shard's twice)
    every = blocks_read()  # and no longer kept: each time, a block per fingerprint or so
    assert every > 180 and blocks_read() == every


def _keys_read(client: redis.Redis) -> int:
    stats = client.info("stats")
    return stats["keyspace_hits"] + stats["keyspace_misses"]


def test_fresh_masters_are_appended_into_the_same_blocks(redis_client: redis.Redis) -> None:
    """Masters with new ids go in without the per-record search (`fresh`): the postings, the
    blocks and every lookup equal those of the checked add, across several batches (into
    blocks that exist already), script calls and splits."""
    rng = random.Random(11)
    masters = [(m, [rng.getrandbits(64) for _ in range(300)]) for m in range(1, 301)]
    fresh, checked = RedisIndex(redis_client, "ct:fresh"), RedisIndex(redis_client, "ct:chk")
    for start in range(0, len(masters), 100):
        batch = masters[start : start + 100]
        assert fresh.add_many(batch, fresh=True) == checked.add_many(batch) == 100 * 300

    assert _blocks(fresh) == _blocks(checked)
    assert (fresh.stats().postings, fresh.stats().keys) == (
        checked.stats().postings,
        checked.stats().keys,
    )
    sample = [fp for _, fps in masters[::17] for fp in fps[:20]]
    assert fresh.lookup(sample) == checked.lookup(sample)


def _blocks(index: RedisIndex) -> dict[bytes, set[bytes]]:
    """The index's blocks (name → set of records)."""
    client, width = index.client, index.record_bytes
    return {
        key.split(b":", 2)[2]: {value[i : i + width] for i in range(0, len(value), width)}
        for key in client.scan_iter(f"{index.prefix}:*")
        if key.count(b":") == 3 and (value := client.get(key)) is not None
    }


def test_a_large_batch_is_mixed_in_pieces_and_routed_a_shard_at_a_time_into_the_same_blocks(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past _MIXED_AT_ONCE fingerprints and _ROUTED_AT_ONCE records (millions of postings
    in a batch of works), postings are made in pieces and routed shard by shard to bound
    their memory: the blocks are the same, for masters whose fingerprints come sorted (as
    the fingerprinter gives them) or in any order, repeated, or none at all."""
    rng = random.Random(12)
    masters = [(m, [rng.getrandbits(64) for _ in range(300)]) for m in range(1, 101)]
    masters += [(m, sorted({rng.getrandbits(64) for _ in range(300)})) for m in range(101, 151)]
    masters.append((151, masters[0][1][:50] * 2))  # repeats: one posting each
    masters.append((152, []))  # too short a text for any fingerprint
    count = 100 * 300 + sum(len(fps) for _, fps in masters[100:150]) + 50
    whole = RedisIndex(redis_client, "ct:whole")
    assert whole.add_many(masters, fresh=True) == count
    monkeypatch.setattr(redis_index, "_ROUTED_AT_ONCE", 1000)
    monkeypatch.setattr(redis_index, "_MIXED_AT_ONCE", 777)  # not on a master's bounds
    by_shard = RedisIndex(redis_client, "ct:byshard")
    assert by_shard.add_many(masters, fresh=True) == count
    assert _blocks(by_shard) == _blocks(whole)
    sample = [fp for _, fps in masters[::7] for fp in fps[:30]]
    assert by_shard.lookup(sample) == whole.lookup(sample)


def test_linear_hashing_grows_one_block_at_a_time() -> None:
    """A shard grows to hold at most `load` postings a block, never shrinks, and stops at
    its top level; growing splits the blocks from `split` on, then those of the next
    level from 0, and only blocks that existed before are read."""
    assert grown(8, 0, 256 * 96, 96, 20) == (8, 0)
    assert grown(8, 0, 256 * 96 + 1, 96, 20) == (8, 1)
    assert grown(8, 250, 10, 96, 20) == (8, 250)
    assert grown(8, 0, 10**12, 96, 12) == (12, 0)
    assert split_blocks(8, 250, 9, 3).tolist() == [0, 1, 2, 250, 251, 252, 253, 254, 255]
    # Past a whole level: blocks made on the way (256..) are split from their records' old
    # blocks, so the old blocks are all that is read.
    assert split_blocks(8, 0, 10, 0).tolist() == list(range(256))
    low = np.array([5, 5 + 256, 5 + 512, 300], dtype=np.uint64)
    assert block_of(low, 8, 0).tolist() == [5, 5, 5, 44]
    assert block_of(low, 8, 6).tolist() == [5, 5 + 256, 5, 44]


def _shard_states(index: RedisIndex) -> list[list[bytes | None]]:
    return [
        index.client.hmget(f"{index.prefix}:{{{n:02x}}}", "level", "split", "postings", "blocks")
        for n in range(SHARDS)
    ]


def test_room_reserved_ahead_takes_the_postings_that_come(
    redis_client: redis.Redis,
) -> None:
    """An import into an empty index makes room for its postings first (`reserve`): the
    shards grow at once, writing no block, and the postings then go in with hardly a
    split; every posting is found, in about as many blocks as an index grown as they came. A
    shard holding records already is left to grow as postings come."""
    rng = random.Random(17)
    masters = [(m, [rng.getrandbits(64) for _ in range(80)]) for m in range(1, 6001)]
    ahead, grown_as_added = RedisIndex(redis_client, "ct:ahead"), RedisIndex(redis_client, "ct:as")
    ahead.reserve(80 * len(masters))
    reserved = [(int(level), int(split)) for level, split, *_ in _shard_states(ahead)]
    share = 80 * len(masters) // SHARDS
    assert reserved == [grown(MIN_LEVEL, 0, share, LOAD, 32)] * SHARDS != [(MIN_LEVEL, 0)] * SHARDS
    assert not list(redis_client.scan_iter("ct:ahead:{*}:*"))  # no block written
    for index in (ahead, grown_as_added):
        for start in range(0, len(masters), 1500):
            batch = masters[start : start + 1500]
            assert index.add_many(batch, fresh=True) == 80 * len(batch)
    assert next(redis_client.scan_iter("ct:ahead:{*}:*"), None)  # the blocks, once written
    # Shards given more than their even share of the postings split a few blocks more.
    blocks = [2 ** int(level) + int(split) for level, split, *_ in _shard_states(ahead)]
    assert all(
        0 <= n - (2**level + split) < 0.05 * n
        for n, (level, split) in zip(blocks, reserved, strict=True)
    )
    sample = [fp for _, fps in masters[::53] for fp in fps[:10]]
    owners = [(m,) for m, fps in masters[::53] for _ in fps[:10]]
    assert ahead.lookup(sample) == grown_as_added.lookup(sample) == owners
    assert 0.95 < ahead.stats().keys / grown_as_added.stats().keys < 1.05

    before = _shard_states(ahead)
    ahead.reserve(80 * len(masters))  # every shard holds its share already
    assert _shard_states(ahead) == before


def test_blocks_split_in_the_client_are_those_the_script_splits(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks are split by the client (read, divided, written back by a script if nothing
    wrote to the shard meanwhile), or, when writes keep coming, by a script in Valkey: the
    same blocks and shard states, splitting before a fresh add or after a checked one,
    records moving or not."""
    rng = random.Random(13)
    masters = [(m, [rng.getrandbits(64) for _ in range(80)]) for m in range(1, 12_001)]
    here, script = RedisIndex(redis_client, "ct:here"), RedisIndex(redis_client, "ct:script")
    batches = [(0, 5000, True), (5000, 9000, False), (9000, 9010, False), (9010, 12_000, True)]
    for index, tries in [(here, redis_index._SPLIT_TRIES), (script, 0)]:
        monkeypatch.setattr(redis_index, "_SPLIT_TRIES", tries)
        for start, stop, fresh in batches:
            assert index.add_many(masters[start:stop], fresh=fresh) == 80 * (stop - start)
    assert _shard_states(here) == _shard_states(script)
    assert _blocks(here) == _blocks(script)
    assert here.stats().keys > 2 * SHARDS * 2**MIN_LEVEL  # more than one level of splits
    sample = [fp for _, fps in masters[::101] for fp in fps[:10]]
    assert here.lookup(sample) == [(m,) for m, fps in masters[::101] for _ in fps[:10]]


@pytest.mark.parametrize("writes", [1, redis_index._SPLIT_TRIES * SHARDS])
def test_a_split_meeting_another_process_write_starts_again(
    redis_client: redis.Redis, writes: int
) -> None:
    """Blocks are split from what was read: when another process writes to the shard in
    between, the split's transaction is not applied and the split starts again from what is
    stored then (after _SPLIT_TRIES times, Valkey's script splits the shard). Nothing either
    process added is lost."""
    rng = random.Random(14)
    masters = [(m, [rng.getrandbits(64) for _ in range(80)]) for m in range(1, 8001)]
    index, other = RedisIndex(redis_client, "ct:race"), RedisIndex(redis_client, "ct:race")
    index.add_many(masters[:4000])
    late = [(m, [rng.getrandbits(64) for _ in range(80)]) for m in range(9000, 9000 + writes)]
    meanwhile = iter(late)
    divided = index._divided

    def divided_while_another_writes(*args):  # type: ignore[no-untyped-def]
        if (master := next(meanwhile, None)) is not None:
            other.add(*master)
        return divided(*args)

    index._divided = divided_while_another_writes  # type: ignore[method-assign]
    scripted = []
    run = index._run

    def noting_scripts(script, calls):  # type: ignore[no-untyped-def]
        scripted.extend([script is index._split] * len(calls))
        return run(script, calls)

    index._run = noting_scripts  # type: ignore[method-assign]
    index.add_many(masters[4000:], fresh=True)

    unwritten = next(meanwhile, (9000 + writes,))[0]
    written = [master for master in late if master[0] < unwritten]
    everything = masters + written
    assert index.stats().postings == 80 * len(everything)
    checked = everything[::37] + written
    sample = [fp for _, fps in checked for fp in fps]
    assert index.lookup(sample) == [(m,) for m, fps in checked for _ in fps]
    assert written == late  # every split met a write until the script took over
    assert any(scripted) == (writes > 1)


def test_redis_query_is_one_round_trip(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = RedisIndex(redis_client, "test:ix")
    for master in range(20):
        index.add(master, range(master * 50, master * 50 + 300))
    query = list(range(0, 1500, 3))  # 500 fingerprints over all 16 shards
    index.lookup(query[:1])  # the first query of a process also reads the shards' layout

    sends = []
    send = redis.connection.AbstractConnection.send_packed_command

    def counting_send(self: redis.connection.AbstractConnection, *args, **kwargs) -> None:
        sends.append(args)
        send(self, *args, **kwargs)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting_send)
    assert len(index.lookup(query)) == 500
    assert index.count_hits(query, max_df=3)
    assert len(sends) == 2


def test_a_lookup_reconnects_when_redis_dropped_its_connection(
    redis_client: redis.Redis,
) -> None:
    """Lookups send their packed reads on a connection of the client's pool: one Redis
    closed meanwhile (a restart, a timeout) is opened again, as for any command."""
    # A client of its own, named: only its connection is closed, not the other tests'.
    client = redis.Redis.from_url(_url_of(redis_client), client_name="ct-test-lookups")
    index = RedisIndex(client, "test:ix")
    index.add(1, range(300))
    assert index.lookup(range(300)) == [(1,)] * 300
    own = [c["id"] for c in redis_client.client_list() if c["name"] == "ct-test-lookups"]
    assert own and all(redis_client.client_kill_filter(_id=i) == 1 for i in own)
    assert index.lookup(range(300)) == [(1,)] * 300
    client.close()


def test_a_lookup_failing_midway_leaves_no_reply_behind(redis_client: redis.Redis) -> None:
    """An error reply in the middle of a lookup's reads (a shard's key of another type)
    raises, and the connection is not given back with the later replies unread: the next
    lookup gets its own answers."""
    index = RedisIndex(redis_client, "test:ix")
    index.add(1, range(300))
    state = redis_client.hgetall("test:ix:{03}")
    redis_client.delete("test:ix:{03}")
    redis_client.set("test:ix:{03}", "not a hash")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        index.lookup(range(300))
    redis_client.delete("test:ix:{03}")
    redis_client.hset("test:ix:{03}", mapping=state)
    for _ in range(3):
        assert index.lookup(range(300)) == [(1,)] * 300
        assert index.lookup([5000]) == [()]


def _url_of(client: redis.Redis) -> str:
    """The URL of client's server, with its password (the embedded Valkey requires one)."""
    kwargs = client.connection_pool.connection_kwargs
    password = f":{kwargs['password']}@" if kwargs.get("password") else ""
    return f"redis://{password}{kwargs['host']}:{kwargs['port']}/{kwargs.get('db', 0)}"


def test_redis_reloads_flushed_scripts(redis_client: redis.Redis) -> None:
    index = RedisIndex(redis_client, "test:ix")
    index.add(1, [10])
    redis_client.script_flush()
    assert index.add(2, [10]) == 1
    assert index.lookup([10]) == [(1, 2)]


def _add_masters(url: str, masters: list[int], seed: int) -> None:
    """One worker process: add each master to overlapping fingerprints, in random order."""
    client = redis.Redis.from_url(url)
    index = RedisIndex(client, "test:ix")
    rng = random.Random(seed)
    for master in masters:
        index.add(master, _shared_fingerprints(master))
        if rng.random() < 0.2:  # concurrent re-adds must stay no-ops
            index.add(master, _shared_fingerprints(master))
    client.close()


def _shared_fingerprints(master: int) -> list[int]:
    # 60 fingerprints in a pool of 200: every fingerprint is listed by many masters,
    # so workers keep rewriting the same blocks.
    return random.Random(master).sample(range(1, 201), 60)


def test_redis_concurrent_workers_end_with_the_exact_union(redis_client: redis.Redis) -> None:
    url = _url_of(redis_client)
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
    index = RedisIndex(redis_client, "test:ix")
    pool_fps = list(range(1, 201))
    assert index.lookup(pool_fps) == expected.lookup(pool_fps)
    assert index.stats().postings == expected.stats().postings == 400 * 60


def test_redis_bytes_per_posting(redis_client: redis.Redis) -> None:
    """400k postings of 54-bit fingerprints over 2,000 masters cost ≤ 16 B each, with Redis'
    default settings."""
    rng = random.Random(42)
    postings, masters = 400_000, 2_000
    index = RedisIndex(redis_client, "test:ix", fingerprint_bits=54)
    redis_client.execute_command("FLUSHDB", "SYNC")  # nothing left to free while measuring
    before = redis_client.info("memory")["used_memory"]
    batch = postings // masters
    for first in range(0, masters, 200):
        index.add_many(
            [(m, [rng.getrandbits(54) for _ in range(batch)]) for m in range(first, first + 200)]
        )
    used = redis_client.info("memory")["used_memory"] - before

    stats = index.stats()
    assert stats.postings == postings
    assert stats.bytes_per_posting <= 16, stats
    assert used / postings <= 16, used
