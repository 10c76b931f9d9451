"""A work's report pages its detail as the domain report does: the summary counts every
finding of the work, the detail lists REPORT_PAGE findings a page, grouped by domain,
with a pager; its PDF still lists them all (built off the request past a page). A domain
report names the domain's subdomains rather than matching a pattern in every query."""

from __future__ import annotations

import io
import re
import time

from pypdf import PdfReader

from tests.admin_seed import PASSWORD, client, login
from tests.many_findings import seed_findings
from tracker.accounts.users import add_user
from tracker.core.store import delete_findings
from tracker.findings import REPORT_PAGE, domain_report


def _listed(page: str) -> list[str]:
    return re.findall(r'<td class="url">([^<]+)</td>', page)


def test_a_work_report_of_more_findings_than_a_page_pages_its_detail(ctx):
    # One work copied on REPORT_PAGE + 30 pages of three domains (and another work once).
    total = REPORT_PAGE + 30
    seed_findings(ctx, 2 * total, 2, lambda n: f"site{n % 3}.example")
    add_user(ctx, "vic", PASSWORD, "viewer")
    web = client(ctx)
    login(web, "vic")
    urls = {f["url"] for f in ctx.db.findings.find({"master_external_id": "many-0"})}
    assert len(urls) == total

    first = web.get("/reports/work?work=many-0")
    assert first.status_code == 200
    assert f"<td><b>{total}</b></td>" in first.text  # the summary counts all of them
    assert len(_listed(first.text)) == REPORT_PAGE and 'id="report-pager"' in first.text
    assert "/reports/work?work=many-0&amp;page=2" in first.text
    second = web.get("/reports/work?work=many-0&page=2").text
    assert len(_listed(second)) == 30
    assert set(_listed(first.text)) | set(_listed(second)) == urls
    assert not set(_listed(first.text)) & set(_listed(second))
    # A group cut by the page still says its size over every page.
    sizes = [int(n) for n in re.findall(r'<span class="count">(\d+)</span>', first.text)]
    assert sum(sizes) == total

    # A work of one page of findings gets its PDF at once (a longer one: off the request).
    others = [f["_id"] for f in ctx.db.findings.find({"master_external_id": "many-1"})]
    delete_findings(ctx.db, {"_id": {"$in": others[3:]}})
    pdf = web.get("/reports/work?work=many-1&format=pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")


def test_a_long_work_report_pdf_is_built_off_the_request_then_downloaded(ctx):
    total = REPORT_PAGE + 5
    seed_findings(ctx, total, 1, lambda n: f"site{n % 2}.example")
    add_user(ctx, "vic", PASSWORD, "viewer")
    web = client(ctx)
    login(web, "vic")
    asked = web.get("/reports/work?work=many-0&format=pdf")
    assert asked.status_code == 200 and 'id="report-pdf"' in asked.text
    assert "Work report · 长篇 第1回" in asked.text
    assert 'href="/reports/work?work=many-0"' in asked.text  # back to the report

    deadline = time.monotonic() + 180
    while (made := web.get("/reports/work.pdf?work=many-0")).headers[
        "content-type"
    ] != "application/pdf":
        assert "The PDF is being prepared" in made.text, made.text[-500:]
        assert time.monotonic() < deadline, "the PDF was never made"
        time.sleep(0.5)
    assert made.headers["content-type"] == "application/pdf"
    assert made.headers["content-disposition"].startswith("attachment;")
    text = "".join(p.extract_text() for p in PdfReader(io.BytesIO(made.content)).pages)
    assert all(f"/read/{n}.html" in text.replace("\n", "") for n in (0, total - 1))
    assert web.get("/reports/work.pdf?work=nope").status_code == 404


def test_a_domain_report_covers_its_subdomains_and_not_look_alikes(ctx):
    hosts = ("copy.example", "m.copy.example", "a.b.copy.example", "notcopy.example")
    seed_findings(ctx, 8, 2, lambda n: hosts[n % 4])
    report = domain_report(ctx, "copy.example", scope="all")
    listed = {f["domain"] for _, findings in report.groups for f in findings}
    assert listed == set(hosts[:3]) and report.summary["total"] == 6
    assert domain_report(ctx, "m.copy.example", scope="all").summary["total"] == 2
    assert domain_report(ctx, "nothing.example", scope="all").summary["total"] == 0
