"""What adding works costs as the library grows: ``copytrack library add`` of a batch of new
works into a library of SIZE works against the same batch's cost into an empty one, and one
work through ``POST /api/v1/works`` (a CMS pushing each new article) into the large one.

    .venv/bin/python -m benchmarks.add_cost --size 100000          # prints the rows
    COPYTRACK_INDEX_SNAPSHOT=true .venv/bin/python -m benchmarks.add_cost --size 100000

The library is bench_scale's (the accuracy benchmark's real works and its cached
distractors); the new works are other distractors (another seed). Every batch's command is
timed whole, the large library and the empty one in turns (a fresh empty data dir each
round), ``ROUNDS`` rounds with other works each; then ``--posts`` works are posted one at a
time to `copytrack admin` on the large library (each answered once stored durably).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.bench_admin import served_admin
from benchmarks.bench_scale import (
    COMMAND,
    _embedded_env,
    _library_works,
    _wait_for_valkey_rewrite,
    _write_jsonl,
    timed_library_add,
)
from benchmarks.shared_corpus import CORPUS_DIR, require_shared
from testbed.distractors import distractors
from testbed.evaluation import build_benchmark, load_documents, percentile
from tracker.core.config import Settings
from tracker.runtime.servers import stop_servers

ROUNDS = 2


def _add(data_dir: Path, works: Path, extra: dict[str, str] | None = None) -> float:
    """Seconds of ``copytrack library add WORKS`` on ``data_dir``'s servers, whole (with
    the ``extra`` variables), once Valkey's rewrite it left running is done."""
    env = {**_embedded_env(data_dir), **(extra or {})}
    took = timed_library_add(env, works)
    _wait_for_valkey_rewrite(Settings.from_env(env))
    return took


def _posts(data_dir: Path, works: list[tuple[str, str]]) -> list[float]:
    """Milliseconds of each ``POST /api/v1/works`` of one work, on ``data_dir``'s admin."""
    env = _embedded_env(data_dir)
    run = {"env": env, "check": True, "capture_output": True, "text": True}
    subprocess.run([*COMMAND, "user", "add", "cms", "--role", "admin", "--password-stdin"],
                   input="a cms password of some length\n", **run)  # type: ignore[call-overload]  # fmt: skip
    token = subprocess.run([*COMMAND, "token", "create", "cms", "--label", "bench"],
                           **run).stdout.strip()  # type: ignore[call-overload]  # fmt: skip
    times = []
    with served_admin(data_dir) as served, httpx.Client(base_url=served.base, timeout=120) as http:
        headers = {"Authorization": f"Bearer {token}"}
        for work_id, text in works:
            started = time.perf_counter()
            answer = http.post("/api/v1/works", json={"works": [{"id": work_id, "text": text}]},
                               headers=headers)  # fmt: skip
            times.append(1000 * (time.perf_counter() - started))
            answer.raise_for_status()
    return times


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="works in the large library")
    parser.add_argument("--batch", type=int, default=1000, help="new works a `library add`")
    parser.add_argument("--posts", type=int, default=30, help="works posted one at a time")
    parser.add_argument("--real", type=int, default=1000)
    parser.add_argument("--suspects", type=int, default=1500)
    args = parser.parse_args(argv)
    require_shared()
    docs, _ = load_documents([CORPUS_DIR])
    bench = build_benchmark(docs, masters=args.real, suspects=args.suspects, seed=0)
    real = [(m.id, m.text) for m in bench.masters]
    new = list(
        distractors([(d.lang, d.text) for d in docs], ROUNDS * args.batch + args.posts, seed=2)
    )
    new_works = [(f"new-{n}", text) for n, (_, text) in enumerate(new)]
    with tempfile.TemporaryDirectory(prefix="add-cost-") as tmp:
        workdir = Path(tmp)
        large = workdir / "large" / "data"
        library = workdir / "library.jsonl"
        works = _library_works(real, docs, args.size - len(real), args.size)
        _write_jsonl(library, ({"id": i, "text": t} for i, t in works))
        dirs = [large]
        try:
            ingest = _add(large, library)
            print(f"library add of {args.size:,} works: {ingest:.1f} s")
            into_large, into_empty = [], []
            for n in range(ROUNDS):
                batch = workdir / f"batch-{n}.jsonl"
                _write_jsonl(batch, ({"id": i, "text": t} for i, t in
                                     new_works[n * args.batch : (n + 1) * args.batch]))  # fmt: skip
                empty = workdir / f"empty-{n}" / "data"
                dirs.append(empty)
                into_empty.append(_add(empty, batch))
                into_large.append(_add(large, batch))
                stop_servers(empty)
            posted = _posts(large, new_works[ROUNDS * args.batch :])
        finally:
            for data_dir in dirs:
                stop_servers(data_dir)
    ratio = statistics.median(into_large) / statistics.median(into_empty)
    rounds = " / ".join(f"{a:.1f} / {b:.1f}" for a, b in zip(into_large, into_empty, strict=True))
    print(json.dumps({"into_large_s": into_large, "into_empty_s": into_empty, "posts_ms": posted}))
    print(f"| {args.batch:,} new works into a {args.size:,} library / into an empty one "
          f"(rounds: {rounds} s) | {statistics.median(into_large):.1f} s / "
          f"{statistics.median(into_empty):.1f} s | {ratio:.2f}× |")  # fmt: skip
    print(f"| one work through `POST /api/v1/works` into the {args.size:,} library, "
          f"p50 / p90 ({len(posted)} posts) | {percentile(posted, 0.5):.0f} / "
          f"{percentile(posted, 0.9):.0f} ms | |")  # fmt: skip


if __name__ == "__main__":
    main()
