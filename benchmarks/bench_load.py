"""Load benchmark: pages scanned through Celery by worker processes, against inline scanning.

    .venv/bin/python -m benchmarks.bench_load                 # 10,000 pages: writes load.md
    .venv/bin/python -m benchmarks.bench_load --pages 1000    # a quick run: prints only

Everything runs on embedded servers started here in a temporary data dir (Valkey with the
production settings, AOF everysec, SecantusDB) and stopped at the end:

1. library: ``--masters`` works, half Chinese and half English news from the shared corpus,
   registered with `add_work`, then rebuilt once with `reindex` (what an upgrade costs);
2. pages: ``--pages`` pages stored with `tracker.scanning.pages.store_page` (raw HTML kept as
   evidence), 30% pirated copies of library works (edited copies, excerpts set in other
   text, copies with ads) and 70% unrelated text (novel chapters, news outside the library);
3. baseline: a sample of the pages (every k-th, ``--baseline-pages``) scanned inline in this
   one process; then the scan state is reset (findings deleted, pages unmarked);
4. load: ``--workers`` `copytrack worker` processes (one pool process each) on the scan
   queue; once all answer a ping, every page is queued with `tracker.tasks.enqueue_scan`
   and the clock runs until the queue is drained and every page is marked scanned.
   Meanwhile the workers' RSS (main + pool process) and Redis ``used_memory`` are sampled.

Checks: every page scanned, one finding per (page, master) at most, and the workers found
the same masters as the inline scan on the sample. The ratio compares the workers'
throughput with the inline one; on a 2-core machine the workers share the cores with both
servers, so it is far from 2. The default run writes benchmarks/results/load.md; any other
run only prints, unless given --out.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import cycle, islice
from pathlib import Path
from typing import Any

import redis

from benchmarks.bytecode import compile_project
from benchmarks.shared_corpus import iter_documents, require_shared
from copytrack.commands.ops import COPYTRACK_COMMAND
from testbed import attacks
from tracker import tasks
from tracker.celery_app import app, configure
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import open_ready
from tracker.masters.library import Work, add_work, reindex
from tracker.monitoring.health import health
from tracker.runtime.processes import descendants, proc_stat
from tracker.runtime.servers import (
    MONGO,
    VALKEY,
    ensure_servers,
    server_status,
    stop_servers,
)
from tracker.scanning.pages import PageInput, scan_page, store_page

RESULTS = Path(__file__).resolve().parent / "results" / "load.md"
DEFAULTS = {"pages": 10_000, "masters": 1_000, "workers": 2, "baseline_pages": 2_000}
COPY_SHARE = 0.3
UNRELATED_CHARS = 2_000  # unrelated pages are novel text cut to about this size
SAMPLE_EVERY = 0.5  # seconds between two memory samples
TIMEOUT = 1_800  # seconds the workers get for all pages before the run is abandoned
STALLED = 10.0  # seconds the queue may stay drained with pages unscanned (failed tasks)


@dataclass(frozen=True)
class Page:
    url: str
    text: str
    master: str | None  # external id of the work it copies, if any


# --------------------------------------------------------------------------- data


def library_works(masters: int) -> list[Work]:
    """Half Chinese, half English news articles."""
    zh = islice(iter_documents("zh_news"), masters // 2)
    en = islice(iter_documents("en_news"), masters - masters // 2)
    return [
        Work(text=doc["text"], external_id=doc["id"], title=doc.get("title"), lang=doc["lang"])
        for doc in (*zh, *en)
    ]


def unrelated_texts(skip: set[str]) -> Iterator[str]:
    """Novel chapters cut into pieces of about UNRELATED_CHARS, then news not in ``skip``."""
    for doc in iter_documents("zh_novel", "en_novel"):
        piece = ""
        for paragraph in attacks.reflow(doc["text"]).split("\n"):
            piece += paragraph + "\n"
            if len(piece) >= UNRELATED_CHARS:
                yield piece.strip()
                piece = ""
    for doc in iter_documents("zh_news", "en_news"):
        if doc["id"] not in skip:
            yield attacks.reflow(doc["text"])


def make_pages(works: list[Work], count: int, seed: int = 7) -> list[Page]:
    """``count`` pages: COPY_SHARE pirated copies of the works, the rest unrelated."""
    rng = random.Random(seed)
    copies = round(count * COPY_SHARE)
    fillers = cycle(unrelated_texts({w.external_id for w in works if w.external_id}))
    pages = []
    for n in range(copies):
        work = works[n % len(works)]
        text = attacks.reflow(work.text)
        kind = n % 3
        if kind == 0:  # homophones, edits, noise, ads: the default combined attack
            text = attacks.combine(text, rng)
        elif kind == 1:  # half of the work set inside an unrelated page
            text = attacks.excerpt(text, rng, fraction=0.5, filler=next(fillers))
        else:
            text = attacks.insert_ads(text, rng)
        pages.append(Page(f"http://pirate{n % 50}.example/copy/{n}", text, work.external_id))
    others = islice(fillers, count - copies)
    pages += [
        Page(f"http://site{n % 50}.example/page/{n}", text, None) for n, text in enumerate(others)
    ]
    rng.shuffle(pages)
    return pages


def page_input(page: Page) -> PageInput:
    """The page as the crawler would hand it over, raw HTML included."""
    paragraphs = "".join(f"<p>{line}</p>" for line in page.text.split("\n"))
    raw = f"<html><head><meta charset=utf-8></head><body><article>{paragraphs}</article>"
    return PageInput(url=page.url, text=page.text, raw=raw.encode(), encoding="utf-8")


# --------------------------------------------------------------------------- processes


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU time used so far by these processes (Linux /proc)."""
    ticks = 0
    for pid in pids:
        if fields := proc_stat(pid):
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


@dataclass
class CpuMeter:
    """CPU seconds spent by named groups of processes between start() and stop()."""

    groups: dict[str, Callable[[], list[int]]]
    spent: dict[str, float] = field(default_factory=dict)

    def start(self) -> None:
        self.spent = {name: -cpu_seconds(pids()) for name, pids in self.groups.items()}

    def stop(self) -> dict[str, float]:
        for name, pids in self.groups.items():
            self.spent[name] += cpu_seconds(pids())
        return self.spent


def rss_bytes(pid: int) -> int:
    """Resident memory of a process and its children (Linux /proc)."""
    total = 0
    for p in (pid, *descendants(pid)):
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


@contextlib.contextmanager
def workers(ctx: Context, count: int, log_dir: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` scan workers (one pool process each), process groups killed on the way out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPYTRACK_")}
    env.update(
        COPYTRACK_MONGO_URL=ctx.endpoints.mongo_url,
        COPYTRACK_REDIS_URL=ctx.endpoints.redis_url,
        COPYTRACK_MONGO_DB=ctx.settings.mongo_db,
        COPYTRACK_DATA_DIR=str(ctx.settings.data_dir),
        COPYTRACK_LOG_LEVEL="WARNING",
    )
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for n in range(count):
            with open(log_dir / f"worker-{n}.log", "ab") as out:
                procs.append(
                    subprocess.Popen(
                        [*COPYTRACK_COMMAND, "worker", "--queues", "scan", "--concurrency", "1"],
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        yield procs
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@dataclass
class MemorySampler:
    """Peak RSS per worker and peak Redis used_memory, sampled from a thread."""

    pids: list[int]
    client: redis.Redis
    worker_peak: dict[int, int] = field(default_factory=dict)
    redis_peak: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_EVERY):
            self.sample()

    def sample(self) -> None:
        for pid in self.pids:
            self.worker_peak[pid] = max(self.worker_peak.get(pid, 0), rss_bytes(pid))
        self.redis_peak = max(self.redis_peak, used_memory(self.client))

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join()
            self.sample()


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


# --------------------------------------------------------------------------- the run


def findings_by_page(ctx: Context) -> dict[Any, set[int]]:
    """Masters found per page; fails on a duplicate (page, master) finding."""
    found: dict[Any, set[int]] = {}
    total = 0
    for doc in ctx.db.findings.find({}, {"page_id": 1, "master_id": 1}):
        found.setdefault(doc["page_id"], set()).add(doc["master_id"])
        total += 1
    distinct = sum(len(masters) for masters in found.values())
    if distinct != total:
        raise AssertionError(f"{total - distinct} duplicate findings")
    return found


def wait_until_scanned(ctx: Context, count: int, logs: Path) -> float:
    """Block until the scan queue is drained and ``count`` pages are marked scanned.

    Returns when the queue was first seen drained. Raises when it stays drained for
    STALLED seconds with pages still unscanned (their tasks failed: the worker logs say why).
    """
    deadline = time.monotonic() + TIMEOUT
    drained: float | None = None
    while time.monotonic() < deadline:
        if ctx.redis.llen(ctx.keys.queue("scan")) or ctx.redis.hlen(ctx.keys.unacked):
            drained = None
        else:
            drained = drained or time.perf_counter()
            # Counting scans every document on SecantusDB: only once the queue looks empty.
            scanned = ctx.db.pages.count_documents({"scanned_as": {"$ne": None}})
            if scanned >= count:
                return drained
            if time.perf_counter() - drained > STALLED:
                raise RuntimeError(
                    f"queue drained, {count - scanned} pages unscanned; read {logs}/worker-*.log"
                )
        time.sleep(0.25)
    raise TimeoutError(f"pages still unscanned after {TIMEOUT} s")


def run(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    settings = Settings.from_env({"COPYTRACK_DATA_DIR": str(data_dir)})
    endpoints = ensure_servers(settings)
    configure(app, endpoints, settings)
    ctx = open_ready(settings)
    result: dict[str, Any] = {"pages": args.pages, "masters": args.masters}

    works = library_works(args.masters)
    start = time.perf_counter()
    ids = {}
    for work in works:
        ids[work.external_id] = add_work(ctx, work)[0].master_id
    result["library_s"] = time.perf_counter() - start
    result["index"] = ctx.index.stats()
    start = time.perf_counter()
    reindex(ctx)
    result["reindex_rate"] = len(works) / (time.perf_counter() - start)

    pages = make_pages(works, args.pages)
    start = time.perf_counter()
    page_ids = [store_page(ctx, page_input(page))[0] for page in pages]
    result["store_rate"] = len(pages) / (time.perf_counter() - start)
    expected = {pid: ids[p.master] for pid, p in zip(page_ids, pages, strict=True) if p.master}

    servers = {s.name: s.pid for s in server_status(data_dir)}
    server_groups: dict[str, Callable[[], list[int]]] = {
        "MongoDB": lambda: [servers[MONGO]],
        "Redis": lambda: [servers[VALKEY]],
    }
    stride = max(1, len(page_ids) // max(1, args.baseline_pages))
    sample = page_ids[::stride][: args.baseline_pages]
    meter = CpuMeter({"scanning process": lambda: [os.getpid()], **server_groups})
    meter.start()
    start = time.perf_counter()
    for page_id in sample:
        scan_page(ctx, page_id)
    result["inline_rate"] = len(sample) / (time.perf_counter() - start)
    result["inline_cpu"] = {k: v / len(sample) for k, v in meter.stop().items()}
    result["baseline_pages"] = len(sample)
    inline = findings_by_page(ctx)
    ctx.db.findings.delete_many({})
    ctx.db.pages.update_many({}, {"$unset": {"scanned_as": "", "scanned_at": "", "matches": ""}})

    before = used_memory(ctx.redis)
    with workers(ctx, args.workers, data_dir) as procs:
        deadline = time.monotonic() + 120
        while len(health(ctx)["workers"] or []) < args.workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"workers did not come up; read {data_dir}/worker-*.log")
        sampler = MemorySampler([p.pid for p in procs], ctx.redis)
        trees = [p.pid for p in procs] + [c for p in procs for c in descendants(p.pid)]
        meter = CpuMeter(
            {"workers": lambda: trees, **server_groups, "enqueuing": lambda: [os.getpid()]}
        )
        with sampler.running():
            meter.start()
            start = time.perf_counter()
            for page_id in page_ids:
                tasks.enqueue_scan(page_id)
            result["enqueue_rate"] = len(page_ids) / (time.perf_counter() - start)
            done = wait_until_scanned(ctx, len(page_ids), data_dir)
            result["worker_cpu"] = {k: v / len(page_ids) for k, v in meter.stop().items()}
    result["worker_rate"] = len(page_ids) / (done - start)
    result["worker_rss"] = sorted(sampler.worker_peak.values())
    result["redis_before"] = before
    result["redis_peak"] = sampler.redis_peak
    result["redis_after"] = used_memory(ctx.redis)

    found = findings_by_page(ctx)  # raises on duplicates
    scanned = ctx.db.pages.count_documents({"scanned_as": {"$ne": None}})
    if scanned != len(page_ids):
        raise AssertionError(f"{len(page_ids) - scanned} pages unscanned")
    differ = [pid for pid in sample if inline.get(pid, set()) != found.get(pid, set())]
    if differ:
        raise AssertionError(f"{len(differ)} sample pages matched differently than inline")
    result["findings"] = sum(len(m) for m in found.values())
    result["copies_found"] = sum(m in found.get(pid, set()) for pid, m in expected.items())
    result["copies"] = len(expected)
    result["unrelated_flagged"] = sum(1 for pid in found if pid not in expected)
    result["valkey"] = ctx.redis.info("server")["valkey_version"]
    ctx.close()
    return result


# --------------------------------------------------------------------------- report


def report(r: dict[str, Any]) -> str:
    mb = 1024 * 1024
    index = r["index"]
    rss = ", ".join(f"{v / mb:.0f}" for v in r["worker_rss"])
    ratio = r["worker_rate"] / r["inline_rate"]

    def cpu(spent: dict[str, float]) -> str:
        return " · ".join(f"{seconds * 1000:.1f}" for seconds in spent.values())

    rows = [
        ("library rebuilt (`copytrack reindex`)", f"{r['reindex_rate']:,.0f} masters/s"),
        ("pages stored (`store_page`, raw HTML kept)", f"{r['store_rate']:,.0f} pages/s"),
        (f"inline scan, one process ({r['baseline_pages']:,}-page sample)",
         f"{r['inline_rate']:,.1f} pages/s"),
        ("enqueue (`enqueue_scan`)", f"{r['enqueue_rate']:,.0f} tasks/s"),
        (f"{len(r['worker_rss'])} workers, queue to all scanned",
         f"**{r['worker_rate']:,.1f} pages/s** (×{ratio:.2f} inline)"),
        ("CPU per page inline, ms: " + " · ".join(r["inline_cpu"]), cpu(r["inline_cpu"])),
        ("CPU per page through workers, ms: " + " · ".join(r["worker_cpu"]),
         cpu(r["worker_cpu"])),
        ("worker peak RSS (main + pool process), MB", rss),
        ("Redis used_memory: index only, MB", f"{r['redis_before'] / mb:.1f}"),
        ("Redis used_memory: peak while queued, MB", f"{r['redis_peak'] / mb:.1f}"),
        ("Redis used_memory: after (index + task results), MB", f"{r['redis_after'] / mb:.1f}"),
        ("index: postings, bytes/posting",
         f"{index.postings:,}, {index.bytes_per_posting:.1f}"),
        ("findings (all distinct per page and master)", f"{r['findings']:,}"),
        ("copies found", f"{r['copies_found']:,} / {r['copies']:,}"),
        ("unrelated pages with a finding", f"{r['unrelated_flagged']:,}"),
    ]  # fmt: skip
    lines = [
        "# Load benchmark",
        "",
        f"`python -m benchmarks.bench_load` on {platform.machine()}, Python "
        f"{platform.python_version()}, {os.cpu_count()} cores, embedded Valkey {r['valkey']} "
        "(AOF everysec) and SecantusDB on the same machine.",
        "",
        f"- library: {r['masters']:,} news articles (half Chinese, half English), indexed in "
        f"{r['library_s']:.0f} s.",
        f"- pages: {r['pages']:,}, {COPY_SHARE:.0%} pirated copies of library works (edited, "
        "excerpted into other text, with ads), the rest unrelated novel and news text.",
        "- inline: `scan_page` in this process on every k-th page; then the scan state is reset "
        "and every page goes through Celery: `enqueue_scan`, `copytrack worker --queues scan "
        "--concurrency 1` per worker process.",
        "- workers, both servers and this process share the cores: the ratio measures the "
        "fleet on one small machine, not what a worker adds on a machine of its own.",
        "- CPU per page is summed over the named processes (Linux /proc): on machines of their "
        "own, workers scan as many pages per second as their cores allow at that cost, until "
        "Redis (single-threaded) or MongoDB runs out of CPU.",
        f"- load average at the end {os.getloadavg()[0]:.1f}.",
        "",
        "| figure | value |",
        "|---|---:|",
        *(f"| {name} | {value} |" for name, value in rows),
        "",
        "Checks passed: every page scanned exactly once as far as findings show (one finding "
        "per page and master), and the workers' findings on the sample equal the inline ones.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=DEFAULTS["pages"])
    parser.add_argument("--masters", type=int, default=DEFAULTS["masters"])
    parser.add_argument("--workers", type=int, default=DEFAULTS["workers"])
    parser.add_argument("--baseline-pages", type=int, default=DEFAULTS["baseline_pages"])
    parser.add_argument("--out", type=Path, help=f"markdown results (default runs: {RESULTS})")
    args = parser.parse_args(argv)
    require_shared()
    compile_project()
    default_run = all(getattr(args, k) == v for k, v in DEFAULTS.items())

    data_dir = Path(tempfile.mkdtemp(prefix="copytrack-load-"))
    try:
        result = run(args, data_dir)
    except BaseException:
        print(f"server and worker logs kept in {data_dir}", file=sys.stderr)
        raise
    finally:
        stop_servers(data_dir)
    shutil.rmtree(data_dir, ignore_errors=True)
    text = report(result)
    print(text)
    out = args.out or (RESULTS if default_run else None)
    if out:
        out.write_text(text, encoding="utf-8")
        print(f"written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
