"""Concurrent `library add` runs of the same texts: each text is stored once (its hash is
claimed by a unique index), the other run reports it as a duplicate, and the index holds
exactly one master's postings per text."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pytest

from tests.corpus import texts
from tracker.config import Settings
from tracker.context import Context, open_context
from tracker.library import Work, add_works
from tracker.store import ensure_indexes

pytestmark = pytest.mark.slow

TEXTS = texts("zh_news", 60)


def _add_all(env: dict[str, str], prefix: str) -> list[str]:
    """One `library add` run: every text under this run's ids, in small batches."""
    ctx = open_context(Settings.from_env(env))
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
