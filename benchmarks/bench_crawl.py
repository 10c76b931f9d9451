"""Benchmark the crawl: pages/s through crawl + decode + extract + store + enqueue, next to
a Scrapy-only crawl (same spider, settings and test web, no copytrack pipeline) in the same
run. Usage::

    .venv/bin/python -m benchmarks.bench_crawl [--repeat N] [--out benchmarks/results/crawl.md]

Each crawl is a fresh process (Twisted's reactor does not restart) on embedded servers
in a temporary data dir, against the local test web served by this process. Two regimes:
*unthrottled* (no delay, 8 parallel requests per site: the machine's CPU is the limit,
through the latencies AutoThrottle measures) and *polite* (0.1 s between requests, one
at a time per site: the sites are the limit, as on the real web). Pages/s counts every
response (pages, lists, feeds, errors) over the crawl's elapsed time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere

from bson import ObjectId  # noqa: E402

from testbed.testweb import build_site, serve  # noqa: E402
from tracker.config import Settings  # noqa: E402
from tracker.servers import ensure_servers, proc_stat, server_status, stop_servers  # noqa: E402

DEFAULT_OUTPUT = REPO / "benchmarks" / "results" / "crawl.md"
REGIMES = {
    "unthrottled": {"delay": 0, "concurrency": 8},
    "polite": {"delay": 0.1, "concurrency": 1},
}
MODES = ("scrapy-only", "copytrack")
TARGET = 0.6


def child(mode: str, campaign: dict[str, Any]) -> dict[str, Any]:
    """One crawl in this (fresh) process; returns Scrapy's figures."""
    from scrapy.crawler import CrawlerProcess

    from crawler.run import scrapy_settings
    from crawler.spiders.campaign import CampaignSpider
    from tracker.campaigns import Campaign
    from tracker.context import process_context

    ctx = process_context()
    ctx.redis.delete("scan")  # count this crawl's queued scans only
    settings = scrapy_settings(Campaign.from_dict(campaign), ObjectId(), ctx, "memory")
    if mode == "scrapy-only":
        # Same spider and politeness; no decode/extract/store/enqueue, no page look-ups.
        middlewares = settings.getdict("DOWNLOADER_MIDDLEWARES")
        middlewares["crawler.middlewares.RefetchPolicyMiddleware"] = None
        settings.set("DOWNLOADER_MIDDLEWARES", middlewares, priority="cmdline")
        settings.set("ITEM_PIPELINES", {}, priority="cmdline")
    settings.set("LOG_LEVEL", "WARNING", priority="cmdline")
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(CampaignSpider)
    process.crawl(crawler)
    process.start()
    assert crawler.stats is not None
    stats = crawler.stats.get_stats()
    own = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "cpu_crawl": own.ru_utime + own.ru_stime,
        "cpu_workers": _children_cpu(),
        "responses": stats.get("response_received_count", 0),
        "items": stats.get("item_scraped_count", 0),
        "elapsed": stats["elapsed_time_seconds"],
        "pages_stored": ctx.db.pages.estimated_document_count(),
        "scans_queued": ctx.redis.llen("scan"),
    }


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux)."""
    fields = proc_stat(pid)
    if fields is None:
        raise RuntimeError(f"process {pid} is gone: read the servers' logs in the data dir")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    """CPU time of this process's children and of the children they reaped: the extraction
    workers, by way of their forkserver (which outlives them)."""
    me, ticks = str(os.getpid()), 0
    for entry in Path("/proc").iterdir():
        fields = proc_stat(entry.name) if entry.name.isdigit() else None
        if fields and fields[1] == me:
            ticks += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def crawl(
    mode: str, campaign: dict[str, Any], env: dict[str, str], servers: dict[str, int]
) -> dict[str, Any]:
    """Run one crawl in a fresh interpreter, on a fresh database; adds the servers' CPU."""
    env = dict(env, COPYTRACK_MONGO_DB=f"bench_{uuid.uuid4().hex[:8]}")
    before = {name: _cpu_seconds(pid) for name, pid in servers.items()}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_crawl", "--child", mode, json.dumps(campaign)],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{mode} crawl failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for name, pid in servers.items():
        result[f"cpu_{name}"] = _cpu_seconds(pid) - before[name]
    result["pages_per_s"] = result["responses"] / result["elapsed"]
    return result


def _cpu(result: dict[str, Any], *parts: str) -> str:
    return " / ".join(f"{result[f'cpu_{part}']:.1f}" for part in parts)


def report(results: dict[str, dict[str, dict[str, Any]]], n_pages: int, wall: float) -> str:
    lines = [
        "# Crawl benchmark (crawl + decode + extract + store + enqueue)",
        "",
        "Generated by `benchmarks/bench_crawl.py`. The local test web (4 sites on loopback, "
        f"{n_pages} article pages plus lists, feeds, sitemaps, redirects, errors, a slow, a "
        "huge and a binary page) crawled by the campaign spider with the project settings "
        "(robots.txt, AutoThrottle, size cap). *scrapy-only* runs the same spider and "
        "middlewares without the copytrack pipeline or page look-ups; *copytrack* adds "
        "decoding, extraction, storing each page with its raw bytes in MongoDB and queueing "
        "its scan in Redis (in worker processes). Best of the repeats, the modes taking "
        f"turns; pages/s = responses / crawl time. Target: copytrack ≥ {TARGET}× "
        "scrapy-only.",
        "",
        "| regime | scrapy-only pages/s | copytrack pages/s | ratio | responses | pages stored "
        "| scans queued | CPU s scrapy-only: crawl / MongoDB / Valkey | CPU s copytrack: crawl "
        "/ workers / MongoDB / Valkey |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for regime, by_mode in results.items():
        base, ours = by_mode["scrapy-only"], by_mode["copytrack"]
        lines.append(
            f"| {regime} {REGIMES[regime]} | {base['pages_per_s']:.1f} | "
            f"{ours['pages_per_s']:.1f} | {ours['pages_per_s'] / base['pages_per_s']:.2f} | "
            f"{ours['responses']} | {ours['pages_stored']} | {ours['scans_queued']} | "
            f"{_cpu(base, 'crawl', 'mongo', 'valkey')} | "
            f"{_cpu(ours, 'crawl', 'workers', 'mongo', 'valkey')} |"
        )
    lines += [
        "",
        f"{os.cpu_count()} CPUs ({platform.machine()}, Python {platform.python_version()}); "
        f"{wall:.0f} s wall time. The embedded MongoDB (SecantusDB) and Valkey, the test "
        "web, the crawl and its workers (their forkserver included) share these CPUs, with "
        "whatever else runs on the machine. Without a delay AutoThrottle still spaces each "
        "site's requests by the latencies it measures, and never shortens the spacing on "
        "an error page: a latency peak late in the crawl (the reactor or the test web "
        "short of CPU) slows all the error pages that follow, in either mode.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument("--child", nargs=2, metavar=("MODE", "CAMPAIGN"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], json.loads(args.child[1]))))
        return 0

    started = time.monotonic()
    web = build_site(slow_seconds=1.0)
    with tempfile.TemporaryDirectory(prefix="bench-crawl-") as data_dir, serve(web) as running:
        endpoints = ensure_servers(Settings.from_env({"COPYTRACK_DATA_DIR": data_dir}))
        servers = {s.name: s.pid for s in server_status(data_dir)}
        env = {k: v for k, v in os.environ.items() if not k.startswith("COPYTRACK_")}
        env.update(
            COPYTRACK_DATA_DIR=data_dir,
            COPYTRACK_MONGO_URL=endpoints.mongo_url,
            COPYTRACK_REDIS_URL=endpoints.redis_url,
            COPYTRACK_ALLOW_PRIVATE_NETWORKS="1",
        )
        seeds = [running.url(site) for site in running.base_urls]
        results: dict[str, dict[str, dict[str, Any]]] = {}
        try:
            for regime, politeness in REGIMES.items():
                campaign = {"name": "bench", "seeds": seeds, **politeness}
                # Modes take turns: whatever else loads the machine meanwhile falls on both.
                runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
                for _ in range(args.repeat):
                    for mode in MODES:
                        runs[mode].append(crawl(mode, campaign, env, servers))
                results[regime] = {}
                for mode in MODES:
                    best = max(runs[mode], key=lambda r: r["pages_per_s"])
                    results[regime][mode] = best
                    print(
                        f"{regime:<12} {mode:<12} {best['pages_per_s']:7.1f} pages/s "
                        f"({best['responses']} responses in {best['elapsed']:.1f} s)"
                    )
        finally:
            stop_servers(data_dir)
    text = report(results, len(web.articles()), time.monotonic() - started)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
