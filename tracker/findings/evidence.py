"""The evidence of one finding, gathered for a report a legal team can file: the work and
the captured page with both hashes, when and where it was captured (and the trusted
time-stamp of the capture, when an authority gave one), the copied passages side by side
with their character-level differences, the review history and the notices.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bson import ObjectId

from ..context import Context
from ..core.times import now
from ..evidence.timestamps import CaptureTimestamp, capture_timestamp
from ..masters.library import master_or_archived
from .captures import page_capture, page_text
from .differences import Piece, differences, tally
from .notices import notices_of
from .passages import Passage, passages
from .workflow import FindingNotFound

#: Characters of passages shown side by side at most; a whole book copying one long work
#: is summarized past this (the full texts stay in the admin and the capture).
MAX_SHOWN_CHARS = 60_000


@dataclass(frozen=True)
class ComparedPassage:
    """A passage of the work and of the page, as runs of same and differing characters."""

    passage: Passage
    pieces: list[Piece]


@dataclass(frozen=True)
class Evidence:
    finding: dict[str, Any]
    master: dict[str, Any]  # with ``deleted_at`` when the work was deleted since
    page: dict[str, Any]  # without its captured bytes (see `capture`)
    passages: list[ComparedPassage]
    passages_left_out: int  # past MAX_SHOWN_CHARS
    tally: dict[str, int]  # characters by kind of difference, over the passages shown
    notices: list[dict[str, Any]]
    generated_at: datetime
    timestamp: CaptureTimestamp  # the capture's trusted time-stamp, or why there is none


def evidence(ctx: Context, finding_id: ObjectId) -> Evidence:
    """Everything a report on the finding shows; raises FindingNotFound."""
    finding = ctx.db.findings.find_one({"_id": finding_id})
    if finding is None:
        raise FindingNotFound(f"no finding {finding_id}")
    master = master_or_archived(ctx, finding["master_id"])
    page = ctx.db.pages.find_one({"_id": finding["page_id"]}, {"raw_zlib": 0}) or {}
    page = {**page, "text": page_text(ctx, page)}
    found = passages(finding, master.get("text", ""), page["text"])
    compared: list[ComparedPassage] = []
    shown = 0
    for passage in found:
        shown += len(passage.master_text) + len(passage.page_text)
        if shown > MAX_SHOWN_CHARS and compared:
            break
        compared.append(
            ComparedPassage(passage, differences(passage.master_text, passage.page_text))
        )
    counts = tally([piece for c in compared for piece in c.pieces])
    return Evidence(
        finding,
        master,
        page,
        compared,
        len(found) - len(compared),
        counts,
        notices_of(ctx, finding_id),
        now(),
        capture_timestamp(page, ctx.settings.tsa_url),
    )


def capture(ctx: Context, page_id: ObjectId) -> bytes | None:
    """The page's captured bytes, exactly as fetched (None when none were stored)."""
    page = ctx.db.pages.find_one({"_id": page_id}, {"raw_zlib": 1, "raw_file": 1})
    return None if page is None else page_capture(ctx, page)
