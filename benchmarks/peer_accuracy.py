"""The winnowing peers (`benchmarks.winnowing_peer`) on the accuracy benchmark of
``copytrack eval`` (its defaults: 1,000 masters, 3,000 suspects, seed 0, the shared
corpus), scored by the eval's own scoring: F1, precision, recall and the false-positive
rate on hard negatives, the strong peer and the weak one side by side.

    .venv/bin/python -m benchmarks.peer_accuracy
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

from benchmarks.shared_corpus import CORPUS_DIR, require_shared
from benchmarks.winnowing_peer import StrongWinnowingIndex, WinnowingIndex
from testbed.evaluation import (
    Outcome,
    Score,
    build_benchmark,
    hard_fp_rate,
    load_documents,
    score_outcomes,
)

PEERS = {"strong peer": StrongWinnowingIndex, "weak peer (earlier reports)": WinnowingIndex}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--masters", type=int, default=1000)
    parser.add_argument("--suspects", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    require_shared()
    docs, _ = load_documents([CORPUS_DIR])
    bench = build_benchmark(docs, masters=args.masters, suspects=args.suspects, seed=args.seed)
    ids = [m.id for m in bench.masters]
    print(f"{args.masters:,} masters, {args.suspects:,} suspects, seed {args.seed}")
    print()
    print("| peer | F1 | precision | recall | hard-negative FP (worse language) | suspects/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, kind in PEERS.items():
        index = kind()
        for master in bench.masters:
            index.add(master.text)
        index.freeze()
        started = time.perf_counter()
        found = [tuple(ids[w] for w in index.match(s.text)) for s in bench.suspects]
        rate = len(found) / (time.perf_counter() - started)
        scores = score_outcomes(bench.suspects, [Outcome(f, 0.0) for f in found])
        overall = sum((by_label["all"] for by_label in scores.values()), Score())
        hard = max(hard_fp_rate(by_label) for by_label in scores.values())
        print(
            f"| {name} | {overall.f1:.3f} | {overall.precision:.3f} | {overall.recall:.3f} | "
            f"{hard:.1%} | {rate:,.0f} |"
        )


if __name__ == "__main__":
    main()
