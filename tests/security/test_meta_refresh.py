"""A pirate cannot hide a copy behind a ``<meta http-equiv="refresh">``.

The attack: a page holding a whole library work and a refresh after 90 s to
``javascript:void(0)`` ended ``failed``; with a refresh to another domain,
``skipped: redirect_off_scope``; neither was stored or scanned, while a visitor reads the
copy until the refresh fires. Now the body a page served is always stored and scanned, and
the refresh target is only one more link.
"""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.corpus import texts
from tests.loopback import served
from tracker.campaigns import Campaign, save_campaign, trigger_run, wait_for_run
from tracker.context import Context
from tracker.masters.library import Work, add_work

pytestmark = pytest.mark.security

WORKS = [t for t in texts("zh_news", 60) if len(t) > 800][:3]


def _page(text: str, refresh: str) -> bytes:
    paragraphs = "".join(f"<p>{line}</p>" for line in text.split("\n") if line.strip())
    return (
        f'<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="{refresh}">'
        f"<title>免费阅读</title></head><body><article>{paragraphs}</article></body></html>"
    ).encode()


PAGES = {
    "/hidden.html": _page(WORKS[0], "90;url=javascript:void(0)"),
    "/away.html": _page(WORKS[1], "0;url=http://elsewhere.test/landing.html"),
    "/hop.html": _page("马上跳转。", "0;url=/target.html"),
    "/target.html": _page(WORKS[2], "600"),  # a refresh to itself: nothing new
}


class _Pirate(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.server.requested.append(self.path)  # type: ignore[attr-defined]
        body = PAGES.get(self.path)
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(body or b"not found")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def pirate() -> Iterator[ThreadingHTTPServer]:
    with served(_Pirate, requested=[]) as server:
        yield server


def test_pages_with_a_meta_refresh_are_stored_scanned_and_their_target_followed(
    crawl_ctx: Context, pirate: ThreadingHTTPServer
) -> None:
    masters = [add_work(crawl_ctx, Work(text=t, external_id=f"w{n}"))[0].master_id
               for n, t in enumerate(WORKS)]  # fmt: skip
    site = f"http://127.0.0.1:{pirate.server_port}"
    seeds = [f"{site}/hidden.html", f"{site}/away.html", f"{site}/hop.html"]
    save_campaign(crawl_ctx, Campaign.from_dict({"name": "refresh", "seeds": seeds, "delay": 0}))
    run = wait_for_run(crawl_ctx, trigger_run(crawl_ctx, "refresh"), timeout=240)

    assert run["state"] == "finished", run
    assert not run.get("failed") and "redirect_off_scope" not in run.get("skipped", {}), run
    stored = {p["final_url"] for p in crawl_ctx.db.pages.find({}, {"final_url": 1})}
    assert stored == {f"{site}{path}" for path in PAGES}
    found = {
        (f["url"].removeprefix(site), f["master_id"])
        for f in crawl_ctx.db.findings.find({}, {"url": 1, "master_id": 1})
    }
    assert {("/hidden.html", masters[0]), ("/away.html", masters[1]),
            ("/target.html", masters[2])} <= found  # fmt: skip
    assert pirate.requested.count("/target.html") == 1  # type: ignore[attr-defined]
