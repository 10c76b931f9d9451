"""Reads of a large library that reviewers and operators wait on, against the plain query a
user would write for each, on the same servers.

    .venv/bin/python -m benchmarks.library_reads --data-dir DIR   # an installation's library

The embedded MongoDB (SecantusDB) finds documents by an indexed value at once, but answers a
`$ne`, an `$or`, a count, and a sorted or skipped query by reading the whole collection: at
100,000 works each of those plain queries takes seconds. `bench_scale` runs these at every
library size it builds and records them in scale.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import open_ready
from tracker.masters.library import find_masters, library_page, library_size, masters_after
from tracker.monitoring.health import STUCK_MINUTES, index_health
from tracker.runtime.servers import ensure_servers

PER_PAGE = 50  # the admin's works list
SAMPLE = 20  # works a discovery run takes


def _reads(ctx: Context) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    """(what, copytrack's read, the plain query) for each read."""
    masters = ctx.db.masters
    name = (masters.find_one({"_id": 1}, {"external_id": 1}) or {}).get("external_id", "")
    stuck = datetime.now(UTC) - timedelta(minutes=STUCK_MINUTES)
    middle = library_size(ctx) // 2

    def plain_health() -> Any:
        return masters.count_documents({"state": {"$ne": "indexed"}, "updated_at": {"$lt": stuck}})

    def works_page() -> Any:
        return library_page(ctx, 2, PER_PAGE)

    def plain_works_page() -> Any:
        newest = masters.find({}, {"text": 0}).sort("_id", -1)
        return masters.count_documents({}), list(newest.skip(PER_PAGE).limit(PER_PAGE))

    def plain_work_by_name() -> Any:
        return list(masters.find({"$or": [{"external_id": name}, {"work_id": name}]}))

    def next_works() -> Any:
        return masters_after(ctx, middle, SAMPLE, {"text": 1})

    def plain_next_works() -> Any:
        after = masters.find({"_id": {"$gt": middle}}, {"text": 1}).sort("_id", 1)
        return list(after.limit(SAMPLE))

    return [
        ("index health (works left unindexed)", lambda: index_health(ctx), plain_health),
        ("admin works list: page 2 and the library's size", works_page, plain_works_page),
        ("a work by name (`library rm`, a work's findings)", lambda: find_masters(ctx, name),
         plain_work_by_name),
        (f"a discovery run's next {SAMPLE} works", next_works, plain_next_works),
    ]  # fmt: skip


def _seconds(read: Callable[[], Any], times: int) -> float:
    taken = []
    for _ in range(times):
        started = time.perf_counter()
        read()
        taken.append(time.perf_counter() - started)
    return statistics.median(taken)


def measure(ctx: Context) -> list[tuple[str, float, float]]:
    """(what, copytrack's seconds (median of 3), the plain query's seconds (one run: they
    take seconds at 100,000 works)) for each read."""
    return [(what, _seconds(ours, 3), _seconds(plain, 1)) for what, ours, plain in _reads(ctx)]


def table(rows: list[tuple[str, float, float]]) -> str:
    lines = ["| read | copytrack | plain query | ratio |", "|---|---:|---:|---:|"]
    for what, ours, plain in rows:
        ratio = plain / ours
        lines.append(f"| {what} | {1000 * ours:,.1f} ms | {1000 * plain:,.1f} ms | {ratio:,.0f}× |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="COPYTRACK_DATA_DIR of an installation")
    args = parser.parse_args()
    settings = Settings.from_env({"COPYTRACK_DATA_DIR": args.data_dir})
    ensure_servers(settings)
    ctx = open_ready(settings)
    try:
        print(f"{library_size(ctx):,} works")
        print(table(measure(ctx)))
    finally:
        ctx.close()


if __name__ == "__main__":
    main()
