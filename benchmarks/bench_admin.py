"""Benchmark the admin at a real crawl's size: N findings (default 100,000) on the embedded
servers, each page a reviewer opens timed in a fresh admin against its target.

The findings are built through the scan path: works registered with `add_works`, pages
stored with their text, and each page's matches recorded by `record_first_scans` (the
findings `record_findings` makes, many pages a bulk write); some findings are then
confirmed or dismissed by `bulk_set_status`. The matches are made, not matched: the
matcher is `bench_scale`'s subject, this is the admin's. Then a fresh admin (its findings
catalogue loads on the first request) serves each page ``--repeat`` times; the times are
of the request inside the process (server time), p50 and p95 against the targets.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx
from pypdf import PdfReader

from tracker.accounts.users import UserError, add_user
from tracker.context import Context, open_context
from tracker.core.config import Settings
from tracker.findings import bulk_set_status, domain_report, record_first_scans
from tracker.masters.library import Work, add_works
from tracker.matching.matcher import MasterRef, Match
from tracker.runtime.servers import ensure_servers, free_port, stop_servers

DEFAULT_OUTPUT = Path(__file__).parent / "results" / "admin.md"
PASSWORD = "bench admin password"
#: Server time p95 targets, ms: what a reviewer waits on at a real crawl's size.
TARGETS = {"findings list": 150, "search": 300, "finding page": 150, "dashboard": 200}
_HANZI = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
TITLES = ("红楼梦", "西游记", "三国演义", "水浒传", "聊斋志异", "儒林外史", "镜花缘", "老残游记")


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_HANZI) for _ in range(n)).replace(_HANZI[0], "。")


def build(ctx: Context, findings: int, works: int, seed: int = 56) -> dict[str, float]:
    """Works, pages and ``findings`` findings; seconds each step took."""
    rng = random.Random(seed)
    took: dict[str, float] = {}
    start = time.perf_counter()
    library = [
        Work(
            text=_text(rng, 400),
            external_id=f"w{i}",
            title=f"{TITLES[i % len(TITLES)]} 第{i // len(TITLES) + 1}回",
        )
        for i in range(works)
    ]
    masters = []
    for result in add_works(ctx, library):
        assert not isinstance(result, ValueError), result
        masters.append(result[0])
    took["works"] = time.perf_counter() - start
    start = time.perf_counter()
    made = 0
    page_no = 0
    while made < findings:
        batch, scans = [], []
        for _ in range(500):
            if made >= findings:
                break
            copied = rng.sample(range(works), min(works, rng.randint(1, 5), findings - made))
            parts, spans = [], []
            for w in copied:
                text, cut = library[w].text, rng.randint(30, 400)
                at = sum(map(len, parts))
                parts.append(text[:cut])
                spans.append((w, cut, at))
            text = "".join(parts)
            domain = f"site{rng.randrange(300)}.example"
            page = {
                "_id": None,
                "url": f"http://{domain}/read/{page_no}.html",
                "title": f"{TITLES[copied[0] % len(TITLES)]} 在线阅读 第{page_no}页",
                "text": text,
                "content_sha256": hashlib.sha256(text.encode()).hexdigest(),
                "campaign": f"campaign-{rng.randrange(4)}",
            }
            page_no += 1
            batch.append(page)
            matches = [
                Match(
                    master=MasterRef(masters[w].master_id, f"w{w}", library[w].title),
                    score=round(cut / 400, 3),
                    hits=max(1, cut // 20),
                    master_coverage=cut / 400,
                    suspect_coverage=cut / len(text),
                    spans=((0, cut, at, at + cut),),
                    copied_chars=cut,
                )
                for w, cut, at in spans
            ]
            scans.append((page, matches))
            made += len(matches)
        for page in batch:
            del page["_id"]
        ids = ctx.db.pages.insert_many(batch).inserted_ids
        for page, page_id in zip(batch, ids, strict=True):
            page["_id"] = page_id
        record_first_scans(ctx, scans)
    took["pages and findings"] = time.perf_counter() - start
    start = time.perf_counter()
    ids = [f["_id"] for f in ctx.db.findings.find({}, {"_id": 1})]
    rng.shuffle(ids)
    decided = ids[: len(ids) // 5]
    for i in range(0, len(decided), 50):
        status = "confirmed" if i % 100 == 0 else "dismissed"
        bulk_set_status(ctx, decided[i : i + 50], status, "bench", reason=None)
    took["decisions"] = time.perf_counter() - start
    return took


def _pct(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def memory_mb(pid: int) -> dict[str, float]:
    """A process's resident memory now (``rss``) and its peak so far (``peak``), MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    kb = {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines()
          if line.startswith(("VmRSS:", "VmHWM:"))}  # fmt: skip
    return {"rss": kb["VmRSS"] / 1024, "peak": kb["VmHWM"] / 1024}


@dataclass
class Served:
    """A fresh admin process on the installation: its address and process id, and when
    it began to listen (``perf_counter``)."""

    base: str
    pid: int
    listening_at: float


@contextmanager
def served_admin(data_dir: Path) -> Iterator[Served]:
    """`copytrack admin` in a process of its own on ``data_dir``'s servers, as a reviewer
    runs it, until the block ends; its log goes to ``data_dir``/bench-admin.log."""
    port = free_port()
    env = {**os.environ, "COPYTRACK_DATA_DIR": str(data_dir)}
    command = [sys.executable, "-c", "from copytrack.cli import run; run()", "admin",
               "--port", str(port)]  # fmt: skip
    log = (data_dir / "bench-admin.log").open("ab")
    process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the admin exited ({process.returncode}) before it listened")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the admin did not listen within 120 s") from None
                time.sleep(0.05)
        yield Served(f"http://127.0.0.1:{port}", process.pid, time.perf_counter())
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def log_in(http: httpx.Client) -> None:
    """Sign the bench reviewer in on ``http`` (its cookies keep the session)."""
    form = http.get("/login").text
    token = form.split('name="csrf_token" value="')[1].split('"')[0]
    logged_in = http.post(
        "/login",
        data={"name": "bench", "password": PASSWORD, "csrf_token": token},
        follow_redirects=False,
    )
    assert logged_in.status_code == 303, logged_in.text


@dataclass
class ColdStart:
    """A fresh admin's first request for the findings list: how long it took (ms), what
    it answered, and when the list was ready (s after the admin listened)."""

    first_ms: float
    first_status: int
    ready_s: float


def cold_start(http: httpx.Client, served: Served) -> ColdStart:
    """Ask the findings list until it answers with findings: the first answers may say
    the list is being prepared (503)."""
    first: tuple[float, int] | None = None
    while True:
        start = time.perf_counter()
        response = http.get("/findings?per_page=10")
        first = first or ((time.perf_counter() - start) * 1000, response.status_code)
        if response.status_code == 200 and 'href="/findings/' in response.text:
            return ColdStart(*first, time.perf_counter() - served.listening_at)
        assert response.status_code == 503, (response.status_code, response.text[:300])
        time.sleep(0.25)


def time_pages(
    http: httpx.Client, ctx: Context, repeat: int, seed: int = 7
) -> dict[str, list[float]]:
    """The ms of each kind of page (time to its last byte over loopback)."""
    rng = random.Random(seed)
    total = ctx.db.findings.estimated_document_count()
    sorts = ("-last_seen", "-score", "copied_chars", "domain", "-hits", "-master_coverage")
    filters = ("", "status=new", "status=confirmed&min_pct=50", "domain=site7.example",
               "campaign=campaign-2", "max_copied=100")  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in TARGETS}
    some = [f["_id"] for f in ctx.db.findings.find({}, {"_id": 1}).limit(2000)]

    def timed(name: str, url: str) -> str:
        start = time.perf_counter()
        response = http.get(url)
        times[name].append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (url, response.status_code)
        assert "/login" not in str(response.url), url
        return response.text

    for i in range(repeat):
        page = rng.choice((1, 2, rng.randint(1, max(1, total // 50))))
        timed("findings list", f"/findings?{rng.choice(filters)}&sort={sorts[i % 6]}&page={page}")
        word = rng.choice((rng.choice(TITLES), "在线阅读", f"site{rng.randrange(300)}.example"))
        timed("search", f"/findings?q={word}")
        timed("finding page", f"/findings/{rng.choice(some)}?{rng.choice(filters)}")
        timed("dashboard", "/")
    return times


#: The list walked with j/k in Chromium: one campaign's new findings, best first.
WALKED = "status=new&campaign=campaign-2&sort=-score"


def walk_j_k(served: Served, steps: int = 30) -> list[float]:
    """Seconds of each j/k step in headless Chromium inside a filtered list: from the key
    press to the next finding's page shown with its passages marked."""
    from playwright.sync_api import sync_playwright

    from tests.test_admin_browser import CHROMIUM, CHROMIUM_ARGS

    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
        page.set_default_timeout(60_000)
        try:
            page.goto(f"{served.base}/login")
            page.fill("input[name=name]", "bench")
            page.fill("input[name=password]", PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{served.base}/")
            page.goto(f"{served.base}/findings?{WALKED}")
            page.locator("a.finding-link").nth(20).click()
            page.wait_for_selector("#master-text mark.hl")
            for key in "j" * (steps * 2 // 3) + "k" * (steps // 3):
                before = page.url
                start = time.perf_counter()
                page.keyboard.press(key)
                page.wait_for_url(lambda url, before=before: url != before)
                page.wait_for_selector("#master-text mark.hl")
                times.append(time.perf_counter() - start)
        finally:
            browser.close()
    return times


@dataclass
class Produced:
    """What a long product took (s), how big it was, and the admin's memory after it."""

    seconds: float
    size: str
    memory: dict[str, float]
    meanwhile_ms: float | None = None


#: The domain whose report, PDF and CSV are produced.
REPORTED = "site7.example"


def produce_reports(http: httpx.Client, ctx: Context, served: Served) -> dict[str, Produced]:
    """A domain's report (every finding, each page of its detail), its PDF
    (built off the request; a dashboard asked meanwhile) and the CSV of every finding."""
    # One of the 300 sites (a third of a percent of the findings each); picking the
    # largest would have SecantusDB group every finding.
    domain, made = REPORTED, {}
    found = ctx.db.findings.count_documents({"domain": domain})
    asked = f"domain={domain}&scope=all"
    pages = domain_report(ctx, domain, "all").pages
    start, size = time.perf_counter(), 0
    for page in range(1, pages + 1):
        response = http.get(f"/reports/domain?{asked}&page={page}")
        assert response.status_code == 200, response.text[:300]
        size += len(response.content)
    made["domain report"] = Produced(
        time.perf_counter() - start,
        f"{found:,} findings, {pages} pages of detail, {size / 1e6:.1f} MB of HTML",
        memory_mb(served.pid),
    )
    start = time.perf_counter()
    assert http.get(f"/reports/domain?{asked}&format=pdf").status_code == 200
    meanwhile = []
    while True:
        response = http.get(f"/reports/domain.pdf?{asked}")
        if response.headers["content-type"] == "application/pdf":
            break
        began = time.perf_counter()
        assert http.get("/").status_code == 200
        meanwhile.append((time.perf_counter() - began) * 1000)
        time.sleep(1)
    pdf_pages = len(PdfReader(io.BytesIO(response.content)).pages)
    made["its PDF"] = Produced(
        time.perf_counter() - start,
        f"{pdf_pages} pages, {len(response.content) / 1e6:.1f} MB",
        memory_mb(served.pid),
        max(meanwhile, default=None),
    )
    start, rows, size = time.perf_counter(), 0, 0
    with http.stream("GET", "/exports/findings.csv?size=any") as response:
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            rows += chunk.count(b"\n")
            size += len(chunk)
    made["CSV of every finding"] = Produced(
        time.perf_counter() - start, f"{rows - 1:,} rows, {size / 1e6:.0f} MB",
        memory_mb(served.pid),
    )  # fmt: skip
    return made


@dataclass
class Measured:
    """Everything a run measured in the fresh admin."""

    cold: ColdStart
    times: dict[str, list[float]]
    after_pages: dict[str, float]
    steps: list[float]
    produced: dict[str, Produced]


def measure(ctx: Context, data_dir: Path, repeat: int) -> Measured:
    """A fresh admin process: its first answer, each page, j/k in Chromium, then the
    long products, with its memory after each."""
    with suppress(UserError):  # added by the run that built a kept installation
        add_user(ctx, "bench", PASSWORD, "reviewer")
    with served_admin(data_dir) as served, httpx.Client(base_url=served.base, timeout=600) as http:
        log_in(http)
        cold = cold_start(http, served)
        print(
            f"cold start: first answer {cold.first_ms:.0f} ms, list ready in {cold.ready_s:.1f} s"
        )
        times = time_pages(http, ctx, repeat)
        after_pages = memory_mb(served.pid)
        print(f"admin memory after the pages: {after_pages}")
        steps = walk_j_k(served)
        print(f"j/k: p50 {_pct(steps, 0.5):.2f} s, p95 {_pct(steps, 0.95):.2f} s")
        produced = produce_reports(http, ctx, served)
        for name, done in produced.items():
            print(f"{name}: {done.seconds:.1f} s, {done.size}, memory {done.memory}")
    return Measured(cold, times, after_pages, steps, produced)


#: The admin's memory target (MB, peak resident), whatever the size.
MEMORY_MB = 300
#: A j/k step's target in Chromium, seconds.
STEP_S = 0.3


def _met(value: float, target: float) -> str:
    return "met" if value <= target else "missed"


def _first_answer(status: int) -> str:
    if status == 503:
        return "503: the list is being prepared, the page refreshes by itself"
    return f"{status}: the list itself"


def report(
    findings: int, works: int, took: dict[str, float], m: Measured, load: tuple[float, float]
) -> str:
    """The results page (benchmarks/results/admin.md); ``load``: the machine's one-minute
    load average before and after the timed pages (other work shares its cores)."""
    commit = subprocess.run(
        ["git", "-C", str(Path(__file__).parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    rows = "\n".join(
        f"| {name} | {_pct(ms, 0.5):.0f} | {_pct(ms, 0.95):.0f} | ≤ {TARGETS[name]} ms | "
        f"{_met(_pct(ms, 0.95), TARGETS[name])} |"
        for name, ms in m.times.items()
    )
    steps = m.steps
    rows += (f"\n| j/k step in Chromium | {_pct(steps, 0.5) * 1000:.0f} | "
             f"{_pct(steps, 0.95) * 1000:.0f} | ≤ {STEP_S * 1000:.0f} ms | "
             f"{_met(_pct(steps, 0.95), STEP_S)} |")  # fmt: skip
    peak = max(done.memory["peak"] for done in m.produced.values())
    memory = "\n".join(
        f"| {name} | {done.seconds:.1f} s | {done.size} | {done.memory['peak']:.0f} MB |"
        for name, done in m.produced.items()
    )
    meanwhile = m.produced["its PDF"].meanwhile_ms
    built = ", ".join(f"{step} {s:.0f} s" for step, s in took.items())
    return f"""# Admin benchmark: {findings:,} findings on the embedded servers

Measured on `{commit}` ({time.strftime("%Y-%m-%d")}). Reproduce with `.venv/bin/python -m
benchmarks.bench_admin --findings {findings}` (writes this file; `--data-dir DIR` keeps the
installation, and a later run with the same `DIR` reuses it instead of building again).
The machine's load average was {load[0]:.1f} before the timed pages and {load[1]:.1f} after,
on {os.cpu_count()} cores.

## Current figures

| | p50 ms | p95 ms | target p95 | |
|---|---:|---:|---:|---|
{rows}

- **Cold start**: a fresh admin (`copytrack admin`) answered its first request, for the
  findings list, in {m.cold.first_ms:.0f} ms ({_first_answer(m.cold.first_status)}); the
  list was ready {m.cold.ready_s:.1f} s after the admin began to listen (its findings
  catalogue loads in the background as the admin starts).
- **Memory**: the admin's peak resident memory (VmHWM) was {m.after_pages["peak"]:.0f} MB
  after the timed pages, and {peak:.0f} MB after the long products below
  (target ≤ {MEMORY_MB} MB: {_met(peak, MEMORY_MB)}).

| long product | took | size | admin's peak memory after it |
|---|---:|---|---:|
{memory}

While the PDF was built (off the request), the slowest dashboard asked meanwhile took
{f"{meanwhile:.0f} ms" if meanwhile is not None else "—"}.

## How it is measured

Generated by `benchmarks/bench_admin.py`. {works:,} works, {findings:,} findings on pages
copying 1-5 works each, through the scan path's `record_first_scans`, a fifth of them
confirmed or dismissed. Built in {sum(took.values()):.0f} s ({built}).

The admin runs as a reviewer runs it, `copytrack admin` in a process of its own; each page
is asked {len(m.times["dashboard"])} times, and its time is to its last byte over loopback
(server time and a millisecond of HTTP). The list: random filters (status, score, domain,
campaign, characters copied), sorts and pages up to the last; the search: a work title, a
page title's words or a URL's host; a finding page: its passages side by side and its
neighbours in a filtered list. j/k: {len(steps)} steps in headless Chromium inside one
campaign's new findings (`{WALKED}`), from the key press to the next
finding shown with its passages marked. Memory is read from `/proc/<pid>/status` of the
admin's process.

{platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} cores.
"""


def _built(ctx: Context, settings: Settings, findings: int, works: int) -> dict[str, float]:
    """Build the installation, or reuse the one a previous run left in the data dir
    (``--data-dir``): its build times are kept beside it."""
    kept = settings.data_dir / "bench-admin-build.json"
    if kept.exists() and ctx.db.findings.estimated_document_count() >= findings:
        return json.loads(kept.read_text())
    took = build(ctx, findings, works)
    kept.write_text(json.dumps(took))
    return took


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--findings", type=int, default=100_000)
    parser.add_argument("--works", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=60)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUTPUT)
    parser.add_argument(
        "--data-dir", type=Path, help="build here and keep it (a later run reuses the build)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-admin-") as tmp:
        data_dir = args.data_dir or Path(tmp) / "data"
        settings = Settings.from_env({"COPYTRACK_DATA_DIR": str(data_dir)})
        ensure_servers(settings)
        try:
            ctx = open_context(settings)
            took = _built(ctx, settings, args.findings, args.works)
            print(f"built {args.findings:,} findings in {sum(took.values()):.0f} s: {took}")
            load_before = os.getloadavg()[0]
            measured = measure(ctx, settings.data_dir, args.repeat)
            load = (load_before, os.getloadavg()[0])
            ctx.close()
        finally:
            stop_servers(settings.data_dir)
    for name, ms in measured.times.items():
        p50, p95 = _pct(ms, 0.5), _pct(ms, 0.95)
        print(f"{name}: p50 {p50:.0f} ms, p95 {p95:.0f} ms (target ≤ {TARGETS[name]} ms, "
              f"{TARGETS[name] / p95:.2f}× the target)")  # fmt: skip
    args.out.write_text(report(args.findings, args.works, took, measured, load))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
