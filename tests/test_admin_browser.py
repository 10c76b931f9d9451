"""The admin in a real browser (Debian's Chromium through Playwright) against a real server.

A reviewer logs in, reads the dashboard chart, opens a finding with its highlighted
passages, confirms it, exports CSV and writes a takedown notice; a hostile page stays
inert. Screenshots of the dashboard and of a finding go to docs/.
"""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from bson import ObjectId

from admin.i18n import COOKIE as LANGUAGE_COOKIE
from admin.routes import works as works_routes
from tests.admin_seed import PASSWORD, Seeded, scanned_page, seed
from tests.corpus import texts
from tests.served_admin import served_admin
from tracker import campaigns as tracker_campaigns
from tracker.findings.notices import working_days_after
from tracker.masters import library

playwright = pytest.importorskip("playwright.sync_api", reason="the playwright package is needed")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's Chromium: apt-get install chromium"
    ),
]


@pytest.fixture
def server(ctx) -> Iterator[tuple[str, Seeded]]:
    """The admin served by uvicorn on 127.0.0.1 in a thread, on a seeded installation."""
    seeded = seed(ctx, pages=16)
    with served_admin(ctx) as port:
        yield f"http://127.0.0.1:{port}", seeded


@pytest.fixture(scope="module")
def browser():
    """One Chromium for the module; each test gets a fresh context (cookies, storage)."""
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(server, browser):
    base, _ = server
    context = browser.new_context(
        viewport={"width": 1440, "height": 900}, accept_downloads=True, locale="zh-CN"
    )
    # A Chinese browser, in which the reviewer chose English (the README's pictures);
    # test_a_chinese_browser_gets_the_chinese_admin covers the default.
    context.add_cookies([{"name": LANGUAGE_COOKIE, "value": "en", "url": base}])
    tab = context.new_page()
    # Six test workers on two cores can hold a page's answer for well over 15 s.
    tab.set_default_timeout(30_000)
    yield tab
    context.close()


def _log_in(page, base: str, name: str) -> None:
    page.goto(f"{base}/login")
    page.fill("input[name=name]", name)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def test_a_reviewer_works_through_a_finding(server, page, ctx, screenshots):
    base, _ = server
    problems: list[str] = []
    # The evidence frame's own scripts are blocked by its sandbox, which Chromium reports.
    page.on(
        "console",
        lambda msg: (
            msg.type == "error" and "sandboxed" not in msg.text and problems.append(msg.text)
        ),
    )
    page.on("dialog", lambda dialog: problems.append(f"dialog: {dialog.message}"))

    _log_in(page, base, "rui")
    assert page.locator("#per-day rect.point").count() == 30  # a bar per day, drawn
    box = page.locator("#per-day").bounding_box()
    assert box and box["width"] > 600 and box["height"] > 150
    open_count = ctx.db.findings.count_documents(
        {"status": {"$in": ["new", "confirmed", "notice_sent"]}}
    )
    assert page.inner_text("#kpi-open") == str(open_count)
    assert page.inner_text("#kpi-confirmed") == "3"
    page.screenshot(path=str(screenshots / "admin-dashboard.png"), full_page=True)

    # Open a new finding from the list.
    page.goto(f"{base}/findings?status=new&domain=www.pirate-news.example&sort=-score")
    page.locator("a.finding-link").first.click()
    page.wait_for_selector("#master-text mark.hl")
    evidence = page.frame_locator("iframe.evidence")
    evidence.locator("h1").wait_for()
    # The capture opens at the copied passage, marked.
    first_mark = evidence.locator("#copytrack-first-mark")
    assert first_mark.is_visible() and len(first_mark.inner_text()) >= 8
    assert first_mark.inner_text() in page.inner_text("#page-text")
    assert page.locator("#master-text mark.hl").count() >= 1
    assert page.locator("#page-text mark.hl").count() >= 1
    page.locator("#page-text mark.hl").first.click()
    index = page.locator("#page-text mark.hl").first.get_attribute("data-pair")
    assert "focus" in page.locator(f"#master-{index}").get_attribute("class")
    page.screenshot(path=str(screenshots / "admin-finding.png"), full_page=True)

    # Confirm it, with a note: the next finding of the list opens; this one is confirmed.
    finding_url = page.url.split("?")[0]
    page.fill("#workflow textarea[name=note]", "整段转载，未经授权")
    page.click("#to-confirmed")
    page.wait_for_selector(".flash-ok")
    assert not page.url.startswith(finding_url)
    page.goto(finding_url)
    assert page.inner_text(".page-head .badge") == "Confirmed"
    assert "整段转载，未经授权" in page.inner_text("#history")

    # Generate the Chinese notice and record that it was sent.
    page.click("#notice-zh")
    body = page.input_value("#notice-body")
    assert "侵权删除通知" in page.input_value("input[name=subject]")
    assert "SHA-256" in body and "http" in body
    page.fill("input[name=recipient]", "abuse@pirate.example")
    page.click("#record-notice")
    page.wait_for_url(finding_url)
    assert page.inner_text(".page-head .badge") == "Notice sent"

    # Export the confirmed and noticed findings as CSV.
    page.goto(f"{base}/findings?status=confirmed,notice_sent")
    with page.expect_download() as download:
        page.click("#export-csv")
    rows = list(csv.reader(io.StringIO(Path(download.value.path()).read_text("utf-8-sig"))))
    assert rows[0][:3] == ["id", "status", "work_id"]
    assert len(rows) - 1 == ctx.db.findings.count_documents(
        {"status": {"$in": ["confirmed", "notice_sent"]}}
    )
    assert problems == []


def test_a_hostile_page_stays_inert_in_the_browser(server, page):
    base, seeded = server
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    _log_in(page, base, "vic")
    page.goto(f"{base}/findings/{seeded.xss}")
    title = page.inner_text("#page-title")
    assert "<script>" in title and "onerror=" in title  # shown as text…
    assert page.locator("#page-title script, #page-title img").count() == 0  # …not as markup
    frame = page.frame_locator("iframe.evidence")
    frame.locator("h1").wait_for()
    page.wait_for_timeout(300)
    assert dialogs == []
    assert page.title().endswith("evil.example · copytrack")  # the frame did not retitle it
    assert page.locator("iframe.evidence").get_attribute("sandbox") == ""


def test_a_run_in_progress_updates_the_campaign_page_without_a_reload(server, page, ctx):
    base, seeded = server
    run_id = tracker_campaigns.start_run(ctx, seeded.campaign)
    tracker_campaigns.join_run(ctx, run_id)
    # A stand-in for the crawl process: alive, with the run's id on its command line.
    crawl = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", str(run_id)])
    ctx.db.runs.update_one({"_id": run_id}, {"$set": {"crawl_processes.0.pid": crawl.pid}})
    try:
        _watch_a_run(page, base, ctx, seeded.campaign, run_id)
    finally:
        crawl.kill()
        crawl.wait()


def _watch_a_run(page, base: str, ctx, campaign: str, run_id) -> None:
    _log_in(page, base, "vic")
    page.goto(f"{base}/campaigns/{campaign}")
    page.evaluate("window.sameDocument = true")
    row = page.locator(f'tr[data-live-run="/runs/{run_id}/progress"]')
    assert row.locator('[data-figure="fetched"]').inner_text() == "0"
    assert row.locator("[data-run-state]").inner_text() == "running"

    tracker_campaigns.record_progress(
        ctx, run_id, {"pages.fetched": 7, "failed.dns": 9}, "crawler-1"
    )
    row.locator('[data-figure="fetched"]', has_text="7").wait_for()
    assert row.locator('[data-figure="failed"]').inner_text() == "9"
    warning = row.locator("[data-run-health].health-warning")
    warning.wait_for()  # amber: most URLs failed, and why
    assert "the host name does not resolve" in warning.inner_text()

    tracker_campaigns.finish_crawl(ctx, run_id)  # no page to scan: the run finishes
    row.locator("[data-run-state]", has_text="finished").wait_for()
    assert page.evaluate("window.sameDocument") is True  # updated in place, not reloaded

    row.locator("a[href^='/runs/']").click()
    page.wait_for_url(f"{base}/runs/{run_id}")
    assert "the host name does not resolve (DNS)" in page.inner_text("table.reasons")


def test_a_dismiss_asks_first_and_a_no_keeps_the_finding_open(server, page, ctx):
    base, seeded = server
    finding_id = next(
        f for f in seeded.findings if ctx.db.findings.find_one({"_id": f})["status"] == "new"
    )
    asked: list[str] = []
    answer = {"yes": False}
    page.on(
        "dialog",
        lambda dialog: (
            asked.append(dialog.message),
            dialog.accept() if answer["yes"] else dialog.dismiss(),
        ),
    )
    _log_in(page, base, "rui")
    page.goto(f"{base}/findings/{finding_id}")
    page.click("#to-dismissed")
    page.wait_for_timeout(300)
    assert asked and asked[0].startswith("Dismiss this finding?")
    assert page.url == f"{base}/findings/{finding_id}"
    assert ctx.db.findings.find_one({"_id": finding_id})["status"] == "new"

    # Yes, as a quotation: the reason goes with the dismissal.
    answer["yes"] = True
    page.select_option("#dismiss-reason", "quotation")
    page.click("#to-dismissed")
    page.wait_for_selector(".flash-ok")
    dismissed = ctx.db.findings.find_one({"_id": finding_id})
    assert dismissed["status"] == "dismissed" and dismissed["dismiss_reason"] == "quotation"


def test_an_invalid_address_gets_a_sentence_not_a_validator_dump(server, page):
    base, _ = server
    _log_in(page, base, "vic")
    answer = page.goto(f"{base}/works/not-a-number")
    assert answer.status == 400
    text = page.inner_text("main")
    assert "The work number in the address ('not-a-number') must be a whole number" in text
    assert "Input should be" not in text and "path." not in text
    page.goto(f"{base}/findings?page=0")
    assert "The page number in the address ('0') must be at least 1" in page.inner_text("main")


def test_on_a_phone_no_page_scrolls_sideways_and_the_nav_is_whole(server, browser):
    base, seeded = server
    context = browser.new_context(viewport={"width": 390, "height": 844})
    phone = context.new_page()
    try:
        _log_in(phone, base, "ada")
        for path in ("/", "/findings", "/works", "/campaigns", f"/findings/{seeded.findings[0]}"):
            phone.goto(f"{base}{path}")
            width = phone.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, (path, width)
        link = phone.locator(".mainnav a", has_text="Dashboard")
        assert link.evaluate("a => a.scrollWidth <= a.clientWidth")  # "Dashboard", not "Dashb…"
    finally:
        context.close()


@pytest.mark.parametrize("language", ["en", "zh"])
def test_at_1280_px_the_findings_filter_keeps_its_units_and_whole_placeholder(
    server, browser, language
):
    """Each bound's unit (%, characters) on the line of its box, and the search box wide
    enough for its placeholder, in both languages."""
    base, _ = server
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_cookies([{"name": LANGUAGE_COOKIE, "value": language, "url": base}])
    tab = context.new_page()
    try:
        _log_in(tab, base, "rui")
        tab.goto(f"{base}/findings")
        for name in ("min_pct", "max_pct", "min_copied", "max_copied"):
            apart = tab.evaluate(
                """name => { const box = document.querySelector(`input[name=${name}]`);
                   const unit = document.createRange(); unit.selectNodeContents(box.parentNode);
                   const a = box.getBoundingClientRect(), b = unit.getBoundingClientRect();
                   return Math.abs(b.bottom - a.bottom) > 2 || b.height > a.height + 4; }""",
                name,
            )
            assert not apart, f"{name}'s unit wrapped below its box ({language})"
        cut = tab.evaluate(
            """() => { const box = document.querySelector("input[name=q]");
               const style = getComputedStyle(box);
               const ctx = document.createElement("canvas").getContext("2d");
               ctx.font = style.font;
               const room = box.clientWidth - parseFloat(style.paddingLeft)
                            - parseFloat(style.paddingRight);
               return ctx.measureText(box.placeholder).width > room; }"""
        )
        assert not cut, f"the search box cuts its placeholder ({language})"
    finally:
        context.close()


def test_a_reviewer_goes_through_a_list_from_the_keyboard(server, page, ctx):
    base, _ = server
    order = [
        str(f["_id"])
        for f in ctx.db.findings.find({"status": "new"}, {"_id": 1}).sort(
            [("score", -1), ("_id", -1)]
        )
    ]
    assert len(order) >= 3
    _log_in(page, base, "rui")
    page.goto(f"{base}/findings?status=new&sort=-score")
    page.locator("a.finding-link").first.click()
    page.wait_for_url(f"{base}/findings/{order[0]}?*")
    assert page.inner_text("nav.walk").startswith(f"1 of {len(order)}")

    page.keyboard.press("j")
    page.wait_for_url(f"{base}/findings/{order[1]}?*")
    page.keyboard.press("k")
    page.wait_for_url(f"{base}/findings/{order[0]}?*")

    page.keyboard.press("c")  # confirm: the next finding of the list opens
    page.wait_for_url(f"{base}/findings/{order[1]}?*")
    assert "Finding marked confirmed." in page.inner_text(".flash-ok")
    assert ctx.db.findings.find_one({"_id": ObjectId(order[0])})["status"] == "confirmed"
    # Typing a note is typing, not a shortcut.
    page.fill("#workflow textarea[name=note]", "jkcd")
    assert page.url.startswith(f"{base}/findings/{order[1]}")


def test_the_side_by_side_panes_open_at_their_first_match(server, page, ctx):
    base, _ = server
    # A long page whose copied passage sits far down: its pane must not open at the top.
    work = ctx.db.masters.find_one({"external_id": "news-001"})
    filler = "这一段是与作品无关的网站内容，用来把抄袭的段落推到页面很靠后的位置。\n" * 120
    finding_id = scanned_page(ctx, "https://far.example/deep", "深处", filler + work["text"])[0]
    _log_in(page, base, "vic")
    page.goto(f"{base}/findings/{finding_id}")
    assert page.locator("#page-text").evaluate("c => c.scrollHeight > c.clientHeight")
    assert page.locator("#page-text").evaluate("c => c.scrollTop") > 0
    mark = page.locator("#page-text mark.hl").first
    assert mark.evaluate(
        "m => { const c = m.closest('.text-col').getBoundingClientRect();"
        " const r = m.getBoundingClientRect(); return r.top >= c.top && r.top < c.bottom; }"
    )


def big_book() -> str:
    """A 60,000-character novel: big at the limits ``open_upload_form`` sets."""
    return "\n".join(texts("zh_novel", 40))[:60_000]


def open_upload_form(page, base: str, monkeypatch, notice: str) -> None:
    """The upload form, signed in as a reviewer, at limits scaled down (the server runs
    in this process: 20,000 characters a work, chapters of 10,000); ``notice`` not shown."""
    for module in (library, works_routes):
        monkeypatch.setattr(module, "MAX_MASTER_CHARS", 20_000)
        monkeypatch.setattr(module, "CHAPTER_CHARS", 10_000)
    _log_in(page, base, "rui")
    page.goto(f"{base}/works/new")
    assert not page.is_visible(notice)


def test_a_big_upload_is_announced_first_then_shows_its_progress(
    server, page, monkeypatch, tmp_path
):
    book = tmp_path / "全本.txt"
    book.write_text(big_book(), encoding="utf-8")
    base, _ = server
    open_upload_form(page, base, monkeypatch, "#upload-warning")
    page.set_input_files("#upload-form input[type=file]", str(book))
    # The browser reads the file to count its chapters: the warning comes once it has.
    warning = page.wait_for_selector("#upload-warning", state="visible").inner_text()
    announced = re.search(
        r"全本.txt: [\d.]+ MB, registered as one work cut into (\d+) chapters", warning
    )
    assert announced, warning
    page.click("#upload-form button[type=submit]")
    assert not page.is_visible("#upload-progress")  # not before the reviewer agreed
    page.evaluate(
        """() => {
          window.seen = [];
          new MutationObserver(() => {
            const status = document.getElementById("upload-status");
            if (status && !status.hidden) window.seen.push(status.textContent);
          }).observe(document.body, {subtree: true, childList: true, characterData: true,
                                     attributes: true});
        }"""
    )
    page.check("#upload-confirm")
    page.click("#upload-form button[type=submit]")
    notes = page.wait_for_selector("#upload-notes").inner_text()
    registered = re.search(
        r"全本.txt: 60,000 characters, registered as one work cut into (\d+) ", notes
    )
    assert registered and registered.group(1) == announced.group(1), (warning, notes)  # counted
    assert "upload them as JSONL" in notes
    assert any("Fingerprinting and indexing" in text for text in page.evaluate("window.seen"))
    assert page.url == f"{base}/works/new"


def test_the_evidence_report_of_a_finding(server, page, ctx, screenshots):
    base, seeded = server
    _log_in(page, base, "vic")
    page.goto(f"{base}/findings/{seeded.findings[0]}")
    page.click("#evidence-report")
    page.wait_for_selector("#copy-facts")
    finding = ctx.db.findings.find_one({"_id": seeded.findings[0]})
    stored = ctx.db.pages.find_one({"_id": finding["page_id"]})
    assert page.inner_text("#capture-sha256").startswith(stored["raw_sha256"])
    assert page.locator("table.passage").count() >= 1
    page.screenshot(path=str(screenshots / "admin-evidence.png"), full_page=True)
    with page.expect_download() as download:
        page.click("#download-pdf")
    assert download.value.suggested_filename == f"copytrack-evidence-{finding['_id']}.pdf"


def test_a_chinese_browser_gets_the_chinese_admin_and_the_switch_sticks(
    server, browser, screenshots
):
    base, seeded = server
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    tab = context.new_page()
    try:
        tab.goto(f"{base}/login")
        assert tab.inner_text("h1 + p") == "版权追踪" and "用户名" in tab.inner_text("form")
        tab.fill("input[name=name]", "rui")
        tab.fill("input[name=password]", PASSWORD)
        tab.click("button[type=submit]")
        tab.wait_for_url(f"{base}/")
        assert tab.inner_text(".mainnav").split()[:3] == ["总览", "侵权发现", "检测"]
        assert tab.locator("html").get_attribute("lang") == "zh-CN"
        tab.screenshot(path=str(screenshots / "admin-dashboard-zh.png"), full_page=True)
        tab.goto(f"{base}/findings/{seeded.findings[6]}")
        assert tab.inner_text("#to-confirmed").strip() == "标记为已确认"
        tab.click(".languages a[hreflang=en]")
        tab.wait_for_selector("#to-confirmed")
        assert tab.url.startswith(f"{base}/findings/{seeded.findings[6]}")  # same page
        assert tab.inner_text("#to-confirmed").strip() == "Mark confirmed"
        tab.goto(f"{base}/works")
        assert tab.inner_text("h1").startswith("Works")  # the choice sticks
    finally:
        context.close()


def test_d_opens_a_dialog_where_the_keyboard_chooses_the_reason(server, page, ctx):
    base, seeded = server
    new = [f for f in seeded.findings if ctx.db.findings.find_one({"_id": f})["status"] == "new"]
    native: list[str] = []
    page.on("dialog", lambda dialog: (native.append(dialog.message), dialog.dismiss()))
    _log_in(page, base, "rui")
    page.goto(f"{base}/findings/{new[-1]}")
    dialog = page.locator("#dismiss-dialog")
    # Changes its mind a few times: each Esc keeps the finding open, each d opens the dialog
    # again (Chromium may leave the focus inside the closed dialog, which must not eat the d).
    for _ in range(5):
        page.keyboard.press("d")
        assert dialog.is_visible() and "Quotation or fair use" in dialog.inner_text()
        page.keyboard.press("Escape")
        assert not dialog.is_visible()
    assert ctx.db.findings.find_one({"_id": new[-1]})["status"] == "new"
    page.keyboard.press("d")
    page.keyboard.press("3")
    page.wait_for_selector(".flash-ok")
    dismissed = ctx.db.findings.find_one({"_id": new[-1]})
    assert dismissed["status"] == "dismissed" and dismissed["dismiss_reason"] == "quotation"
    assert native == []  # no native confirm on the way


@pytest.mark.parametrize(("lang", "asks"), [("en", "within 8 working days"),
                                            ("zh", "8 个工作日内")])  # fmt: skip
def test_moving_a_notices_deadline_moves_the_working_days_its_text_asks_for(
    server, page, ctx, lang, asks
):
    base, seeded = server
    confirmed = next(
        f for f in seeded.findings if ctx.db.findings.find_one({"_id": f})["status"] == "confirmed"
    )
    _log_in(page, base, "rui")
    page.goto(f"{base}/findings/{confirmed}/notice?lang={lang}")
    assert asks not in page.input_value("#notice-body")
    eight = working_days_after(datetime.now(UTC), 8).date().isoformat()
    page.fill("#notice-deadline", eight)
    page.dispatch_event("#notice-deadline", "change")
    assert asks in page.input_value("#notice-body")
