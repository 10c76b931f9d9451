"""MongoDB helpers of tracker.core.store, and pages stored again, on the embedded SecantusDB."""

from __future__ import annotations

from typing import Any

import pytest
from bson import ObjectId
from pymongo.collection import Collection
from pymongo.database import Database

from tracker.campaigns import pending_scans
from tracker.context import Context
from tracker.core.store import all_of, update_found
from tracker.scanning.pages import PageInput, scan_page, store_page


def test_update_found_returns_the_document_before_or_after_and_applies_the_update(
    mongo_db: Database[Any],
) -> None:
    works = mongo_db.works
    works.insert_many([{"_id": 1, "state": "ready", "n": 0}, {"_id": 2, "state": "ready", "n": 0}])

    before = update_found(works, {"_id": 1, "state": "ready"}, {"$inc": {"n": 1}}, {"n": 1})
    after = update_found(works, {"_id": 1}, {"$set": {"state": "gone"}}, after=True)

    assert before == {"_id": 1, "n": 0}
    assert after == {"_id": 1, "state": "gone", "n": 1}
    assert update_found(works, {"_id": 1, "state": "ready"}, {"$inc": {"n": 1}}) is None
    assert works.find_one({"_id": 1}) == {"_id": 1, "state": "gone", "n": 1}
    assert works.find_one({"_id": 2}) == {"_id": 2, "state": "ready", "n": 0}  # untouched


class _RacedOnce:
    """The collection, with another writer's update landing right after the first read."""

    def __init__(self, collection: Collection[Any], query: dict, update: dict) -> None:
        self._collection, self._race = collection, (query, update)
        self.name = collection.name

    def find_one(self, *args: Any, **kwargs: Any) -> Any:
        found = self._collection.find_one(*args, **kwargs)
        if self._race is not None:
            self._collection.update_one(*self._race)
            self._race = None
        return found

    def update_one(self, *args: Any, **kwargs: Any) -> Any:
        return self._collection.update_one(*args, **kwargs)


def test_update_found_does_not_update_a_document_that_changed_after_it_was_read(
    mongo_db: Database[Any],
) -> None:
    findings = mongo_db.findings
    findings.insert_one({"_id": 1, "status": "new", "by": None})
    # Another reviewer dismisses the finding between the read and the update.
    raced = _RacedOnce(findings, {"_id": 1}, {"$set": {"status": "dismissed", "by": "ann"}})

    moved = update_found(
        raced,  # type: ignore[arg-type]
        {"_id": 1, "status": {"$in": ["new"]}},
        {"$set": {"status": "confirmed", "by": "bob"}},
    )

    assert moved is None  # read again: it is no "new" finding any more
    assert findings.find_one({"_id": 1}) == {"_id": 1, "status": "dismissed", "by": "ann"}


def test_update_found_reads_again_when_a_field_it_returns_changed(mongo_db: Database[Any]) -> None:
    pages = mongo_db.pages
    pages.insert_one({"_id": 1, "url": "u", "sha": "a"})
    raced = _RacedOnce(pages, {"_id": 1}, {"$set": {"sha": "b"}})

    before = update_found(raced, {"url": "u"}, {"$set": {"sha": "c"}}, {"sha": 1})  # type: ignore[arg-type]

    assert before == {"_id": 1, "sha": "b"}  # the text it replaced, not the one first read
    assert pages.find_one({"_id": 1}) == {"_id": 1, "url": "u", "sha": "c"}


class _RacedAlways(_RacedOnce):
    """Another writer changing the document after every read."""

    def find_one(self, *args: Any, **kwargs: Any) -> Any:
        found = self._collection.find_one(*args, **kwargs)
        self._collection.update_one({"_id": 1}, {"$inc": {"sha": 1}})
        return found


def test_update_found_gives_up_with_a_clear_error_on_a_document_that_never_stops_changing(
    mongo_db: Database[Any],
) -> None:
    mongo_db.pages.insert_one({"_id": 1, "url": "u", "sha": 0})
    raced = _RacedAlways(mongo_db.pages, {}, {})

    with pytest.raises(RuntimeError, match=r"pages: the document matching .*changed under"):
        update_found(raced, {"url": "u"}, {"$set": {"x": 1}}, {"sha": 1})  # type: ignore[arg-type]
    assert "x" not in mongo_db.pages.find_one({"_id": 1})


def test_all_of_finds_what_and_finds(mongo_db: Database[Any]) -> None:
    findings = mongo_db.findings
    findings.insert_many(
        {"_id": i, "status": ("new", "confirmed")[i % 2], "domain": f"s{i % 3}.example", "n": i}
        for i in range(12)
    )
    clause_sets = [
        [{"status": "new"}, {"domain": "s1.example"}],
        [{"status": {"$in": ["new", "confirmed"]}}, {"status": "confirmed"}, {"n": {"$gte": 5}}],
        [{"$or": [{"n": 1}, {"n": 2}]}, {"$or": [{"n": 2}, {"n": 3}]}],
        [{"$and": [{"n": {"$lt": 4}}]}, {"status": "new"}],
    ]
    for clauses in clause_sets:
        expected = sorted(d["_id"] for d in findings.find({"$and": clauses}))
        assert sorted(d["_id"] for d in findings.find(all_of(clauses))) == expected, clauses
    assert all_of([{"status": "new"}, {"domain": "s1.example"}]) == {
        "status": "new",
        "domain": "s1.example",
    }
    assert all_of([]) == {}


def test_a_page_stored_again_keeps_its_id_and_first_fetch_and_says_whether_to_scan_it(
    ctx: Context,
) -> None:
    url = "https://copies.example/a"
    page_id, due = store_page(ctx, PageInput(url, "原文一", raw=b"<p>1</p>", skip_reason="x"))
    first = ctx.db.pages.find_one({"_id": page_id})
    scan_page(ctx, page_id)

    again_id, again_due = store_page(ctx, PageInput(url, "原文一", raw=b"<p>1 </p>"))
    edited_id, edited_due = store_page(ctx, PageInput(url, "原文二", raw=b"<p>2</p>"))

    stored = ctx.db.pages.find_one({"_id": page_id})
    assert due and not again_due and edited_due
    assert again_id == edited_id == page_id
    assert ctx.db.pages.count_documents({"url": url}) == 1
    assert stored["first_fetched_at"] == first["first_fetched_at"]
    assert stored["text"] == "原文二" and "skip_reason" not in stored


def test_a_run_waits_for_the_pages_it_stored_until_they_are_scanned(ctx: Context) -> None:
    first_run, second_run = ObjectId(), ObjectId()
    scanned, _ = store_page(ctx, PageInput("https://c.example/1", "甲文", run_id=first_run))
    unscanned, _ = store_page(ctx, PageInput("https://c.example/2", "乙文", run_id=first_run))
    scan_page(ctx, scanned)
    assert pending_scans(ctx, first_run) == [unscanned]

    # The first run died; the next one stores both again, unchanged: the page never
    # scanned is still to be scanned (queued), now with the second run.
    again = [store_page(ctx, PageInput(f"https://c.example/{i}", text, run_id=second_run))
             for i, text in ((1, "甲文"), (2, "乙文"))]  # fmt: skip
    assert again == [(scanned, False), (unscanned, True)]
    assert pending_scans(ctx, first_run) == []
    assert pending_scans(ctx, second_run) == [unscanned]

    # Stored once more with a new text, then back to the text it was scanned with: the
    # scan finds nothing new to do, and the run is not left waiting for it.
    store_page(ctx, PageInput("https://c.example/1", "甲文改", run_id=second_run))
    store_page(ctx, PageInput("https://c.example/1", "甲文", run_id=second_run))
    assert sorted(pending_scans(ctx, second_run)) == sorted([scanned, unscanned])
    assert not scan_page(ctx, scanned).scanned
    scan_page(ctx, unscanned)
    assert pending_scans(ctx, second_run) == []
