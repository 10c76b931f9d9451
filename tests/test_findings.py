"""Pages and findings on real servers: one finding per (page, master), re-scans update."""

from __future__ import annotations

import hashlib
import zlib

from tests.corpus import texts
from tracker.findings import dashboard, find_findings, hidden_quotations, parse_filter
from tracker.masters.library import Work, add_work
from tracker.scanning.pages import PageInput, scan_page, store_page

ZH = texts("zh_news", 30)


def test_a_scanned_copy_becomes_one_finding_that_rescans_update(ctx):
    add_work(ctx, Work(text=ZH[0], external_id="w0", title="Work zero"))
    add_work(ctx, Work(text=ZH[1], external_id="w1"))
    page = PageInput(
        url="http://pirate.example/a/1",
        text="转载：" + ZH[0] + ZH[20][:200],
        raw=b"<html>...</html>",
        campaign="c1",
    )
    page_id, changed = store_page(ctx, page)
    assert changed
    result = scan_page(ctx, page_id)
    assert result.scanned and result.matches == 1 and result.record.new == 1
    finding = ctx.db.findings.find_one({"page_id": page_id})
    assert finding["master_external_id"] == "w0" and finding["status"] == "new"
    assert finding["domain"] == "pirate.example" and finding["campaign"] == "c1"
    assert finding["master_coverage"] > 0.95 and finding["spans"]

    # The same text again: not rescanned; forced: updated, never duplicated.
    assert store_page(ctx, page) == (page_id, False)
    assert not scan_page(ctx, page_id).scanned
    again = scan_page(ctx, page_id, force=True)
    assert again.record.new == 0 and again.record.updated == 1
    assert ctx.db.findings.count_documents({}) == 1
    refreshed = ctx.db.findings.find_one({"page_id": page_id})
    assert refreshed["first_seen"] == finding["first_seen"]
    assert refreshed["last_seen"] >= finding["last_seen"]


def test_a_page_that_no_longer_copies_is_marked_removed(ctx):
    add_work(ctx, Work(text=ZH[2], external_id="w2"))
    url = "http://pirate.example/b"
    page_id, _ = store_page(ctx, PageInput(url=url, text=ZH[2]))
    scan_page(ctx, page_id)
    ctx.db.findings.update_one({"page_id": page_id}, {"$set": {"status": "confirmed"}})
    store_page(ctx, PageInput(url=url, text=ZH[25]))
    assert scan_page(ctx, page_id).record.removed == 1
    finding = ctx.db.findings.find_one({"page_id": page_id})
    assert finding["status"] == "removed"
    assert finding["history"][-1]["note"] == "the page no longer copies this work"


def test_the_raw_page_is_kept_with_its_hash(ctx):
    raw = "<html><body>正文</body></html>".encode("gbk")
    page_id, _ = store_page(ctx, PageInput(url="http://x.example/", text="正文", raw=raw))
    stored = ctx.db.pages.find_one({"_id": page_id})
    assert zlib.decompress(stored["raw_zlib"]) == raw
    assert stored["raw_sha256"] == hashlib.sha256(raw).hexdigest()


def test_a_copy_gets_the_date_its_text_gives_and_a_page_without_findings_is_not_searched(ctx):
    add_work(ctx, Work(text=ZH[0], external_id="w0"))
    dated = "<html><body><p>Posted on March 3, 2021.</p><p>{}</p></body></html>"
    copy = PageInput("http://pirate.example/c", "转载：" + ZH[0], raw=dated.format("x").encode())
    other = PageInput("http://pirate.example/o", ZH[25], raw=dated.format("y").encode())
    for page in (copy, other):
        scan_page(ctx, store_page(ctx, page)[0])

    published = {
        p["url"]: p["published"] for p in ctx.db.pages.find({}, {"url": 1, "published": 1})
    }
    assert published == {copy.url: "2021-03-03", other.url: None}


def test_quotation_sized_findings_are_kept_out_of_the_queue_unless_asked_for(ctx):
    """A page quoting 60 characters of a work and a page copying it whole: both recorded,
    the quotation marked so; lists, counts and the dashboard show the copy only, and say
    how many quotations they hide; size=quotations or any shows them. On a listing page
    the quotation is no finding at all."""
    add_work(ctx, Work(text=ZH[0], external_id="w0"))
    flat = "".join(ZH[0].split())
    quoting = PageInput(
        url="http://q.example/1", text=ZH[20] + "\n" + flat[100:160] + "\n" + ZH[21]
    )
    copying = PageInput(url="http://c.example/1", text=ZH[0])
    for page in (quoting, copying):
        scan_page(ctx, store_page(ctx, page)[0])
    by_url = {f["url"]: f for f in ctx.db.findings.find()}
    assert by_url[quoting.url]["quotation"] and not by_url[copying.url]["quotation"]
    queue = parse_filter({})
    assert [f["url"] for f in find_findings(ctx, queue).items] == [copying.url]
    assert hidden_quotations(ctx, queue) == 1
    shown = find_findings(ctx, parse_filter({"size": "quotations"}))
    assert [f["url"] for f in shown.items] == [quoting.url]
    assert find_findings(ctx, parse_filter({"size": "any"})).total == 2
    assert parse_filter({"size": "quotations"}).as_params() == {"size": "quotations"}
    figures = dashboard(ctx)
    assert figures["open"] == 1 and figures["quotations_hidden"] == 1
    listing = PageInput(url="http://l.example/1", text=quoting.text, listing=True)
    assert scan_page(ctx, store_page(ctx, listing)[0]).matches == 0


def test_first_scans_recorded_at_once_are_as_one_by_one(ctx):
    from tracker.findings import record_findings, record_first_scans
    from tracker.matching.matcher import MasterRef, Match

    (added,) = add_work(ctx, Work(text=ZH[3], external_id="w3", title="Work three"))
    match = Match(MasterRef(added.master_id, "w3", "Work three"), 0.9, 7, 0.8, 0.5,
                  ((0, 300, 10, 310),), copied_chars=300)  # fmt: skip
    pages = []
    for i in range(3):
        page_id, _ = store_page(ctx, PageInput(url=f"http://p.example/{i}", text=ZH[3], title="t"))
        pages.append(ctx.db.pages.find_one({"_id": page_id}))
    record_findings(ctx, pages[0], [match])
    assert record_first_scans(ctx, [(pages[0], []), (pages[1], [match]), (pages[2], [match])]) == 2
    # The page that had a finding was recorded as a scan: what it no longer copies is closed.
    assert ctx.db.findings.find_one({"page_id": pages[0]["_id"]})["status"] == "removed"
    one, two = (ctx.db.findings.find_one({"page_id": p["_id"]}) for p in pages[1:])
    record_findings(ctx, pages[2], [match])  # a re-scan, one by one: the same finding
    again = ctx.db.findings.find_one({"page_id": pages[2]["_id"]})
    assert set(one) == set(again) and one["status"] == "new" and one["page_title"] == "t"
    assert again["_id"] == two["_id"] and again["first_seen"] == two["first_seen"]
    # A page whose finding another scan records between the look and the write: the unique
    # (page, master) index refuses the insert, and the page is recorded as a re-scan.
    page_id, _ = store_page(ctx, PageInput(url="http://p.example/raced", text=ZH[3], title="r"))
    raced = ctx.db.pages.find_one({"_id": page_id})
    assert record_first_scans(ctx, [(raced, [match]), (raced, [match]), (pages[1], [])]) == 1
    assert ctx.db.findings.count_documents({"page_id": page_id}) == 1
    assert ctx.db.findings.find_one({"page_id": pages[1]["_id"]})["status"] == "removed"
