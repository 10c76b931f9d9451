"""A work's report pages its detail as the domain report does: the summary counts every
finding of the work, the detail lists REPORT_PAGE findings a page, grouped by domain,
with a pager; its PDF still lists them all."""

from __future__ import annotations

import re

from tests.admin_seed import PASSWORD, client, login
from tests.many_findings import seed_findings
from tracker.findings import REPORT_PAGE
from tracker.users import add_user


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

    pdf = web.get("/reports/work?work=many-0&format=pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
