"""Editing and deleting works, and what becomes of their findings.

- New title or author: the work's findings show them at once.
- New text: the work is re-indexed and every page that copies it is scanned again, so its
  findings show passages of the new text; a page that no longer copies the new text has
  its finding closed ``removed`` (with the reason in its history).
- Deleting: the work leaves the index, then the library. Its findings that nobody decided
  on (still ``new``, or only ever changed by copytrack) go with it; those a reviewer
  decided on (confirmed, notice sent, dismissed, …) are records a legal team may need: they
  are kept, marked ``work_deleted``, and the work's document is archived in
  ``deleted_masters`` so their evidence can still be shown. The work is marked removing and
  out of the index before its findings are touched, and a scan records no finding of a work
  so marked or gone (`tracker.findings.record`): a scan racing the removal leaves none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..context import Context
from ..core.store import changed, delete_findings
from ..core.times import now
from ..findings import REMOVED, SYSTEM, invalidate_dashboard
from ..masters.library import (
    ARCHIVE,
    AddResult,
    delete_master,
    find_masters,
    replace_text,
    withdraw_master,
)
from ..masters.master_cache import note_library_edit
from .pages import scan_page


@dataclass(frozen=True)
class EditResult:
    """What an edit changed: the text (its result), the pages scanned again, and how many
    of the work's findings that left open."""

    text: AddResult | None
    rescanned: int = 0
    still_copied: int = 0


def _reviewed(master_id: int) -> dict[str, Any]:
    """The work's findings a person has acted on (an entry in their history not by
    copytrack)."""
    return {"master_id": master_id, "history": {"$elemMatch": {"by": {"$ne": SYSTEM}}}}


def findings_fate(ctx: Context, master_id: int) -> dict[str, int]:
    """What deleting the work would do to its findings: ``deleted`` (nobody decided on them)
    and ``kept`` (a reviewer did)."""
    total = ctx.db.findings.count_documents({"master_id": master_id})
    kept = ctx.db.findings.count_documents(_reviewed(master_id))
    return {"deleted": total - kept, "kept": kept}


def edit_work(
    ctx: Context,
    master_id: int,
    *,
    title: str | None = None,
    author: str | None = None,
    text: str | None = None,
) -> EditResult:
    """Change a work's title, author (given values; "" clears) or text. Raises LookupError
    for an unknown work, ValueError for a text that cannot be a work's (see replace_text)."""
    fields = {
        k: (v.strip() or None) for k, v in (("title", title), ("author", author)) if v is not None
    }
    if ctx.db.masters.find_one({"_id": master_id}, {"_id": 1}) is None:
        raise LookupError(f"no work #{master_id}")
    result = None if text is None else replace_text(ctx, master_id, text)
    if fields:
        ctx.db.masters.update_one({"_id": master_id}, {"$set": {**fields, "updated_at": now()}})
        note_library_edit(ctx)
        if "title" in fields:
            ctx.db.findings.update_many(
                {"master_id": master_id}, changed({"$set": {"master_title": fields["title"]}})
            )
    rescanned = 0
    if result is not None and result.status == "updated":
        pages = ctx.db.findings.distinct("page_id", {"master_id": master_id})
        for page_id in pages:
            scan_page(ctx, page_id, force=True)  # passages of the new text, or closed
        rescanned = len(pages)
    invalidate_dashboard(ctx)
    open_findings = ctx.db.findings.count_documents(
        {"master_id": master_id, "status": {"$ne": REMOVED}}
    )
    return EditResult(result, rescanned, open_findings if rescanned else 0)


@dataclass(frozen=True)
class DeleteResult:
    external_id: str
    findings_deleted: int
    findings_kept: int


def delete_work(ctx: Context, master_id: int, by: str) -> DeleteResult:
    """Take a work out of the library and the index; its undecided findings go, reviewed
    ones stay as records with the work archived. Raises LookupError for an unknown work."""
    master = ctx.db.masters.find_one({"_id": master_id})
    if master is None:
        raise LookupError(f"no work #{master_id}")
    return _delete(ctx, master, by)


def delete_works(ctx: Context, key: str, by: str) -> list[DeleteResult]:
    """`delete_work` for every master a key names (external id, integer id, or work id:
    all chapters of a long work)."""
    return [_delete(ctx, master, by) for master in find_masters(ctx, key)]


def _delete(ctx: Context, master: dict[str, Any], by: str) -> DeleteResult:
    master_id, at = master["_id"], now()
    # Out of the index, marked removing: no scan records a finding of it from now on.
    withdraw_master(ctx, master)
    # Archived before it is deleted: a kill midway leaves the work in both places, never in
    # neither (removing it again finishes the job).
    ctx.db[ARCHIVE].replace_one(
        {"_id": master_id},
        {**master, "deleted_at": at, "deleted_by": by},
        upsert=True,
    )
    kept = ctx.db.findings.update_many(
        _reviewed(master_id), changed({"$set": {"work_deleted": {"at": at, "by": by}}})
    ).modified_count
    deleted = delete_findings(ctx.db, {"master_id": master_id, "work_deleted": {"$exists": False}})
    delete_master(ctx, master_id)
    if not kept:
        ctx.db[ARCHIVE].delete_one({"_id": master_id})  # no finding needs it
    invalidate_dashboard(ctx)
    return DeleteResult(master["external_id"], deleted, kept)
