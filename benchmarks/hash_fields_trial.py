"""A trial of two layouts on a real index: today's blocks of the index on the
servers of COPYTRACK_DATA_DIR copied into hashes beside them (one hash a block, a field a
fingerprint's record key without its check bits, the value its postings: the record's
first byte, which holds the check bits, the work id and the place), then the latency
loop's pages looked up both ways, in turns, on the same server: today's read
(`RedisIndex.postings`, one ``MGET`` of the page's blocks, no blocks kept), one
pipelined ``HMGET`` a fingerprint, packed and read raw, and a read-only snapshot of the
same postings as two sorted arrays in a mapped file (`Snapshot`, the strong peer's lookup).
All must find the same postings.

Prints p50 / p99 ms a page, Valkey's own µs a page, the bytes read a page against the
bytes of the postings it found, and the bytes a posting the hashes take in Valkey (and how
many of them Valkey keeps compact, as listpacks). The hashes are deleted at the end.

    COPYTRACK_DATA_DIR=DIR .venv/bin/python -m benchmarks.hash_fields_trial SUSPECTS.jsonl
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.index_layouts import exchange
from benchmarks.latency_loop import latency_sample, read_texts
from fingerprinter import query_granule_fingerprints, to_letters
from testbed.evaluation import percentile
from tracker.context import open_context
from tracker.index import MIN_LEVEL, SHARD_BITS, SHARDS, RedisIndex
from tracker.masters.library import library_size
from tracker.matching.matcher import DEFAULT_MATCH_SETTINGS

TAG = b":f:"
ROUNDS = 3


def _copy_blocks(ix: RedisIndex, snapshot: list[np.ndarray]) -> tuple[int, int]:
    """Every block of ``ix`` copied into a hash beside it, and its postings appended to
    ``snapshot`` as rows of (mixed fingerprint without check bits, work id); (postings
    copied, hashes)."""
    client, record = ix.client, ix.record_bytes
    key_len = ix._key_len
    mask = int(ix._key_mask)
    postings = hashes = 0
    for shard in range(SHARDS):
        prefix = ix._shards[shard]
        names = [n for n in client.scan_iter(match=f"{prefix}:*", count=2000) if TAG not in n]
        for start in range(0, len(names), 2000):
            chunk = names[start : start + 2000]
            pipe = client.pipeline(transaction=False)
            for name, block in zip(chunk, client.mget(chunk), strict=True):
                if not block:
                    continue
                rows = np.frombuffer(block, dtype=np.uint8).reshape(-1, record)
                head = np.zeros((len(rows), 8), dtype=np.uint8)
                head[:, 8 - key_len :] = rows[:, :key_len]
                keys = head.view(">u8").ravel() & np.uint64(mask)
                number = name.rsplit(b":", 1)[1]
                low = np.uint64(int(number) & ((1 << MIN_LEVEL) - 1))
                x = ((keys << np.uint64(MIN_LEVEL)) | low) << np.uint64(SHARD_BITS)
                ids = np.ascontiguousarray(rows[:, key_len : key_len + 4]).view(">u4").ravel()
                snapshot.append(np.stack([x | np.uint64(shard), ids.astype(np.uint64)], 1))
                mapping: dict[bytes, bytes] = {}
                for key, row in zip(keys.tolist(), rows, strict=True):
                    field = key.to_bytes(key_len, "big")
                    value = bytes(row[:1]) + bytes(row[key_len:])
                    mapping[field] = mapping.get(field, b"") + value
                pipe.hset(prefix.encode() + TAG + number, mapping=mapping)
                postings += len(rows)
                hashes += 1
            pipe.execute()
    return postings, hashes


def _drop_hashes(ix: RedisIndex) -> None:
    for shard in range(SHARDS):
        names = list(ix.client.scan_iter(match=f"{ix._shards[shard]}:f:*", count=2000))
        for start in range(0, len(names), 2000):
            ix.client.delete(*names[start : start + 2000])


def hmget_postings(ix: RedisIndex, values: np.ndarray, max_df: int) -> tuple[int, int]:
    """(postings found, bytes read) of the fingerprints ``values``, one HMGET each."""
    shard, block, keys = ix._route(ix._mixed(values))
    fields = ((keys & ix._key_mask).astype(">u8").view(np.uint8).reshape(-1, 8))[
        :, 8 - ix._key_len :
    ]
    prefixes = [s.encode() + TAG for s in ix._shards]
    key_len = ix._key_len
    payload = b"".join(
        b"*3\r\n$5\r\nHMGET\r\n$%d\r\n%s%010d\r\n$%d\r\n%s\r\n"
        % (len(prefixes[s]) + 10, prefixes[s], b, key_len, f)
        for s, b, f in zip(shard.tolist(), block.tolist(), map(bytes, fields), strict=True)
    )
    replies = exchange(ix.client, payload, len(values))
    got = [reply[0] or b"" for reply in replies]
    read = sum(map(len, got))
    sizes = np.array([len(g) // 6 for g in got])
    rows = np.frombuffer(b"".join(got), dtype=np.uint8).reshape(-1, 6)
    query = np.repeat(np.arange(len(values)), sizes)
    master = np.ascontiguousarray(rows[:, 1:5]).view(">u4").ravel().astype(np.int64)
    df = sizes[query]
    keep = df <= max_df
    order = np.argsort(query[keep] << 32 | master[keep], kind="stable")
    return len(order), read


class Snapshot:
    """The index's postings as two sorted arrays in a file, mapped read-only (the strong
    peer's lookup over copytrack's own postings)."""

    def __init__(self, rows: list[np.ndarray], path: Path) -> None:
        table = np.concatenate(rows)
        table = table[np.argsort(table[:, 0], kind="stable")]
        np.save(path.with_suffix(".keys.npy"), table[:, 0])
        np.save(path.with_suffix(".ids.npy"), table[:, 1].astype(np.uint32))
        self.keys = np.load(path.with_suffix(".keys.npy"), mmap_mode="r")
        self.ids = np.load(path.with_suffix(".ids.npy"), mmap_mode="r")
        self.bytes = self.keys.nbytes + self.ids.nbytes

    def postings(self, ix: RedisIndex, values: np.ndarray, max_df: int) -> int:
        x = ix._mixed(values) & ix._mask
        left = np.searchsorted(self.keys, x, side="left")
        counts = np.searchsorted(self.keys, x, side="right") - left
        counts[counts > max_df] = 0
        ends = np.cumsum(counts)
        at = np.repeat(left - (ends - counts), counts) + np.arange(ends[-1] if len(ends) else 0)
        master = self.ids[at].astype(np.int64)
        query = np.repeat(np.arange(len(values)), counts)
        order = np.argsort(query << 32 | master, kind="stable")
        return len(order)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suspects", type=Path, help='JSONL of {"id", "text"}')
    args = parser.parse_args(argv)
    ctx = open_context()
    ix = ctx.index
    try:
        before = ctx.redis.info("memory")["used_memory"]
        rows: list[np.ndarray] = []
        copied, hashes = _copy_blocks(ix, rows)
        grown = ctx.redis.info("memory")["used_memory"] - before
        workdir = tempfile.TemporaryDirectory(prefix="snapshot-")
        snapshot = Snapshot(rows, Path(workdir.name) / "index")
        del rows
        sample_names = [
            ix._shards[s].encode() + TAG + b"%010d" % b for s in range(2) for b in range(100)
        ]
        encodings = [ctx.redis.object("encoding", n) for n in sample_names]
        compact = sum(e in (b"listpack", b"ziplist") for e in encodings if e) / max(
            sum(1 for e in encodings if e), 1
        )
        texts = read_texts(args.suspects)
        sample = [texts[i] for i in latency_sample(texts)]
        max_df = DEFAULT_MATCH_SETTINGS.df_cut(library_size(ctx))
        pages = [query_granule_fingerprints(to_letters(t), ctx.params).tagged() for t in sample]
        ways = {
            "blocks + MGET (today)": "mget",
            "hash fields + HMGET": "hmget",
            "mapped snapshot (sorted arrays)": "snapshot",
        }
        ms: dict[str, list[float]] = {w: [] for w in ways}
        usec: dict[str, list[float]] = {w: [] for w in ways}
        read: dict[str, int] = dict.fromkeys(ways, 0)
        found: dict[str, int] = dict.fromkeys(ways, 0)
        record = ix.record_bytes
        ix.postings(pages[0], max_df, kept=False)  # warm-up: shard states read
        hmget_postings(ix, pages[0], max_df)
        snapshot.postings(ix, pages[0], max_df)
        for _ in range(ROUNDS):
            for way, how in ways.items():
                start_usec = sum(s["usec"] for s in ctx.redis.info("commandstats").values())
                for values in pages:
                    started = time.perf_counter()
                    if how == "mget":
                        n = len(ix.postings(values, max_df, kept=False))
                        shard, block, _ = ix._route(ix._mixed(values))
                        nbytes = None
                    elif how == "hmget":
                        n, nbytes = hmget_postings(ix, values, max_df)
                    else:
                        n, nbytes = snapshot.postings(ix, values, max_df), 0
                    ms[way].append(1000 * (time.perf_counter() - started))
                    found[way] += n
                    if nbytes is not None:
                        read[way] += nbytes
                end_usec = sum(s["usec"] for s in ctx.redis.info("commandstats").values())
                usec[way].append((end_usec - start_usec) / len(pages))
        # Today's bytes: the distinct blocks a page meets, at their stored sizes.
        for values in pages:
            shard, block, _ = ix._route(ix._mixed(values))
            names = {
                f"{ix._shards[s]}:{b:010d}"
                for s, b in zip(shard.tolist(), block.tolist(), strict=True)
            }
            read["blocks + MGET (today)"] += ROUNDS * sum(ctx.redis.strlen(n) for n in names)
        print(
            f"{copied:,} postings in {hashes:,} hashes: {grown / max(copied, 1):.1f} bytes a "
            f"posting in Valkey ({compact:.0%} of a sample of hashes kept as listpacks); "
            f"a mapped snapshot of {snapshot.bytes / copied:.1f} bytes a posting; "
            f"{len(pages)} pages, {ROUNDS} rounds in turns."
        )
        print()
        print("| way | p50 ms | p99 ms | Valkey's own µs a page | postings a page |"
              " bytes read / bytes of postings found |")  # fmt: skip
        print("|---|---:|---:|---:|---:|---:|")
        for way in ways:
            postings_bytes = found[way] * record
            print(
                f"| {way} | {percentile(ms[way], 0.5):.2f} | {percentile(ms[way], 0.99):.2f} | "
                f"{statistics.median(usec[way]):.0f} | {found[way] / len(ms[way]):.0f} | "
                f"{read[way] / max(postings_bytes, 1):.1f} |"
            )
    finally:
        _drop_hashes(ix)
        ctx.close()


if __name__ == "__main__":
    main()
