"""A page too big for its MongoDB document (a whole book): its capture and text go to
GridFS, and everything that reads them finds them there (real servers)."""

from __future__ import annotations

import hashlib

import pytest

from tests.copies import ZH, found_on
from tracker.findings import captures, evidence
from tracker.findings.captures import page_capture, page_text
from tracker.masters.library import Work, add_work
from tracker.scanning.pages import PageInput, scan_page, store_page


@pytest.fixture
def small_documents(monkeypatch):
    """Documents hold little: every page of these tests is 'big'."""
    monkeypatch.setattr(captures, "INLINE_RAW_BYTES", 200)
    monkeypatch.setattr(captures, "INLINE_TEXT_CHARS", 100)


def _files(ctx) -> int:
    return ctx.db[f"{captures.BUCKET}.files"].count_documents({})


def test_big_parts_go_to_gridfs_and_come_back(ctx, small_documents):
    add_work(ctx, Work(text=ZH[0], external_id="w0"))
    raw = ("<html><body>" + ZH[0] * 3 + "</body></html>").encode("gb18030")
    page_id, _ = store_page(ctx, PageInput("https://books.example/全本.txt", ZH[0], raw=raw))
    doc = ctx.db.pages.find_one({"_id": page_id})
    assert doc["raw_zlib"] is None and doc["raw_file"] is not None
    assert doc["text"] == "" and doc["text_file"] is not None
    assert page_capture(ctx, doc) == raw and page_text(ctx, doc) == ZH[0]
    assert doc["raw_sha256"] == hashlib.sha256(raw).hexdigest()
    assert scan_page(ctx, page_id).matches == 1  # scanned from GridFS
    finding = ctx.db.findings.find_one({"page_id": page_id})
    found = evidence(ctx, finding["_id"])
    assert found.passages and found.page["text"] == ZH[0]
    assert _files(ctx) == 2
    # Fetched again with another text: the new parts replace the old ones.
    store_page(ctx, PageInput("https://books.example/全本.txt", ZH[1], raw=raw + b"!"))
    doc = ctx.db.pages.find_one({"_id": page_id})
    assert page_text(ctx, doc) == ZH[1] and _files(ctx) == 2


def test_small_pages_stay_in_their_document(ctx):
    add_work(ctx, Work(text=ZH[0], external_id="w0"))
    found_on(ctx, "https://copy.example/a", 0)
    doc = ctx.db.pages.find_one({"url": "https://copy.example/a"})
    assert doc["raw_zlib"] is not None and doc["raw_file"] is None and doc["text"]
    assert _files(ctx) == 0
