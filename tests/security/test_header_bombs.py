"""A crawled site drove the crawler out of memory through its headers.

The attack: a server answered ``HTTP/1.1 200 OK`` and then sent ``X-Pad: <8,000 bytes>``
header lines for 25 s; the size cap counts bodies only, the crawl process grew to 18.7 GB
until the kernel killed it, and the run ended ``failed: interrupted`` with the site never
scanned. Now a response's head is bounded in bytes, header lines and time
(crawler/heads.py), in the crawl (crawler/download_handler.py), in the page-rendering path
(the page and its scripts' requests) and in `copytrack check URL` (crawler/connections.py).

A loopback site serves two copies and the traps: endless header lines (it stops by itself
after 256 MB, should the client never hang up), sampling the crawl process's memory as it
sends, and a head a line every half second.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from copytrack.cli import main
from crawler.fetch import FetchError, download, fetch_text
from crawler.heads import HeadLimits
from crawler.rendering import chromium_path
from tests.corpus import novel_chapters
from tests.loopback import Handler, served
from tests.processes import wait_until
from tracker.campaigns import (
    Campaign,
    crawl_log_path,
    launch_crawl,
    save_campaign,
    start_run,
    wait_for_run,
)
from tracker.context import Context
from tracker.core.netguard import system_lookup
from tracker.masters.library import Work, add_works

pytestmark = pytest.mark.security

CHAPTERS = [text[:1500] for text in novel_chapters(2)]
PAD = b"X-Pad: " + b"a" * 8000 + b"\r\n"
BOMB_BUDGET = 256 * 1024 * 1024  # what the trap sends at most, if nobody hangs up
#: How much the crawl process may grow while the trap sends: a head is at most 256 KB.
GROWTH_MB = 40
RUN_TIMEOUT = 180


#: A chapter a script fills in, after its request to the trap (which must fail) is done.
READER = (
    "<html><head><meta charset='utf-8'><title>第1章</title></head><body>"
    "<div id='content'></div><script>"
    "fetch('/bomb.json').catch(e => null).finally(() => fetch('/api/chapter')"
    ".then(r => r.json()).then(lines => { document.getElementById('content').innerHTML ="
    " lines.map(line => '<p>' + line + '</p>').join(''); }));"
    "</script></body></html>"
).encode()


def page(n: int) -> bytes:
    paragraphs = "".join(f"<p>{line}</p>" for line in CHAPTERS[n].split("\n") if line)
    return (
        f"<html><head><meta charset='utf-8'><title>第{n + 1}章</title></head><body><article>"
        f"{paragraphs}</article></body></html>"
    ).encode()


class _Traps(Handler):
    """Two chapters, a head without end (/bomb...) and a head that trickles (/slow...)."""

    server: Any

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        if self.path == "/":
            links = "".join(f'<a href="{p}">{p}</a> ' for p in self.server.links)
            self.send_body(f"<html><body>{links}</body></html>".encode())
        elif self.path.startswith("/ch"):
            self.send_body(page(int(self.path[3])))
        elif self.path == "/reader.html":
            self.send_body(READER)
        elif self.path == "/api/chapter":
            self.send_body(json.dumps(CHAPTERS[0].split("\n"), ensure_ascii=False).encode(),
                           "application/json")  # fmt: skip
        elif self.path.startswith("/bomb"):
            self._endless_head()
        elif self.path.startswith("/slow"):
            self._trickling_head()
        else:
            self.send_error(404)

    def _endless_head(self) -> None:
        """Header lines until the client hangs up (or 256 MB are sent), watching how much
        the crawl process (``crawl_pid``, if set) grows meanwhile."""
        watch = Growth(self.server.crawl_pid)
        self.server.watches.append(watch)
        sent = 0
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            while sent < BOMB_BUDGET:
                self.wfile.write(PAD)
                sent += len(PAD)
                if sent % (32 * len(PAD)) == 0:
                    watch.sample()
            time.sleep(60)  # the budget spent: wait for the client to give up
        except OSError:
            self.server.hung_up.append(sent)  # the client hung up, as it should
        finally:
            watch.sample()

    def _trickling_head(self) -> None:
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            for n in range(120):
                self.wfile.write(b"X-Slow-%d: 1\r\n" % n)
                self.wfile.flush()
                time.sleep(0.5)
        except OSError:
            pass


@contextmanager
def trap_site(*links: str) -> Iterator[Any]:
    with served(_Traps, paths=[], links=links, crawl_pid=None, hung_up=[], watches=[]) as site:
        site.base = f"http://127.0.0.1:{site.server_port}"
        yield site


class Growth:
    """How much a process's resident memory grows from now on, by samples (none without
    a process). Kills the process past 2 GB: the machine is shared."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.start = self.peak = self._rss() or 0.0

    def _rss(self) -> float | None:
        if self.pid is None:
            return None
        with suppress(OSError):
            status = Path(f"/proc/{self.pid}/status").read_text()
            return next(int(line.split()[1]) / 1024 for line in status.splitlines()
                        if line.startswith("VmRSS:"))  # fmt: skip
        return None  # the process is gone

    def sample(self) -> None:
        rss = self._rss() or 0.0
        self.peak = max(self.peak, rss)
        if rss > 2048:
            os.kill(self.pid, signal.SIGKILL)

    @property
    def growth(self) -> float:
        return self.peak - self.start


def grown(site: Any) -> float:
    """The most the crawl process grew while one of the traps sent its endless head."""
    assert site.watches, "the trap was never requested"
    return max(watch.growth for watch in site.watches)


def crawl(ctx: Context, name: str, site: Any, **options: Any) -> dict:
    campaign = {"name": name, "seeds": [f"{site.base}/"], "delay": 0, "concurrency": 4}
    save_campaign(ctx, Campaign.from_dict({**campaign, **options}))
    run_id = start_run(ctx, name)
    site.crawl_pid = launch_crawl(ctx, name, run_id).pid
    return wait_for_run(ctx, run_id, timeout=RUN_TIMEOUT)


def problems(ctx: Context, run: dict) -> dict[str, tuple[str, str, str]]:
    return {
        doc["url"].rsplit("/", 1)[1]: (doc["outcome"], doc["reason"], doc["detail"])
        for doc in ctx.db.run_problems.find({"run_id": run["_id"]})
    }


# ---------------------------------------------------------------------- the crawl


def test_a_crawl_refuses_endless_headers_and_scans_the_rest(
    crawl_ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPYTRACK_HEADER_SECONDS", "2")  # a tunable of the crawl process
    add_works(crawl_ctx, [Work(text=t, external_id=f"ch{n}") for n, t in enumerate(CHAPTERS)])
    with trap_site("/ch0.html", "/bomb.html", "/slow.html", "/ch1.html") as site:
        run = crawl(crawl_ctx, "headers", site)
        paths = list(site.paths)
    assert run["state"] == "finished", run
    assert grown(site) < GROWTH_MB, f"the crawl grew {grown(site):.0f} MB as the trap sent"
    assert site.hung_up and site.hung_up[0] < BOMB_BUDGET  # the crawler hung up on it
    assert run["failed"] == {"headers_too_large": 1, "headers_too_slow": 1}, run
    assert paths.count("/bomb.html") == 1 and paths.count("/slow.html") == 1  # no retries
    found = problems(crawl_ctx, run)
    assert found["bomb.html"][:2] == ("failed", "headers_too_large")
    assert "over 256 KB of headers (COPYTRACK_MAX_HEADER_BYTES)" in found["bomb.html"][2]
    assert found["slow.html"][:2] == ("failed", "headers_too_slow")
    assert "2 s after the first byte (COPYTRACK_HEADER_SECONDS)" in found["slow.html"][2]
    # The other pages of the site were stored and scanned: each copy is a finding.
    for n in (0, 1):
        stored = crawl_ctx.db.pages.find_one({"url": f"{site.base}/ch{n}.html"})
        assert stored is not None and stored.get("scanned_at"), stored
        masters = crawl_ctx.db.findings.distinct("master_external_id", {"page_id": stored["_id"]})
        assert masters == [f"ch{n}"]
    shown = CliRunner().invoke(main, ["campaign", "show", "headers"], catch_exceptions=False)
    assert "headers_too_large 1" in shown.output and "headers_too_slow 1" in shown.output


# ---------------------------------------------------------------------- the rendering path


@pytest.mark.slow
@pytest.mark.skipif(not chromium_path().exists(), reason="needs Debian's Chromium")
def test_a_rendering_crawl_refuses_endless_headers_of_a_page_and_of_its_scripts_requests(
    crawl_ctx: Context,
) -> None:
    """The page is fetched by the crawl's handler, its script's request by the route's
    fetch: both meet the trap; the chapter the script fills in is found all the same."""
    add_works(crawl_ctx, [Work(text=CHAPTERS[0], external_id="ch0")])
    with trap_site("/reader.html", "/bomb.html") as site:
        run = crawl(crawl_ctx, "rendered", site, render=True)
        paths = list(site.paths)
    assert run["state"] == "finished", run
    assert grown(site) < GROWTH_MB, f"the crawl grew {grown(site):.0f} MB as the traps sent"
    assert len(site.hung_up) == 2 and max(site.hung_up) < BOMB_BUDGET, site.hung_up
    assert "/bomb.json" in paths and "/api/chapter" in paths
    assert run["failed"] == {"headers_too_large": 1}, run
    assert problems(crawl_ctx, run)["bomb.html"][:2] == ("failed", "headers_too_large")
    reader = crawl_ctx.db.pages.find_one({"url": f"{site.base}/reader.html"})
    assert reader["rendered"] is True and reader.get("scanned_at"), reader.get("skip_reason")
    assert crawl_ctx.db.findings.distinct("master_external_id", {"page_id": reader["_id"]}) == [
        "ch0"
    ]
    log = crawl_log_path(crawl_ctx, run["_id"]).read_text()
    assert f"{site.base}/bomb.json: the server sent over 256 KB of headers" in log


# ---------------------------------------------------------------------- copytrack check URL


def test_check_url_refuses_endless_headers_in_one_line(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPYTRACK_ALLOW_PRIVATE_NETWORKS", "1")
    with trap_site() as site:
        url = f"{site.base}/bomb.html"
        started = time.monotonic()
        with pytest.raises(FetchError) as refused:
            fetch_text(url)
        assert time.monotonic() - started < 5
        wait_until(lambda: site.hung_up, 5, "the client hanging up")
        result = CliRunner().invoke(main, ["check", url])
    message = str(refused.value)
    assert message.startswith(f"{url}: the server sent over 256 KB of headers")
    assert "\n" not in message
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "the server sent over 256 KB of headers" in result.output


def test_check_url_gives_up_on_a_head_that_trickles() -> None:
    """A line of the head every half second: each read is quick, the head never ends."""
    with trap_site() as site:
        url = f"{site.base}/slow.html"
        started = time.monotonic()
        with pytest.raises(FetchError, match=r"not sent all its headers 1 s after"):
            download(url, True, 30, 1 << 20, system_lookup, HeadLimits(seconds=1))
        assert time.monotonic() - started < 3
        with pytest.raises(FetchError, match=r"over 5 header lines \(COPYTRACK_MAX_HEADERS\)"):
            download(url, True, 30, 1 << 20, system_lookup, HeadLimits(max_lines=5))


def test_a_head_within_the_limits_is_read() -> None:
    with trap_site() as site:
        got = download(f"{site.base}/ch0.html", True, 30, 1 << 20, system_lookup)
    assert got.status == 200 and "第1章".encode() in got.body
    assert got.headers["Content-Type"].startswith("text/html")
