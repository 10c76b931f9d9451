"""One finding's evidence report: character-level differences named for what they are,
both hashes, the capture time, and a PDF that carries the capture (real servers)."""

from __future__ import annotations

import hashlib
import random
import re
from html import escape

import pytest

from admin.i18n import language
from admin.web import templates
from testbed.attacks import homophones, traditional
from tests.admin_seed import PASSWORD, client, login
from tests.copies import ZH
from tests.pdf_layout import overflowing_text, text_past_its_cell
from tracker.accounts.users import add_user
from tracker.findings import (
    build_notice,
    differences,
    evidence,
    record_notice,
    set_notice_sender,
    set_status,
    tally,
)
from tracker.masters.library import Work, add_work
from tracker.scanning.pages import PageInput, scan_page, store_page


def test_differences_are_named_for_what_they_are():
    work = "长城是中国古代的军事防御工程，今天我们去参观。"
    page = "長城是中國古代的军事防御工程，\n今天我门去参观了。"
    kinds = [(p.kind, p.work, p.page) for p in differences(work, page) if p.kind != "same"]
    assert kinds == [
        ("traditional", "长", "長"),
        ("traditional", "国", "國"),
        ("homophone", "们", "门"),
        ("added", "", "了"),
    ]  # fmt: skip  (the line break is layout, not a difference)
    counted = tally(differences(work, page))
    assert {kind: n for kind, n in counted.items() if kind != "same"} == {
        "synonym": 0, "traditional": 2, "homophone": 1, "changed": 0, "added": 1, "omitted": 0,
    }  # fmt: skip
    assert [p.kind for p in differences("甲乙丙丁", "甲丙丁")] == ["same", "omitted", "same"]
    assert [p.kind for p in differences("好，a1", "好。b2")] == ["same", "changed"]


def test_the_attacks_copytrack_sees_through_show_in_the_evidence():
    rng = random.Random(7)
    text = ZH[0][:600]
    counted = tally(differences(text, homophones(text, rng, rate=0.1)))
    assert counted["homophone"] >= 20 and counted["changed"] <= counted["homophone"] // 4
    counted = tally(differences(text, traditional(text, rng)))
    assert counted["traditional"] >= 20 and counted["homophone"] == counted["changed"] == 0


@pytest.fixture
def edited_copy(ctx):
    """A work copied with homophones and traditional forms; its finding."""
    add_work(ctx, Work(text=ZH[1], external_id="news-1", title="长城新闻", author="记者"))
    rng = random.Random(3)
    copied = traditional(homophones(ZH[1], rng, rate=0.05), rng)
    raw = f"<html><body><article><p>{copied}</p></article></body></html>".encode()
    page_id, _ = store_page(
        ctx, PageInput(url="https://copy.example/a.html", text=copied, raw=raw, status=200)
    )
    scan_page(ctx, page_id)
    return ctx, ctx.db.findings.find_one({"page_id": page_id}), raw


def test_the_evidence_of_a_finding(edited_copy):
    ctx, finding, raw = edited_copy
    found = evidence(ctx, finding["_id"])
    assert found.page["raw_sha256"] == hashlib.sha256(raw).hexdigest()
    assert found.passages and found.passages_left_out == 0
    assert found.tally["traditional"] > 10 and found.tally["homophone"] > 0


def test_the_evidence_report_as_html_and_as_a_pdf_carrying_the_capture(edited_copy):
    ctx, finding, _ = edited_copy
    add_user(ctx, "vic", PASSWORD, "viewer")
    web = client(ctx)
    login(web, "vic")
    html = web.get(f"/findings/{finding['_id']}/evidence")
    assert html.status_code == 200
    page = ctx.db.pages.find_one({"_id": finding["page_id"]})
    assert re.search(rf'id="capture-sha256">{page["raw_sha256"]}', html.text)
    assert re.search(rf'id="text-sha256">{page["content_sha256"]}', html.text)
    assert page["fetched_at"].strftime("%Y-%m-%d %H:%M:%S UTC") in html.text
    assert '<span class="d-traditional" title="Traditional form">' in html.text
    assert '<span class="d-homophone" title="Homophone">' in html.text
    assert "《长城新闻》" in html.text  # a Chinese title in its brackets
    pdf = web.get(f"/findings/{finding['_id']}/evidence?format=pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
    assert pdf.headers["content-disposition"].startswith("attachment;")
    assert b"/EmbeddedFile" in pdf.content  # the capture travels with the report
    assert web.get("/findings/nothing/evidence").status_code == 404
    shown = web.get(f"/findings/{finding['_id']}").text
    assert f'href="/findings/{finding["_id"]}/evidence?format=pdf" download' in shown


def test_the_evidence_pdf_stays_within_its_margins(edited_copy):
    ctx, finding, _ = edited_copy
    found = evidence(ctx, finding["_id"])
    html = templates.get_template("evidence.html").render(
        ev=found, pdf=True, has_capture=True, capture_name="capture.html", max_chars=60_000
    )
    assert overflowing_text(html) == []


@pytest.mark.parametrize("lang", ["en", "zh-CN"])
def test_the_evidence_pdf_prints_no_review_or_notice_text_over_the_next_column(edited_copy, lang):
    """The review table printed "…21:38:29 UTC" over the status column, in both languages;
    the notices' table, with its two times and a hash, too."""
    ctx, finding, _ = edited_copy
    set_status(ctx, finding["_id"], "confirmed", "reviewer-with-a-long-name")
    set_notice_sender(ctx, organization="示例报业集团", email="legal@news.example")
    body = build_notice(ctx, finding["_id"], "zh").body
    record_notice(ctx, finding["_id"], lang="zh", subject="s", body=body,
                  recipient="abuse@a-long-domain-name.example", by="rui")  # fmt: skip
    found = evidence(ctx, finding["_id"])
    assert found.notices and len(found.finding["history"]) >= 2
    with language(lang):
        html = templates.get_template("evidence.html").render(
            ev=found, pdf=True, has_capture=True, capture_name="capture.html", max_chars=60_000
        )
    assert text_past_its_cell(html) == []
    assert overflowing_text(html) == []
    # The report keeps the text sent, not only its hash.
    assert escape(body.splitlines()[0]) in html and escape(body.splitlines()[-1]) in html
