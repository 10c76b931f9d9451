"""Benchmark the crawl: pages/s through crawl + decode + extract + store + enqueue, next to
a Scrapy-only crawl (same spider, settings and test web, no copytrack pipeline) in the same
run. Usage::

    .venv/bin/python -m benchmarks.bench_crawl [--repeat N] [--out benchmarks/results/crawl.md]
    .venv/bin/python -m benchmarks.bench_crawl --real-pages [--repeat N] [--limit N] [--render]

Each crawl is a fresh process (Twisted's reactor does not restart) on embedded servers
in a temporary data dir, against the local test web served by this process. Two regimes:
*unthrottled* (no delay, 8 parallel requests per site: the machine's CPU is the limit,
through the latencies AutoThrottle measures) and *polite* (0.1 s between requests, one
at a time per site: the sites are the limit, as on the real web). Pages/s counts every
response (pages, lists, feeds, errors) over the crawl's elapsed time.

``--real-pages`` measures the whole `copytrack campaign run --wait` over the shared real
pages against a naive Scrapy + trafilatura spider instead (benchmarks/results/crawl-real.md).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere

from bson import ObjectId  # noqa: E402

from benchmarks.bench_extraction import (  # noqa: E402
    AGREEMENT_ONLY,
    HUMAN_TRUTH,
    load_pages,
    prf,
    read_page,
)
from benchmarks.bench_scale import COMMAND  # noqa: E402
from benchmarks.bytecode import compile_project  # noqa: E402
from benchmarks.shared_corpus import (  # noqa: E402
    CORPUS_DIR,
    FILES,
    WEBPAGES_DIR,
    iter_documents,
    require_shared,
)
from testbed.testweb import build_site, serve  # noqa: E402
from testbed.testweb.generator import Resource, TestWeb  # noqa: E402
from tracker.core.config import Settings  # noqa: E402
from tracker.masters.generation import open_ready  # noqa: E402
from tracker.runtime.processes import proc_stat  # noqa: E402
from tracker.runtime.servers import ensure_servers, server_status, stop_servers  # noqa: E402

DEFAULT_OUTPUT = REPO / "benchmarks" / "results" / "crawl.md"
REGIMES = {
    "unthrottled": {"delay": 0, "concurrency": 8},
    "polite": {"delay": 0.1, "concurrency": 1},
}
MODES = ("scrapy-only", "copytrack")
TARGET = 0.6
ALL_KINDS = (*HUMAN_TRUTH, *AGREEMENT_ONLY, "snippets", None)  # every zh/en page


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
        "scans_queued": ctx.redis.llen(ctx.keys.queue("scan")),
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
    parser.add_argument(
        "--out", type=Path, help=f"markdown results (default {DEFAULT_OUTPUT}, or {REAL_OUTPUT})"
    )
    parser.add_argument("--real-pages", action="store_true", help="the shared real pages")
    parser.add_argument("--webpages", type=Path, default=WEBPAGES_DIR)
    parser.add_argument("--limit", type=int, default=None, help="real pages: first N only")
    parser.add_argument(
        "--render", action="store_true", help="real pages: rendered in Chromium, both sides"
    )
    parser.add_argument("--child", nargs=2, metavar=("MODE", "CAMPAIGN"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], json.loads(args.child[1]))))
        return 0
    compile_project()
    if args.real_pages:
        return real_pages_main(args)

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
    out = args.out or DEFAULT_OUTPUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)
    return 0


# ------------------------------------------------------------------ real-pages mode
# The shared real pages (../shared/webpages) on one loopback site, an index page linking
# them all; `copytrack campaign run --wait` (crawl, extract, store, scan against a library)
# against the naive spider a user would write instead, both whole commands in one run.

NAIVE_SPIDER = """\
import scrapy
import trafilatura


class NaiveSpider(scrapy.Spider):
    name = "naive"

    def __init__(self, start: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.start_urls = [start]

    def parse(self, response):
        yield {"url": response.url, "text": trafilatura.extract(response.text)}
        yield from response.follow_all(css="a", callback=self.parse)
"""
#: The naive spider a user would write to render pages: scrapy-playwright on every request.
#: Its browser sends every host but loopback to a dead proxy and aborts their requests: the
#: real pages name their images and scripts on the public web, which a benchmark must not
#: reach (copytrack runs with COPYTRACK_RENDER_OFFSITE=0 alike).
NAIVE_RENDER_SPIDER = """\
from urllib.parse import urlsplit

import scrapy
import trafilatura


def other_host(request):
    return urlsplit(request.url).hostname != "127.0.0.1"


class NaiveRenderSpider(scrapy.Spider):
    name = "naive-render"
    custom_settings = {
        "DOWNLOAD_HANDLERS": {
            "http": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler",
            "https": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler",
        },
        "PLAYWRIGHT_LAUNCH_OPTIONS": {
            "executable_path": "/usr/bin/chromium",
            # Loopback is fetched directly (Chromium's default), anything else nowhere.
            "args": ["--no-sandbox", "--proxy-server=127.0.0.1:9"],
        },
        "PLAYWRIGHT_ABORT_REQUEST": other_host,
        "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": 4,
    }

    def __init__(self, start: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.start_url = start

    async def start(self):
        yield scrapy.Request(self.start_url, meta={"playwright": True})

    def parse(self, response):
        yield {"url": response.url, "text": trafilatura.extract(response.text)}
        yield from response.follow_all(css="a", callback=self.parse, meta={"playwright": True})
"""
REAL_CONCURRENCY = 16
REAL_LIST_LINKS = 100  # links per list page
REAL_DEPTH = 2  # home → list → page
REAL_LIBRARY_PER_FILE = 100  # works of each shared corpus file in the library
REAL_OUTPUT = REPO / "benchmarks" / "results" / "crawl-real.md"
RENDER_OUTPUT = REPO / "benchmarks" / "results" / "crawl-real-render.md"
QUALITY_TARGETS = {"zh": 0.94, "en": 0.90}


def real_site(webpages: Path, limit: int | None) -> tuple[TestWeb, dict[str, dict]]:
    """One site serving the zh/en shared pages byte for byte under /p/<id>.html, listed
    on /list/<n> pages (as a site's section pages) that the home page links to; and the
    manifest entry of each page's path. No charset in the header: both crawlers decode
    from the page, as they must for the many servers that send none."""
    entries = load_pages(webpages, kinds=ALL_KINDS)[:limit]
    by_path = {f"/p/{e['id']}.html": e for e in entries}
    resources = {path: Resource(read_page(webpages, e), "text/html") for path, e in by_path.items()}
    paths = list(by_path)
    lists = [paths[i : i + REAL_LIST_LINKS] for i in range(0, len(paths), REAL_LIST_LINKS)]
    for n, listed in enumerate(lists):
        resources[f"/list/{n}"] = Resource(_links_page(f"List {n}", listed))
    resources["/"] = Resource(_links_page("Pages", [f"/list/{n}" for n in range(len(lists))]))
    return TestWeb(0, {"real": resources}, {}), by_path


def _links_page(title: str, paths: list[str]) -> bytes:
    links = "".join(f'<li><a href="{path}">{path}</a></li>\n' for path in paths)
    return f"<!doctype html><title>{title}</title><ul>\n{links}</ul>".encode()


def _quality(texts: dict[str, str], by_path: dict[str, dict]) -> dict[str, tuple[float, int]]:
    """Mean F1 per language over the pages with human truth, and how many were scored."""
    scores: dict[str, list[float]] = defaultdict(list)
    for path, entry in by_path.items():
        if entry.get("truth_kind") in HUMAN_TRUTH:
            scores[entry["lang"]].append(
                prf(texts.get(path, ""), entry["truth_text"], entry["lang"])[2]
            )
    return {lang: (sum(f) / len(f), len(f)) for lang, f in scores.items()}


def run_naive(start: str, workdir: Path, render: bool = False) -> dict[str, Any]:
    """`scrapy runspider` of the naive spider (rendering every page with scrapy-playwright
    when ``render``), timed as a whole command."""
    spider, out = workdir / "naive_spider.py", workdir / "naive.jsonl"
    spider.write_text(NAIVE_RENDER_SPIDER if render else NAIVE_SPIDER)
    command = [
        sys.executable, "-m", "scrapy", "runspider", str(spider), "-a", f"start={start}",
        "-O", str(out), "-s", "LOG_LEVEL=WARNING", "-s", f"DEPTH_LIMIT={REAL_DEPTH}",
        "-s", f"CONCURRENT_REQUESTS={REAL_CONCURRENCY}",
        "-s", f"CONCURRENT_REQUESTS_PER_DOMAIN={REAL_CONCURRENCY}",
    ]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, cwd=workdir, check=True, capture_output=True)
    seconds = time.perf_counter() - started
    rows = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    texts = {urlsplit(r["url"]).path: r["text"] or "" for r in rows}
    return {"seconds": seconds, "pages": len(rows), "texts": texts}


def run_campaign(start: str, workdir: Path, library: Path, render: bool = False) -> dict[str, Any]:
    """`copytrack campaign run --wait` on embedded servers (started, the library added and
    the campaign defined before the clock); the texts it stored, from MongoDB. ``render``:
    the campaign renders its pages, their scripts' requests kept on the site."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPYTRACK_")}
    env.update(COPYTRACK_DATA_DIR=str(workdir / "data"), COPYTRACK_ALLOW_PRIVATE_NETWORKS="1",
               COPYTRACK_RENDER_OFFSITE="0")  # fmt: skip
    settings = Settings.from_env(env)
    ensure_servers(settings)
    try:
        subprocess.run([*COMMAND, "library", "add", "--no-progress", str(library)],
                       env=env, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        subprocess.run(
            [*COMMAND, "campaign", "add", "real", "--seed", start, "--depth", str(REAL_DEPTH),
             "--delay", "0", "--concurrency", str(REAL_CONCURRENCY),
             *(["--render"] if render else [])],
            env=env, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        started = time.perf_counter()
        subprocess.run([*COMMAND, "campaign", "run", "real", "--wait"], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        seconds = time.perf_counter() - started
        ctx = open_ready(settings)
        stored = list(ctx.db.pages.find({}, {"url": 1, "text": 1}))
        findings = ctx.db.findings.count_documents({})
        ctx.close()
    finally:
        stop_servers(settings.data_dir)
    texts = {urlsplit(p["url"]).path: p.get("text") or "" for p in stored}
    return {"seconds": seconds, "pages": len(stored), "texts": texts, "findings": findings}


def real_pages_main(args: argparse.Namespace) -> int:
    require_shared(args.webpages)
    require_shared(CORPUS_DIR)
    web, by_path = real_site(args.webpages, args.limit)
    with tempfile.TemporaryDirectory(prefix="bench-crawl-real-") as tmp, serve(web) as running:
        workdir = Path(tmp)
        library = workdir / "library.jsonl"
        with library.open("w", encoding="utf-8") as out:
            for name in FILES:
                for doc in itertools.islice(iter_documents(name), REAL_LIBRARY_PER_FILE):
                    out.write(json.dumps(doc, ensure_ascii=False) + "\n")
        start = running.url("real")
        runs: dict[str, list[dict[str, Any]]] = {"naive": [], "copytrack": []}
        for i in range(args.repeat):  # taking turns: other load falls on both
            runs["naive"].append(run_naive(start, workdir, args.render))
            runs["copytrack"].append(
                run_campaign(start, workdir / f"run-{i}", library, args.render)
            )
            for name, side in runs.items():
                print(f"{name:<10} {side[-1]['pages']} pages in {side[-1]['seconds']:.1f} s")
    best = {name: min(side, key=lambda r: r["seconds"]) for name, side in runs.items()}
    text = real_report(best, by_path, len(by_path), args.render)
    if args.limit is None:
        (args.out or (RENDER_OUTPUT if args.render else REAL_OUTPUT)).write_text(text)
    print(text)
    return 0


def real_report(
    best: dict[str, dict[str, Any]], by_path: dict[str, dict], n_pages: int, render: bool = False
) -> str:
    naive, ours = best["naive"], best["copytrack"]
    speed = {name: n_pages / side["seconds"] for name, side in best.items()}
    quality = {name: _quality(side["texts"], by_path) for name, side in best.items()}
    lines = [
        "# Crawl benchmark on real pages (crawl + extract + store + scan)",
        "",
        "Generated by `benchmarks/bench_crawl.py --real-pages`. The zh/en pages of "
        f"`../shared/webpages` ({n_pages} real news and article pages, byte for byte) on one "
        f"loopback site, on list pages of {REAL_LIST_LINKS} links that the home page links. "
        "*naive*: the Scrapy spider a user would write (`trafilatura.extract(response.text)` "
        f"per page, following every link to depth {REAL_DEPTH}, {REAL_CONCURRENCY} parallel "
        "requests), `scrapy runspider -o pages.jsonl`. "
        "*copytrack*: `copytrack campaign run --wait` of a campaign with the same depth, no "
        f"delay and concurrency {REAL_CONCURRENCY} on the embedded servers, against a "
        f"library of {REAL_LIBRARY_PER_FILE * len(FILES)} works of the shared corpus: "
        "robots.txt, decoding, extraction, storing each page with its raw bytes, scanning it. "
        "Each the whole command, best of the repeats; pages/s = pages served / seconds. "
        "F1: bag-of-tokens against the human truth (as in bench_extraction), mean over the "
        "pages that have one.",
        *(
            [
                "",
                "**Rendering on** (`--render`): every page run in Debian's Chromium. *naive*: "
                "the scrapy-playwright spider a user would write (`playwright: True` on every "
                "request, 4 pages at once); *copytrack*: the campaign's `render` option "
                "(`COPYTRACK_RENDER_PAGES` 4). Both browsers reach loopback only (the pages "
                "name their scripts and images on the public web): the naive one aborts other "
                "hosts' requests, copytrack runs with `COPYTRACK_RENDER_OFFSITE=0`.",
            ]
            if render
            else []
        ),
        "",
        "| | naive spider | copytrack | copytrack vs naive |",
        "|---|---:|---:|---:|",
        f"| seconds | {naive['seconds']:.1f} | {ours['seconds']:.1f} | |",
        f"| pages/s | {speed['naive']:.1f} | {speed['copytrack']:.1f} | "
        f"{speed['copytrack'] / speed['naive']:.2f}× (target ≥ 1.0×) |",
        f"| pages with text | {sum(1 for t in naive['texts'].values() if t)} | "
        f"{sum(1 for t in ours['texts'].values() if t)} | |",
    ]
    for lang, target in QUALITY_TARGETS.items():
        if lang not in quality["naive"]:  # a --limit run without pages of it
            continue
        (f_naive, n), (f_ours, _) = quality["naive"][lang], quality["copytrack"][lang]
        lines.append(
            f"| {lang} F1 ({n} pages with truth) | {f_naive:.3f} | {f_ours:.3f} | "
            f"{f_ours - f_naive:+.3f} (target ≥ {target}) |"
        )
    lines += [
        f"| findings (none of the pages copies the library: each would be false) | – | "
        f"{ours['findings']} | |",
        "",
        f"{os.cpu_count()} CPUs ({platform.machine()}, Python {platform.python_version()}); "
        "the servers, the site, the crawl and its workers share them. copytrack runs "
        "trafilatura, then readability-lxml as a second opinion (+0.06 F1 on Chinese pages) "
        "on the pages where trafilatura's own readability pass disagrees with its text "
        "(about half), and reads title, author and date from the markup, on both cores; "
        "the naive spider trafilatura alone, in one process.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
