"""Concurrent `library add` runs of the same texts: each text is stored once (its hash is
claimed by a unique index), the other run reports it as a duplicate, and the index holds
exactly one master's postings per text; and a racer's removal of postings between the two
counts' readings (the library's, then the index's) raises no false alarm of a loss,
whether it is a removal or a racing add giving its postings back."""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest

from tests.adding import add_texts
from tests.corpus import texts
from tracker.context import Context, open_context
from tracker.core.config import Settings
from tracker.core.store import ensure_indexes
from tracker.masters import generation, library
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
    add_texts(ctx, TEXTS[:3], "w")
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


def test_a_racing_add_giving_its_postings_back_between_the_two_counts_is_no_loss(
    ctx: Context, tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An add indexes a text and counts its postings, another add stores the same text
    first, so the first gives its postings back (discount, then removal) exactly between
    the check's reading of the library's count and the index's. Read once, the index's
    count is below the library's ("Redis lost recent writes"): the check sees the
    give-back noted beside the postings and reads both counts again."""
    add_texts(ctx, TEXTS[:2], "w")
    settings = Settings.from_env(tracker_env)
    racer, checker = open_context(settings), open_context(settings)
    indexed, stored, counted, read, given_back = (threading.Event() for _ in range(5))
    insert_documents, removing_postings = library._insert_documents, library.removing_postings
    read_library = generation._read_library

    def insert_once_the_text_is_taken(context: Context, *args: object) -> set[int]:
        if context is racer:  # its postings are in the index, its document not yet
            indexed.set()
            assert stored.wait(30)
        return insert_documents(context, *args)

    @contextlib.contextmanager
    def give_back_once_read(context: Context, count: int) -> Iterator[None]:
        if context is racer:  # counted, then lost the text: about to give its postings back
            counted.set()
            assert read.wait(30)
        with removing_postings(context, count):
            yield
        if context is racer:
            given_back.set()

    def read_then_wait(context: Context, fresh: bool = False) -> dict | None:
        found = read_library(context, fresh)
        if context is checker and fresh and not read.is_set():
            read.set()  # the library's count, the racer's postings in it, is read
            assert given_back.wait(30)
        return found

    monkeypatch.setattr(library, "_insert_documents", insert_once_the_text_is_taken)
    monkeypatch.setattr(library, "removing_postings", give_back_once_read)
    monkeypatch.setattr(generation, "_read_library", read_then_wait)
    with ThreadPoolExecutor(1) as pool:
        try:
            racing = pool.submit(add_works, racer, [Work(text=TEXTS[2], external_id="late")])
            assert indexed.wait(30)
            [first] = add_work(ctx, Work(text=TEXTS[2], external_id="first"))
            stored.set()
            assert counted.wait(30)
            state = generation.inspect(checker)  # the give-back runs inside its reading
            [[late]] = racing.result(30)
        finally:
            stored.set()  # a failed step releases the racer
            read.set()
            racer.close()
            checker.close()
    assert given_back.is_set() and (late.status, late.master_id) == ("duplicate", first.master_id)
    assert state.problem is None and state.settled, state.problem
    assert state.index_postings == state.library_postings == ctx.index.stats().postings
    generation.ensure(ctx)  # raises IndexNotReady on a loss
