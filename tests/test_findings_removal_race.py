"""A first crawl's scans recorded at once (`record_first_scans`) while a work is removed:
a removal between the scan's look at the library and its write leaves no finding of the
removed work, and the findings of the other works are kept; on real servers."""

from __future__ import annotations

from typing import Any

from tests.corpus import texts
from tracker.findings import record, record_first_scans
from tracker.masters.library import Work, add_work
from tracker.matching.matcher import MasterRef, Match
from tracker.scanning.library_edits import delete_work
from tracker.scanning.pages import PageInput, store_page

ZH = texts("zh_news", 8)


def _match(master_id: int, external_id: str) -> Match:
    return Match(MasterRef(master_id, external_id, external_id), 0.9, 7, 0.8, 0.5,
                 ((0, 300, 10, 310),), copied_chars=300)  # fmt: skip


def test_a_work_removed_while_first_scans_are_recorded_leaves_no_finding(ctx, monkeypatch):
    (gone,) = add_work(ctx, Work(text=ZH[3], external_id="gone", title="gone"))
    (kept,) = add_work(ctx, Work(text=ZH[4], external_id="kept", title="kept"))
    pages = []
    for i in range(3):
        page_id, _ = store_page(ctx, PageInput(url=f"http://p.example/{i}", text=ZH[3], title="t"))
        pages.append(ctx.db.pages.find_one({"_id": page_id}))
    real_find_in = record.find_in
    removed = []

    def look_then_remove(collection: Any, *args: Any, **kwargs: Any) -> Any:
        found = list(real_find_in(collection, *args, **kwargs))
        if collection.name == "masters" and not removed:
            # The removal runs between the look at the library and the insert.
            removed.append(delete_work(ctx, gone.master_id, "ana"))
        return iter(found)

    monkeypatch.setattr(record, "find_in", look_then_remove)
    scans = [
        (pages[0], [_match(gone.master_id, "gone"), _match(kept.master_id, "kept")]),
        (pages[1], [_match(gone.master_id, "gone")]),
        (pages[2], [_match(kept.master_id, "kept")]),
    ]
    new = record_first_scans(ctx, scans)

    assert removed and ctx.db.masters.find_one({"_id": gone.master_id}) is None
    assert ctx.db.findings.count_documents({"master_id": gone.master_id}) == 0
    kept_pages = {f["page_id"] for f in ctx.db.findings.find({"master_id": kept.master_id})}
    assert kept_pages == {pages[0]["_id"], pages[2]["_id"]}
    assert new == 2  # only the findings that stay are new
