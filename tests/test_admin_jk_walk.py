"""A reviewer walks a filtered list from the keyboard (j/k) in Chromium on an installation
of 5,000 findings: each step opens the neighbour the findings catalogue says, and both
the list and the finding pages render. Speed is `benchmarks/bench_admin.py`'s to measure;
the steps' times are printed only."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from bson import ObjectId

from admin.i18n import COOKIE as LANGUAGE_COOKIE
from tests.admin_seed import PASSWORD
from tests.many_findings import seed_findings
from tests.served_admin import served_admin
from tests.test_admin_browser import CHROMIUM, CHROMIUM_ARGS, _log_in
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.core.config import Settings
from tracker.findings import Catalogue, MongoFindings, bulk_set_status, parse_filter
from tracker.masters.generation import open_ready

playwright = pytest.importorskip("playwright.sync_api", reason="the playwright package is needed")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's Chromium: apt-get install chromium"
    ),
]

FINDINGS = 5_000
#: One page in 25 on the walked site; a quarter of those dismissed (out of the list).
LISTED = FINDINGS // 25 * 3 // 4
LIST = {"status": "new", "domain": "walk.example", "sort": "-score"}


def _domain(n: int) -> str:
    return "walk.example" if n % 25 == 0 else f"site{n % 97}.example"


@pytest.fixture
def ctx(own: Settings) -> Iterator[Context]:
    """An installation on servers of its own: dropping 10,000 documents from the
    session's SecantusDB takes longer than stopping servers (30 s to minutes)."""
    context = open_ready(own)
    yield context
    context.close()


@pytest.fixture
def installation(ctx: Context) -> Iterator[str]:
    """5,000 findings, and the admin serving them; yields its address."""
    start = time.perf_counter()
    ids = seed_findings(ctx, FINDINGS, 300, _domain)
    walked = ids[::25]
    bulk_set_status(ctx, walked[::4], "dismissed", "rui")
    print(f"\nseeded {len(ids):,} findings in {time.perf_counter() - start:.1f} s")
    add_user(ctx, "rui", PASSWORD, "reviewer")
    with served_admin(ctx) as port:
        yield f"http://127.0.0.1:{port}"


def test_j_and_k_walk_a_filtered_list_of_a_large_installation(ctx, installation):
    base = installation
    flt = parse_filter(LIST)
    catalogue = Catalogue(MongoFindings(lambda: ctx.db))
    order = catalogue.ordered(flt)
    assert len(order) == LISTED and ctx.db.findings.count_documents({}) == FINDINGS
    query = urlencode(LIST)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        context.add_cookies([{"name": LANGUAGE_COOKIE, "value": "en", "url": base}])
        page = context.new_page()
        page.set_default_timeout(30_000)
        try:
            _log_in(page, base, "rui")
            start = time.perf_counter()
            page.goto(f"{base}/findings?{query}")
            print(f"list: {time.perf_counter() - start:.2f} s (the catalogue loading)")
            assert page.inner_text("h1 .muted") == str(len(order))
            links = page.locator("a.finding-link")
            assert links.count() == 50
            listed = [link.get_attribute("href").split("?")[0][len("/findings/") :]
                      for link in links.all()]  # fmt: skip
            assert listed == [str(i) for i in order[:50]]

            links.nth(20).click()  # a finding inside the list, neither end of it
            current = order[20]
            page.wait_for_url(f"{base}/findings/{current}?*")
            for key in "jjjjjjkkkjj":
                near = catalogue.neighbours(flt, current)
                expected = near.next if key == "j" else near.previous
                assert expected is not None
                start = time.perf_counter()
                page.keyboard.press(key)
                page.wait_for_url(f"{base}/findings/{expected}?*")
                page.wait_for_selector("#master-text mark.hl")
                took = time.perf_counter() - start
                current = ObjectId(str(expected))
                position = order.index(current) + 1
                print(f"{key}: {took * 1000:.0f} ms, to {position} of {len(order)}")
                assert f"\n{position} of {len(order)}\n" in page.inner_text("nav.walk")
                assert page.locator("#page-text mark.hl").count() >= 1
        finally:
            context.close()
            browser.close()
