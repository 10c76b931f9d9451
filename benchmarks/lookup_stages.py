"""Where a page's lookup (`tracker.matching.matcher.candidates`) spends its time, stage by stage, on
the servers of COPYTRACK_DATA_DIR: the letters (pinyin initials), the query fingerprints,
the index read (`RedisIndex.postings`, one round trip), the ranking; and what the read
moved: the index blocks read and their bytes against the postings they held for the page.
The latency loop's pages (`benchmarks.latency_loop`), in a fresh context, after one page
that warms it up; the process keeps no blocks (every page reads all it needs, as a page of
new text meets them).

    COPYTRACK_DATA_DIR=DIR .venv/bin/python -m benchmarks.lookup_stages SUSPECTS.jsonl
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks.latency_loop import latency_sample, read_texts
from fingerprinter import query_granule_fingerprints, to_letters
from testbed.evaluation import percentile
from tracker.context import open_context
from tracker.masters.library import library_size
from tracker.matching.matcher import DEFAULT_MATCH_SETTINGS, _ranked

STAGES = ("letters", "fingerprints", "index read", "ranking")


def measure(texts: Sequence[str]) -> dict[str, list[float]]:
    """Milliseconds of every stage a page, the blocks and bytes each page read, and the
    postings it got."""
    ctx = open_context()
    # With COPYTRACK_INDEX_SNAPSHOT the blocks read are the delta's.
    blocks = getattr(ctx.index, "delta", ctx.index)
    index = ctx.index
    settings = DEFAULT_MATCH_SETTINGS
    got: dict[str, list[float]] = {name: [] for name in (*STAGES, "blocks", "block bytes",
                                                         "postings", "fingerprints n")}  # fmt: skip
    read_sizes: list[int] = []
    original = blocks._block_reads

    def counted(read, cut, names):
        blocks, states = original(read, cut, names)
        read_sizes.append(sum(len(b or b"") for b in blocks))
        read_sizes.append(len(blocks))
        return blocks, states

    blocks._block_reads = counted
    try:
        sample = [texts[i] for i in latency_sample(texts)]
        for n, text in enumerate([sample[0], *sample]):
            read_sizes.clear()
            t0 = time.perf_counter()
            letters = to_letters(text, ctx.params.latin_mode)
            t1 = time.perf_counter()
            query = query_granule_fingerprints(letters, ctx.params)
            values = query.tagged()
            t2 = time.perf_counter()
            found = index.postings(values, settings.df_cut(library_size(ctx)), kept=False)
            t3 = time.perf_counter()
            _ranked(text, query, found, slice(0, len(found)), 0, settings)
            t4 = time.perf_counter()
            if n == 0:
                continue  # the warm-up page
            for name, (a, b) in zip(STAGES, [(t0, t1), (t1, t2), (t2, t3), (t3, t4)], strict=True):
                got[name].append(1000 * (b - a))
            got["block bytes"].append(sum(read_sizes[0::2]))
            got["blocks"].append(sum(read_sizes[1::2]))
            got["postings"].append(len(found))
            got["fingerprints n"].append(len(values))
    finally:
        ctx.close()
    return got


def report(got: dict[str, list[float]], record_bytes: int) -> str:
    lines = ["| stage | p50 ms | p90 ms |", "|---|---:|---:|"]
    for name in STAGES:
        lines.append(
            f"| {name} | {percentile(got[name], 0.5):.2f} | {percentile(got[name], 0.9):.2f} |"
        )
    total = [sum(v) for v in zip(*(got[name] for name in STAGES), strict=True)]
    lines.append(f"| lookup in all | {percentile(total, 0.5):.2f} | {percentile(total, 0.9):.2f} |")
    med = {name: float(np.median(got[name])) for name in got}
    ratio = np.array(got["block bytes"]) / np.maximum(np.array(got["postings"]) * record_bytes, 1)
    lines += [
        "",
        f"A page (median): {med['fingerprints n']:.0f} fingerprints, {med['blocks']:.0f} blocks "
        f"read, {med['block bytes'] / 1e3:.0f} KB of blocks, {med['postings']:.0f} postings "
        f"found ({med['postings'] * record_bytes / 1e3:.1f} KB of records): "
        f"{float(np.median(ratio)):.0f}× the bytes of the postings returned.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suspects", type=Path, help='JSONL of {"id", "text"}')
    args = parser.parse_args(argv)
    got = measure(read_texts(args.suspects))
    ctx = open_context()
    try:
        record_bytes = getattr(ctx.index, "delta", ctx.index).record_bytes
    finally:
        ctx.close()
    print(report(got, record_bytes))


if __name__ == "__main__":
    main()
