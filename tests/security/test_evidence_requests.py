"""Viewing the evidence of a hostile page makes no request outside the admin.

The attack: an ``<iframe src=http://host:port/>`` in a captured page made the reviewer's
browser open a connection to the pirate's server on every view of the evidence, despite
the sandbox: the pirate learns when (and from where) its page is looked at. Here a page
with every fetching element we know points at a loopback listener that counts the
connections it accepts; the finding's page (with its marked copy) and the capture as
fetched are opened in Chromium.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import lxml.html
import pytest

from admin.evidence import marked_copy
from tests.admin_seed import PASSWORD, ZH
from tests.security.browser import chromium_tab, in_chromium, sign_in
from tests.security.fakes import CountingServer, listening
from tests.served_admin import served_admin
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.masters.library import Work, add_work
from tracker.scanning.pages import PageInput, scan_page, store_page

pytestmark = pytest.mark.security


def hostile_page(pirate: str, text: str) -> bytes:
    """A page that asks the browser to fetch from ``pirate`` in every way it can without
    a script (scripts are the sandbox's), each element at a path of its own."""
    u = f"{pirate}/"
    return f"""<!DOCTYPE html>
<html manifest="{u}manifest"><head>
<meta charset="utf-8"><title>盗版</title>
<base href="{u}base/">
<meta http-equiv="refresh" content="0; url={u}refresh">
<link rel="preconnect" href="{u}preconnect"><link rel="dns-prefetch" href="{u}dns-prefetch">
<link rel="prefetch" href="{u}prefetch"><link rel="prerender" href="{u}prerender">
<link rel="preload" href="{u}preload" as="image"><link rel="modulepreload" href="{u}module">
<link rel="stylesheet" href="{u}stylesheet"><link rel="icon" href="{u}icon">
<link rel="manifest" href="{u}webmanifest"><link rel="alternate stylesheet" href="{u}alt">
<style>@import url({u}import); body {{ background: url({u}css-bg) }}
@font-face {{ font-family: x; src: url({u}font) }} p {{ font-family: x }}</style>
<script src="{u}script"></script>
</head><body background="{u}body-background">
<h1 style="background-image: url('{u}style-attr')">盗版</h1>
<p>{text}</p>
<iframe src="{u}iframe"></iframe><iframe srcdoc="<img src='{u}srcdoc-img'>"></iframe>
<object data="{u}object"></object><embed src="{u}embed"><applet code="{u}applet"></applet>
<img src="{u}img"><img srcset="{u}srcset 2x"><img src="relative-img">
<picture><source srcset="{u}picture-source"><img src="{u}picture-img"></picture>
<video src="{u}video" poster="{u}poster" autoplay></video>
<video><source src="{u}video-source"><track src="{u}track" default></video>
<audio src="{u}audio" autoplay></audio><input type="image" src="{u}input-image">
<table background="{u}table-background"><tr><td background="{u}td-background">x</td></tr>
</table>
<svg><image href="{u}svg-image"/><image xlink:href="{u}svg-xlink"
xmlns:xlink="http://www.w3.org/1999/xlink"/><use href="{u}svg-use#x"/>
<feImage href="{u}fe-image"/></svg>
<form action="{u}form" method="post"><button autofocus>x</button></form>
<a href="{u}anchor" ping="{u}ping">a link</a>
<frameset><frame src="{u}frame"></frameset>
<portal src="{u}portal"></portal>
</body></html>""".encode()


@pytest.fixture
def pirate() -> Iterator[CountingServer]:
    with listening() as server:
        yield server


@pytest.fixture
def evidence(ctx: Context, pirate: CountingServer) -> Iterator[tuple[str, str, str]]:
    """The admin serving a finding of the hostile page: its base URL, the finding's and
    the page's ids."""
    add_user(ctx, "vic", PASSWORD, "viewer")
    add_work(ctx, Work(text=ZH[0], title="新闻", external_id="news-1"))
    base = f"http://127.0.0.1:{pirate.server_address[1]}"
    page_id, _ = store_page(
        ctx,
        PageInput(
            url="http://www.pirate.example/1",
            text=ZH[0],
            raw=hostile_page(base, ZH[0]),
            title="盗版",
        ),
    )
    scan_page(ctx, page_id)
    finding = ctx.db.findings.find_one({"page_id": page_id})
    assert finding is not None
    with served_admin(ctx) as port:
        yield f"http://127.0.0.1:{port}", str(finding["_id"]), str(page_id)


@pytest.fixture
def tab() -> Iterator[Any]:
    with chromium_tab() as tab:
        yield tab


@in_chromium
def test_the_evidence_of_a_hostile_page_fetches_nothing_outside(
    evidence: tuple[str, str, str], pirate: CountingServer, tab: Any
) -> None:
    admin, finding_id, page_id = evidence
    sign_in(tab, admin, "vic")
    outside: list[str] = []
    tab.on("request", lambda r: r.url.startswith(admin) or outside.append(r.url))

    tab.goto(f"{admin}/findings/{finding_id}")
    frame = tab.frame_locator("iframe.evidence")
    assert frame.locator("mark").first.inner_text()  # the marked copy is shown
    tab.goto(f"{admin}/pages/{page_id}/raw")  # the capture as fetched
    assert "盗版" in tab.content()
    tab.goto(f"{admin}/pages/{page_id}/raw?mark={finding_id}")  # the marked copy alone
    time.sleep(2)  # time for a meta refresh, preloads, speculative connections
    assert (pirate.connections, pirate.paths) == (0, []), outside


def test_the_marked_copy_keeps_no_address_to_fetch() -> None:
    """The copy alone, whatever the policy it is served with: the pirate's address is left
    only in the links' tooltips."""
    pirate = "http://pirate.test:8001"
    marked, count = marked_copy(hostile_page(pirate, ZH[0]).decode(), [ZH[0]])
    assert count > 0
    root = lxml.html.document_fromstring(marked)
    left = [
        f"<{element.tag} {name}={value!r}>"
        for element in root.iter()
        if isinstance(element.tag, str)
        for name, value in element.attrib.items()
        if "pirate.test" in value and name != "title"
    ]
    styles = [style.text for style in root.iter("style") if "pirate.test" in (style.text or "")]
    assert (left, styles) == ([], [])
    assert root.xpath("//a[@title]") and not root.xpath("//iframe|//meta[@http-equiv]|//base")
