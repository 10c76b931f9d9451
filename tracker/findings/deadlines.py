"""A notice's deadline and what became of the copy: the stages a noticed finding goes
through, and the re-check each finding records (``notice_check``).

Recording a notice sets the finding's ``notice_deadline`` (tracker.findings.notices). Until
then the site is *awaiting*; after it, the finding is *overdue* until a re-check
(tracker.scanning.rechecks) fetched the page again: then the copy is *still there* (the finding
stays ``notice_sent``, for escalation) or *removed* (a scan closed it). A re-check that
could not fetch the page counts again after RETRY_UNREACHABLE.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..context import Context
from ..core.store import changed
from .status import NOTICE_SENT, REMOVED, history_entry

#: What a re-check found: the page no longer copies the work, still does, or did not answer.
GONE, STILL_THERE, UNREACHABLE = "removed", "still_there", "unreachable"
OUTCOME_LABELS = {GONE: "Removed", STILL_THERE: "Still there", UNREACHABLE: "Could not be fetched"}
#: A page that did not answer is re-checked again this much later.
RETRY_UNREACHABLE = timedelta(hours=6)

#: Where noticed findings stand, in the order they get there, with their labels.
AWAITING, OVERDUE = "awaiting", "overdue"
STAGE_LABELS = {
    AWAITING: "Awaiting the deadline",
    OVERDUE: "Deadline passed, not re-checked",
    STILL_THERE: "Still there after the deadline",
    GONE: "Removed after a notice",
}
NOTICE_STAGES: tuple[str, ...] = tuple(STAGE_LABELS)


def stage_query(stage: str, at: datetime) -> dict[str, Any]:
    """The findings at ``stage`` of their notice at time ``at``."""
    if stage == AWAITING:
        return {"status": NOTICE_SENT, "notice_deadline": {"$gt": at}}
    if stage == OVERDUE:
        return {
            "status": NOTICE_SENT,
            "notice_deadline": {"$lte": at},
            "notice_check.settled": {"$ne": True},
            "$or": [
                {"notice_check.outcome": {"$ne": UNREACHABLE}},
                {"notice_check.at": {"$lte": at - RETRY_UNREACHABLE}},
            ],
        }
    if stage == STILL_THERE:
        return {
            "status": NOTICE_SENT,
            "notice_check.settled": True,
            "notice_check.outcome": STILL_THERE,
        }
    if stage == GONE:
        return {"status": REMOVED, "notice_deadline": {"$exists": True}}
    raise ValueError(f"unknown notice stage {stage!r}: use one of {', '.join(NOTICE_STAGES)}")


def notice_stages(ctx: Context, at: datetime) -> dict[str, int]:
    """How many findings are at each stage of their notice."""
    return {
        stage: ctx.db.findings.count_documents(stage_query(stage, at)) for stage in NOTICE_STAGES
    }


def record_check(
    ctx: Context, finding: dict[str, Any], outcome: str, at: datetime, by: str, detail: str = ""
) -> str | None:
    """Record a re-check of a noticed finding, returning its outcome: ``GONE`` when the
    scan that came with it closed the finding; None when a reviewer moved it meanwhile
    (their decision stands, nothing is recorded)."""
    if outcome != UNREACHABLE:
        if finding["status"] == REMOVED:
            outcome = GONE
        elif finding["status"] != NOTICE_SENT:
            return None
    check: dict[str, Any] = {
        "at": at,
        "outcome": outcome,
        "by": by,
        # The answer to the notice: a page fetched after its deadline (an earlier look, or
        # one that could not fetch it, leaves the re-check to come).
        "settled": outcome != UNREACHABLE and at >= finding["notice_deadline"],
    }
    if detail:
        check["detail"] = detail[:500]
    update: dict[str, Any] = {"$set": {"notice_check": check}}
    if outcome == STILL_THERE:
        note = "re-checked after the notice: the page still copies this work"
        update["$push"] = {"history": history_entry(NOTICE_SENT, at, by, note)}
    ctx.db.findings.update_one({"_id": finding["_id"]}, changed(update))
    return outcome
