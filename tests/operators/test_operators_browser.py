"""The operators page in a real browser (Debian's Chromium through Playwright) on a seeded
installation: a reviewer opens an operator, reads what ties its domains, and splits a
wrong tie off. Its picture is the README's (docs/admin-operators.png, refreshed with
COPYTRACK_UPDATE_SCREENSHOTS=1)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from admin.i18n import COOKIE as LANGUAGE_COOKIE
from tests.admin_seed import PASSWORD, ZH, seed
from tests.served_admin import served_admin
from tracker.core.times import now
from tracker.operators.grouping import update_operators
from tracker.scanning.pages import PageInput, scan_page, store_page

playwright = pytest.importorskip("playwright.sync_api", reason="the playwright package is needed")
CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's Chromium"),
]
BAIDU = "8d2f4c1b9e7a6053d4c2b1a0f9e8d7c6"
#: A novel-mirror operator's domains: (host, address, whether its pages carry the Baidu id).
MIRRORS = (
    ("www.biqu-mirror.example", "203.0.113.7", True),
    ("m.biqu-mirror.example", "203.0.113.7", True),
    ("read.xsw-books.example", "198.51.100.20", True),
    ("cdn-tenant.example", "203.0.113.7", False),  # only the host's address: a wrong tie
)


def mirror_page(host: str, baidu: bool, text: str) -> bytes:
    analytics = f'<script src="https://hm.baidu.com/hm.js?{BAIDU}"></script>' if baidu else ""
    paragraphs = "".join(f"<p>{line}</p>" for line in text.split("\n") if line)
    return (
        f"<html><head><meta charset='utf-8'><title>{host}</title>"
        f"<link rel='icon' href='/skin/biqu/favicon.ico'>{analytics}</head><body>"
        "<div class='header'><div class='logo'>笔趣阁</div><ul class='nav'><li class='a'>首页</li>"
        "</ul></div><div class='box'><div class='path'><a class='h'>首页</a></div>"
        f"<div class='content'><article>{paragraphs}</article></div></div>"
        "<div class='footer'><p class='c'>©</p></div></body></html>"
    ).encode()


def seed_operator(ctx) -> None:
    """The admin's seed, plus an operator's mirrors copying its works; a domain that joins
    the operator later (a new domain of a known operator)."""
    seed(ctx)
    for n, (host, address, baidu) in enumerate(MIRRORS):
        url = f"https://{host}/book/{100 + n}.html"
        page_id, _ = store_page(ctx, PageInput(
            url=url, text=ZH[n], raw=mirror_page(host, baidu, ZH[n]), ip=address,
            headers={"Content-Type": "text/html; charset=utf-8"}, campaign="pirate-sites",
        ))  # fmt: skip
        scan_page(ctx, page_id)
    update_operators(ctx)
    ctx.db.operators.update_many({}, {"$set": {"known_since": now() - timedelta(days=12)}})
    url = "https://www.biqu-new.example/book/200.html"
    page_id, _ = store_page(ctx, PageInput(
        url=url, text=ZH[5], raw=mirror_page("www.biqu-new.example", True, ZH[5]),
        ip="192.0.2.44", campaign="pirate-sites",
    ))  # fmt: skip
    scan_page(ctx, page_id)
    update_operators(ctx)


def test_a_reviewer_reads_an_operator_and_splits_a_wrong_tie(ctx, screenshots):
    seed_operator(ctx)
    [operator] = list(ctx.db.operators.find())
    with served_admin(ctx) as port, playwright.sync_playwright() as p:
        base = f"http://127.0.0.1:{port}"
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        context.add_cookies([{"name": LANGUAGE_COOKIE, "value": "en", "url": base}])
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{base}/login")
        page.fill("input[name=name]", "rui")
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base}/")
        assert "www.biqu-new.example" in page.inner_text("#new-operator-domains")
        page.click("nav.mainnav >> text=Operators")
        page.click(f"a[href='/operators/{operator['_id']}']")
        ties = page.inner_text("#operator-ties")
        assert BAIDU in ties and "203.0.113.7" in ties and "Same page template" in ties
        assert "New domain of a known operator" in page.inner_text("#operator-domains")
        page.screenshot(path=str(screenshots / "admin-operators.png"), full_page=True)
        row = page.locator("#operator-domains tr", has_text="cdn-tenant.example")
        row.locator("button", has_text="Split off").click()
        page.wait_for_selector(".flash, .message, [role=status]", state="attached")
        assert "cdn-tenant.example" not in page.inner_text("#operator-domains")
        browser.close()
    [after] = list(ctx.db.operators.find())
    assert "cdn-tenant.example" not in {d["domain"] for d in after["domains"]}
