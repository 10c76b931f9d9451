"""`SnapshotIndex`: a mapped snapshot plus a delta in Valkey answers as `MemoryIndex` does,
refuses layouts it does not know, and loses nothing when a compaction is killed.

Real Valkey: the session's embedded one (``redis_client`` from conftest).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import redis
from click.testing import CliRunner

from copytrack.cli import main
from fingerprinter import CHECK_BITS
from tests.corpus import texts
from tests.processes import wait_until, worker_process
from tracker.core.config import Settings
from tracker.index import IndexVersionMismatch, MemoryIndex, RedisIndex, snapshot
from tracker.index.snapshot import (
    SNAPSHOT_LAYOUT,
    CompactionLost,
    Lease,
    SnapshotArrays,
    SnapshotIndex,
    claim_compaction,
    compact_queued,
    compact_when_due,
    find,
    key_sample,
)
from tracker.masters.generation import open_ready
from tracker.masters.library import Work, add_work
from tracker.matching.matcher import match_text
from tracker.runtime.servers import Endpoints

BITS = 54


def snapshot_index(
    client: redis.Redis, data_dir: Path, prefix: str = "test:snap", copies_in_redis: bool = True
) -> SnapshotIndex:
    delta = RedisIndex(client, prefix, BITS, CHECK_BITS, layout_tag=SNAPSHOT_LAYOUT)
    return SnapshotIndex(delta, data_dir, copies_in_redis)


def assert_same_postings(
    index: SnapshotIndex, memory: MemoryIndex, asked: list[int], max_df: int | None = None
) -> None:
    got, want = index.postings(asked, max_df), memory.postings(asked, max_df)
    for field in ("query", "master", "df", "exact", "place"):
        assert getattr(got, field).tolist() == getattr(want, field).tolist(), field


def test_snapshot_and_delta_answer_as_the_memory_index(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    rng = random.Random(63)
    # A pool of fingerprints, each with its check bits above (as the fingerprinter gives),
    # small enough that works share many of them.
    pool = [rng.getrandbits(BITS) | rng.getrandbits(CHECK_BITS) << BITS for _ in range(3000)]
    index, memory = snapshot_index(redis_client, tmp_path / "a"), MemoryIndex(BITS, CHECK_BITS)
    index.ensure_version("v1")
    held: dict[int, list[int]] = {}
    compactions = 0
    for step in range(240):
        master = rng.randrange(60)
        roll = rng.random()
        if roll < 0.6 or not held:
            fps = rng.sample(pool, rng.randrange(1, 120))
            places = [rng.randrange(256) for _ in fps]
            assert index.add(master, fps, places) == memory.add(master, fps, places)
            held.setdefault(master, []).extend(fps)
        elif roll < 0.9:
            master = rng.choice(sorted(held))
            some = held[master] if rng.random() < 0.5 else rng.sample(held[master], 5)
            assert index.remove(master, some) == memory.remove(master, some)
        else:
            assert index.compact()
            compactions += 1
        if step % 20 == 0:
            asked = rng.sample(pool, 400)
            # Checks that disagree: found by the fingerprint, not exact.
            asked += [fp ^ 1 << BITS for fp in asked[:40]]
            assert_same_postings(index, memory, asked)
            assert_same_postings(index, memory, asked, max_df=3)
            assert index.generation()[1] == memory.generation()[1]
    assert compactions >= 5
    asked = pool[:1000]
    assert_same_postings(index, memory, asked)
    # Another host: no file of the snapshot in its data dir, it copies it from Valkey.
    other = snapshot_index(redis_client, tmp_path / "b")
    assert_same_postings(other, memory, asked)
    assert list((tmp_path / "b").glob("*.ctsnap"))
    assert index.compact()
    assert_same_postings(other, memory, asked)  # it follows the next snapshot
    assert index.delta.generation()[1] == 0  # the delta merged whole, nothing lost
    assert index.generation()[1] == memory.generation()[1] > 0


def _batch(rng: random.Random, masters: range, pool: list[int]) -> list:
    return [(m, sorted(set(rng.sample(pool, rng.randrange(20, 200))))) for m in masters]


def test_a_merge_holds_each_posting_once_and_in_key_order() -> None:
    """What a compaction merges: a delta with postings given twice (an add retried) and
    postings the snapshot holds already (a compaction killed after its switch), on keys
    that many works share, and fresh postings of new ids."""
    rng = np.random.default_rng(5)
    common = rng.integers(0, 2**60, 40, dtype=np.uint64)  # keys held by many postings

    def postings(n: int, first_id: int) -> set[tuple[int, int]]:
        keys = np.where(rng.random(n) < 0.5, rng.choice(common, n),
                        rng.integers(0, 2**60, n, dtype=np.uint64))  # fmt: skip
        ids = rng.integers(first_id, first_id + 300, n)
        return set(zip(keys.tolist(), ids.tolist(), strict=True))

    def arrays(pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        keys = np.array([k for k, _ in pairs], dtype=np.uint64)
        ids = np.array([i for _, i in pairs], dtype=np.uint32)
        return keys, ids, (ids % 251).astype(np.uint8)

    held, new, fresh = postings(20_000, 0), postings(10_000, 200), postings(5_000, 1000)
    keys, ids, places = arrays(sorted(held))
    order = np.argsort(keys)
    old = SnapshotArrays(keys[order], ids[order], places[order])
    given = list(new) + list(new)[::3] + list(held)[::4]  # repeats, and postings old holds
    rng.shuffle(given)
    result = snapshot.merged(old, *arrays(given), fresh=arrays(list(fresh)))
    pairs = list(zip(result.keys.tolist(), result.ids.tolist(), strict=True))
    assert len(pairs) == len(set(pairs))
    assert set(pairs) == held | new | fresh
    assert (result.keys[1:] >= result.keys[:-1]).all()
    assert (result.places == (result.ids % 251)).all()


def test_a_batch_larger_than_the_snapshot_goes_straight_into_a_new_one(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """The first batch of a library is written as a snapshot, not into the delta; a small
    batch after it goes into the delta; one that would leave the delta larger than the
    snapshot takes the delta with it into the next. Every posting answered throughout."""
    rng = random.Random(5)
    pool = [rng.getrandbits(BITS) | rng.getrandbits(CHECK_BITS) << BITS for _ in range(4000)]
    index, memory = snapshot_index(redis_client, tmp_path), MemoryIndex(BITS, CHECK_BITS)
    index.ensure_version("v1")
    asked = pool[:1500] + [fp ^ 1 << BITS for fp in pool[:50]]

    first = _batch(rng, range(0, 100), pool)
    assert index.add_many(first, fresh=True) == memory.add_many(first, fresh=True)
    assert index.delta.generation()[1] == 0  # nothing went through the delta's blocks
    assert redis_client.hget("test:snap:{snap}:state", "name") is not None
    assert_same_postings(index, memory, asked)

    small = _batch(rng, range(100, 110), pool)
    assert index.add_many(small, fresh=True) == memory.add_many(small, fresh=True)
    in_delta = index.delta.generation()[1]
    assert in_delta > 0
    assert_same_postings(index, memory, asked)

    large = _batch(rng, range(110, 300), pool)
    assert index.add_many(large, fresh=True) == memory.add_many(large, fresh=True)
    assert index.delta.generation()[1] == 0  # the delta went into the new snapshot too
    assert_same_postings(index, memory, asked)
    assert index.generation()[1] == memory.generation()[1]
    # Another host copies the snapshot built so from Valkey.
    assert_same_postings(snapshot_index(redis_client, tmp_path / "b"), memory, asked)


def test_a_batch_goes_into_the_delta_while_another_process_compacts(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    rng = random.Random(6)
    pool = [rng.getrandbits(BITS) for _ in range(2000)]
    index, memory = snapshot_index(redis_client, tmp_path), MemoryIndex(BITS, CHECK_BITS)
    other = Lease(index)
    assert other.take()
    works = _batch(rng, range(50), pool)
    assert index.add_many(works, fresh=True) == memory.add_many(works, fresh=True)
    assert index.delta.generation()[1] == memory.generation()[1]  # all of it in the delta
    assert not compact_when_due(index, always=True)  # the lease is the other's
    assert_same_postings(index, memory, pool[:500])
    other.give_back()
    assert compact_when_due(index, always=True)
    assert index.delta.generation()[1] == 0
    assert_same_postings(index, memory, pool[:500])


def test_a_compaction_that_lost_its_lease_switches_nothing(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    """A compaction that stalled past its lease while another process took it over (or
    whose index was cleared) leaves the snapshot named and its own chunks gone."""
    index = snapshot_index(redis_client, tmp_path)
    index.add_many([(1, [5, 6, 7])], fresh=True)
    index.add(2, [6, 9])
    name = redis_client.hget("test:snap:{snap}:state", "name")
    lease = Lease(index, seconds=60)
    assert lease.take()
    redis_client.set(lease.key, "another process's token")  # as after an expiry
    with pytest.raises(CompactionLost):
        index.compact(lease=lease)
    assert redis_client.hget("test:snap:{snap}:state", "name") == name
    assert index.delta.generation()[1] == 2  # work 2's postings still in the delta
    chunks = {k.decode() for k in redis_client.scan_iter(match="test:snap:snap:*")}
    assert chunks == {f"test:snap:snap:{name.decode()}:0"}
    assert index.lookup([5, 6, 9]) == [(1,), (1, 2), (2,)]


def test_a_page_reads_only_the_delta_from_valkey(redis_client: redis.Redis, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    index = snapshot_index(redis_client, tmp_path)
    works = [(m, rng.integers(0, 2**BITS, 400, dtype=np.uint64)) for m in range(300)]
    index.add_many(works, fresh=True)
    assert compact_when_due(index, always=True)
    asked = np.concatenate([fps[:2] for _, fps in works])
    redis_client.config_resetstat()
    found = index.postings(asked)
    assert sorted(set(found.master.tolist())) == list(range(300))
    info = redis_client.info("stats")
    # The delta's blocks are empty: the 600 fingerprints' 600 postings took no block bytes.
    assert info["total_net_output_bytes"] < 20_000


def test_a_process_of_the_blocks_layout_refuses_a_snapshot_index(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    index = snapshot_index(redis_client, tmp_path)
    index.ensure_version("v1")
    index.add(1, [5, 6, 7])
    old = RedisIndex(redis_client, "test:snap", BITS, CHECK_BITS)
    with pytest.raises(IndexVersionMismatch) as refused:
        old.postings([5])
    assert "copytrack reindex" in str(refused.value)
    assert "\n" not in str(refused.value)
    with pytest.raises(IndexVersionMismatch):
        old.ensure_version("v1")


def test_a_library_built_into_a_snapshot_refuses_other_fingerprint_parameters(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    # A first batch goes straight into a snapshot: the delta holds none of its postings.
    index = snapshot_index(redis_client, tmp_path)
    index.ensure_version("v1")
    index.add_many([(1, [5, 6]), (2, [6, 8])], fresh=True)
    assert index.delta.generation()[1] == 0
    other = snapshot_index(redis_client, tmp_path / "other")
    with pytest.raises(IndexVersionMismatch, match="copytrack reindex"):
        other.ensure_version("v2")
    index.ensure_version("v1")  # its own version still opens it
    assert index.lookup([5, 6, 8]) == [(1,), (1, 2), (2,)]


def test_a_snapshot_process_refuses_an_index_of_blocks_and_reindex_migrates_it(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    old = RedisIndex(redis_client, "test:snap", BITS, CHECK_BITS)
    old.ensure_version("v1")
    old.add_many([(1, [5, 6]), (2, [6, 8])])
    index = snapshot_index(redis_client, tmp_path)
    with pytest.raises(IndexVersionMismatch, match="copytrack reindex"):
        index.ensure_version("v1")
    with pytest.raises(IndexVersionMismatch, match="copytrack reindex"):
        index.postings([5])
    # What `copytrack reindex` does: clear, rebuild from the library, compact.
    index.clear()
    index.ensure_version("v1")
    index.add_many([(1, [5, 6]), (2, [6, 8])], fresh=True)
    assert compact_when_due(index, always=True)
    assert index.lookup([5, 6, 8, 9]) == [(1,), (1, 2), (2,), ()]


def test_an_unknown_snapshot_file_is_refused_in_one_line(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    index = snapshot_index(redis_client, tmp_path)
    index.add(1, [5, 6, 7])
    assert index.compact()
    (path,) = tmp_path.glob("*.ctsnap")
    data = bytearray(path.read_bytes())
    data[: len(b"CTSNAP1")] = b"CTSNAP9"
    path.write_bytes(bytes(data))
    other = snapshot_index(redis_client, tmp_path)
    with pytest.raises(IndexVersionMismatch) as refused:
        other.postings([5])
    assert "copytrack reindex" in str(refused.value) and "\n" not in str(refused.value)


_COMPACTING_CHILD = textwrap.dedent(
    """
    import sys, numpy as np, redis
    from pathlib import Path
    from fingerprinter import CHECK_BITS
    from tracker.index import RedisIndex
    from tracker.index.snapshot import SNAPSHOT_LAYOUT, SnapshotIndex
    import tracker.index.snapshot as snapshot
    snapshot.LEASE_SECONDS = 1.0  # a killed child's lease soon lapses for the next
    client = redis.Redis.from_url(sys.argv[1])
    index = SnapshotIndex(
        RedisIndex(client, "test:snap", 54, CHECK_BITS, layout_tag=SNAPSHOT_LAYOUT),
        Path(sys.argv[2]),
    )
    master = int(sys.argv[3])
    while True:
        fps = np.random.default_rng(master).integers(0, 2**54, 2000, dtype=np.uint64)
        index.add_many([(master, fps)], fresh=True)
        print(master, flush=True)  # as `library add` prints what it added
        master += 1
        assert snapshot.compact_when_due(index, always=True)  # as a worker does, leased
    """
)


def test_a_compaction_killed_at_any_point_loses_no_posting(
    redis_client: redis.Redis, endpoints: Endpoints, tmp_path: Path
) -> None:
    url = endpoints.redis_url
    rng = random.Random(9)
    data_dir = tmp_path / "host"
    # A snapshot of 600,000 postings first: each compaction takes a while to kill it in.
    seeded = snapshot_index(redis_client, data_dir)
    seeded.add_many([(m, _fingerprints(m)) for m in range(300)], fresh=True)
    assert seeded.compact()
    added = list(range(300))
    for _ in range(6):
        start = added[-1] + 1 if added else 0
        time.sleep(1.2)  # the lease of the child killed before lapses
        child = subprocess.Popen(
            [sys.executable, "-c", _COMPACTING_CHILD, url, str(data_dir), str(start)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            # Past a few compactions, then killed at a random moment of the next (the lease
            # the last child left lapses first).
            for _ in range(rng.randrange(2, 5)):
                line = child.stdout.readline()
                assert line, "the child stopped: its compaction was refused"
                added.append(int(line))
            time.sleep(rng.random() * 0.25)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        for host in (data_dir, tmp_path / f"fresh{len(added)}"):
            index = snapshot_index(redis_client, host)
            for master in (added[0], added[len(added) // 2], added[-1]):
                found = index.postings(_fingerprints(master))
                assert (found.master == master).sum() == 2000, master
    # A later compaction tidies whatever the kills left: still every posting.
    time.sleep(1.2)
    assert compact_when_due(index, always=True)
    assert index.delta.generation()[1] == 0
    for master in added:
        assert (index.postings(_fingerprints(master)[:50]).master == master).sum() == 50


_BUILDING_CHILD = textwrap.dedent(
    """
    import sys, numpy as np, redis
    from pathlib import Path
    from fingerprinter import CHECK_BITS
    from tracker.index import RedisIndex
    import tracker.index.snapshot as snapshot
    snapshot.LEASE_SECONDS = 1.0
    client = redis.Redis.from_url(sys.argv[1])
    index = snapshot.SnapshotIndex(
        RedisIndex(client, sys.argv[3], 54, CHECK_BITS, layout_tag=snapshot.SNAPSHOT_LAYOUT),
        Path(sys.argv[2]),
    )
    masters = range(int(sys.argv[4]), int(sys.argv[4]) + 300)
    rng = np.random.default_rng
    index.add_many([(m, rng(m).integers(0, 2**54, 2000, dtype=np.uint64)) for m in masters],
                   fresh=True)
    print(index.delta.generation()[1], flush=True)  # as `library add` prints what it added
    """
)


def test_large_batches_are_runs_of_their_own_and_leave_the_base_alone(
    redis_client: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of RUN_MIN_POSTINGS or more into a library: each is sorted into a run of
    its own, merged only with runs no larger than it gathers, so the base is rewritten
    only when they reach its size and a lookup reads few parts. Every posting is answered
    throughout, a removal masks a work in any run, other hosts copy every part, and a
    compaction merges them all into one."""
    monkeypatch.setattr(snapshot, "RUN_MIN_POSTINGS", 2_000)
    rng = random.Random(8)
    pool = [rng.getrandbits(BITS) | rng.getrandbits(CHECK_BITS) << BITS for _ in range(6000)]
    index, memory = snapshot_index(redis_client, tmp_path / "a"), MemoryIndex(BITS, CHECK_BITS)
    index.ensure_version("v1")
    asked = pool[:2500] + [fp ^ 1 << BITS for fp in pool[:50]]

    def state() -> dict[str, str]:
        raw = redis_client.hgetall("test:snap:{snap}:state")
        return {k.decode(): v.decode() for k, v in raw.items()}

    bases, most_runs = set(), 0
    for n in range(9):
        batch = _batch(rng, range(100 * n, 100 * n + 100), pool)
        assert index.add_many(batch, fresh=True) == memory.add_many(batch, fresh=True)
        assert index.delta.generation()[1] == 0  # nothing went through the delta's blocks
        bases.add(state()["name"])
        most_runs = max(most_runs, len(json.loads(state().get("runs") or "[]")))
        assert_same_postings(index, memory, asked)
        assert index.generation()[1] == memory.generation()[1]
    assert len(bases) <= 4  # the base rewritten as it doubles, not at every batch
    assert 1 <= most_runs <= 4  # about log2 of 9 batches (their sizes vary)
    assert len(json.loads(state()["runs"])) >= 1  # 9 batches: a base of 8 and a run of 1

    # A work in the newest run removed, one in the base partly: masked where they are.
    assert index.remove(850, pool) == memory.remove(850, pool)
    some = _batch(random.Random(1), range(5, 6), pool)[0][1][:7]
    assert index.remove(5, some) == memory.remove(5, some)
    assert_same_postings(index, memory, asked)
    other = snapshot_index(redis_client, tmp_path / "b")  # another host copies every part
    assert_same_postings(other, memory, asked)
    assert len(list((tmp_path / "b").glob("*.ctsnap"))) == 1 + len(json.loads(state()["runs"]))

    assert index.compact()
    assert json.loads(state()["runs"]) == []
    assert_same_postings(index, memory, asked)
    assert_same_postings(other, memory, asked)
    assert len(list((tmp_path / "b").glob("*.ctsnap"))) == 1  # the merged parts' files go
    index.drop_strays()
    chunks = {k.decode() for k in redis_client.scan_iter(match="test:snap:snap:*")}
    assert chunks and all(k.startswith(f"test:snap:snap:{state()['name']}:") for k in chunks)


def test_without_copies_in_redis_the_data_dir_holds_the_only_copy(
    redis_client: redis.Redis, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """COPYTRACK_INDEX_SNAPSHOT_IN_REDIS=false: a base, its runs and a compaction leave no
    byte of the snapshot in Redis; every posting is answered from the files of the data dir
    the processes share, and a process with another data dir stops with a line saying what
    to do."""
    monkeypatch.setattr(snapshot, "RUN_MIN_POSTINGS", 2_000)
    rng = random.Random(9)
    pool = [rng.getrandbits(BITS) | rng.getrandbits(CHECK_BITS) << BITS for _ in range(6000)]
    index = snapshot_index(redis_client, tmp_path / "a", copies_in_redis=False)
    memory = MemoryIndex(BITS, CHECK_BITS)
    index.ensure_version("v1")
    asked = pool[:2500]

    def copies() -> list[bytes]:
        return list(redis_client.scan_iter(match="test:snap:snap:*"))

    for n in range(3):
        batch = _batch(rng, range(100 * n, 100 * n + 100), pool)
        assert index.add_many(batch, fresh=True) == memory.add_many(batch, fresh=True)
    assert redis_client.hget("test:snap:{snap}:state", "runs") not in (None, b"[]")
    few = _batch(rng, range(300, 310), pool)  # into the delta's blocks
    assert index.add_many(few) == memory.add_many(few)
    assert_same_postings(index, memory, asked)
    assert copies() == []
    assert index.compact()
    assert copies() == []
    assert_same_postings(index, memory, asked)
    same_dir = snapshot_index(redis_client, tmp_path / "a")  # another process, same data dir
    assert_same_postings(same_dir, memory, asked)
    elsewhere = snapshot_index(redis_client, tmp_path / "b")
    with pytest.raises(IndexVersionMismatch) as refused:
        elsewhere.postings(asked)
    assert "not in this data dir" in str(refused.value)
    assert "COPYTRACK_INDEX_SNAPSHOT_IN_REDIS=false" in str(refused.value)
    assert "copytrack reindex" in str(refused.value)


def test_a_batch_built_into_a_snapshot_killed_at_any_point_loses_no_posting(
    redis_client: redis.Redis, endpoints: Endpoints, tmp_path: Path
) -> None:
    """A first batch of 600,000 postings, built straight into a snapshot, killed with
    SIGKILL at a random moment: once it returned, every posting is found (from its host
    and a fresh one); killed before, the index still answers and a later batch (once the
    lease lapsed) is built whole."""
    rng = random.Random(12)
    for round_ in range(6):
        prefix = f"test:snap{round_}"
        child = subprocess.Popen(
            [sys.executable, "-c", _BUILDING_CHILD, endpoints.redis_url, str(tmp_path / "host"),
             prefix, "0"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(0.3 + rng.random() * 1.5)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert child.stdout is not None
        printed = child.stdout.read()
        for host in ("host", f"fresh{round_}"):
            index = snapshot_index(redis_client, tmp_path / host, prefix)
            found = index.postings(_fingerprints(299))
            if printed:
                assert int(printed) == 0  # built straight into the snapshot, not the delta
                assert (found.master == 299).sum() == 2000
        time.sleep(1.2)  # the lease of a child killed while building lapses
        done = subprocess.run(
            [sys.executable, "-c", _BUILDING_CHILD, endpoints.redis_url, str(tmp_path / "host"),
             prefix, "1000"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert int(done.stdout) == 0 or printed  # into a snapshot, unless one was there
        index = snapshot_index(redis_client, tmp_path / "fresh", prefix)
        for master in (1000, 1150, 1299) + ((0, 299) if printed else ()):
            assert (index.postings(_fingerprints(master)).master == master).sum() == 2000


def _fingerprints(master: int) -> np.ndarray:
    """The fingerprints the child gives ``master`` (the same function as its own)."""
    return np.random.default_rng(master).integers(0, 2**54, 2000, dtype=np.uint64)


def _works_file(works: list[str], where: Path) -> str:
    path = where / "works.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": f"w{n}", "text": t}, ensure_ascii=False) + "\n"
            for n, t in enumerate(works)
        ),
        encoding="utf-8",
    )
    return str(path)


def test_a_library_on_the_snapshot_index_matches_before_and_after_reindex(
    tracker_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """COPYTRACK_INDEX_SNAPSHOT: works added match from the delta, `copytrack reindex`
    (also the way from an index of blocks) puts them into the snapshot, and a work removed
    no longer matches."""
    works = texts("zh_news", 12)
    runner = CliRunner()
    monkeypatch.setenv("COPYTRACK_INDEX_SNAPSHOT", "false")  # first an index of blocks
    added = runner.invoke(main, ["library", "add", _works_file(works, tmp_path)])
    assert added.exit_code == 0, added.output
    monkeypatch.setenv("COPYTRACK_INDEX_SNAPSHOT", "true")
    with pytest.raises(IndexVersionMismatch, match="copytrack reindex"):
        open_ready(Settings.from_env())
    reindexed = runner.invoke(main, ["reindex"], catch_exceptions=False)
    assert reindexed.exit_code == 0, reindexed.output
    ctx = open_ready(Settings.from_env())
    try:
        assert isinstance(ctx.index, SnapshotIndex)
        assert ctx.index.delta.generation()[1] == 0  # every posting in the snapshot
        copy = works[5][: len(works[5]) // 2]
        assert [m.master.external_id for m in match_text(ctx, copy)] == ["w5"]
        more = runner.invoke(main, ["library", "add", _works_file(texts("zh_news", 14), tmp_path)])
        assert more.exit_code == 0 and more.output.count("added\t") == 2, more.output
        assert ctx.index.delta.generation()[1] > 0  # the new works in the delta
        late = texts("zh_news", 14)[13]
        assert [m.master.external_id for m in match_text(ctx, late[:2000])] == ["w13"]
        removed = runner.invoke(main, ["library", "rm", "w5"])
        assert removed.exit_code == 0, removed.output
        assert match_text(ctx, copy) == []
    finally:
        ctx.close()


def test_the_install_builds_the_compiled_search_of_bounds() -> None:
    assert snapshot._compiled_bounds is not None, (
        "tracker/index/_snapshot_bounds.pyx was not built: run `make .venv/.installed` "
        "(it needs a C compiler and Python's headers)"
    )


@pytest.mark.parametrize("way", ["compiled loop", "numpy passes"])
@pytest.mark.parametrize("size", [0, 10, 1000, 50_000])
@pytest.mark.parametrize("top", [2**40, 2**64])
def test_the_sampled_search_finds_what_a_binary_search_of_all_keys_finds(
    size: int, top: int, way: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if way == "numpy passes":
        monkeypatch.setattr(snapshot, "_compiled_bounds", None)
    rng = np.random.default_rng(size)
    # Few distinct keys (runs far longer than a sample's step, all in the directory's first
    # prefix) and many, ends included, up to the top of 64 bits.
    keys = np.sort(np.concatenate((
        rng.integers(0, 50, size // 2, dtype=np.uint64),
        rng.integers(0, top, size - size // 2, dtype=np.uint64, endpoint=top < 2**64),
    )))  # fmt: skip
    arrays = SnapshotArrays(
        keys, np.arange(size, dtype=np.uint32), np.zeros(size, np.uint8), key_sample(keys)
    )
    asked = np.concatenate((rng.choice(keys, 300) if size else np.empty(0, np.uint64),
                            rng.integers(0, top, 300, dtype=np.uint64, endpoint=top < 2**64),
                            np.array([0, 2**63, 2**64 - 1], np.uint64), keys[-1:] + 1))  # fmt: skip
    asked &= ~np.uint64(2**CHECK_BITS - 1)
    query, master, _, _ = find(arrays, asked, CHECK_BITS)
    plain = SnapshotArrays(keys, arrays.ids, arrays.places)  # searched whole
    want_query, want_master, _, _ = find(plain, asked, CHECK_BITS)
    assert query.tolist() == want_query.tolist() and master.tolist() == want_master.tolist()
    assert len(query) >= (300 if size else 0)


def test_one_compaction_is_queued_at_a_time_and_only_when_due(
    redis_client: redis.Redis, tmp_path: Path
) -> None:
    index = snapshot_index(redis_client, tmp_path)
    rng = np.random.default_rng(8)
    index.add_many([(1, rng.integers(0, 2**BITS, 100, dtype=np.uint64))], fresh=True)
    assert not claim_compaction(index, 60)  # the delta is empty
    index.add_many([(m, rng.integers(0, 2**BITS, 2000, dtype=np.uint64)) for m in range(2, 110)])
    lease = Lease(index)
    assert lease.take()
    assert not claim_compaction(index, 60)  # another process compacts it
    lease.give_back()
    assert claim_compaction(index, 60)
    assert not claim_compaction(index, 60)  # queued already
    assert compact_queued(index)
    assert index.delta.generation()[1] == 0
    assert not claim_compaction(index, 60)  # not due any more


@pytest.mark.slow
def test_a_worker_compacts_what_was_added_without_library_add(
    tracker_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Works added one at a time (as `POST /api/v1/works` does) stay in the delta until a
    worker consuming the maintenance queue finds it past its share and compacts it."""
    monkeypatch.setenv("COPYTRACK_INDEX_SNAPSHOT", "true")
    ctx = open_ready(Settings.from_env())
    try:
        assert isinstance(ctx.index, SnapshotIndex)
        work = texts("zh_news", 3)[2]
        [added] = add_work(ctx, Work(external_id="pushed", text=work), index_on_disk=True)
        assert added.status == "added"
        # Past COMPACT_MIN_POSTINGS in the delta: postings of other ids, as many works
        # pushed one at a time would bring.
        rng = np.random.default_rng(4)
        many = [(10_000 + m, rng.integers(0, 2**BITS, 2000, dtype=np.uint64)) for m in range(110)]
        for batch in (many[:55], many[55:]):
            ctx.index.add_many(batch)
        assert ctx.index.compaction_due()
        log = tmp_path / "worker.log"
        with worker_process(ctx, log, queues="maintenance"):
            wait_until(lambda: ctx.index.delta.generation()[1] == 0, 90, "compaction", log)
        assert [m.master.external_id for m in match_text(ctx, work[:2000])] == ["pushed"]
        found = ctx.index.postings(many[-1][1])
        assert (found.master == many[-1][0]).sum() == 2000
        assert not ctx.index.compaction_due()
    finally:
        ctx.close()
