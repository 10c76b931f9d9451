"""Findings as CSV, each cell safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from typing import Any

from ..context import Context
from ..core.batches import batched
from ..core.store import find_in
from ..core.times import iso
from .queries import FindingFilter, finding_query, sort_spec
from .status import LABELS

CSV_COLUMNS = (
    ("id", lambda f: str(f["_id"])),
    # As the admin says them ("Notice sent"), not as stored ("notice_sent").
    ("status", lambda f: LABELS.get(f.get("status"), f.get("status"))),
    ("work_id", lambda f: f.get("master_external_id")),
    ("work_title", lambda f: f.get("master_title")),
    ("domain", lambda f: f.get("domain")),
    # host:port: two sites on one host are two sites (the domain column drops the port).
    ("site", lambda f: f.get("site") or f.get("domain")),
    ("url", lambda f: f.get("url")),
    ("campaign", lambda f: f.get("campaign")),
    ("dismiss_reason", lambda f: f.get("dismiss_reason")),
    ("score", lambda f: f.get("score")),
    ("work_coverage", lambda f: f.get("master_coverage")),
    ("copied_chars", lambda f: f.get("copied_chars")),
    ("page_coverage", lambda f: f.get("suspect_coverage")),
    ("hits", lambda f: f.get("hits")),
    ("first_seen", lambda f: iso(f.get("first_seen"))),
    ("last_seen", lambda f: iso(f.get("last_seen"))),
    ("notice_deadline", lambda f: iso(f.get("notice_deadline"))),
    # Everyone a notice about the finding went to, oldest first ("; " between them).
    ("notice_recipients", lambda f: "; ".join(f.get("recipients") or [])),
    # Two hashes, named for what they hash: the captured bytes (the evidence file) and
    # the text extracted from them (what was matched).
    ("page_capture_sha256", lambda f: f.get("capture_sha256")),
    ("page_text_sha256", lambda f: f.get("page_sha256")),
)


# A spreadsheet runs a cell starting with these as a formula (or DDE command).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "|", "%")
# One that splits on semicolons or tabs (as many locales do, whatever the file's commas)
# starts a new cell after them: a formula there runs too.
_SPLIT_FORMULA = re.compile(r"(?<=[;\t])(\s*)(?=[=+\-@])")


def safe_cell(value: Any) -> str:
    """A CSV cell that a spreadsheet shows as text, never evaluates (formula injection),
    however it splits the line."""
    if value is None:
        return ""
    if isinstance(value, bool | int | float):
        return str(value)
    text = _SPLIT_FORMULA.sub(r"\1'", str(value))
    return "'" + text if text.startswith(_FORMULA_START) else text


def findings_csv(ctx: Context, flt: FindingFilter, batch: int = 500) -> Iterator[str]:
    """The filtered findings as CSV text chunks: a BOM (so Excel reads UTF-8), header, rows."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([name for name, _ in CSV_COLUMNS])
    yield "\ufeff" + _drain(buffer)
    # The cursor's batches as big as ours: the admin holds one batch of findings at a time
    # (the driver's default would fetch up to 16 MB of them at once).
    cursor = (
        ctx.db.findings.find(finding_query(ctx, flt), {"history": 0, "spans": 0})
        .sort(sort_spec(flt.sort))
        .batch_size(batch)
    )
    for chunk in batched(cursor, batch):
        page_ids = [f["page_id"] for f in chunk]
        captures = {
            page["_id"]: page.get("raw_sha256")
            for page in find_in(ctx.db.pages, "_id", page_ids, {"raw_sha256": 1})
        }
        recipients: dict[Any, list[str]] = {}
        notices = ctx.db.notices.find(
            {"finding_id": {"$in": [f["_id"] for f in chunk]}}, {"finding_id": 1, "recipient": 1}
        ).sort("sent_at", 1)
        for notice in notices:
            sent_to = recipients.setdefault(notice["finding_id"], [])
            if notice["recipient"] not in sent_to:
                sent_to.append(notice["recipient"])
        for finding in chunk:
            finding["capture_sha256"] = captures.get(finding["page_id"])
            finding["recipients"] = recipients.get(finding["_id"])
            writer.writerow([safe_cell(get(finding)) for _, get in CSV_COLUMNS])
        yield _drain(buffer)


def _drain(buffer: io.StringIO) -> str:
    text = buffer.getvalue()
    buffer.seek(0)
    buffer.truncate()
    return text
