"""Installations of many findings, built fast: works registered as usual, pages stored,
and each page's match recorded by `record_first_scans` (the findings of a real scan,
many pages a bulk write), the matches made rather than matched (the matcher has its own tests).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from datetime import UTC, datetime

from bson import ObjectId

from tracker.context import Context
from tracker.core.store import find_in
from tracker.findings import record_first_scans
from tracker.masters.library import Work, add_works
from tracker.matching.matcher import QUOTATION_CHARS, MasterRef, Match

_HANZI = [chr(c) for c in range(0x4E00, 0x4E00 + 3000)]
WORK_CHARS = 600
#: Pages recorded per bulk write (and stored per insert).
BATCH = 1000


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_HANZI) for _ in range(n))


def seed_findings(
    ctx: Context,
    count: int,
    works: int,
    domain_of: Callable[[int], str],
    seed: int = 56,
) -> list[ObjectId]:
    """``count`` pages on the domains ``domain_of(n)`` gives, page ``n`` copying one of
    ``works`` works (copies, not quotation-sized: they are in the reviewer's queue), with
    scores of their own; the findings' ids, page by page."""
    rng = random.Random(seed)
    library = [
        Work(text=_text(rng, WORK_CHARS), external_id=f"many-{i}", title=f"长篇 第{i + 1}回")
        for i in range(works)
    ]
    masters = []
    for result in add_works(ctx, library):
        assert not isinstance(result, ValueError), result
        masters.append(result[0].master_id)
    found: list[ObjectId] = []
    fetched_at = datetime.now(UTC).replace(microsecond=0)
    for start in range(0, count, BATCH):
        pages, matches = [], []
        for n in range(start, min(count, start + BATCH)):
            w = n % works
            cut = rng.randint(QUOTATION_CHARS, WORK_CHARS)
            text = _text(rng, 50) + library[w].text[:cut]
            pages.append({
                "url": f"http://{domain_of(n)}/read/{n}.html",
                "title": f"{library[w].title} 在线阅读 {n}",
                "text": text,
                "content_sha256": hashlib.sha256(text.encode()).hexdigest(),
                "fetched_at": fetched_at,
                "status": 200,
            })  # fmt: skip
            ref = MasterRef(masters[w], library[w].external_id, library[w].title)
            matches.append(Match(ref, score=round(cut / WORK_CHARS, 3), hits=cut // 20,
                                 master_coverage=cut / WORK_CHARS,
                                 suspect_coverage=cut / len(text),
                                 spans=((0, cut, 50, 50 + cut),), copied_chars=cut))  # fmt: skip
        ids = ctx.db.pages.insert_many(pages).inserted_ids
        for page, page_id in zip(pages, ids, strict=True):
            page["_id"] = page_id
        record_first_scans(
            ctx, [(page, [match]) for page, match in zip(pages, matches, strict=True)]
        )
        recorded = find_in(ctx.db.findings, "page_id", ids, {"page_id": 1})
        by_page = {finding["page_id"]: finding["_id"] for finding in recorded}
        found += [by_page[page_id] for page_id in ids]
    return found
