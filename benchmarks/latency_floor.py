"""What a query costs at its floor on the embedded servers: the pages of the latency loop
(`benchmarks.latency_loop`) timed three ways, each way in a fresh process, the ways in
turns (the machine's speed drifts over minutes):

- ``worker``: ``match_text``, as a worker meets the pages (the latency loop itself);
- ``works in memory``: the same, with every work the pages point at already read into the
  process (no MongoDB read is left; the works' letters are still made);
- ``lookup``: ``candidates`` alone: letters, fingerprints, the index lookup, the ranking.

With each, Valkey's own time a page (``INFO commandstats``, while the loop runs alone on
the servers): what no client-side change can take off a lookup.

    COPYTRACK_DATA_DIR=DIR .venv/bin/python -m benchmarks.latency_floor SUSPECTS.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.latency_loop import in_fresh_process, latencies, read_texts
from testbed.evaluation import percentile
from tracker.context import Context
from tracker.masters.generation import open_ready
from tracker.masters.master_cache import masters_kept
from tracker.matching.matcher import candidates, match_text

WAYS = ("worker", "works in memory", "lookup")
ROUNDS = 3


def _valkey_usec(ctx: Context) -> int:
    """Microseconds Valkey has spent in commands since it started."""
    return sum(stat["usec"] for stat in ctx.redis.info("commandstats").values())


def _read_every_work(ctx: Context, sample: list[str]) -> None:
    # Looked up through a context of their own: the index blocks a process keeps
    # (COPYTRACK_INDEX_CACHE_MB) stay those the timed loop reads itself.
    finder = open_ready()
    try:
        wanted = {c.master_id for text in sample for c in candidates(finder, text)}
    finally:
        finder.close()
    # Twice: the first read of kept works takes the installation's edit mark
    # (tracker.masters.master_cache), which may drop what was read before it.
    for _ in range(2):
        masters_kept(ctx).load(ctx, wanted)


def measure(way: str, texts: Sequence[str]) -> dict[str, object]:
    """The milliseconds of each page of the sample timed ``way``, and Valkey's own
    milliseconds a page meanwhile."""
    query: Callable[[Context, str], object] = candidates if way == "lookup" else match_text
    started: list[int] = []

    def prepare(ctx: Context, sample: list[str]) -> None:
        if way == "works in memory":
            _read_every_work(ctx, sample)
        started.append(_valkey_usec(ctx))

    timed = latencies(texts, query, prepare)
    ctx = open_ready()
    try:
        valkey_ms = (_valkey_usec(ctx) - started[0]) / 1000 / max(len(timed), 1)
    finally:
        ctx.close()
    return {"ms": timed, "valkey_ms": valkey_ms}


def floor_rounds(
    suspects: Path, rounds: int = ROUNDS, env: dict[str, str] | None = None
) -> list[dict[str, dict[str, object]]]:
    """`measure` of every way in a fresh process, the ways in turns, ``rounds`` times, on
    the servers of ``env`` (default: this process's environment)."""
    return [
        {
            way: in_fresh_process(
                ["benchmarks.latency_floor", "--way", way, str(suspects)],
                env,
                f"latency_floor: the {way!r} loop on {suspects}",
            )
            for way in WAYS
        }
        for _ in range(rounds)
    ]


def report(rounds: list[dict[str, dict[str, object]]]) -> str:
    """p50, p90, p99 (ms) and Valkey's own ms a page of every round and way; each way's
    median p50."""
    lines = [
        "| round | way | p50 | p90 | p99 | Valkey's own time a page |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for n, ways in enumerate(rounds, 1):
        for way, got in ways.items():
            ms = got["ms"]
            lines.append(
                f"| {n} | {way} | {percentile(ms, 0.5):.2f} | {percentile(ms, 0.9):.2f} | "
                f"{percentile(ms, 0.99):.2f} | {got['valkey_ms']:.2f} |"
            )
    for way in WAYS:
        p50 = statistics.median(percentile(r[way]["ms"], 0.5) for r in rounds)
        lines.append(f"| median | {way} | {p50:.2f} | | | |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suspects", type=Path, help='JSONL of {"id", "text"}')
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)  # one fresh process
    args = parser.parse_args(argv)
    if args.way:
        print(json.dumps(measure(args.way, read_texts(args.suspects))))
        return
    print(report(floor_rounds(args.suspects, args.rounds)))


if __name__ == "__main__":
    main()
