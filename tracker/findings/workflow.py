"""The reviewers' decisions: a finding's status changed, one or many at a time, with its
history (the model: tracker.findings.status)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bson import ObjectId

from ..context import Context
from ..core.batches import batched
from ..core.store import IN_VALUES, changed, update_found
from ..core.times import now
from .dashboard import invalidate_dashboard
from .record import REOPEN_AS
from .status import DISMISSED, LICENSED, STATUSES, TRANSITIONS, history_entry


class WorkflowError(ValueError):
    """A workflow step that is not allowed, with the reason."""


class FindingNotFound(LookupError):
    """No finding has this id."""


#: Why a finding is dismissed: reports and the review queue tell them apart.
DISMISS_REASONS = {
    "false_positive": "False positive",
    "licensed": "Licensed or permitted",
    "quotation": "Quotation or fair use",
    "other": "Other",
}


def _check_reason(status: str, reason: str | None) -> None:
    if reason is None:
        return
    if status != DISMISSED:
        raise WorkflowError("a reason is given only when dismissing a finding")
    if reason not in DISMISS_REASONS:
        raise WorkflowError(
            f"unknown dismiss reason {reason!r}: use one of {', '.join(DISMISS_REASONS)}"
        )


def status_update(
    status: str, by: str, note: str | None, reason: str | None = None
) -> dict[str, Any]:
    """The update that moves a finding to ``status`` and records it in the history."""
    update: dict[str, Any] = {
        "$set": {"status": status, "status_at": now()},
        # A status someone chose: a later scan must not put back the one copytrack closed.
        "$unset": {REOPEN_AS: ""},
        "$push": {"history": history_entry(status, now(), by, note, reason)},
    }
    if reason:
        update["$set"]["dismiss_reason"] = reason
    else:
        update["$unset"]["dismiss_reason"] = ""
    return changed(update)


def sources_of(status: str) -> list[str]:
    """The statuses a reviewer may move a finding to ``status`` from."""
    return [source for source, targets in TRANSITIONS.items() if status in targets]


def _check_target(status: str) -> None:
    if status not in STATUSES:
        raise WorkflowError(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
    if status == LICENSED:
        raise WorkflowError("'licensed' follows from the whitelist: add the domain there instead")


def check_change(status: str, reason: str | None = None) -> None:
    """Raise WorkflowError unless a reviewer may move findings to ``status`` (for ``reason``):
    asked before a change of many findings is put to the reviewer to confirm."""
    _check_target(status)
    _check_reason(status, reason)


def set_status(
    ctx: Context,
    finding_id: ObjectId,
    status: str,
    by: str,
    note: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Move one finding to ``status``; returns it updated.

    Raises FindingNotFound, or WorkflowError naming the allowed next statuses. The
    status is checked in the same update that changes it, so two reviewers racing
    cannot both move the finding.
    """
    _check_target(status)
    _check_reason(status, reason)
    updated = update_found(
        ctx.db.findings,
        {"_id": finding_id, "status": {"$in": sources_of(status)}},
        status_update(status, by, note, reason),
        after=True,
    )
    if updated is None:
        current = ctx.db.findings.find_one({"_id": finding_id}, {"status": 1})
        if current is None:
            raise FindingNotFound(f"no finding {finding_id}")
        allowed = ", ".join(TRANSITIONS[current["status"]]) or "nothing (it is on the whitelist)"
        raise WorkflowError(
            f"a {current['status']!r} finding cannot become {status!r}; it can become {allowed}"
        )
    invalidate_dashboard(ctx)
    return updated


@dataclass(frozen=True)
class BulkResult:
    """How many findings changed, and how many were refused by the workflow (or missing)."""

    changed: int
    refused: int


def bulk_set_status(
    ctx: Context,
    finding_ids: list[ObjectId],
    status: str,
    by: str,
    note: str | None = None,
    reason: str | None = None,
) -> BulkResult:
    """Move many findings to ``status``; those whose status does not allow it stay as they
    are. In updates of IN_VALUES ids: a list's every finding may be 100,000."""
    check_change(status, reason)
    ids = list(dict.fromkeys(finding_ids))
    modified = 0
    for chunk in batched(ids, IN_VALUES):
        result = ctx.db.findings.update_many(
            {"_id": {"$in": chunk}, "status": {"$in": sources_of(status)}},
            status_update(status, by, note, reason),
        )
        modified += result.modified_count
    if modified:
        invalidate_dashboard(ctx)
    return BulkResult(modified, len(ids) - modified)
