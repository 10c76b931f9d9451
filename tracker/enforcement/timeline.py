"""Outcomes in one place: each finding's timeline, and the enforcement funnel.

A finding's timeline gathers what the enforcement loop recorded about it, in time order:
found and reviewed (its history), the alerts that named it (the delivery log), the notices
sent and those the relay refused, the delisting requests and their re-checks, the
re-checks of the page after a notice. It reads the records those steps keep; nothing is
written twice to build it.

The funnel counts, per domain or per work, the copies found, those a reviewer confirmed,
those notified, those removed after a notice, how long removal took (median days from the
first notice), and the copies still there after their deadline.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bson import ObjectId

from ..context import Context
from ..findings.catalogue import Catalogue, MongoFindings
from ..findings.deadlines import OUTCOME_LABELS, STILL_THERE, UNREACHABLE
from ..findings.funnel import BY, FUNNEL_COLUMNS, FunnelRow, funnel_csv, funnel_totals
from ..findings.status import CONFIRMED, DISMISSED, LICENSED, NEW, NOTICE_SENT, REMOVED
from ..findings.workflow import FindingNotFound
from .delisting import DELISTED, ENGINES, delistings_of
from .deliveries import DELIVERED, deliveries_of

__all__ = ["BY", "FUNNEL_COLUMNS", "STEP_LABELS", "FunnelRow", "Step", "finding_timeline",
           "funnel", "funnel_csv", "funnel_totals"]  # fmt: skip

FOUND, REVIEWED, ALERTED, NOTICE, NOTICE_FAILED = (
    "found", "reviewed", "alerted", "notice_sent", "notice_failed"
)  # fmt: skip
DELISTING, DELISTING_CHECKED, RECHECKED, GONE = (
    "delisting_requested", "delisting_checked", "rechecked", "removed"
)  # fmt: skip
#: Each kind of step, with its label (the admin translates it).
STEP_LABELS: dict[str, str] = {
    FOUND: "Found",
    REVIEWED: "Reviewed",
    ALERTED: "Alerted",
    NOTICE: "Notice sent",
    NOTICE_FAILED: "Notice not sent",
    DELISTING: "Delisting requested",
    DELISTING_CHECKED: "Delisting re-checked",
    RECHECKED: "Re-checked",
    GONE: "Removed",
}
#: What a step's ``outcome`` can say, with its label.
OUTCOMES: dict[str, str] = {
    **{status: label for status, label in (
        (CONFIRMED, "Confirmed"), (DISMISSED, "Dismissed"), (NEW, "Back to new"),
        (LICENSED, "Licensed"),
    )},
    **OUTCOME_LABELS,
    DELIVERED: "Delivered",
    "pending": "Waiting to be retried",
    "failed": "Failed",
    "recorded": "Recorded by hand",
    "emailed": "E-mailed",
    "requested": "Requested",
    DELISTED: "Delisted",
    "still_listed": "Still listed",
}  # fmt: skip


@dataclass(frozen=True)
class Step:
    """One step of a finding's enforcement: when, what, by whom, its outcome, to whom, and
    what the other side answered (an SMTP reply, a webhook's HTTP status)."""

    at: datetime
    kind: str
    outcome: str = ""
    by: str = ""
    to: list[str] = field(default_factory=list)
    answer: str = ""
    detail: str = ""

    @property
    def label(self) -> str:
        return STEP_LABELS[self.kind]

    @property
    def outcome_label(self) -> str:
        return OUTCOMES.get(self.outcome, self.outcome)


def _history_steps(finding: dict[str, Any]) -> Iterable[Step]:
    for n, entry in enumerate(finding.get("history", [])):
        status, at, by = entry["status"], entry["at"], entry.get("by", "")
        note = entry.get("note") or ""
        if n == 0:
            yield Step(at, FOUND, by=by, detail=finding.get("url", ""))
        elif status == REMOVED:
            yield Step(at, GONE, outcome=REMOVED, by=by, detail=note)
        elif status == NOTICE_SENT:
            # Notices come from their own records (with the relay's answer); what the
            # history adds is a re-check that found the copy still there.
            if note.startswith("re-checked"):
                yield Step(at, RECHECKED, outcome=STILL_THERE, by=by, detail=note)
        else:
            yield Step(at, REVIEWED, outcome=status, by=by, detail=note)


def _alert_steps(ctx: Context, finding_id: ObjectId) -> Iterable[Step]:
    for d in deliveries_of(ctx, finding_id):
        at = d.get("delivered_at") or d.get("failed_at") or d["created_at"]
        yield Step(at, ALERTED, outcome=d["state"], by=d["subscription"], to=list(d["to"]),
                   answer=d.get("answer", ""), detail=d["channel"])  # fmt: skip


def _notice_steps(ctx: Context, finding: dict[str, Any]) -> Iterable[Step]:
    for notice in ctx.db.notices.find({"finding_id": finding["_id"]}).sort("sent_at", 1):
        delivery = notice.get("delivery") or {}
        refused = delivery.get("refused") or {}
        answer = delivery.get("answer", "")
        if refused:
            answer += " (refused " + "; ".join(f"{a}: {r}" for a, r in refused.items()) + ")"
        yield Step(
            notice["sent_at"], NOTICE, outcome="emailed" if delivery else "recorded",
            by=notice["by"],
            to=delivery.get("accepted") or [a.strip() for a in notice["recipient"].split(",")],
            answer=answer, detail=delivery.get("message_id", ""),
        )  # fmt: skip
    for failure in finding.get("notice_failures", []):
        yield Step(failure["at"], NOTICE_FAILED, outcome="failed", by=failure.get("by", ""),
                   to=list(failure.get("to", [])), answer=failure.get("error", ""))  # fmt: skip
    check = finding.get("notice_check")
    if check and check["outcome"] == UNREACHABLE:  # the others are in the history
        yield Step(check["at"], RECHECKED, outcome=UNREACHABLE, by=check.get("by", ""),
                   detail=check.get("detail", ""))  # fmt: skip


def _delisting_steps(ctx: Context, finding_id: ObjectId) -> Iterable[Step]:
    for request in delistings_of(ctx, finding_id):
        engine = ENGINES.get(request["engine"], request["engine"])
        yield Step(request["requested_at"], DELISTING, outcome="requested",
                   by=request.get("by", ""), detail=engine)  # fmt: skip
        for check in request.get("checks", []):
            yield Step(check["at"], DELISTING_CHECKED,
                       outcome="still_listed" if check["listed"] else DELISTED,
                       by=check.get("provider", ""), detail=engine)  # fmt: skip


def finding_timeline(ctx: Context, finding_id: ObjectId) -> list[Step]:
    """Every step of a finding's enforcement, oldest first; FindingNotFound when there is
    no such finding."""
    finding = ctx.db.findings.find_one({"_id": finding_id})
    if finding is None:
        raise FindingNotFound(f"no finding {finding_id}")
    steps = [
        *_history_steps(finding),
        *_alert_steps(ctx, finding_id),
        *_notice_steps(ctx, finding),
        *_delisting_steps(ctx, finding_id),
    ]
    # Stable: steps recorded at one instant keep the order of the loop (found first).
    return sorted(steps, key=lambda s: s.at)


# -- the funnel ------------------------------------------------------------------------


def funnel(
    ctx: Context,
    by: str = "domain",
    limit: int | None = None,
    catalogue: Catalogue | None = None,
) -> list[FunnelRow]:
    """The enforcement funnel per domain or per work (``by``), most copies found first;
    findings dismissed or licensed are not copies and are left out. ``catalogue``: the
    admin's, kept in step with the store (milliseconds at 100,000 findings); without one,
    every finding is read once."""
    if catalogue is None:
        catalogue = Catalogue(MongoFindings(lambda: ctx.db))
    return catalogue.funnel(by, limit or None)
