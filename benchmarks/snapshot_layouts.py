"""The index's two layouts on one library, in turns: Valkey's blocks alone (the default)
and the mapped snapshot beside an empty delta (``COPYTRACK_INDEX_SNAPSHOT``).

    .venv/bin/python -m benchmarks.snapshot_layouts --size 10000

Both libraries are bench_scale's (the accuracy benchmark's real works and its cached
distractors), each on embedded servers of its own; the latency floor's loops
(`benchmarks.latency_floor`: a page as a worker meets it, and the lookup alone) run on
one, then the other, ``--rounds`` times. Prints each round's p50 / p90 / p99 and Valkey's
own time a page.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.add_cost import _add
from benchmarks.bench_scale import _embedded_env, _library_works, _write_jsonl
from benchmarks.latency_floor import WAYS, floor_rounds
from benchmarks.shared_corpus import CORPUS_DIR, require_shared
from testbed.evaluation import build_benchmark, load_documents, percentile
from tracker.runtime.servers import stop_servers

LAYOUTS = {"blocks": "false", "snapshot": "true"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    require_shared()
    docs, _ = load_documents([CORPUS_DIR])
    bench = build_benchmark(docs, masters=1000, suspects=1500, seed=0)
    real = [(m.id, m.text) for m in bench.masters]
    with tempfile.TemporaryDirectory(prefix="snapshot-layouts-") as tmp:
        workdir = Path(tmp)
        suspects = workdir / "suspects.jsonl"
        _write_jsonl(suspects, ({"id": s.id, "text": s.text} for s in bench.suspects))
        library = workdir / "library.jsonl"
        works = _library_works(real, docs, args.size - len(real), args.size)
        _write_jsonl(library, ({"id": i, "text": t} for i, t in works))
        dirs = {name: workdir / name / "data" for name in LAYOUTS}
        try:
            for name, data_dir in dirs.items():
                took = _add(data_dir, library, {"COPYTRACK_INDEX_SNAPSHOT": LAYOUTS[name]})
                print(f"{name}: library add of {args.size:,} works in {took:.1f} s")
            rounds: dict[str, list[dict]] = {name: [] for name in LAYOUTS}
            for _ in range(args.rounds):
                for name, data_dir in dirs.items():
                    env = {**_embedded_env(data_dir), "COPYTRACK_INDEX_SNAPSHOT": LAYOUTS[name]}
                    rounds[name] += floor_rounds(suspects, 1, env)
                    time.sleep(1)
        finally:
            for data_dir in dirs.values():
                stop_servers(data_dir)
    print("| round | layout | way | p50 | p90 | p99 | Valkey's own ms a page |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for n in range(args.rounds):
        for name in LAYOUTS:
            for way in ("worker", "lookup"):
                got = rounds[name][n][way]
                ms = got["ms"]
                print(f"| {n + 1} | {name} | {way} | {percentile(ms, 0.5):.2f} | "
                      f"{percentile(ms, 0.9):.2f} | {percentile(ms, 0.99):.2f} | "
                      f"{got['valkey_ms']:.2f} |")  # fmt: skip
    for name in LAYOUTS:
        for way in WAYS:
            p50 = statistics.median(percentile(r[way]["ms"], 0.5) for r in rounds[name])
            print(f"| median | {name} | {way} | {p50:.2f} | | | |")


if __name__ == "__main__":
    main()
