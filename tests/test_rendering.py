"""Script-rendered pages: a pirate site whose chapter pages are empty
shells a script fills from a JSON request. Without rendering the run says why nothing was
found; with the campaign's ``render`` option the pages are run in Debian's Chromium
(scrapy-playwright) and every chapter is found. Chromium fetches nothing itself: the
page's requests go through the crawl's private-network rule, images and styles are never
fetched, and what escapes the route reaches no server.

Real crawls of a loopback site on the embedded servers; the guard tests drive Chromium
directly with a scripted DNS.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from scrapy.http import HtmlResponse

from crawler.rendering import PageRoute, RenderOptions, chromium_path
from crawler.urls import UrlScope
from tests.admin_seed import PASSWORD, client, login
from tests.corpus import novel_chapters
from tests.loopback import Handler, served
from tests.security.fakes import ScriptedLookup, listening
from tracker.accounts.users import add_user
from tracker.campaigns import Campaign, save_campaign, trigger_run, wait_for_run
from tracker.masters.library import Work, add_works

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not Path("/usr/bin/chromium").exists(),
        reason="needs Debian's Chromium: apt-get install chromium",
    ),
]

CHAPTERS = [text[:1200] for text in novel_chapters(3)]
READER = (
    "fetch('/api/chapter?id=' + document.body.dataset.chapter)"
    ".then(r => r.json()).then(d => {"
    " document.getElementById('content').innerHTML ="
    " d.paragraphs.map(p => '<p>' + p + '</p>').join(''); });"
)


def _shell(n: int, charset: str) -> bytes:
    """A chapter page as served: navigation, an empty box, an image, the reader script."""
    return (
        f'<html><head><meta charset="{charset}"><title>第{n}章</title>'
        '<link rel="stylesheet" href="/css/site.css"></head>'
        f'<body data-chapter="{n}"><div class="nav">首页 > 目录 > 第{n}章</div>'
        f'<div id="content"></div><img src="/img/{n}.png">'
        '<script src="/js/reader.js"></script></body></html>'
    ).encode(charset)


class _ScriptedSite(Handler):
    """An index of three chapters (the third served in GBK) filled in by script."""

    def do_GET(self) -> None:
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        path = urlsplit(self.path).path
        if path == "/":
            links = "".join(f'<a href="/ch/{n}.html">第{n}章</a> ' for n in (1, 2, 3))
            self.send_body(f"<html><body>{links}</body></html>".encode())
        elif path.startswith("/ch/"):
            n = int(path[4:-5])
            charset = "gbk" if n == 3 else "utf-8"
            self.send_body(_shell(n, charset), f"text/html; charset={charset}")
        elif path == "/js/reader.js":
            self.send_body(READER.encode(), "text/javascript")
        elif path == "/api/chapter":
            n = int(parse_qs(urlsplit(self.path).query)["id"][0])
            paragraphs = CHAPTERS[n - 1].split("\n")
            body = json.dumps({"paragraphs": paragraphs}, ensure_ascii=False).encode()
            self.send_body(body, "application/json")
        else:
            self.send_error(404)


def _crawl(ctx: Any, render: bool) -> tuple[dict[str, Any], str, list[str]]:
    with served(_ScriptedSite, paths=[]) as server:
        base = f"http://127.0.0.1:{server.server_port}"
        name = "rendered" if render else "served"
        campaign = {"name": name, "seeds": [f"{base}/"], "delay": 0, "render": render}
        save_campaign(ctx, Campaign.from_dict(campaign))
        run = wait_for_run(ctx, trigger_run(ctx, name), timeout=240)
        return run, base, list(server.paths)


def test_script_filled_chapters_are_found_only_when_rendered_and_the_run_says_why(crawl_ctx):
    ctx = crawl_ctx
    add_works(ctx, [Work(text=text, external_id=f"ch{n}") for n, text in enumerate(CHAPTERS, 1)])

    run, base, paths = _crawl(ctx, render=False)
    assert run["state"] == "finished", run
    assert run["skipped"].get("needs_rendering") == 3, run
    assert ctx.db.findings.count_documents({}) == 0
    assert not any(p.startswith("/api/") for p in paths)  # nothing ran the script
    add_user(ctx, "vic", PASSWORD, "viewer")
    http = client(ctx)
    login(http, "vic")
    shown = http.get(f"/runs/{run['_id']}").text
    assert "its scripts may write it" in shown and "rendering in a browser" in shown
    assert f"{base}/ch/1.html" in shown

    run, base, paths = _crawl(ctx, render=True)
    assert run["state"] == "finished", run
    assert "needs_rendering" not in run.get("skipped", {}), run
    for n in (1, 2, 3):
        page = ctx.db.pages.find_one({"url": f"{base}/ch/{n}.html"})
        assert page["rendered"] is True and "skip_reason" not in page, page.get("skip_reason")
        found = ctx.db.findings.distinct("master_external_id", {"page_id": page["_id"]})
        assert found == [f"ch{n}"], (n, found)
    # The index is rendered too (HTML); the chapters' data came through the route.
    assert sorted(p for p in paths if p.startswith("/api/")) == [
        f"/api/chapter?id={n}" for n in (1, 2, 3)
    ]
    # Images and styles are never fetched, by the crawl or by the browser.
    assert not any(p.startswith(("/img/", "/css/")) for p in paths), paths
    # The evidence says the capture is the page as the browser showed it.
    finding = ctx.db.findings.find_one({"master_external_id": "ch3"})
    report = http.get(f"/findings/{finding['_id']}/evidence").text
    assert "the page as a browser showed it" in report


def _render(html: str, url: str, options: RenderOptions, lookup: ScriptedLookup) -> str:
    """``html`` as fetched from ``url``, rendered in Chromium through the crawl's route."""
    from playwright.async_api import async_playwright

    fetched = HtmlResponse(url=url, body=html.encode(), encoding="utf-8")

    async def render() -> str:
        async with async_playwright() as p:
            browser = await p.chromium.launch(
                executable_path=str(chromium_path()),
                args=["--no-sandbox", "--proxy-server=127.0.0.1:9",
                      "--proxy-bypass-list=<-loopback>"],
            )  # fmt: skip
            page = await browser.new_page()
            route = PageRoute(fetched, options, lookup)
            await route.install(page)
            await page.goto(url)
            await route.settle(page, timeout=10)
            content = await page.inner_text("#content")
            await browser.close()
            return content

    return asyncio.run(render())


def _page(port: int) -> str:
    """A page whose script fetches its text from pirate.test, and which also asks for an
    image, a style sheet and a WebSocket on loopback directly."""
    return (
        "<html><body><div id='content'></div>"
        f"<img src='http://127.0.0.1:{port}/img.png'>"
        f"<link rel='stylesheet' href='http://127.0.0.1:{port}/site.css'>"
        "<script>"
        f"fetch('http://pirate.test:{port}/text').then(r => r.text())"
        ".then(t => { document.getElementById('content').textContent = t; });"
        f"try {{ new WebSocket('ws://127.0.0.1:{port}/live'); }} catch (e) {{}}"
        "</script></body></html>"
    )


def test_a_rendered_page_cannot_reach_a_private_address_through_its_scripts():
    """The script's request is resolved by the crawl's rule and refused before any
    connection; the image, style sheet and WebSocket reach nothing either."""
    with listening() as server:
        lookup = ScriptedLookup({"pirate.test": [["127.0.0.1"]]})
        options = RenderOptions(allow_private=False, timeout=10, max_bytes=2**20, max_requests=10)
        text = _render(_page(server.server_port), "http://pirate.test/ch1", options, lookup)
        assert text == ""
        assert lookup.calls == {"pirate.test": 1}  # the rule looked it up, Chromium did not
        assert server.connections == 0


def test_a_rendered_page_gets_its_text_through_the_route_when_the_address_is_allowed():
    """The control: the same page with private addresses allowed (a loopback test web) gets
    its text, fetched by the route through the scripted DNS; still no image, style sheet or
    WebSocket."""
    with listening() as server:
        lookup = ScriptedLookup({"pirate.test": [["127.0.0.1"]]})
        options = RenderOptions(allow_private=True, timeout=10, max_bytes=2**20, max_requests=10)
        text = _render(_page(server.server_port), "http://pirate.test/ch1", options, lookup)
        assert "这是第0段正文" in text  # the listener's article, as text
        assert server.paths == ["/text"], server.paths


def test_with_offsite_requests_off_a_page_gets_nothing_from_other_sites():
    """COPYTRACK_RENDER_OFFSITE=0: the same page on another site than its text's is
    rendered without it; nothing is looked up or fetched for the other site."""
    with listening() as server:
        lookup = ScriptedLookup({"pirate.test": [["127.0.0.1"]]})
        options = RenderOptions(
            allow_private=True, timeout=10, max_bytes=2**20, max_requests=10,
            sites=UrlScope.build(["mirror.test"], (), ()),
        )  # fmt: skip
        text = _render(_page(server.server_port), "http://mirror.test/ch1", options, lookup)
        assert text == "" and lookup.calls == {} and server.connections == 0
