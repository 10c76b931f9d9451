"""A whole-book capture does not hang the finding's page.

The attack: the marked copy of a 60 MB book capture was made and inlined in one piece, and
the finding's page hung in the browser (20 MB here: 43 s to load). A capture over
``INLINE_CAPTURE_BYTES`` is now shown in parts, first the one with the copied passage.
"""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from admin.evidence import FIRST_MARK_ID, INLINE_CAPTURE_BYTES, PART_BYTES, part_count
from tests.admin_seed import PASSWORD, ZH, client, login
from tests.security.browser import chromium_tab, in_chromium, sign_in
from tests.served_admin import served_admin
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.masters.library import Work, add_work
from tracker.scanning.pages import PageInput, scan_page, store_page

pytestmark = pytest.mark.security

CAPTURE_MB = 12


def book(megabytes: int, copied: str) -> bytes:
    """A long page of filler chapters with ``copied`` in the middle."""
    chapter = "".join(f"<p>第{n}节 这是一段填充的文字，别处没有的内容。</p>\n" for n in range(200))
    half = chapter * (megabytes * 2**20 // len(chapter.encode()) // 2)
    body = f"{half}<p>{copied}</p>{half}"
    return f"<html><head><meta charset=utf-8></head><body>{body}</body></html>".encode()


@pytest.fixture
def large(ctx: Context) -> tuple[str, str, int]:
    """A finding of a page with a large capture: its id, its page's id, the capture's size."""
    add_user(ctx, "vic", PASSWORD, "viewer")
    add_work(ctx, Work(text=ZH[0], title="新闻", external_id="news-1"))
    raw = book(CAPTURE_MB, ZH[0])
    page_id, _ = store_page(
        ctx, PageInput(url="http://books.pirate.example/1", text=ZH[0], raw=raw, title="全本")
    )
    scan_page(ctx, page_id)
    finding = ctx.db.findings.find_one({"page_id": page_id})
    return str(finding["_id"]), str(page_id), len(raw)


def test_a_large_capture_is_shown_in_parts(ctx: Context, large: tuple[str, str, int]) -> None:
    finding_id, page_id, size = large
    assert size > INLINE_CAPTURE_BYTES
    web: TestClient = client(ctx)
    login(web, "vic")
    parts = part_count(size)
    page = web.get(f"/findings/{finding_id}").text
    assert 'id="capture-parts"' in page
    assert page.count(f"/pages/{page_id}/raw?mark={finding_id}&amp;part=") == parts
    shown = web.get(f"/pages/{page_id}/raw", params={"mark": finding_id})
    assert shown.status_code == 200
    assert len(shown.content) < 1.5 * PART_BYTES and FIRST_MARK_ID in shown.text
    first = web.get(f"/pages/{page_id}/raw", params={"mark": finding_id, "part": 1})
    assert len(first.content) < 1.5 * PART_BYTES and FIRST_MARK_ID not in first.text
    last = web.get(f"/pages/{page_id}/raw", params={"mark": finding_id, "part": parts + 9})
    assert last.status_code == 200 and "</body>" in last.text  # past the end: the last one


@in_chromium
def test_the_finding_page_of_a_large_capture_loads_at_once(
    ctx: Context, large: tuple[str, str, int]
) -> None:
    finding_id, _, _ = large
    with served_admin(ctx) as port, chromium_tab() as tab:
        base = f"http://127.0.0.1:{port}"
        sign_in(tab, base, "vic")
        started = time.monotonic()
        tab.goto(f"{base}/findings/{finding_id}", wait_until="load", timeout=120_000)
        took = time.monotonic() - started
        assert tab.frame_locator("iframe.evidence").locator(f"#{FIRST_MARK_ID}").inner_text()
        assert took < 5, f"{took:.1f} s"  # in one piece: 10-12 s
        tab.click("#capture-parts a >> nth=0")  # another part, in the frame
        frame = tab.frame_locator("iframe.evidence")
        assert frame.locator("p").first.inner_text().startswith("第0节")
