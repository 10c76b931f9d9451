"""Postings Redis acknowledged but never wrote to disk (nothing printed as added
is lost): `library add` and the admin store new works, and mark updated works indexed, only
once the index has their postings on disk, so a disk that stops taking writes leaves new
works unregistered and updated ones NOT INDEXED, scans allowed, and the next add finishes
the job, instead of works marked indexed without postings and every scan refused until
a reindex."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import pytest

from tests.admin_seed import client, login, seed
from tests.corpus import texts
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters import durability, library
from tracker.masters.generation import inspect, open_ready
from tracker.masters.library import Work, add_batches, prepare_works
from tracker.matching.matcher import match_text

TEXTS = texts("zh_news", 6)
FIRST, SECOND = TEXTS[:3], TEXTS[3:]
_SAY = "free space and run the command again"


@pytest.fixture
def own_ctx(own: Settings) -> Iterator[Context]:
    context = open_ready(own)
    yield context
    context.close()


def _add(ctx: Context, prefix: str, works: list[str]) -> list[str]:
    batch = prepare_works(
        ctx, [Work(text=t, external_id=f"{prefix}{n}") for n, t in enumerate(works)]
    )
    return [r.status for _, results in add_batches(ctx, [("batch", batch)]) for (r,) in results]


@contextlib.contextmanager
def _disk_not_written(ctx: Context, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Redis keeps taking writes but no longer writes its append-only file to disk, as with
    a full disk; the barrier waits half a second instead of a minute."""
    monkeypatch.setattr(
        library, "wait_index_durable", functools.partial(durability.wait_index_durable, timeout=0.5)
    )
    ctx.redis.config_set("appendfsync", "no")
    try:
        yield
    finally:
        ctx.redis.config_set("appendfsync", "everysec")  # the disk takes writes again


def test_works_whose_postings_are_not_on_disk_are_not_stored_and_are_added_again(
    own_ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _add(own_ctx, "first", FIRST) == ["added"] * 3
    counted = inspect(own_ctx).library_postings
    with _disk_not_written(own_ctx, monkeypatch), pytest.raises(durability.NotDurable, match=_SAY):
        _add(own_ctx, "second", SECOND)
    assert own_ctx.db.masters.count_documents({"external_id": {"$regex": "^second"}}) == 0
    state = inspect(own_ctx)
    assert state.problem is None and state.library_postings == counted  # scans go on

    assert _add(own_ctx, "second", SECOND) == ["added"] * 3
    assert inspect(own_ctx).problem is None
    for n, text in enumerate(SECOND):
        assert [m.master.external_id for m in match_text(own_ctx, text)] == [f"second{n}"]


def test_an_update_whose_postings_are_not_on_disk_is_left_unindexed_and_finished_again(
    own_ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = FIRST[0], SECOND[0]
    assert _add(own_ctx, "story", [old]) == ["added"]
    with _disk_not_written(own_ctx, monkeypatch), pytest.raises(durability.NotDurable, match=_SAY):
        _add(own_ctx, "story", [new])
    # The old text's removal is not on disk: the new text is not stored, and the work is
    # shown NOT INDEXED, matched neither by the old text nor by the new, and scans go on
    # (the old text's postings were discounted).
    stored = own_ctx.db.masters.find_one({"external_id": "story0"})
    assert (stored["state"], stored["text"]) == ("indexing", old)
    state = inspect(own_ctx)
    assert state.problem is None and state.library_postings == 0
    assert match_text(own_ctx, old) == [] and match_text(own_ctx, new) == []

    assert _add(own_ctx, "story", [new]) == ["updated"]
    assert own_ctx.db.masters.find_one({"external_id": "story0"})["state"] == "indexed"
    assert inspect(own_ctx).problem is None
    assert [m.master.external_id for m in match_text(own_ctx, new)] == ["story0"]


def test_the_admin_refuses_an_upload_whose_postings_are_not_on_disk(
    own_ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(own_ctx)
    web = client(own_ctx)
    token = login(web, "rui")
    form = {"csrf_token": token, "text": SECOND[0], "title": "上传"}
    with _disk_not_written(own_ctx, monkeypatch):
        refused = web.post("/works/new", data=form)
    assert refused.status_code == 503 and _SAY in refused.text
    assert own_ctx.db.masters.count_documents({"title": "上传"}) == 0
    assert inspect(own_ctx).problem is None

    stored = web.post("/works/new", data=form)  # the disk takes writes again
    assert stored.status_code == 200 and own_ctx.db.masters.count_documents({"title": "上传"}) == 1
