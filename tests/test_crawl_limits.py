"""Limits on what a crawled site controls: links per page, redirect chains, body size,
decompressed size (gzip bombs) and download time, in a crawl and in `copytrack check URL`.

A loopback site serves every trap; the crawl must refuse each one quickly, count it in
the run under its reason (`copytrack campaign show`) and log the URL.
"""

from __future__ import annotations

import random
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from contextlib import suppress
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from click.testing import CliRunner
from scrapy import Request
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.downloadermiddlewares.redirect import RedirectMiddleware
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Response, XmlResponse
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from copytrack.cli import main
from crawler import settings as crawl_settings
from crawler.fetch import FetchError, fetch_text
from crawler.items import DroppedLinks, FetchedPage
from crawler.spiders.campaign import CampaignSpider, problem_of
from tests.loopback import served
from tracker.campaigns import Campaign, crawl_log_path, save_campaign, trigger_run, wait_for_run
from tracker.context import Context
from tracker.core.config import CRAWL_DEFAULTS

pytestmark = pytest.mark.slow

MAX_LINKS = CRAWL_DEFAULTS["COPYTRACK_MAX_LINKS_PER_PAGE"]
MAX_REDIRECTS = crawl_settings.REDIRECT_MAX_TIMES
MAX_BYTES = crawl_settings.DOWNLOAD_MAXSIZE
BOMB_BYTES = 2**30  # what the bomb inflates to: 1 GiB of zeros in about 1 MB
RUN_TIMEOUT = 240
PARAGRAPH = "<p>这是第{n}段正文，讲述了一个很长的故事，足够被识别为文章的主体内容。</p>"
ARTICLE = (
    "<html><head><title>标题</title></head><body><article><h1>标题</h1>"
    + "".join(PARAGRAPH.format(n=n) for n in range(8))
    + "</article></body></html>"
).encode()
LINKS_ON_PAGE = MAX_LINKS + 100


def gzipped(chunks: Iterator[bytes]) -> bytes:
    # Z_RLE: runs of zeros compress as well as at level 9, in half the time.
    packer = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS, 9, zlib.Z_RLE)
    return b"".join([*(packer.compress(chunk) for chunk in chunks), packer.flush()])


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """A gzip stream of about 1 MB that inflates to 1 GiB."""
    chunk = bytes(2**24)
    return gzipped(chunk for _ in range(BOMB_BYTES // len(chunk)))


class _Traps(BaseHTTPRequestHandler):
    """The site: an article, and every trap the limits are for."""

    server: Any

    def do_GET(self) -> None:
        path = self.path
        base = f"http://127.0.0.1:{self.server.server_port}"
        if path.startswith(("/long/", "/short/")):
            kind, hop = path.split("/")[1], int(path.split("/")[2])
            if kind == "long" or hop < 3:  # /long/ redirects for ever, /short/ three times
                self._send(302, b"", "text/html", Location=f"{base}/{kind}/{hop + 1}")
            else:
                self._send(200, ARTICLE, "text/html; charset=utf-8")
        elif path == "/":
            links = ["/links.html", "/long/0", "/short/0", "/bomb.html", "/big.html"]
            body = "".join(f'<a href="{link}">{link}</a> ' for link in links)
            self._send(200, f"<html><body>{body}</body></html>".encode(), "text/html")
        elif path == "/links.html":
            farm = "".join(f'<a href="/farm/{n}.html">{n}</a> ' for n in range(LINKS_ON_PAGE))
            self._send(200, ARTICLE.replace(b"</article>", farm.encode() + b"</article>"),
                       "text/html; charset=utf-8")  # fmt: skip
        elif path == "/robots.txt":
            self._send(
                200, f"User-agent: *\nSitemap: {base}/sitemap.xml.gz\n".encode(), "text/plain"
            )
        elif path == "/sitemap.xml.gz":  # a gzip file, not a gzip transfer
            self._send(200, self.server.bomb, "application/gzip")
        elif path == "/bomb.html":
            self._send(200, self.server.bomb, "text/html", **{"Content-Encoding": "gzip"})
        elif path in ("/big.html", "/big-stream.html"):  # without Content-Length: streamed
            big = b"<p>" + b"x" * (MAX_BYTES + 1)
            self._send(200, big, "text/html", length=path == "/big.html")
        elif path == "/gzip.html":
            self._send(200, gzipped(iter([ARTICLE])), "text/html; charset=utf-8",
                       **{"Content-Encoding": "gzip"})  # fmt: skip
        elif path == "/corrupt.html":
            self._send(200, b"\x1f\x8b\x08\x00" + bytes(range(256)), "text/html",
                       **{"Content-Encoding": "gzip"})  # fmt: skip
        elif path == "/noise.html":  # bytes in no charset, no NUL: decodes to U+FFFD mostly
            rng = random.Random(7)
            noise = bytes(rng.randrange(128, 256) for _ in range(5000))
            self._send(200, b"<html><body><p>" + noise, "text/html")
        elif path == "/trickle.html":
            self._trickle()
        else:
            self._send(404, b"", "text/html")

    def _send(
        self, status: int, body: bytes, content_type: str, length: bool = True, **headers: str
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length:
            self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        with suppress(ConnectionError):  # a client refusing a big body hangs up
            self.wfile.write(body)

    def _trickle(self) -> None:
        """An article a byte every 50 ms: each read is quick, the whole takes minutes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        try:
            for byte in ARTICLE:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.05)
        except ConnectionError:
            pass  # the client gave up, as it should

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def site(bomb: bytes) -> Iterator[str]:
    with served(_Traps, bomb=bomb) as server:
        yield f"http://127.0.0.1:{server.server_port}"


# ---------------------------------------------------------------------- a real crawl


def test_a_crawl_refuses_the_traps_and_says_so(crawl_ctx: Context, site: str) -> None:
    campaign = Campaign.from_dict(
        {
            "name": "traps",
            "seeds": [f"{site}/", f"{site}/robots.txt"],
            "deny": ["/farm/"],  # the farm's links are counted, then left out of scope
            "delay": 0,
            "concurrency": 8,
        }
    )
    save_campaign(crawl_ctx, campaign)
    started = time.monotonic()
    run_id = trigger_run(crawl_ctx, "traps")
    run = wait_for_run(crawl_ctx, run_id, timeout=RUN_TIMEOUT)
    assert run["state"] == "finished", run
    assert time.monotonic() - started < 120  # the bombs were not inflated

    assert run["skipped"]["links_over_limit"] == LINKS_ON_PAGE - MAX_LINKS
    assert run["skipped"]["too_many_redirects"] == 1
    assert run["skipped"]["too_large_decompressed"] == 1  # the page sent gzip-encoded
    assert run["skipped"]["too_large"] == 1
    assert run["failed"]["invalid_sitemap"] == 1  # the sitemap.xml.gz bomb
    # Three redirects are fine; the page at their end and the link farm's page were stored.
    stored = {p["final_url"]: p for p in crawl_ctx.db.pages.find({}, {"final_url": 1, "text": 1})}
    assert "这是第7段正文" in stored[f"{site}/short/3"]["text"]
    assert f"{site}/links.html" in stored and f"{site}/bomb.html" not in stored

    show = CliRunner().invoke(main, ["campaign", "show", "traps"], catch_exceptions=False)
    for reason in ("links_over_limit 100", "too_many_redirects 1", "too_large_decompressed 1",
                   "too_large 1", "invalid_sitemap 1"):  # fmt: skip
        assert reason in show.output, show.output
    log = crawl_log_path(crawl_ctx, run_id).read_text()
    assert f"{site}/links.html has {LINKS_ON_PAGE} links: following the first {MAX_LINKS}" in log
    assert f"{site}/long/0: more than {MAX_REDIRECTS} redirects" in log


@pytest.mark.parametrize(("depth", "fetched"), [(0, {"/"}), (1, {"/", "/links.html"})])
def test_a_crawl_stops_at_its_depth(
    crawl_ctx: Context, site: str, depth: int, fetched: set[str]
) -> None:
    """Depth 0 is the seed alone (Scrapy's DEPTH_LIMIT would take 0 for no limit); the
    link farm one hop further is neither fetched nor counted as dropped."""
    name = f"depth{depth}"
    campaign = {"name": name, "seeds": [f"{site}/"], "allow": ["/$", "/links"],
                "max_depth": depth, "delay": 0}  # fmt: skip
    save_campaign(crawl_ctx, Campaign.from_dict(campaign))
    run = wait_for_run(crawl_ctx, trigger_run(crawl_ctx, name), timeout=RUN_TIMEOUT)
    assert run["state"] == "finished", run
    pages = crawl_ctx.db.pages.find({"campaign": name}, {"final_url": 1})
    assert {p["final_url"].removeprefix(site) for p in pages} == fetched
    assert "links_over_limit" not in run.get("skipped", {})


def test_the_crawl_reads_its_tunables_from_the_environment(
    crawl_ctx: Context, site: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_campaign(crawl_ctx, Campaign.from_dict(
        {"name": "tuned", "seeds": [f"{site}/"], "allow": ["/$"], "delay": 0}
    ))  # fmt: skip
    monkeypatch.setenv("COPYTRACK_MAX_LINKS_PER_PAGE", "3")  # the home page has 5
    run = wait_for_run(crawl_ctx, trigger_run(crawl_ctx, "tuned"), timeout=RUN_TIMEOUT)
    assert run["state"] == "finished" and run["skipped"]["links_over_limit"] == 2, run
    monkeypatch.setenv("COPYTRACK_MAX_LINKS_PER_PAGE", "lots")
    run = wait_for_run(crawl_ctx, trigger_run(crawl_ctx, "tuned"), timeout=RUN_TIMEOUT)
    assert run["state"] == "failed"
    assert run["error"].startswith(
        "invalid COPYTRACK_MAX_LINKS_PER_PAGE='lots': set it to a whole number"
    )


# ---------------------------------------------------------------------- the parts


def _spider(**campaign_options: Any) -> CampaignSpider:
    campaign = {"name": "c", "seeds": ["http://a.example/"], **campaign_options}
    settings = {"COPYTRACK_CAMPAIGN": campaign, "COPYTRACK_MAX_LINKS_PER_PAGE": MAX_LINKS}
    crawler = get_crawler(CampaignSpider, settings)
    return CampaignSpider.from_crawler(crawler)


def response(cls: type[Response], url: str, body: str | bytes) -> Any:
    """A response as the spider gets it (tied to its request)."""
    raw = body.encode() if isinstance(body, str) else body
    return cls(url, body=raw, request=Request(url))


def test_links_past_the_limit_are_dropped_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    links = "".join(f'<a href="/p/{n}">{n}</a>' for n in range(MAX_LINKS + 7))
    page = response(HtmlResponse, "http://a.example/list", f"<html><body>{links}</body></html>")
    out = list(_spider().parse_page(page))
    assert isinstance(out[0], FetchedPage)
    requests = [x for x in out if isinstance(x, Request)]
    assert len(requests) == MAX_LINKS
    assert requests[-1].url == f"http://a.example/p/{MAX_LINKS - 1}"  # document order
    assert [x for x in out if isinstance(x, DroppedLinks)] == [
        DroppedLinks("http://a.example/list", 7, "links_over_limit")
    ]
    assert f"http://a.example/list has {MAX_LINKS + 7} links" in caplog.text

    items = "".join(f"<item><link>/f/{n}</link></item>" for n in range(MAX_LINKS + 1))
    rss = f"<rss><channel><item><link>http://[::1</link></item>{items}</channel></rss>"
    out = list(_spider().parse_seed(response(XmlResponse, "http://a.example/feed.xml", rss)))
    assert len([x for x in out if isinstance(x, Request)]) == MAX_LINKS
    assert [x for x in out if isinstance(x, DroppedLinks)] == [
        DroppedLinks("http://a.example/feed.xml", 1, "links_over_limit"),
        DroppedLinks("http://a.example/feed.xml", 1, "bad_url"),
    ]


def test_links_of_a_page_at_the_last_hop_are_not_extracted() -> None:
    links = "".join(f'<a href="/p/{n}">{n}</a>' for n in range(MAX_LINKS + 7))
    page = response(HtmlResponse, "http://a.example/list", f"<html><body>{links}</body></html>")
    page.request.meta["depth"] = 2  # as Scrapy's DepthMiddleware records it
    assert [type(x) for x in _spider(max_depth=2).parse_page(page)] == [FetchedPage]
    assert len([x for x in _spider(max_depth=3).parse_page(page) if isinstance(x, Request)]) == (
        MAX_LINKS
    )


def test_sitemap_urls_past_their_limit_are_dropped_counted_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    campaign = {"name": "c", "seeds": ["http://a.example/sitemap.xml"]}
    settings = {"COPYTRACK_CAMPAIGN": campaign, "COPYTRACK_MAX_SITEMAP_URLS": 3}
    spider = CampaignSpider.from_crawler(get_crawler(CampaignSpider, settings))
    urls = "".join(f"<url><loc>http://a.example/a/{n}.html</loc></url>" for n in range(5))
    sitemap = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
    out = list(spider.parse_seed(response(XmlResponse, "http://a.example/sitemap.xml", sitemap)))
    assert [x.url for x in out if isinstance(x, Request)] == [
        f"http://a.example/a/{n}.html" for n in range(3)
    ]
    assert [x for x in out if isinstance(x, DroppedLinks)] == [
        DroppedLinks("http://a.example/sitemap.xml", 2, "links_over_limit")
    ]
    assert "following the first 3 (COPYTRACK_MAX_SITEMAP_URLS)" in caplog.text


def test_scrapy_refusals_get_their_reasons() -> None:
    """problem_of recognises the refusals of Scrapy's own middlewares (their messages)."""
    crawler = get_crawler(settings_dict={"REDIRECT_MAX_TIMES": MAX_REDIRECTS})
    chain = [f"http://a.example/{n}" for n in range(MAX_REDIRECTS + 1)]
    request = Request(
        chain[-1], meta={"redirect_times": MAX_REDIRECTS, "redirect_urls": chain[:-1]}
    )
    moved = Response(chain[-1], status=302, headers={"Location": "/next"}, request=request)
    with pytest.raises(IgnoreRequest) as refused:
        RedirectMiddleware.from_crawler(crawler).process_response(request, moved)
    failure = Failure(refused.value)
    failure.request = request  # type: ignore[attr-defined]
    problem = problem_of(failure, chain[-1])
    assert (problem.url, problem.reason, problem.skipped) == (chain[0], "too_many_redirects", True)
    assert f"more than {MAX_REDIRECTS} redirects" in problem.detail and chain[-1] in problem.detail

    crawler = get_crawler(settings_dict={"DOWNLOAD_MAXSIZE": 10_000})
    request = Request("http://a.example/bomb")
    packed = Response(request.url, body=gzipped(iter([bytes(10**6)])), request=request,
                      headers={"Content-Encoding": "gzip"})  # fmt: skip
    with pytest.raises(IgnoreRequest) as refused:
        HttpCompressionMiddleware.from_crawler(crawler).process_response(request, packed)
    failure = Failure(refused.value)
    failure.request = request  # type: ignore[attr-defined]
    assert problem_of(failure, request.url).reason == "too_large_decompressed"

    corrupt = Response(request.url, body=b"\x1f\x8b\x08\x00" + bytes(range(256)),
                       headers={"Content-Encoding": "gzip"}, request=request)  # fmt: skip
    with pytest.raises(zlib.error) as broken:
        HttpCompressionMiddleware.from_crawler(crawler).process_response(request, corrupt)
    failure = Failure(broken.value)
    failure.request = request  # type: ignore[attr-defined]
    assert problem_of(failure, request.url).reason == "bad_compression"


def test_a_corrupt_gzip_sitemap_is_counted_not_a_crash() -> None:
    sitemap = response(Response, "http://a.example/sitemap.xml.gz", b"\x1f\x8b\x08\x00garbage")
    [problem] = list(_spider().parse_sitemap(sitemap))
    assert problem.reason == "invalid_sitemap" and "sitemap.xml.gz" in problem.detail
    # As a seed it is stored as a page and skipped as binary by the pipeline.
    [page] = list(_spider().parse_seed(sitemap))
    assert isinstance(page, FetchedPage)


# ---------------------------------------------------------------------- copytrack check URL


def test_fetch_text_follows_a_few_redirects_not_a_chain(site: str) -> None:
    assert "这是第7段正文" in fetch_text(f"{site}/short/0", allow_private=True)
    with pytest.raises(FetchError) as refused:
        fetch_text(f"{site}/long/0", allow_private=True)
    message = str(refused.value)
    assert message.startswith(f"{site}/long/0: more than {MAX_REDIRECTS} redirects")
    assert f"{site}/long/{MAX_REDIRECTS}" in message and "open it in a browser" in message


def test_fetch_text_refuses_a_gzip_bomb_quickly_and_in_little_memory(site: str) -> None:
    assert "这是第7段正文" in fetch_text(f"{site}/gzip.html", allow_private=True)
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(FetchError, match=r"/bomb\.html: larger than 3 MB once decompressed"):
            fetch_text(f"{site}/bomb.html", allow_private=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 5
    assert peak < 8 * MAX_BYTES  # the body and 3 MB of output, not a gigabyte
    with pytest.raises(FetchError, match=r"/corrupt\.html: its compressed body is corrupt"):
        fetch_text(f"{site}/corrupt.html", allow_private=True)


def test_fetch_text_size_time_and_charset_limits(site: str) -> None:
    for page in ("big.html", "big-stream.html"):
        with pytest.raises(FetchError, match=rf"/{page}: larger than 3 MB .*check the file"):
            fetch_text(f"{site}/{page}", allow_private=True)
    started = time.monotonic()
    with pytest.raises(FetchError, match=r"/trickle\.html: still downloading after 1 s"):
        fetch_text(f"{site}/trickle.html", allow_private=True, timeout=1)
    assert time.monotonic() - started < 3
    with pytest.raises(FetchError, match=r"/noise\.html: \d+ byte sequences are not valid"):
        fetch_text(f"{site}/noise.html", allow_private=True)
