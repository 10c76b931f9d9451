"""Concurrent `library add` runs of the same texts: each text is stored once (its hash is
claimed by a unique index), the other run reports it as a duplicate, and the index holds
exactly one master's postings per text; and a racer's removal of postings between the two
counts' readings (the library's, then the index's) raises no false alarm of a loss."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

from tests.corpus import texts
from tracker.context import Context
from tracker.core.config import Settings
from tracker.core.store import ensure_indexes
from tracker.masters import generation
from tracker.masters.generation import open_ready
from tracker.masters.library import Work, add_work, add_works
from tracker.scanning.library_edits import delete_works

pytestmark = pytest.mark.slow

TEXTS = texts("zh_news", 60)


def _add_all(env: dict[str, str], prefix: str) -> list[str]:
    """One `library add` run: every text under this run's ids, in small batches."""
    ctx = open_ready(Settings.from_env(env))
    statuses = []
    try:
        for first in range(0, len(TEXTS), 5):
            works = [
                Work(text=text, external_id=f"{prefix}-{first + n}")
                for n, text in enumerate(TEXTS[first : first + 5])
            ]
            statuses += [r[0].status for r in add_works(ctx, works)]
    finally:
        ctx.close()
    return statuses


def test_racing_adds_store_each_text_once(ctx: Context, tracker_env: dict[str, str]) -> None:
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = [pool.submit(_add_all, tracker_env, prefix) for prefix in ("a", "b")]
        statuses = [status for run in runs for status in run.result()]

    stored = list(ctx.db.masters.find({}, {"sha256": 1}))
    assert len(stored) == len({doc["sha256"] for doc in stored}) == len(TEXTS)
    assert statuses.count("added") == len(TEXTS)
    assert statuses.count("duplicate") == len(TEXTS)
    # The losers gave their postings back: the index holds one master per text.
    expected = sum(doc["fingerprints"] for doc in ctx.db.masters.find({}, {"fingerprints": 1}))
    assert ctx.index.stats().postings == expected


def test_a_library_from_before_gets_the_unique_claim(mongo_db, caplog) -> None:
    masters = mongo_db.masters
    masters.create_index([("sha256", 1)])  # as libraries made before had it
    masters.insert_many([{"_id": 1, "external_id": "x", "sha256": "a"}])
    ensure_indexes(mongo_db)
    assert _unique(masters)

    # A library that already holds a text twice keeps working and says what to do.
    masters.drop_index("sha256_1")
    masters.create_index([("sha256", 1)])
    masters.insert_one({"_id": 2, "external_id": "y", "sha256": "a"})
    ensure_indexes(mongo_db)
    assert not _unique(masters)
    assert "copytrack library rm ID" in caplog.text
    masters.delete_one({"_id": 2})
    ensure_indexes(mongo_db)
    assert _unique(masters)


def _unique(collection) -> bool:
    return bool(collection.index_information()["sha256_1"].get("unique"))


def test_a_removal_between_the_two_counts_is_no_loss(
    ctx: Context, tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check reads the library's count; a racer then takes a work out (its discount,
    then its postings); then the check reads the index's count, lower than the library's
    it read: not a loss, since the racer's removal is noted beside the postings."""
    for n, text in enumerate(TEXTS[:3]):
        add_work(ctx, Work(text=text, external_id=f"w{n}"))
    racer = open_ready(Settings.from_env(tracker_env))
    read_library = generation._read_library
    raced: list[str] = []

    def read_then_race(context: Context, fresh: bool = False) -> dict | None:
        library = read_library(context, fresh)
        if fresh and not raced:
            raced.extend(r.external_id for r in delete_works(racer, "w1", by="racer"))
        return library

    monkeypatch.setattr(generation, "_read_library", read_then_race)
    try:
        state = generation.inspect(ctx)
        generation.ensure(ctx)  # raises IndexNotReady on a loss
    finally:
        racer.close()
    assert raced == ["w1"]
    assert state.problem is None and state.settled
    assert state.index_postings == state.library_postings  # read again, after the removal
