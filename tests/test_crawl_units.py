"""Crawler parts on their own: canonical URLs, scope, the private-network rule, fetch_text."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.request import Request as UrlRequest

import pytest
import redis
from bson import ObjectId
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.test import get_crawler

from crawler.fetch import FetchError, _CountedRedirects, fetch_page, fetch_text
from crawler.middlewares import (
    SEED,
    CampaignScopeMiddleware,
    CrawlRefused,
    PrivateNetworkMiddleware,
    SharedFrontierMiddleware,
)
from crawler.run import scrapy_settings
from crawler.urls import UrlScope, canonicalize
from extractor import NoArticleText, html_to_text
from tests.loopback import served
from tests.processes import clean_env
from tracker.campaigns import Campaign
from tracker.context import Context
from tracker.core.config import ConfigError
from tracker.core.netguard import PrivateAddressError, address_problem, check_url

PARAGRAPH = "<p>这是第{n}段正文，讲述了一个很长的故事，足够被识别为文章的主体内容。</p>"
ARTICLE = (
    "<html><head><title>标题</title></head><body><article><h1>标题</h1>"
    + "".join(PARAGRAPH.format(n=n) for n in range(8))
    + "</article></body></html>"
).encode("gbk")


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("HTTP://Example.COM:80/a/b.html?utm_source=rss&utm_medium=feed#comments",
         "http://example.com/a/b.html"),
        ("https://x.example:443/p?b=2&fbclid=abc&a=1&UTM_Campaign=x", "https://x.example/p?a=1&b=2"),
        ("http://x.example:8080/p?spm=1.2&id=7", "http://x.example:8080/p?id=7"),
        ("http://x.example/%e4%b8%ad?q=%E4%B8%AD", "http://x.example/%E4%B8%AD?q=%E4%B8%AD"),
        ("http://x.example", "http://x.example/"),
    ],
)  # fmt: skip
def test_canonicalize(url: str, canonical: str) -> None:
    assert canonicalize(url) == canonical
    assert canonicalize(canonical) == canonical


def test_scope_ports_subdomains_patterns() -> None:
    scope = UrlScope.build(["127.0.0.1:8001", "example.com"], [r"/news/", r"/$"], [r"/login"])
    assert scope.in_domains("http://127.0.0.1:8001/x")
    assert not scope.in_domains("http://127.0.0.1:8002/x")  # another site on another port
    assert scope.in_domains("https://www.example.com:8443/")
    assert scope.in_domains("http://example.com")
    assert not scope.in_domains("http://badexample.com/")
    assert not scope.in_domains("ftp://example.com/")
    assert scope.allows("http://example.com/news/1.html") and scope.allows("http://example.com/")
    assert not scope.allows("http://example.com/about.html")  # matches no allow pattern
    assert not scope.allows("http://example.com/news/login")  # denied
    ipv6 = UrlScope.build(["[::1]:8080"], [], [])
    assert ipv6.in_domains("http://[::1]:8080/") and not ipv6.in_domains("http://[::1]:8081/")


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1", "loopback"), ("::1", "loopback"), ("::ffff:127.0.0.1", "loopback"),
        ("10.0.0.8", "private"), ("192.168.1.1", "private"), ("fd00::1", "private"),
        ("169.254.169.254", "link-local"), ("fe80::1", "link-local"), ("0.0.0.0", "unspecified"),
        ("100.64.0.1", "non-global"), ("224.0.0.1", "multicast"),
        ("93.184.216.34", None), ("2606:4700::1111", None),
    ],
)  # fmt: skip
def test_address_problems(address: str, problem: str | None) -> None:
    assert address_problem(ipaddress.ip_address(address)) == problem


def test_check_url_resolves_names() -> None:
    with pytest.raises(PrivateAddressError, match=r"localhost .* loopback"):
        check_url("http://localhost:8000/")  # a name, resolved
    with pytest.raises(PrivateAddressError, match="COPYTRACK_ALLOW_PRIVATE_NETWORKS"):
        check_url("http://[::1]/")
    check_url("http://127.0.0.1/", allow_private=True)


def _crawler(allow_private: bool = False) -> object:
    campaign = {"name": "c", "seeds": ["http://127.0.0.1:8001/"], "deny": ["/login"]}
    settings = {"COPYTRACK_CAMPAIGN": campaign, "COPYTRACK_ALLOW_PRIVATE_NETWORKS": allow_private}
    return get_crawler(settings_dict=settings)


def test_private_network_middleware_refuses_redirects_into_private_space() -> None:
    middleware = PrivateNetworkMiddleware.from_crawler(_crawler())
    redirect = Request("http://10.0.0.1/admin", meta={"redirect_urls": ["http://pub.example/"]})
    with pytest.raises(CrawlRefused) as refused:
        asyncio.run(middleware.process_request(redirect))
    assert refused.value.reason == "private_address" and "10.0.0.1" in str(refused.value)


def test_the_shared_frontier_gives_up_on_a_redis_that_stops_answering() -> None:
    """The middleware that marks a run busy uses the scheduler's Redis settings, timeouts
    included: a Redis that accepts connections but never answers fails the crawl (a
    timeout) instead of hanging it."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never replies
        port = silent.getsockname()[1]
        crawler = get_crawler(settings_dict={
            "REDIS_URL": f"redis://127.0.0.1:{port}/0",
            "REDIS_PARAMS": {"socket_timeout": 0.5, "retry_on_timeout": False},
            "COPYTRACK_FRONTIER_BUSY_KEY": "test:busy",
            "COPYTRACK_FRONTIER_GRACE": 5.0,
        })  # fmt: skip
        middleware = SharedFrontierMiddleware.from_crawler(crawler)
        started = time.monotonic()
        with pytest.raises(redis.TimeoutError):
            middleware.process_request(Request("http://127.0.0.1:8001/a"))
        assert time.monotonic() - started < 5


def test_scope_middleware() -> None:
    crawler = _crawler()
    middleware = CampaignScopeMiddleware.from_crawler(crawler)
    middleware.request_scheduled(Request("http://127.0.0.1:8001/a"), None)
    with pytest.raises(IgnoreRequest):
        middleware.request_scheduled(Request("http://example.invalid/"), None)
    with pytest.raises(IgnoreRequest):
        middleware.request_scheduled(Request("http://127.0.0.1:8001/login"), None)
    # A seed only needs the right host; a redirect out of scope is reported when downloaded.
    middleware.request_scheduled(Request("http://127.0.0.1:8001/login", meta={SEED: True}), None)
    redirect = Request("http://other.example/", meta={"redirect_urls": ["http://127.0.0.1:8001/"]})
    middleware.request_scheduled(redirect, None)
    with pytest.raises(CrawlRefused, match="out of scope"):
        middleware.process_request(redirect)


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.hits += 1  # type: ignore[attr-defined]
        answer = {"/gone.html": 410, "/broken.html": 500}.get(self.path, 200)
        if answer != 200:
            self.send_error(answer)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=gbk")
        self.end_headers()
        self.wfile.write(ARTICLE)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def page_server() -> Iterator[ThreadingHTTPServer]:
    with served(_Page, hits=0) as server:
        yield server


def test_fetch_text(page_server: ThreadingHTTPServer) -> None:
    url = f"http://127.0.0.1:{page_server.server_port}/a.html"
    with pytest.raises(FetchError, match="loopback"):
        fetch_text(url, allow_private=False)
    assert page_server.hits == 0  # refused before connecting  # type: ignore[attr-defined]
    text = fetch_text(url, allow_private=True)
    assert "这是第0段正文" in text and "这是第7段正文" in text
    with pytest.raises(FetchError, match="only http and https"):
        fetch_text("file:///etc/passwd", allow_private=True)


def test_fetch_page_hands_over_the_evidence_of_a_page(page_server: ThreadingHTTPServer) -> None:
    site = f"http://127.0.0.1:{page_server.server_port}"
    with pytest.raises(FetchError, match="loopback"):
        fetch_page(f"{site}/a.html", allow_private=False)
    assert page_server.hits == 0  # type: ignore[attr-defined]
    page = fetch_page(f"{site}/a.html", allow_private=True)
    assert page.raw == ARTICLE and page.encoding == "gb18030" and page.status == 200
    assert "这是第7段正文" in page.text and page.skip_reason is None
    # Taken down: an empty page saying so (its scan closes the findings); a failure raises.
    gone = fetch_page(f"{site}/gone.html", allow_private=True)
    assert gone.text == "" and gone.status == 410 and gone.skip_reason.startswith("gone: HTTP 410")
    with pytest.raises(FetchError, match=r"broken.html: HTTP 500"):
        fetch_page(f"{site}/broken.html", allow_private=True)


def test_redirects_to_other_schemes_are_refused() -> None:
    # Where an http(s) redirect leads is checked when it is connected to
    # (tests/security/test_dns_guard.py); other schemes are not followed at all.
    guard = _CountedRedirects()
    request = UrlRequest("http://pub.example/")
    with pytest.raises(FetchError, match="only http and https"):
        guard.redirect_request(request, None, 302, "Found", Message(), "file:///etc/passwd")


def test_html_to_text() -> None:
    assert "这是第3段正文" in html_to_text(ARTICLE)
    with pytest.raises(NoArticleText, match="no article text"):
        html_to_text(b"<html><body><p>hi</p></body></html>")
    with pytest.raises(ValueError, match="PNG"):
        html_to_text(b"\x89PNG\r\n\x1a\n" + bytes(100))


def test_crawl_tunables_are_read_from_the_environment(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The crawl limits of tracker/core/config.py are environment variables of the crawl process
    (an operator sets them in compose) and Scrapy settings of the same name."""
    campaign = Campaign.from_dict({"name": "c", "seeds": ["http://127.0.0.1:9/"]})
    assert (
        scrapy_settings(campaign, ObjectId(), ctx, "memory").getfloat(
            "COPYTRACK_EXTRACT_CPU_SECONDS"
        )
        == 60.0
    )
    monkeypatch.setenv("COPYTRACK_EXTRACT_CPU_SECONDS", "7.5")
    monkeypatch.setenv("COPYTRACK_MAX_LINKS_PER_PAGE", "3")
    settings = scrapy_settings(campaign, ObjectId(), ctx, "memory")
    assert settings.getfloat("COPYTRACK_EXTRACT_CPU_SECONDS") == 7.5
    assert settings.getint("COPYTRACK_MAX_LINKS_PER_PAGE") == 3
    for bad in ("abc", "-1", "nan", "2.5"):  # 2.5 links is no whole number
        monkeypatch.setenv("COPYTRACK_MAX_LINKS_PER_PAGE", bad)
        with pytest.raises(
            ConfigError, match=f"COPYTRACK_MAX_LINKS_PER_PAGE='{bad}': set it to a whole"
        ):
            scrapy_settings(campaign, ObjectId(), ctx, "memory")


def test_a_crawl_process_that_cannot_reach_its_servers_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    # Port 1 on loopback: nothing listens there.
    env = clean_env(
        COPYTRACK_MONGO_URL="mongodb://127.0.0.1:1/",
        COPYTRACK_REDIS_URL="redis://127.0.0.1:1/0",
        COPYTRACK_DATA_DIR=str(tmp_path),
    )
    done = subprocess.run(
        [sys.executable, "-m", "crawler", "--campaign", "news", "--run-id", str(ObjectId())],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "MongoDB at COPYTRACK_MONGO_URL does not answer" in done.stderr
