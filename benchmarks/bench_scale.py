"""Scale benchmark: copytrack's commands against the strong in-process winnowing peer, on the
same library and the same suspects, at a publisher's library sizes.

    .venv/bin/python -m benchmarks.bench_scale                  # 10k and 100k works: scale.md
    .venv/bin/python -m benchmarks.bench_scale --quick          # 2k and 5k works: prints only
    .venv/bin/python -m benchmarks.bench_scale --sizes 1000000  # the documented 1M run

For each library size N, in one run:

1. library: the real masters of the accuracy benchmark (`testbed.evaluation.build_benchmark`
   on the shared corpus) plus N − real distractor works (`testbed.distractors`: Markov
   chains over the corpus's tokens, lengths drawn from it, copying no work), as JSONL;
2. suspects: the benchmark's labelled suspects (copies under every attack of the eval,
   unrelated and hard negatives), as JSONL;
3. copytrack: embedded servers in a fresh data dir (started before the clock), then the
   commands a user runs, each timed as a whole: ``copytrack library add LIBRARY.jsonl`` and
   ``copytrack check --jsonl SUSPECTS.jsonl`` (once Valkey has finished the append-only-file
   rewrite the ingest left running, which is reported); query latency is ``match_text``
   per suspect timed in a fresh process against the same servers, after one match to warm
   it up (`benchmarks.latency_loop`); Valkey ``used_memory`` and the index's bytes per
   posting; MongoDB ``dbStats``;
4. peer (`benchmarks.winnowing_peer.StrongWinnowingIndex`, the strong peer: vectorized
   lookups, a cut for hashes more than 100 works hold): every work added (ingest) before
   copytrack starts,
   in this process. The machine's speed drifts over minutes, so the two are timed in
   turns: the whole check ``CHECK_ROUNDS`` times each, alternating (copytrack's command,
   then the peer matching every suspect; the medians compared, every round reported), and
   the peer's latency loop right after copytrack's;
5. both scored with the eval's scoring: recall and precision of (suspect, work) pairs,
   F1, and the false-positive rate on hard negatives.

Every size's servers run on to the end, when copytrack's latency loop runs at every size in
turns, ``LATENCY_ROUNDS`` times: how latency grows with the library is the ratio of sizes
measured at the same time, not across the hour the larger ingest took. Then, on the largest
size's servers, what a query costs without its read of works from MongoDB, and with the
index lookup alone (`benchmarks.latency_floor`).

A default run writes benchmarks/results/scale.md; other runs only print, unless --out.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice
from pathlib import Path

import redis

from benchmarks import library_reads
from benchmarks.bytecode import compile_project
from benchmarks.latency_floor import floor_rounds
from benchmarks.latency_floor import report as floor_report
from benchmarks.latency_loop import (
    LATENCY_CHARS,
    in_fresh_process,
    latency_sample,
)
from benchmarks.shared_corpus import CORPUS_DIR, require_shared
from benchmarks.winnowing_peer import StrongWinnowingIndex
from testbed.distractors import distractors
from testbed.evaluation import (
    Outcome,
    Score,
    Suspect,
    build_benchmark,
    hard_fp_rate,
    load_documents,
    percentile,
    score_outcomes,
)
from tracker.core.config import Settings
from tracker.masters.generation import open_ready
from tracker.runtime.servers import ensure_servers, stop_servers

RESULTS = Path(__file__).resolve().parent / "results" / "scale.md"
CACHE = Path(__file__).resolve().parent / ".cache"
COMMAND = [sys.executable, "-c", "from copytrack.cli import run; run()"]
# Whole checks timed per side, alternating with the peer's (the median is compared).
CHECK_ROUNDS = 3
# Latency loops per size at the end, the sizes in turns.
LATENCY_ROUNDS = 3
# The peer holds every work's text and postings in this process: ~4.5 GB at 200,000 works.
PEER_MAX = 200_000
PEER_SKIPPED = (
    "it holds every work and its postings in this process, and runs on libraries of up to "
    "`--peer-max` works (200,000 by default, ~4.5 GB)"
)


@dataclass
class Side:
    """What one system measured at one size."""

    name: str
    ingest_seconds: float
    # Every round's whole check, in the order run (`CHECK_ROUNDS`).
    check_rounds: list[float]
    latencies_ms: list[float]
    memory: str
    bytes_per_posting: float
    overall: Score
    hard_fp: float
    # Seconds the ingest's append-only-file rewrite ran on after the command (copytrack).
    rewrite_after_ingest: float = 0.0
    # Reads of the library reviewers and operators wait on (copytrack): library_reads.
    reads: list[tuple[str, float, float]] = field(default_factory=list)

    @property
    def check_seconds(self) -> float:
        return statistics.median(self.check_rounds)

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)


def _write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def _distractor_texts(docs: Sequence, count: int) -> Iterator[tuple[str, str]]:
    """Distractors (lang, text), cached on disk (generating 100k takes minutes), read one at
    a time: a million of them take gigabytes."""
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"distractors-{count}.jsonl.gz"
    if not path.exists():
        started = time.perf_counter()
        pairs = distractors([(d.lang, d.text) for d in docs], count, seed=1)
        partial = path.with_suffix(".partial")
        with gzip.open(partial, "wt", encoding="utf-8", compresslevel=1) as out:
            for lang, text in pairs:
                out.write(json.dumps([lang, text], ensure_ascii=False) + "\n")
        partial.rename(path)
        print(f"  generated {count:,} distractors in {time.perf_counter() - started:.0f} s")
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            lang, text = json.loads(line)
            yield lang, text


def _library_works(
    real: Sequence[tuple[str, str]], docs: Sequence, padding: int, size: int
) -> Iterator[tuple[str, str]]:
    """(id, text) of a library of ``size`` works: the real ones, then distractors (of the
    ``padding`` cached), one at a time."""
    pad = islice(_distractor_texts(docs, padding), size - len(real))
    return chain(real, ((f"distractor-{n}", text) for n, (_, text) in enumerate(pad)))


def _overall(suspects: Sequence[Suspect], found: Sequence[Sequence[str]]) -> tuple[Score, float]:
    scores = score_outcomes(suspects, [Outcome(tuple(f), 0.0) for f in found])
    overall = sum((by_label["all"] for by_label in scores.values()), Score())
    hard = [hard_fp_rate(by_label) for by_label in scores.values()]
    return overall, statistics.fmean(hard) if hard else 0.0


def _embedded_env(data_dir: Path) -> dict[str, str]:
    """The environment of copytrack's commands on the embedded servers of ``data_dir``."""
    env = {**os.environ, "COPYTRACK_DATA_DIR": str(data_dir)}
    for name in ("COPYTRACK_MONGO_URL", "COPYTRACK_REDIS_URL"):
        env.pop(name, None)
    return env


def _latency_round(data_dir: Path, suspects_path: Path) -> list[float]:
    """Milliseconds of each query of the latency sample, in a fresh process."""
    return in_fresh_process(
        ["benchmarks.latency_loop", str(suspects_path)],
        _embedded_env(data_dir),
        f"bench_scale: the latency loop on {data_dir}",
    )


def timed_library_add(env: dict[str, str], works: Path) -> float:
    """Seconds of ``copytrack library add WORKS`` in ``env``, whole (its servers started
    before the clock)."""
    ensure_servers(Settings.from_env(env))
    started = time.perf_counter()
    subprocess.run(
        [*COMMAND, "library", "add", "--no-progress", str(works)],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def run_copytrack(
    data_dir: Path,
    library: Path,
    suspects_path: Path,
    suspects: Sequence[Suspect],
    peer: PeerRun | None = None,
) -> Side:
    """copytrack's side, on embedded servers in ``data_dir`` (left running); the peer's
    checks and latency loop (when given) run in turns with its own."""
    env = _embedded_env(data_dir)
    settings = Settings.from_env(env)
    ingest = timed_library_add(env, library)
    settled = _wait_for_valkey_rewrite(settings)
    checks, outputs = [], set()
    for _ in range(CHECK_ROUNDS if peer is not None else 1):
        started = time.perf_counter()
        out = subprocess.run(
            [*COMMAND, "check", "--jsonl", str(suspects_path)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        checks.append(time.perf_counter() - started)
        outputs.add(_findings(out))
        if peer is not None:
            peer.check()
    if len(outputs) > 1:
        raise SystemExit(
            f"bench_scale: `copytrack check --jsonl {suspects_path}` found other pairs in "
            f"one of its {len(checks)} rounds on the same library: its findings must not "
            "depend on the run (look for an unordered set or a race in the matcher)"
        )
    found: dict[str, list[str]] = defaultdict(list)
    for row in outputs.pop():
        found[row[0]].append(row[1])
    overall, hard_fp = _overall(suspects, [found.get(s.id, []) for s in suspects])

    latencies = _latency_round(data_dir, suspects_path)
    if peer is not None:
        peer.time_latency()
    ctx = open_ready(settings)
    reads = library_reads.measure(ctx)
    stats = ctx.index.stats()
    used = ctx.redis.info("memory")["used_memory"]
    db = ctx.db.command("dbStats")
    ctx.close()
    memory = (
        f"Valkey {used / 1e6:,.0f} MB ({stats.postings:,} postings), "
        f"MongoDB {db.get('dataSize', 0) / 1e6:,.0f} MB data"
    )
    return Side(
        "copytrack",
        ingest,
        checks,
        latencies,
        memory,
        used / max(stats.postings, 1),
        overall,
        hard_fp,
        settled,
        reads,
    )


def _findings(jsonl: str) -> frozenset[tuple]:
    """(suspect id, work id, score, coverages) of each line of ``check --jsonl``: what a
    check found, its timing aside."""
    rows = map(json.loads, jsonl.splitlines())
    fields = ("score", "master_coverage", "suspect_coverage")
    return frozenset(
        (str(row["suspect_id"]), row["master_id"], *(row[name] for name in fields)) for row in rows
    )


def _wait_for_valkey_rewrite(settings: Settings) -> float:
    """Seconds until Valkey has no append-only-file rewrite running or scheduled: a large
    ingest leaves one behind (each block rewritten is logged whole), and the check is timed
    on servers at rest, as a user's later check would find them."""
    client = redis.Redis.from_url(ensure_servers(settings).redis_url)
    started = time.perf_counter()
    try:
        while True:
            persistence = client.info("persistence")
            if not (persistence["aof_rewrite_in_progress"] or persistence["aof_rewrite_scheduled"]):
                return time.perf_counter() - started
            time.sleep(0.2)
    finally:
        client.close()


class PeerRun:
    """The in-process peer on one library: built first (its ingest), then matching every
    suspect (`check`) and the latency sample (`time_latency`) whenever `run_copytrack`
    calls for it, in turns with copytrack."""

    def __init__(self, works: Sequence[tuple[str, str]], suspects: Sequence[Suspect]) -> None:
        self._index = StrongWinnowingIndex()
        started = time.perf_counter()
        for _, text in works:
            self._index.add(text)
        self._index.freeze()
        self._ingest = time.perf_counter() - started
        self._ids = [work_id for work_id, _ in works]
        self._suspects = suspects
        self._checks: list[float] = []
        self._latencies: list[float] = []
        self._found: list[list[str]] = []

    def check(self) -> None:
        started = time.perf_counter()
        found = [[self._ids[w] for w in self._index.match(s.text)] for s in self._suspects]
        self._checks.append(time.perf_counter() - started)
        self._found = found

    def time_latency(self) -> None:
        for i in latency_sample([suspect.text for suspect in self._suspects]):
            started = time.perf_counter()
            self._index.match(self._suspects[i].text)
            self._latencies.append(1000 * (time.perf_counter() - started))

    def side(self) -> Side:
        overall, hard_fp = _overall(self._suspects, self._found)
        index = self._index
        return Side(
            "strong winnowing peer",
            self._ingest,
            self._checks,
            self._latencies,
            f"{index.memory_bytes / 1e6:,.0f} MB of numpy arrays ({index.postings:,} postings)",
            index.memory_bytes / max(index.postings, 1),
            overall,
            hard_fp,
        )


def _row(label: str, ours: float, peer: float, unit: str, higher_is_better: bool) -> str:
    ratio = ours / peer if higher_is_better else peer / ours
    return f"| {label} | {ours:,.2f} {unit} | {peer:,.2f} {unit} | {ratio:.2f}× |"


def _rounds(side: Side) -> str:
    return " / ".join(f"{seconds:.2f}" for seconds in side.check_rounds)


def report(size: int, real: int, chars: int, ours: Side, peer: Side | None, n_suspects: int) -> str:
    """The size's section of scale.md; without the peer's columns when it did not run."""

    def row(label: str, value: Callable[[Side], float], unit: str, higher_is_better: bool) -> str:
        if peer is None:
            return f"| {label} | {value(ours):,.2f} {unit} | – | – |"
        return _row(label, value(ours), value(peer), unit, higher_is_better)

    def text(label: str, value: Callable[[Side], str]) -> str:
        return f"| {label} | {value(ours)} | {'–' if peer is None else value(peer)} | |"

    lines = [
        f"### {size:,} works ({real:,} real, {size - real:,} distractors; "
        f"{n_suspects:,} suspects, {chars / 1e6:.1f} M chars)",
        "",
        "| | copytrack | strong peer | copytrack vs strong peer |",
        "|---|---:|---:|---:|",
        row("ingest", lambda side: size / side.ingest_seconds, "works/s", True),
        f"| Valkey's AOF rewrite still running after `library add` (waited out before the "
        f"check) | {ours.rewrite_after_ingest:.1f} s | – | |",
        row("end-to-end check", lambda side: chars / side.check_seconds / 1e6, "M chars/s", True),
        text("check rounds (s, in turns)", _rounds),
        row("query p50 (3–5k chars)", lambda side: side.p(0.5), "ms", False),
        row("query p99 (3–5k chars)", lambda side: side.p(0.99), "ms", False),
        text("memory", lambda side: side.memory),
        text("bytes per posting", lambda side: f"{side.bytes_per_posting:.1f}"),
    ]
    for name, attr in (("recall", "recall"), ("precision", "precision"), ("F1", "f1")):
        lines.append(text(name, lambda side, attr=attr: f"{getattr(side.overall, attr):.4f}"))
    lines.append(text("hard-negative FP rate", lambda side: f"{side.hard_fp:.4f}"))
    if peer is None:
        lines += ["", f"The peer did not run: {PEER_SKIPPED}."]
    if ours.reads:
        lines += ["", "Reads reviewers and operators wait on (`benchmarks/library_reads.py`), "
                  "against the plain query on the same servers:", "",
                  library_reads.table(ours.reads).rstrip("\n")]  # fmt: skip
    return "\n".join(lines) + "\n"


def latency_in_turns(
    data_dirs: dict[int, Path], suspects_path: Path
) -> dict[int, list[list[float]]]:
    """copytrack's latency loop at every size, the sizes in turns, `LATENCY_ROUNDS` times:
    each round's milliseconds, by size."""
    rounds: dict[int, list[list[float]]] = {size: [] for size in data_dirs}
    for _ in range(LATENCY_ROUNDS):
        for size, data_dir in data_dirs.items():
            rounds[size].append(_latency_round(data_dir, suspects_path))
    return rounds


def latency_report(rounds: dict[int, list[list[float]]]) -> str:
    """The section of `latency_in_turns`: p50 / p99 of each round and size, and each
    size's median p50 against the smallest size's."""
    sizes = sorted(rounds)
    p50 = {size: statistics.median(percentile(r, 0.5) for r in rounds[size]) for size in sizes}
    lines = [
        "### Query latency across sizes, in turns",
        "",
        f"copytrack's latency loop (`benchmarks/latency_loop.py`: a fresh process, "
        f"{LATENCY_CHARS[0]:,}–{LATENCY_CHARS[1]:,}-character suspects) on every size's "
        f"servers, the sizes in turns, {LATENCY_ROUNDS} rounds: p50 / p99 in ms.",
        "",
        "| round | " + " | ".join(f"{size:,} works" for size in sizes) + " |",
        "|---|" + "---:|" * len(sizes),
    ]
    for n in range(LATENCY_ROUNDS):
        cells = (f"{percentile(rounds[size][n], 0.5):.2f} / "
                 f"{percentile(rounds[size][n], 0.99):.2f}" for size in sizes)  # fmt: skip
        lines.append(f"| {n + 1} | " + " | ".join(cells) + " |")
    lines.append("| median p50 | " + " | ".join(f"{p50[size]:.2f}" for size in sizes) + " |")
    smallest = sizes[0]
    lines.append(
        f"| p50 against {smallest:,} works | "
        + " | ".join(f"{p50[size] / p50[smallest]:.2f}×" for size in sizes)
        + " |"
    )
    return "\n".join(lines) + "\n"


def floor_section(size: int, rounds: list[dict[str, dict[str, object]]]) -> str:
    """The section of the latency floor (`benchmarks.latency_floor`) at ``size`` works."""
    return "\n".join([
        f"### What a query costs without its MongoDB read, {size:,} works",
        "",
        "The latency loop's pages on the same servers, each way in a fresh process, the ways "
        "in turns (`benchmarks/latency_floor.py`): as a worker meets them; with every work "
        "they point at already read into the process (no MongoDB read left); and the "
        "candidates alone (letters, fingerprints, the index lookup, the ranking). Valkey's "
        "own time a page is its `INFO commandstats` while the loop ran. Milliseconds.",
        "",
        floor_report(rounds),
        "",
    ])  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="library sizes, comma-separated")
    parser.add_argument("--real", type=int, default=1000, help="real masters (from the corpus)")
    parser.add_argument("--suspects", type=int, default=1500, help="labelled suspects")
    parser.add_argument("--quick", action="store_true", help="2k and 5k works, 300 suspects")
    parser.add_argument(
        "--peer-max",
        type=int,
        default=PEER_MAX,
        help="largest library the in-process peer runs on (it holds every work in memory)",
    )
    parser.add_argument("--out", type=Path, help=f"markdown results (default run: {RESULTS})")
    args = parser.parse_args(argv)
    require_shared()
    compile_project()
    if args.quick:
        args.sizes, args.real, args.suspects = "2000,5000", 300, 300
    sizes = [int(s) for s in args.sizes.split(",")]
    default_run = not (argv or sys.argv[1:])
    out = args.out or (RESULTS if default_run else None)

    docs, _ = load_documents([CORPUS_DIR])
    bench = build_benchmark(docs, masters=args.real, suspects=args.suspects, seed=0)
    real = [(m.id, m.text) for m in bench.masters]
    chars = sum(len(s.text) for s in bench.suspects)
    padding = max(sizes) - len(real)
    sections = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        workdir = Path(tmp)
        suspects_path = workdir / "suspects.jsonl"
        _write_jsonl(suspects_path, [{"id": s.id, "text": s.text} for s in bench.suspects])
        data_dirs = {size: workdir / f"run-{size}" / "data" for size in sizes}
        try:
            for size in sizes:
                works = _library_works(real, docs, padding, size)
                # The peer holds every work anyway: the distractors are read once for both.
                held = list(works) if size <= args.peer_max else None
                library = workdir / f"library-{size}.jsonl"
                _write_jsonl(library, ({"id": i, "text": t} for i, t in (held or works)))
                print(f"{size:,} works, {len(bench.suspects):,} suspects")
                peer = PeerRun(held, bench.suspects) if held is not None else None
                ours = run_copytrack(data_dirs[size], library, suspects_path, bench.suspects, peer)
                section = report(
                    size, len(real), chars, ours, peer and peer.side(), len(bench.suspects)
                )
                print(section)
                sections.append(section)
                library.unlink()
            if len(sizes) > 1:
                section = latency_report(latency_in_turns(data_dirs, suspects_path))
                print(section)
                sections.append(section)
            largest = max(sizes)
            section = floor_section(
                largest, floor_rounds(suspects_path, env=_embedded_env(data_dirs[largest]))
            )
            print(section)
            sections.append(section)
        finally:
            for data_dir in data_dirs.values():
                stop_servers(data_dir)
    if out:
        header = [
            "# Scale benchmark",
            "",
            f"`python -m benchmarks.bench_scale {' '.join(argv or sys.argv[1:])}`".replace(
                " `", "`"
            ),
            f"on {platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} "
            "cores; copytrack on its embedded servers (Valkey with AOF everysec, SecantusDB "
            "with sync-on-commit) in the same run as the peer. Ingest and end-to-end check "
            "are whole commands (`copytrack library add`, `copytrack check --jsonl`); the peer "
            "(`benchmarks/winnowing_peer.py`, the strong peer: winnowing k=12, w=8 over "
            "pinyin initials, sorted numpy arrays, every hash of a query looked up at once, "
            "hashes more than 100 works hold dropped) runs in this process. The whole checks "
            "are timed in turns, "
            f"{CHECK_ROUNDS} rounds each, and their medians compared; copytrack's latency "
            "loop runs in a fresh process (a worker's), the peer's right after it. Ratios "
            "> 1: copytrack is better.",
            "",
        ]
        out.write_text("\n".join(header) + "\n" + "\n".join(sections))
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
