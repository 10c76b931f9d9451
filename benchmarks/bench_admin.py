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
import platform
import random
import subprocess
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

from admin.app import create_app
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.core.config import Settings
from tracker.findings import bulk_set_status, record_first_scans
from tracker.masters.generation import open_ready
from tracker.masters.library import Work, add_works
from tracker.matching.matcher import MasterRef, Match
from tracker.runtime.servers import ensure_servers, stop_servers

DEFAULT_OUTPUT = Path(__file__).parent / "results" / "admin.md"
PASSWORD = "bench admin password"
#: Server time p95 targets, ms (issue 56).
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


def time_pages(ctx: Context, repeat: int, seed: int = 7) -> tuple[float, dict[str, list[float]]]:
    """Seconds of the fresh admin's first request (its catalogue loading), and the ms of
    each kind of page."""
    rng = random.Random(seed)
    total = ctx.db.findings.estimated_document_count()
    add_user(ctx, "bench", PASSWORD, "reviewer")
    app = create_app(ctx)
    http = TestClient(app, base_url="http://127.0.0.1")
    form = http.get("/login").text
    token = form.split('name="csrf_token" value="')[1].split('"')[0]
    logged_in = http.post(
        "/login",
        data={"name": "bench", "password": PASSWORD, "csrf_token": token},
        follow_redirects=False,
    )
    assert logged_in.status_code == 303, logged_in.text
    start = time.perf_counter()
    listed = http.get("/findings?per_page=10")
    first = time.perf_counter() - start
    assert 'href="/findings/' in listed.text and len(app.state.catalogue) == total
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
    return first, times


def report(findings: int, works: int, took: dict[str, float], first: float,
           times: dict[str, list[float]]) -> str:  # fmt: skip
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    rows = "\n".join(
        f"| {name} | {_pct(ms, 0.5):.0f} | {_pct(ms, 0.95):.0f} | ≤ {TARGETS[name]} | "
        f"{'met' if _pct(ms, 0.95) <= TARGETS[name] else 'missed'} |"
        for name, ms in times.items()
    )
    built = ", ".join(f"{step} {s:.0f} s" for step, s in took.items())
    return f"""# Admin benchmark: {findings:,} findings on the embedded servers

Measured on `{commit}` ({time.strftime("%Y-%m-%d")}). Reproduce with `.venv/bin/python -m
benchmarks.bench_admin --findings {findings}` (writes this file).

Generated by `benchmarks/bench_admin.py`. {works:,} works, {findings:,} findings on pages
copying 1-5 works each, a fifth of them confirmed or dismissed. Built in
{sum(took.values()):.0f} s ({built}). A fresh admin's first request, which loads its
findings catalogue, took {first:.1f} s. Then each page {len(times["dashboard"])} times,
server time in ms (the request inside the admin's process):

| page | p50 ms | p95 ms | target p95 | |
|---|---:|---:|---:|---|
{rows}

The list: random filters (status, score, domain, campaign, characters copied), sorts and
pages up to the last; the search: a work title, a page title's words or a URL's host; a
finding page: its passages side by side and its neighbours in a filtered list.

{platform.machine()}, Python {platform.python_version()}.
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--findings", type=int, default=100_000)
    parser.add_argument("--works", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=60)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-admin-") as tmp:
        settings = Settings.from_env({"COPYTRACK_DATA_DIR": str(Path(tmp) / "data")})
        ensure_servers(settings)
        try:
            ctx = open_ready(settings)
            took = build(ctx, args.findings, args.works)
            print(f"built {args.findings:,} findings in {sum(took.values()):.0f} s: {took}")
            first, times = time_pages(ctx, args.repeat)
            ctx.close()
        finally:
            stop_servers(settings.data_dir)
    for name, ms in times.items():
        p50, p95 = _pct(ms, 0.5), _pct(ms, 0.95)
        print(f"{name}: p50 {p50:.0f} ms, p95 {p95:.0f} ms (target ≤ {TARGETS[name]} ms, "
              f"{TARGETS[name] / p95:.2f}× the target)")  # fmt: skip
    args.out.write_text(report(args.findings, args.works, took, first, times))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
