"""A small test web of pirate domains for the operator tests: each host name resolves (the
crawl's ScriptedLookup) to a loopback address of its own or one it shares, and serves
pages copying the library with its site's analytics id, favicon and page template.

``SITES`` as built: alpha and beta share a Baidu 统计 id, a favicon and a template; beta
and gamma share an address only (one host, two tenants: the wrong tie); delta's articles
redirect to alpha's mirror of them; omega shares nothing; epsilon (served from the second
crawl on) shares alpha's id.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from testbed.testweb.server import LoopbackServer
from tests.copies import ZH
from tests.loopback import Handler, running

BAIDU_SHARED = "0123456789abcdef0123456789abcdef"


@dataclass(frozen=True)
class Site:
    host: str
    address: str  # the loopback address its name resolves to
    works: tuple[int, ...]  # the works of ZH its articles copy
    template: str = "blog"
    baidu: str | None = None
    favicon: str = "/favicon.ico"
    redirect_to: str | None = None  # its articles redirect to this site's mirror (/m/)
    from_round: int = 1  # served from this crawl on


SITES = (
    Site("alpha.test", "127.0.0.2", (0, 1), baidu=BAIDU_SHARED, favicon="/static/op7/fav.ico"),
    Site("beta.test", "127.0.0.3", (2,), baidu=BAIDU_SHARED, favicon="/static/op7/fav.ico"),
    Site("gamma.test", "127.0.0.3", (3,), template="news", baidu="f" * 32),
    Site("delta.test", "127.0.0.4", (0, 1), redirect_to="alpha.test"),
    Site("omega.test", "127.0.0.5", (4,), template="forum", baidu="e" * 32),
    Site("epsilon.test", "127.0.0.6", (5,), template="news", baidu=BAIDU_SHARED, from_round=2),
)


def _frame(site: Site, title: str, body: str, round_: int) -> str:
    """The page in its site's template: the markup around the article differs by template."""
    analytics = (f'<script src="https://hm.baidu.com/hm.js?{site.baidu}"></script>'
                 if site.baidu else "")  # fmt: skip
    head = (f"<head><meta charset='utf-8'><title>{title}</title>"
            f"<link rel='icon' href='{site.favicon}'>{analytics}</head>")  # fmt: skip
    if site.template == "blog":
        frame = (
            "<div class='wrap'><div class='top'><div class='logo'>{name}</div><ul class='nav'>"
            "<li class='item'>首页</li><li class='item'>小说</li></ul></div>"
            "<div class='content'><div class='crumb'><a class='home'>首页</a></div>{body}"
            "<div class='side'><h3 class='side-title'>热门</h3></div></div>"
            "<div class='bottom'><p class='copy'>©</p></div></div>"
        )
    elif site.template == "news":
        frame = (
            "<header id='h'><nav class='menu main'><a class='m'>新闻</a></nav></header>"
            "<section class='story'><h1 class='headline'>{name}</h1>{body}</section>"
            "<aside class='rail'><ol class='hot'><li class='hot-item'>1</li></ol></aside>"
            "<footer class='site-footer'><small class='legal'>{round}</small></footer>"
        )
    else:
        frame = (
            "<div class='bar'><a class='login'>登录</a></div>"
            "<table class='forum'><tr class='row'><td class='cell'>{name}</td>"
            "<td class='cell body'>{body}</td></tr></table>"
            "<div class='pager'><span class='page-no'>1</span></div>"
        )
    return (f"<html>{head}<body>"
            + frame.format(name=site.host, body=body, round=round_) + "</body></html>")  # fmt: skip


@dataclass
class OperatorWeb:
    """The running sites: their ports, and which crawl (round) they serve now."""

    ports: dict[str, int] = field(default_factory=dict)
    round: int = 1

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.ports[host]}{path}"

    def script(self) -> dict[str, list[list[str]]]:
        """The crawl's DNS: each host name to its loopback address."""
        return {site.host: [[site.address]] for site in SITES}

    def seeds(self) -> list[str]:
        return [self.url(site.host) for site in SITES]

    def page(self, site: Site, path: str) -> tuple[int, str, str]:
        """(status, Location or "", HTML) of ``path`` on ``site`` in this round."""
        if site.from_round > self.round:
            return 404, "", "<html><body>nothing</body></html>"
        if site.redirect_to and path.startswith("/a/"):
            return 302, self.url(site.redirect_to, "/m/" + path.removeprefix("/a/")), ""
        # gamma's pages change between rounds: its captures are stored (and read) anew.
        changed = self.round if site.host == "gamma.test" else 1
        if path == "/":
            links = "".join(f"<li><a href='/a/{n}.html'>第{n}篇</a></li>" for n in site.works)
            return 200, "", _frame(site, site.host, f"<ul class='list'>{links}</ul>", changed)
        for n in site.works:
            if path in (f"/a/{n}.html", f"/m/{n}.html"):  # /m/: reached by redirects only
                paragraphs = "".join(f"<p>{line}</p>" for line in ZH[n].split("\n") if line)
                return 200, "", _frame(site, f"第{n}篇", f"<article>{paragraphs}</article>",
                                       changed)  # fmt: skip
        return 404, "", "<html><body>not found</body></html>"


class _SiteHandler(Handler):
    def do_GET(self) -> None:
        web: OperatorWeb = self.server.web  # type: ignore[attr-defined]
        host = (self.headers.get("Host") or "").split(":")[0]
        site = next((s for s in SITES if s.host == host), None)
        if site is None:
            self.send_body(b"unknown host", "text/plain", status=404)
            return
        if self.path == "/robots.txt":
            self.send_body(b"User-agent: *\nAllow: /\n", "text/plain")
            return
        status, location, html = web.page(site, self.path)
        if location:
            self.send_response(status)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_body(html.encode(), status=status)


@contextlib.contextmanager
def operator_web() -> Iterator[OperatorWeb]:
    """The sites served on their loopback addresses (one server per address, by Host)."""
    web = OperatorWeb()
    with contextlib.ExitStack() as stack:
        for address in sorted({site.address for site in SITES}):
            server = LoopbackServer((address, 0), _SiteHandler)
            server.daemon_threads = True
            server.web = web  # type: ignore[attr-defined]
            stack.enter_context(running(server))
            for site in SITES:
                if site.address == address:
                    web.ports[site.host] = server.server_address[1]
        yield web
