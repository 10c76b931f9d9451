"""A bulk change of every finding a list's filter matches, not only the ticked ones: asked
first with the count, then applied through the workflow (history kept), on real servers."""

from __future__ import annotations

import html
import re

import pytest
from bson import ObjectId

from admin.i18n import COOKIE as LANGUAGE_COOKIE
from tests.admin_seed import PASSWORD, client, login
from tests.many_findings import seed_findings
from tests.served_admin import served_admin
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.findings import bulk_set_status


def _hidden(page: str, name: str) -> str:
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', page)
    assert found, name
    return html.unescape(found.group(1))


def _statuses(ctx: Context, ids: list[ObjectId]) -> dict[ObjectId, str]:
    return {f["_id"]: f["status"] for f in ctx.db.findings.find({"_id": {"$in": ids}})}


def test_a_change_of_all_matching_findings_asks_with_the_count_then_changes_them(ctx):
    # 250 findings: 160 on one site, 30 of them confirmed already; the rest elsewhere.
    ids = seed_findings(ctx, 250, 25, lambda n: "hit.example" if n < 160 else f"s{n % 7}.example")
    bulk_set_status(ctx, ids[:30], "confirmed", "rui")
    matching = ids[30:160]
    add_user(ctx, "rui", PASSWORD, "reviewer")
    web = client(ctx)
    token = login(web, "rui")
    listed = web.get("/findings?status=new&domain=hit.example&sort=-score").text
    assert "Apply to all 130 matching" in listed
    form = {
        "filter": _hidden(listed, "filter"),
        "status": "dismissed",
        "reason": "false_positive",
        "note": "mirror of a licensed partner",
        "back": _hidden(listed, "back"),
        "csrf_token": token,
    }
    before = _statuses(ctx, ids)

    asked = web.post("/findings/bulk/all", data=form)
    assert asked.status_code == 200
    assert "Mark all 130 findings as dismissed?" in asked.text
    assert _statuses(ctx, ids) == before  # asking changes nothing
    assert web.post("/findings/bulk/all", data={**form, "csrf_token": "forged"}).status_code == 403

    # A finding that starts matching between the question and the answer: asked again.
    moved = ObjectId(ids[0])
    bulk_set_status(ctx, [moved], "new", "rui")
    again = web.post(
        "/findings/bulk/all",
        data={**form, "count": _hidden(asked.text, "count"), "confirm": "true"},
    )
    assert (
        "Mark all 131 findings as dismissed?" in again.text and 'id="bulk-all-moved"' in again.text
    )
    assert _statuses(ctx, ids)[ids[100]] == "new"
    bulk_set_status(ctx, [moved], "confirmed", "rui")

    done = web.post(
        "/findings/bulk/all",
        data={**form, "count": _hidden(asked.text, "count"), "confirm": "true"},
    )
    assert done.status_code == 200 and "130 finding(s) marked dismissed." in done.text
    after = _statuses(ctx, ids)
    changed = {i for i in ids if after[i] != before[i]}
    assert changed == set(matching)
    assert all(after[i] == "dismissed" for i in matching)
    for finding in ctx.db.findings.find({"_id": {"$in": matching[:5]}}):
        assert finding["dismiss_reason"] == "false_positive"
        last = finding["history"][-1]
        assert last["status"] == "dismissed" and last["by"] == "rui"
        assert last["note"] == "mirror of a licensed partner"
    assert "No findings match these filters." in web.post("/findings/bulk/all", data=form).text


@pytest.mark.slow
def test_in_chromium_the_whole_list_is_asked_on_its_page_not_in_a_dialog(ctx):
    browsers = pytest.importorskip("tests.test_admin_browser")
    if not browsers.CHROMIUM.exists():
        pytest.skip("needs Debian's Chromium: apt-get install chromium")
    ids = seed_findings(ctx, 60, 6, lambda n: "hit.example" if n % 2 else "other.example")
    add_user(ctx, "rui", PASSWORD, "reviewer")
    dialogs: list[str] = []
    with served_admin(ctx) as port, browsers.playwright.sync_playwright() as p:
        base = f"http://127.0.0.1:{port}"
        browser = p.chromium.launch(
            executable_path=str(browsers.CHROMIUM), args=browsers.CHROMIUM_ARGS
        )
        context = browser.new_context()
        context.add_cookies([{"name": LANGUAGE_COOKIE, "value": "en", "url": base}])
        page = context.new_page()
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        try:
            browsers._log_in(page, base, "rui")
            page.goto(f"{base}/findings?domain=hit.example")
            page.select_option("#bulk select[name=status]", "dismissed")
            page.click("#bulk-all")
            page.wait_for_selector("#bulk-all-confirm")
            assert "Mark all 30 findings as dismissed?" in page.inner_text("h1")
            page.click("#confirm-bulk-all")
            page.wait_for_selector(".flash-ok")
            assert "30 finding(s) marked dismissed." in page.inner_text(".flash-ok")
        finally:
            context.close()
            browser.close()
    assert dialogs == []  # the page with the count asks, not a native confirm
    statuses = _statuses(ctx, ids)
    assert [statuses[i] == "dismissed" for i in ids] == [n % 2 == 1 for n in range(60)]
