"""A notice's deadline and the re-check after it, on real servers: the page is fetched
again, stored and scanned; the finding says whether the copy is gone or still there."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer

import pytest
from bson import ObjectId
from click.testing import CliRunner

from copytrack.cli import main
from tests.adding import add_all
from tests.copies import ZH, found_on
from tests.loopback import Handler, served
from tracker.core.times import now
from tracker.findings import (
    FindingFilter,
    WorkflowError,
    dashboard,
    find_findings,
    notice_stages,
    record_notice,
    set_notice_sender,
    set_status,
    working_days_after,
)
from tracker.masters.library import Work, add_work
from tracker.scanning.chains import join_chain
from tracker.scanning.pages import PageInput, scan_page, store_page
from tracker.scanning.rechecks import due_pages, recheck_due, recheck_page


@pytest.fixture
def noticed(ctx):
    """Four pages copying a work each, every finding confirmed and its notice sent."""
    add_all(
        ctx,
        [Work(text=text, external_id=f"w{i}", title=f"作品{i}") for i, text in enumerate(ZH[:4])],
    )
    set_notice_sender(ctx, organization="示例报业集团", email="legal@news.example")
    findings = {}
    for i, name in enumerate(("kept", "edited", "gone", "down")):
        finding_id = found_on(ctx, f"https://copy.example/{name}", i)
        set_status(ctx, finding_id, "confirmed", "rui")
        record_notice(
            ctx, finding_id, lang="zh", subject="s", body="通知", recipient="abuse@x", by="rui"
        )
        findings[name] = finding_id
    return ctx, findings


def finding(ctx, finding_id: ObjectId) -> dict:
    return ctx.db.findings.find_one({"_id": finding_id})


def test_deadlines_count_working_days():
    friday = datetime(2026, 11, 27, 15, 0, tzinfo=UTC)
    assert working_days_after(friday, 5) == datetime(2026, 12, 4, 15, 0, tzinfo=UTC)
    assert working_days_after(friday, 1) == datetime(2026, 11, 30, 15, 0, tzinfo=UTC)


def test_a_notice_gives_the_site_a_deadline(noticed):
    ctx, findings = noticed
    kept = finding(ctx, findings["kept"])
    sent = ctx.db.notices.find_one({"finding_id": findings["kept"]})
    assert kept["notice_deadline"] == sent["deadline"] > now() + timedelta(days=4)
    assert "deadline" in kept["history"][-1]["note"]
    assert notice_stages(ctx, now())["awaiting"] == 4
    assert due_pages(ctx) == []  # nothing is re-checked before its deadline
    with pytest.raises(WorkflowError, match="has passed already"):
        record_notice(
            ctx, findings["kept"], lang="zh", subject="s", body="b", recipient="x", by="rui",
            deadline=now() - timedelta(days=1),
        )  # fmt: skip


def test_after_the_deadline_each_page_is_fetched_again_and_the_outcome_recorded(noticed):
    ctx, findings = noticed
    ctx.db.findings.update_many({}, {"$set": {"notice_deadline": now() - timedelta(hours=1)}})
    assert notice_stages(ctx, now())["overdue"] == 4
    overdue = find_findings(ctx, FindingFilter(notice="overdue"), 1, 50)
    assert {f["_id"] for f in overdue.items} == set(findings.values())

    copies = {url: ctx.db.pages.find_one({"url": url})["text"] for url in (
        "https://copy.example/kept", "https://copy.example/edited")}  # fmt: skip
    fetched: list[str] = []

    def fetch(url: str) -> PageInput:
        fetched.append(url)
        if url.endswith("/kept"):  # the same copy, still up
            return PageInput(url, copies[url], raw=b"<p>same</p>")
        if url.endswith("/edited"):  # the site cut the copied text
            return PageInput(url, "本页内容已删除。", raw=b"<p>deleted</p>")
        if url.endswith("/gone"):  # 404: the fetcher hands it over empty
            return PageInput(url, "", status=404, skip_reason="gone: HTTP 404 Not Found")
        raise ValueError(f"{url}: cannot fetch: timed out")

    checks = {c.url.rsplit("/", 1)[1]: c for c in recheck_due(ctx, fetch)}
    assert len(fetched) == 4
    assert {name: c.outcome for name, c in checks.items()} == {
        "kept": "still_there", "edited": "removed", "gone": "removed", "down": "unreachable",
    }  # fmt: skip
    assert "timed out" in checks["down"].detail
    kept, edited = finding(ctx, findings["kept"]), finding(ctx, findings["edited"])
    assert kept["status"] == "notice_sent" and kept["notice_check"]["outcome"] == "still_there"
    assert "still copies" in kept["history"][-1]["note"]
    assert edited["status"] == "removed" and edited["notice_check"]["outcome"] == "removed"
    edited_page = ctx.db.pages.find_one({"url": "https://copy.example/edited"})
    # The new capture is the evidence of the removal.
    assert edited_page["raw_sha256"] == hashlib.sha256(b"<p>deleted</p>").hexdigest()
    assert finding(ctx, findings["down"])["status"] == "notice_sent"
    stages = notice_stages(ctx, now())
    assert stages == {"awaiting": 0, "overdue": 0, "still_there": 1, "removed": 2}
    assert dashboard(ctx)["notices"] == stages  # the re-check dropped the cache

    assert recheck_due(ctx, fetch) == []  # each deadline is re-checked once
    # A page that did not answer is tried again after a while; a new notice starts anew.
    later = now() + timedelta(hours=7)
    assert due_pages(ctx, later) == [finding(ctx, findings["down"])["page_id"]]
    record_notice(
        ctx, findings["kept"], lang="en", subject="s", body="again", recipient="x", by="rui"
    )
    assert "notice_check" not in finding(ctx, findings["kept"])
    assert notice_stages(ctx, now())["awaiting"] == 1


def test_a_reviewer_can_recheck_before_the_deadline_without_using_it_up(noticed):
    ctx, findings = noticed
    page_id = finding(ctx, findings["kept"])["page_id"]
    text = ctx.db.pages.find_one({"_id": page_id})["text"]
    check = recheck_page(ctx, page_id, lambda url: PageInput(url, text), by="rui")
    assert check.outcome == "still_there" and check.findings == 1
    assert finding(ctx, findings["kept"])["notice_check"]["settled"] is False
    ctx.db.findings.update_many({}, {"$set": {"notice_deadline": now() - timedelta(hours=1)}})
    assert page_id in due_pages(ctx)  # the check after the deadline is still to come


class _Site(Handler):
    """A pirate page that is up until the site takes it down (``server.copy`` is None)."""

    def do_GET(self) -> None:
        copy = self.server.copy  # type: ignore[attr-defined]
        if copy is None:
            self.send_error(404)
            return
        self.send_body(f"<html><body><article><p>{copy}</p></article></body></html>".encode())


@pytest.fixture
def site() -> Iterator[ThreadingHTTPServer]:
    with served(_Site, copy=None) as server:
        yield server


def test_copytrack_recheck_fetches_the_real_page(crawl_ctx, site):
    ctx = crawl_ctx
    add_work(ctx, Work(text=ZH[0], external_id="w0", title="作品0"))
    set_notice_sender(ctx, organization="示例报业集团", email="legal@news.example")
    url = f"http://127.0.0.1:{site.server_port}/book/1.html"
    site.copy = ZH[0]
    finding_id = found_on(ctx, url, 0)
    set_status(ctx, finding_id, "confirmed", "rui")
    record_notice(ctx, finding_id, lang="zh", subject="s", body="通知", recipient="x", by="rui")
    runner = CliRunner()
    quiet = runner.invoke(main, ["recheck"], catch_exceptions=False)
    assert quiet.exit_code == 0 and "no notice is past its deadline" in quiet.stderr

    ctx.db.findings.update_one(
        {"_id": finding_id}, {"$set": {"notice_deadline": now() - timedelta(minutes=1)}}
    )
    still = runner.invoke(main, ["recheck"], catch_exceptions=False)
    assert still.stdout == f"still_there\t{url}\t1 finding(s)\n"
    site.copy = None  # taken down after all; a reviewer looks again
    page_id = finding(ctx, finding_id)["page_id"]
    gone = runner.invoke(main, ["recheck", "--page", str(page_id)], catch_exceptions=False)
    assert gone.stdout.startswith(f"removed\t{url}\t1 finding(s)\tgone: HTTP 404")
    assert finding(ctx, finding_id)["status"] == "removed"
    bad = runner.invoke(main, ["recheck", "--page", "nope"])
    assert bad.exit_code == 1 and "'nope' is not a page id" in bad.stderr


def test_a_chapter_joined_from_pages_is_rechecked_as_its_pages(ctx):
    add_work(ctx, Work(text=ZH[2], external_id="w2"))
    set_notice_sender(ctx, organization="示例报业集团", email="legal@news.example")
    thirds = [ZH[2][n * len(ZH[2]) // 3 : (n + 1) * len(ZH[2]) // 3] for n in range(3)]
    urls = [f"https://cut.example/ch{n}.html" for n in range(3)]
    for n, (url, text) in enumerate(zip(urls, thirds, strict=True)):
        nxt = urls[n + 1] if n < 2 else None
        store_page(ctx, PageInput(url, text, raw=text.encode(), next_url=nxt))
    joined_id, _ = join_chain(ctx, urls[1])
    scan_page(ctx, joined_id)
    finding = ctx.db.findings.find_one({"page_id": joined_id})
    set_status(ctx, finding["_id"], "confirmed", "rui")
    record_notice(ctx, finding["_id"], lang="zh", subject="s", body="b", recipient="x", by="r")
    up = dict(zip(urls, thirds, strict=True))

    def fetch(url: str) -> PageInput:
        if url in up:
            return PageInput(url, up[url], raw=up[url].encode())
        return PageInput(url, "", status=404, skip_reason="gone: HTTP 404 Not Found")

    assert recheck_page(ctx, joined_id, fetch).outcome == "still_there"  # not one page alone
    assert ctx.db.pages.find_one({"_id": joined_id})["parts"] == urls
    up.clear()  # every page taken down
    check = recheck_page(ctx, joined_id, fetch)
    assert check.outcome == "removed" and "gone: HTTP 404" in check.detail
    assert ctx.db.findings.find_one({"_id": finding["_id"]})["status"] == "removed"
