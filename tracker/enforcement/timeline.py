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

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from statistics import median
from typing import Any

from bson import ObjectId

from ..context import Context
from ..core.times import now as utc_now
from ..findings.deadlines import OUTCOME_LABELS, STILL_THERE, UNREACHABLE
from ..findings.export import safe_cell
from ..findings.status import (
    CONFIRMED,
    DISMISSED,
    LICENSED,
    NEW,
    NOT_COPIES,
    NOTICE_SENT,
    REMOVED,
)
from ..findings.workflow import FindingNotFound
from .delisting import DELISTED, ENGINES, delistings_of
from .deliveries import DELIVERED, deliveries_of

__all__ = ["FUNNEL_COLUMNS", "STEP_LABELS", "FunnelRow", "Step", "finding_timeline", "funnel",
           "funnel_csv"]  # fmt: skip

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

BY = ("domain", "work")
FUNNEL_COLUMNS = ("found", "confirmed", "notified", "removed", "median_days_to_removal",
                  "still_there")  # fmt: skip
_FUNNEL_FIELDS = {
    "domain": 1, "master_external_id": 1, "master_title": 1, "status": 1, "history": 1,
    "notice_check": 1, "notice_deadline": 1,
}  # fmt: skip


@dataclass(frozen=True)
class FunnelRow:
    """One domain's or work's funnel: each stage a subset of the one before."""

    key: str
    title: str
    found: int
    confirmed: int
    notified: int
    removed: int
    median_days_to_removal: float | None
    still_there: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Tally:
    title: str = ""
    found: int = 0
    confirmed: int = 0
    notified: int = 0
    removed: int = 0
    still_there: int = 0
    days: list[float] = field(default_factory=list)

    def row(self, key: str) -> FunnelRow:
        days = round(median(self.days), 1) if self.days else None
        return FunnelRow(key, self.title, self.found, self.confirmed, self.notified,
                         self.removed, days, self.still_there)  # fmt: skip


def _first(history: list[dict[str, Any]], status: str) -> datetime | None:
    return next((h["at"] for h in history if h["status"] == status), None)


def _count(tally: _Tally, finding: dict[str, Any]) -> None:
    history, status = finding.get("history", []), finding["status"]
    tally.found += 1
    noticed = _first(history, NOTICE_SENT)
    # A copy removed counts as confirmed when a reviewer had confirmed it before it went.
    was_confirmed = noticed is not None or _first(history, CONFIRMED) is not None
    if not (status in (CONFIRMED, NOTICE_SENT) or (status == REMOVED and was_confirmed)):
        return
    tally.confirmed += 1
    if noticed is None:
        return
    tally.notified += 1
    if status == REMOVED:
        tally.removed += 1
        removed_at = history[-1]["at"] if history[-1]["status"] == REMOVED else None
        if removed_at is not None:
            tally.days.append(max((removed_at - noticed).total_seconds(), 0) / 86400)
    check = finding.get("notice_check") or {}
    if status == NOTICE_SENT and check.get("settled") and (check.get("outcome") == STILL_THERE):
        tally.still_there += 1


def funnel(ctx: Context, by: str = "domain", limit: int | None = None) -> list[FunnelRow]:
    """The enforcement funnel per domain or per work (``by``), most copies found first;
    findings dismissed or licensed are not copies and are left out."""
    if by not in BY:
        raise ValueError(f"a funnel is by {' or '.join(BY)}, not {by!r}")
    tallies: dict[str, _Tally] = {}
    query = {"status": {"$nin": list(NOT_COPIES)}}
    # A thousand findings a batch: the driver's default fetches up to 16 MB of them at once
    # (with their histories), which took the admin's memory up by 140 MB at 100,000.
    for finding in ctx.db.findings.find(query, _FUNNEL_FIELDS).batch_size(1000):
        key = finding["domain"] if by == "domain" else finding["master_external_id"]
        tally = tallies.setdefault(key, _Tally(
            title="" if by == "domain" else finding.get("master_title") or ""
        ))  # fmt: skip
        _count(tally, finding)
    rows = [t.row(key) for key, t in tallies.items()]
    rows.sort(key=lambda r: (-r.found, r.key))
    return rows[:limit] if limit else rows


def cached_funnel(ctx: Context, by: str = "domain", max_age_s: int = 60) -> list[FunnelRow]:
    """``funnel`` aggregated at most once a minute (the dashboard's panel reads it)."""
    key = f"{ctx.keys.dashboard}:funnel:{by}"
    cached = ctx.redis.get(key)
    if cached is not None:
        return [FunnelRow(**row) for row in json.loads(cached)]
    rows = funnel(ctx, by)
    ctx.redis.set(key, json.dumps([r.as_dict() for r in rows]), ex=max_age_s)
    return rows


def funnel_totals(rows: list[FunnelRow]) -> dict[str, Any]:
    """The funnel of every row together (the median of the rows' medians is no median:
    it is left to the rows)."""
    return {name: sum(getattr(r, name) for r in rows)
            for name in FUNNEL_COLUMNS if name != "median_days_to_removal"}  # fmt: skip


def funnel_csv(rows: list[FunnelRow], by: str) -> str:
    """The funnel as CSV, one row a domain or work."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([by, "title", *FUNNEL_COLUMNS, "at"])
    at = f"{utc_now():%Y-%m-%dT%H:%M:%SZ}"
    for row in rows:
        values = [row.key, row.title, *(getattr(row, name) for name in FUNNEL_COLUMNS), at]
        writer.writerow([safe_cell(v) for v in values])
    return out.getvalue()
