"""The master library on real servers: add, idempotence, updates, removal, reindex."""

from __future__ import annotations

import io
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from xml.sax.saxutils import escape

import pymongo
import pytest

from fingerprinter import FingerprintParams
from tests.adding import add_texts
from tests.corpus import texts
from tests.test_books import _epub
from tracker.core import store
from tracker.core.config import Settings
from tracker.index import IndexVersionMismatch
from tracker.masters import library
from tracker.masters.generation import open_ready
from tracker.masters.library import (
    CHAPTER_CHARS,
    MAX_MASTER_CHARS,
    Work,
    add_work,
    add_works,
    reindex,
)
from tracker.masters.loaders import load_works
from tracker.matching.matcher import match_text
from tracker.scanning.library_edits import delete_works

ZH = texts("zh_news", 40)
NOVEL = texts("zh_novel", 80)


def found(ctx, text: str) -> list[str]:
    return [m.master.external_id for m in match_text(ctx, text)]


def test_added_works_are_found_and_listed(ctx):
    results = [
        add_work(ctx, Work(text=t, external_id=f"news-{i}", title=f"t{i}"))[0]
        for i, t in enumerate(ZH[:10])
    ]
    assert [r.status for r in results] == ["added"] * 10
    assert len({r.master_id for r in results}) == 10
    assert found(ctx, ZH[3]) == ["news-3"]
    master = ctx.db.masters.find_one({"external_id": "news-3"})
    assert master["sha256"] and master["params_version"] == ctx.params.version
    assert master["state"] == "indexed" and master["title"] == "t3"


def test_adding_the_same_text_again_changes_nothing(ctx):
    first = add_work(ctx, Work(text=ZH[0], external_id="a"))[0]
    postings = ctx.index.stats().postings
    again = add_work(ctx, Work(text=ZH[0], external_id="a"))[0]
    twin = add_work(ctx, Work(text=ZH[0], external_id="b"))[0]
    assert again.status == "unchanged" and again.master_id == first.master_id
    assert twin.status == "duplicate" and "a" in twin.detail
    assert ctx.index.stats().postings == postings
    assert ctx.db.masters.count_documents({}) == 1


def test_a_batch_readded_finds_every_work_stored_however_its_lookups_are_cut(ctx, monkeypatch):
    # The stored works of a batch are looked up IN_VALUES ids or hashes at a time, more
    # while a lookup finds none: here the new works first, then the stored ones.
    monkeypatch.setattr(store, "IN_VALUES", 4)
    monkeypatch.setattr(store, "IN_VALUES_NONE_FOUND", 16)
    works = [Work(text, f"n{i}") for i, text in enumerate(ZH[:15])]
    new = [Work(text, f"new{i}") for i, text in enumerate(ZH[21:27])]
    first = add_works(ctx, works)
    again = add_works(ctx, [*new, *works, Work(ZH[14], "twin"), Work(ZH[20], "n7")])
    assert [r.status for (r,) in first] == ["added"] * 15
    assert [r.status for (r,) in again] == (
        ["added"] * 6 + ["unchanged"] * 15 + ["duplicate", "updated"]
    )
    assert [r.master_id for (r,) in again][6:21] == [r.master_id for (r,) in first]
    assert ctx.db.masters.count_documents({}) == 21


def test_new_text_under_an_existing_id_replaces_the_old_one(ctx):
    add_work(ctx, Work(text=ZH[0], external_id="a"))
    result = add_work(ctx, Work(text=ZH[1], external_id="a"))[0]
    assert result.status == "updated"
    assert found(ctx, ZH[1]) == ["a"]
    assert found(ctx, ZH[0]) == []


def test_batches_added_in_a_stream_give_what_adding_them_one_by_one_gives(ctx, monkeypatch):
    """`add_batches` settles a batch while the postings of the one before are written and
    the documents of the one before that are inserted: each batch's results come once its
    documents are stored, and a batch naming a work of a batch under way (its id or its
    text, one or two batches back) sees it, as if added alone."""
    insert_many = pymongo.collection.Collection.insert_many
    add_many = type(ctx.index).add_many

    def slow_insert(collection, *args, **kwargs):
        time.sleep(0.3)  # the next batches are started meanwhile
        return insert_many(collection, *args, **kwargs)

    def slow_add(index, *args, **kwargs):
        time.sleep(0.3)
        return add_many(index, *args, **kwargs)

    monkeypatch.setattr(pymongo.collection.Collection, "insert_many", slow_insert)
    monkeypatch.setattr(type(ctx.index), "add_many", slow_add)
    batches = {
        "first": [Work(ZH[0], "a"), Work(ZH[1], "b"), Work(ZH[2], "c")],
        "second": [Work(ZH[3], "d"), Work(ZH[4], "e")],
        "third": [Work(ZH[7], "g"), Work(ZH[9], "i")],
        "fourth": [Work(ZH[6], "d"), Work(ZH[4], "f"), Work(ZH[8], "h")],  # second's
        "fifth": [Work(ZH[8], "j"), Work(ZH[10], "i"), Work(ZH[0], "a")],  # fourth's, ...
    }
    statuses = {}
    stream = ((tag, library.prepare_works(ctx, works)) for tag, works in batches.items())
    for tag, results in library.add_batches(ctx, stream):
        statuses[tag] = [r.status for (r,) in results]
        ids = [r.master_id for (r,) in results]
        assert ctx.db.masters.count_documents({"_id": {"$in": ids}}) == len(set(ids)), tag
    assert statuses == {
        "first": ["added"] * 3,
        "second": ["added"] * 2,
        "third": ["added"] * 2,
        "fourth": ["updated", "duplicate", "added"],
        "fifth": ["duplicate", "updated", "unchanged"],
    }
    assert found(ctx, ZH[6]) == ["d"] and found(ctx, ZH[3]) == []
    assert found(ctx, ZH[4]) == ["e"] and found(ctx, ZH[8]) == ["h"]
    assert found(ctx, ZH[10]) == ["i"] and found(ctx, ZH[9]) == []
    assert ctx.db.masters.count_documents({}) == 8
    # No work was indexed twice (a batch added a work of one under way as new).
    stored = sum(m["fingerprints"] for m in ctx.db.masters.find({}, {"fingerprints": 1}))
    assert ctx.index.stats().postings == stored


def test_removing_a_work_removes_its_postings(ctx):
    add_work(ctx, Work(text=ZH[0], external_id="keep"))
    postings = ctx.index.stats().postings
    add_work(ctx, Work(text=ZH[1], external_id="drop"))
    assert [r.external_id for r in delete_works(ctx, "drop", "rui")] == ["drop"]
    assert ctx.index.stats().postings == postings
    assert found(ctx, ZH[1]) == []
    assert found(ctx, ZH[0]) == ["keep"]
    assert delete_works(ctx, "drop", "rui") == []


def test_works_are_taken_in_turn_round_the_library_each_once(ctx):
    ids = [add_work(ctx, Work(text=t, external_id=f"n{i}"))[0].master_id
           for i, t in enumerate(ZH[:30])]  # fmt: skip
    delete_works(ctx, "n12", "rui")
    kept = [i for i in ids if i != ids[12]]

    def taken(after: int, count: int) -> list[int]:
        return [m["_id"] for m in library.masters_after(ctx, after, count, {"_id": 1})]

    assert taken(ids[10], 3) == [ids[11], ids[13], ids[14]]  # a removed work is skipped
    assert taken(ids[27], 5) == [ids[28], ids[29], ids[0], ids[1], ids[2]]  # round to the start
    assert taken(ids[20], 100) == kept[20:] + kept[:20]  # the whole library, each once
    assert taken(0, 40) == kept


def _size_seen_by_another_process(tracker_env: dict[str, str]) -> int:
    other = open_ready(Settings.from_env(tracker_env))
    try:
        return library.library_size(other)
    finally:
        other.close()


def test_the_library_size_is_counted_once_for_every_process(ctx, tracker_env, monkeypatch):
    """The matcher's threshold scales with the library's size: one process counts it and
    the others read the count from Redis (the embedded MongoDB counts by reading the whole
    collection); adding or removing a work keeps the count without counting again."""
    add_texts(ctx, ZH[:5], "w")
    assert library.library_size(ctx) == 5
    counted = []
    count = pymongo.collection.Collection.estimated_document_count

    def counting(collection, *args, **kwargs):
        counted.append(collection.name)
        return count(collection, *args, **kwargs)

    monkeypatch.setattr(pymongo.collection.Collection, "estimated_document_count", counting)
    size_seen_by_another_process = partial(_size_seen_by_another_process, tracker_env)
    assert size_seen_by_another_process() == 5 and counted == []
    add_work(ctx, Work(text=ZH[5], external_id="w5"))
    add_texts(ctx, [ZH[5], ZH[6], ZH[7]], "v")  # one already in the library
    assert size_seen_by_another_process() == 8 and counted == []
    delete_works(ctx, "w0", "rui")
    assert size_seen_by_another_process() == 7 and counted == []
    # Once lost (Redis restarted empty), counted again by the next reader.
    ctx.redis.delete(ctx.keys.library_size)
    assert size_seen_by_another_process() == 7 and counted == ["masters"]


def test_a_work_added_while_the_library_is_counted_is_counted(ctx, tracker_env, monkeypatch):
    """A work stored after a process read its count of the library, and before it shared
    the count: the add found no shared count to keep, and the count shared lacks the work.
    The next reader counts again rather than read it short for LIBRARY_RECOUNT_SECONDS."""
    add_texts(ctx, ZH[:5], "w")
    ctx.redis.delete(ctx.keys.library_size)  # as it is every LIBRARY_RECOUNT_SECONDS
    count = pymongo.collection.Collection.estimated_document_count

    def counted_before_an_add(collection, *args, **kwargs):
        counted = count(collection, *args, **kwargs)
        monkeypatch.setattr(pymongo.collection.Collection, "estimated_document_count", count)
        add_work(ctx, Work(text=ZH[5], external_id="w5"))  # another process's
        return counted

    monkeypatch.setattr(
        pymongo.collection.Collection, "estimated_document_count", counted_before_an_add
    )
    assert library.library_size(ctx) == 5
    assert _size_seen_by_another_process(tracker_env) == 6


def test_a_work_counted_before_its_add_keeps_the_count_is_counted_once(
    ctx, tracker_env, monkeypatch
):
    """A process counts the library between an add storing its works and keeping the
    shared count: the count holds them already, and adding them to it again would leave
    it too high for LIBRARY_RECOUNT_SECONDS."""
    add_texts(ctx, ZH[:5], "w")
    ctx.redis.delete(ctx.keys.library_size)
    insert = pymongo.collection.Collection.insert_many

    def counted_once_stored(collection, *args, **kwargs):
        stored = insert(collection, *args, **kwargs)
        if collection.name == "masters":
            assert _size_seen_by_another_process(tracker_env) == 6  # counted, and shared
        return stored

    monkeypatch.setattr(pymongo.collection.Collection, "insert_many", counted_once_stored)
    add_work(ctx, Work(text=ZH[5], external_id="w5"))
    monkeypatch.undo()
    assert _size_seen_by_another_process(tracker_env) == 6


def test_a_count_left_short_by_a_killed_add_is_counted_again_in_time(ctx, tracker_env, monkeypatch):
    """A process killed between storing works and keeping the shared count leaves it
    short; adds and removals since keep it, without making it last: it is counted again
    LIBRARY_RECOUNT_SECONDS after it was counted."""
    monkeypatch.setattr(library, "LIBRARY_RECOUNT_SECONDS", 1.0)
    add_texts(ctx, ZH[:3], "w")
    assert library.library_size(ctx, fresh=True) == 3
    with monkeypatch.context() as killed:
        killed.setattr(library, "_library_size_changed", lambda *args: None)
        add_work(ctx, Work(text=ZH[3], external_id="w3"))
    add_work(ctx, Work(text=ZH[4], external_id="w4"))
    assert _size_seen_by_another_process(tracker_env) == 4  # short by the killed add's
    time.sleep(1.2)
    assert _size_seen_by_another_process(tracker_env) == 5


def test_processes_asking_the_library_size_at_once_count_it_once(ctx, tracker_env, monkeypatch):
    """Workers starting together after an add find no shared count: one counts, the others
    wait for its count instead of each reading the whole collection."""
    add_texts(ctx, ZH[:3], "w")
    counted = []
    count = pymongo.collection.Collection.estimated_document_count

    def slow_counting(collection, *args, **kwargs):
        counted.append(collection.name)
        time.sleep(0.3)  # as a large library takes: the others ask meanwhile
        return count(collection, *args, **kwargs)

    monkeypatch.setattr(pymongo.collection.Collection, "estimated_document_count", slow_counting)
    workers = [open_ready(Settings.from_env(tracker_env)) for _ in range(4)]
    try:
        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(library.library_size, workers)) == [3] * 4
    finally:
        for worker in workers:
            worker.close()
    assert counted == ["masters"]


def test_reindex_after_losing_redis_gives_identical_results(ctx, monkeypatch):
    monkeypatch.setattr(library, "REINDEX_BATCH", 4)  # 15 works: four batches
    add_texts(ctx, ZH[:15], "n")
    queries = [ZH[2][50:400], ZH[7], ZH[20], ZH[11][:200] + ZH[12][200:500]]
    before = [match_text(ctx, q) for q in queries]
    stats = ctx.index.stats()
    counts = {m["_id"]: m["fingerprints"] for m in ctx.db.masters.find()}
    ctx.redis.flushdb()
    # As an upgrade (other parameters: other counts) or an update killed half-way leaves them.
    ctx.db.masters.update_many({}, {"$set": {"state": library.INDEXING, "params_version": "v0"}})
    ctx.db.masters.update_many({"_id": {"$in": list(counts)[::3]}}, {"$set": {"fingerprints": 7}})
    assert [match_text(ctx, q) for q in queries] != before
    reported = []

    def progress(works: int) -> None:
        # A batch is counted done once its works are marked indexed, not before (the marks
        # of one batch are written while the next one's postings are).
        reported.append(works)
        marked = {"state": "indexed", "params_version": ctx.params.version}
        assert ctx.db.masters.count_documents(marked) >= sum(reported)

    assert reindex(ctx, progress) == 15
    assert reported == [4, 4, 4, 3]
    assert [match_text(ctx, q) for q in queries] == before
    assert ctx.index.stats().postings == stats.postings
    marks = {m["_id"]: (m["fingerprints"], m["state"], m["params_version"])
             for m in ctx.db.masters.find()}  # fmt: skip
    assert marks == {i: (n, "indexed", ctx.params.version) for i, n in counts.items()}


def test_long_works_are_split_into_linked_chapters(ctx, monkeypatch):
    # Limits scaled to the corpus at hand (the bundled one holds no 400k-character book).
    book = "\n".join(NOVEL)
    max_chars = min(MAX_MASTER_CHARS, len(book) // 2)
    monkeypatch.setattr(library, "MAX_MASTER_CHARS", max_chars)
    monkeypatch.setattr(library, "CHAPTER_CHARS", max_chars * CHAPTER_CHARS // MAX_MASTER_CHARS)
    assert len(book) > library.MAX_MASTER_CHARS
    results = add_work(ctx, Work(text=book, external_id="book", title="三国"))
    assert len(results) >= len(book) // library.CHAPTER_CHARS
    chapters = list(ctx.db.masters.find({"work_id": "book"}))
    assert len(chapters) == len(results) and "".join(c["text"] for c in chapters) == book
    assert found(ctx, NOVEL[-1][:600])[0].startswith("book#")
    removed = [r.external_id for r in delete_works(ctx, "book", "rui")]
    assert sorted(removed) == sorted(r.external_id for r in results)
    assert ctx.index.stats().postings == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty text"),
        ("   \n", "empty text"),
        ("太短了", "too short"),
        ("1234 567", "too short"),
    ],
)
def test_unusable_texts_are_refused_with_the_reason(ctx, text, message):
    with pytest.raises(ValueError, match=message):
        add_work(ctx, Work(text=text, external_id="x"))
    assert ctx.db.masters.count_documents({}) == 0


def test_letters_are_counted_in_the_whole_text_not_only_its_beginning(ctx):
    # Thousands of digits and punctuation first (a table, a list of figures), the words
    # after them: a text with letters enough anywhere is registered, one with too few
    # anywhere is refused with its count.
    figures = "12,345.67 | 89.01% | " * 200
    (result,) = add_work(ctx, Work(text=figures + ZH[0], external_id="after-table"))
    assert result.external_id == "after-table"
    with pytest.raises(ValueError, match="too short to fingerprint: 3 letters"):
        add_work(ctx, Work(text=figures + "太短了" + figures, external_id="no-words"))
    assert [m["external_id"] for m in ctx.db.masters.find()] == ["after-table"]


def test_an_index_built_with_other_parameters_is_refused(ctx, tracker_env):
    add_work(ctx, Work(text=ZH[0], external_id="a"))
    with pytest.raises(IndexVersionMismatch, match="copytrack reindex"):
        open_ready(Settings.from_env(tracker_env), params=FingerprintParams(granule=48))


def _docx(chapters: list[str]) -> bytes:
    """A Word document as Word writes one: a chapter heading (style Heading1), then its
    paragraphs, each a run of text."""
    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"

    def paragraph(text: str, style: str | None = None) -> str:
        props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
        return f"<w:p>{props}<w:r><w:t>{escape(text)}</w:t></w:r></w:p>"

    body = "".join(
        paragraph(f"第{n + 1}章", "Heading1") + "".join(map(paragraph, text.split("\n")))
        for n, text in enumerate(chapters)
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr(
            "word/document.xml",
            f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{w}"><w:body>{body}'
            "</w:body></w:document>",
        )
    return out.getvalue()


def _pdf(chapters: list[str]) -> bytes:
    import weasyprint

    html = "".join(f"<h2>第{n + 1}章</h2><p>{text}</p>" for n, text in enumerate(chapters))
    return weasyprint.HTML(string=f"<html><body>{html}</body></html>").write_pdf()


@pytest.mark.parametrize("suffix", [".docx", ".epub", ".pdf"])
def test_a_publishers_master_is_one_work_or_one_per_chapter(ctx, tmp_path, suffix):
    # The PDF in English: WeasyPrint's CJK subset fonts here carry no text layer pypdf reads.
    corpus = "en_novel" if suffix == ".pdf" else "zh_novel"
    chapters = [text[:1200] for text in texts(corpus, 3)]
    made = {".docx": _docx, ".epub": _epub, ".pdf": _pdf}[suffix](chapters)
    master = tmp_path / f"长篇{suffix}"
    master.write_bytes(made)
    whole = list(load_works([master]))
    assert [item.work.external_id for item in whole] == ["长篇"], whole
    per_chapter = list(load_works([master], chapters=True))
    ids = [item.work.external_id for item in per_chapter]
    # A PDF has pages, not chapters: one work either way.
    assert ids == (["长篇"] if suffix == ".pdf" else ["长篇-001", "长篇-002", "长篇-003"]), ids
    add_works(ctx, [item.work for item in per_chapter])
    for n, text in enumerate(chapters):
        assert found(ctx, text[100:700]) == [ids[0] if suffix == ".pdf" else ids[n]]
