"""The funnel's counts and a finding's timeline from the records the loop keeps: copies
removed after a notice and how long it took, copies still there after the deadline, a
notice the relay refused, dismissed findings left out."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest

from tests.enforcement.helpers import set_sender, store_finding
from tracker.context import Context
from tracker.core.times import now
from tracker.enforcement.timeline import finding_timeline, funnel, funnel_csv
from tracker.findings import record_notice, set_status
from tracker.findings.deadlines import STILL_THERE, record_check
from tracker.findings.status import REMOVED, history_entry
from tracker.findings.workflow import FindingNotFound


def noticed(ctx: Context, url: str, work: str = "W-1") -> object:
    finding_id = store_finding(ctx, url, work)
    set_status(ctx, finding_id, "confirmed", "rui")
    record_notice(ctx, finding_id, lang="en", subject="s", body="b",
                  recipient="abuse@registrar.test", by="rui")  # fmt: skip
    return finding_id


def removed_after(ctx: Context, finding_id: object, days: float) -> None:
    """The scan's removal, ``days`` after the notice (as a scan records it)."""
    sent = ctx.db.notices.find_one({"finding_id": finding_id})["sent_at"]
    at = sent + timedelta(days=days)
    ctx.db.findings.update_one({"_id": finding_id}, {
        "$set": {"status": REMOVED},
        "$push": {"history": history_entry(REMOVED, at, note="the page no longer copies")},
    })  # fmt: skip


def test_the_funnel_counts_each_stage_and_the_days_to_removal(ctx: Context) -> None:
    set_sender(ctx)
    for n, days in enumerate((2, 4, 9)):
        removed_after(ctx, noticed(ctx, f"http://pirate.test/{n}.html"), days)
    still = noticed(ctx, "http://pirate.test/still.html", "W-2")
    finding = ctx.db.findings.find_one({"_id": still})
    record_check(ctx, finding, STILL_THERE, finding["notice_deadline"] + timedelta(hours=1),
                 "copytrack")  # fmt: skip
    confirmed = store_finding(ctx, "http://pirate.test/confirmed.html", "W-2")
    set_status(ctx, confirmed, "confirmed", "rui")
    store_finding(ctx, "http://pirate.test/new.html", "W-2")
    dismissed = store_finding(ctx, "http://pirate.test/quote.html", "W-2")
    set_status(ctx, dismissed, "dismissed", "rui", reason="quotation")
    store_finding(ctx, "http://other.test/x.html", "W-1")

    by_domain = {r.key: r for r in funnel(ctx, "domain")}
    row = by_domain["pirate.test"]
    assert (row.found, row.confirmed, row.notified, row.removed) == (6, 5, 4, 3)
    assert row.median_days_to_removal == 4.0 and row.still_there == 1
    assert (by_domain["other.test"].found, by_domain["other.test"].confirmed) == (1, 0)
    by_work = {r.key: r for r in funnel(ctx, "work")}
    assert (by_work["W-1"].found, by_work["W-1"].removed) == (4, 3)
    assert by_work["W-2"].title == "The work W-2" and by_work["W-2"].still_there == 1
    [first, second] = csv.DictReader(io.StringIO(funnel_csv(funnel(ctx, "domain"), "domain")))
    assert first["domain"] == "pirate.test" and first["median_days_to_removal"] == "4.0"
    assert second["median_days_to_removal"] == ""
    with pytest.raises(ValueError, match="by domain or work"):
        funnel(ctx, "campaign")


def test_the_timeline_shows_a_refused_notice_a_removal_and_nothing_else(ctx: Context) -> None:
    set_sender(ctx)
    finding_id = store_finding(ctx, "http://pirate.test/a.html")
    set_status(ctx, finding_id, "confirmed", "rui")
    # The relay refused the first try (as sending records it), then a notice went out.
    ctx.db.findings.update_one({"_id": finding_id}, {"$push": {"notice_failures": {
        "at": now(), "to": ["gone@pirate.test"], "error": "550 5.1.1 no such mailbox here",
        "by": "rui",
    }}})  # fmt: skip
    record_notice(ctx, finding_id, lang="en", subject="s", body="b",
                  recipient="abuse@registrar.test", by="rui")  # fmt: skip
    removed_after(ctx, finding_id, 3)
    steps = finding_timeline(ctx, finding_id)
    assert [(s.kind, s.outcome) for s in steps] == [
        ("found", ""), ("reviewed", "confirmed"), ("notice_failed", "failed"),
        ("notice_sent", "recorded"), ("removed", "removed"),
    ]  # fmt: skip
    assert steps[2].answer.startswith("550") and steps[2].to == ["gone@pirate.test"]
    assert steps[3].to == ["abuse@registrar.test"] and steps[3].by == "rui"
    with pytest.raises(FindingNotFound):
        finding_timeline(
            ctx, store_finding(ctx, "http://x.test/") and ctx.db.pages.find_one()["_id"]
        )
