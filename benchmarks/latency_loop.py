"""One round of query latency as a worker process meets pages: a fresh process on the
servers of COPYTRACK_DATA_DIR, ``match_text`` of every suspect of `LATENCY_CHARS`
characters, each timed, after one match that warms the process up; prints the
milliseconds as a JSON list.

    COPYTRACK_DATA_DIR=DIR .venv/bin/python -m benchmarks.latency_loop SUSPECTS.jsonl

`benchmarks.bench_scale` runs it after each size's check, and again at every size in turns
(the machine's speed drifts over minutes: latencies of two sizes are compared when
measured at the same time); `benchmarks.latency_floor` times parts of the same loop.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tracker.context import Context
from tracker.core.allocator import keep_freed_memory
from tracker.masters.generation import open_ready
from tracker.matching.match_pool import load_tables
from tracker.matching.matcher import match_text

LATENCY_CHARS = (3000, 5000)  # suspects of this many characters give the latency figures


def latency_sample(texts: Sequence[str]) -> list[int]:
    """Positions of the texts of `LATENCY_CHARS` characters."""
    low, high = LATENCY_CHARS
    return [i for i, text in enumerate(texts) if low <= len(text) <= high]


def latencies(
    texts: Sequence[str],
    query: Callable[[Context, str], object] = match_text,
    prepare: Callable[[Context, list[str]], None] | None = None,
) -> list[float]:
    """Milliseconds of ``query`` (``match_text``) of each text of the sample, in this
    process; ``prepare`` is given the sample first, untimed."""
    keep_freed_memory()  # as the console script does in every worker (tracker.core.allocator)
    ctx = open_ready()
    try:
        # A worker process is long-lived and forked with the fingerprinter's tables loaded
        # (`load_tables`); its first match loads the index scripts, which no later one pays.
        load_tables()
        match_text(ctx, texts[0])
        sample = [texts[i] for i in latency_sample(texts)]
        if prepare is not None:
            prepare(ctx, sample)
        timed = []
        for text in sample:
            started = time.perf_counter()
            query(ctx, text)
            timed.append(1000 * (time.perf_counter() - started))
        return timed
    finally:
        ctx.close()


def read_texts(suspects: Path) -> list[str]:
    """The texts of a suspects JSONL file ({"id", "text"} a line)."""
    with suspects.open(encoding="utf-8") as lines:
        return [json.loads(line)["text"] for line in lines]


def in_fresh_process(module: Sequence[str], env: Mapping[str, str] | None, what: str) -> Any:
    """What ``python -m MODULE...`` prints as JSON, run in a fresh process with ``env``;
    one line naming ``what`` failed, and its last line of error, when it fails."""
    done = subprocess.run([sys.executable, "-m", *module], env=env, capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"{what} failed: {last}")
    return json.loads(done.stdout)


def main(argv: Sequence[str] | None = None) -> None:
    (suspects,) = argv if argv is not None else sys.argv[1:]
    print(json.dumps([round(ms, 3) for ms in latencies(read_texts(Path(suspects)))]))


if __name__ == "__main__":
    main()
