"""A PDF bomb held an extraction worker about 90 s.

A few kilobytes of PDF can hold drawing instructions that take pypdf minutes to work
through: one page of megabytes of them (inflated from a small stream), or one stream of
them drawn on thousands of pages. Reading a book's PDF is bounded in pages, drawing
instructions, text and CPU time, in whichever thread reads it (the crawl's workers, the
admin's check of a URL, `copytrack check URL`), and a bomb stops quickly, saying which
bound it broke. The PDFs are written here with pypdf.
"""

from __future__ import annotations

import io
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest
from pypdf import PdfWriter
from pypdf.generic import ArrayObject, DictionaryObject, NameObject, NumberObject, StreamObject

from crawler.digest import digest
from extractor.books import book_text
from extractor.decoding import UnusableContent

pytestmark = pytest.mark.security

SHOWN = b"(abcdefgh) Tj "  # one string shown: an operand and an operator


def _font(writer: PdfWriter) -> DictionaryObject:
    font = writer._add_object(DictionaryObject({
        NameObject("/Type"): NameObject("/Font"),
        NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica"),
    }))  # fmt: skip
    return DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})


def _stream(writer: PdfWriter, instructions: bytes, **entries: object) -> object:
    stream = StreamObject()
    stream._data = zlib.compress(instructions, 9)
    stream[NameObject("/Filter")] = NameObject("/FlateDecode")
    stream.update({NameObject(f"/{key}"): value for key, value in entries.items()})
    return writer._add_object(stream)


def pdf(instructions: bytes, pages: int = 1, form: bytes | None = None) -> bytes:
    """A PDF of ``pages`` pages that all draw the same compressed content stream (showing
    text in Helvetica); ``form``: the instructions of a form the page may draw (``/X1 Do``)."""
    writer = PdfWriter()
    resources = _font(writer)
    if form is not None:
        box = ArrayObject(NumberObject(n) for n in (0, 0, 612, 792))
        drawn = _stream(writer, b"BT /F1 12 Tf 10 10 Td " + form + b"ET",
                        Type=NameObject("/XObject"), Subtype=NameObject("/Form"), BBox=box,
                        Resources=_font(writer))  # fmt: skip
        resources[NameObject("/XObject")] = DictionaryObject({NameObject("/X1"): drawn})
    content = _stream(writer, b"BT /F1 12 Tf 10 10 Td " + instructions + b"ET")
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = resources
        page[NameObject("/Contents")] = content
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def timed_refusal(body: bytes, **bounds: float) -> tuple[str, float]:
    """Why book_text refuses ``body``, and the CPU seconds it took to say so."""
    started = time.thread_time()
    with pytest.raises(UnusableContent) as refused:
        book_text(body, "application/pdf", **bounds)
    return str(refused.value), time.thread_time() - started


def test_a_page_of_megabytes_of_instructions_is_refused_before_it_is_parsed() -> None:
    bomb = pdf(SHOWN * 800_000)  # 11 MB of instructions in about 25 KB: pypdf took 18 s
    assert len(bomb) < 64 * 1024
    reason, seconds = timed_refusal(bomb)
    assert reason.startswith("a PDF that holds 10.7 MB of drawing instructions on a page")
    assert "stopped at page 1" in reason and "PDF bomb" in reason
    assert seconds < 2


def test_a_stream_drawn_on_every_page_stops_when_the_cpu_time_is_spent() -> None:
    bomb = pdf(SHOWN * 60_000, pages=500)  # each page under every other bound: 1.5 s each
    reason, seconds = timed_refusal(bomb, max_seconds=2)
    assert reason.startswith("a PDF that takes over 2 s of CPU time to read (stopped at page")
    assert seconds < 5


def test_the_budget_holds_in_a_thread_where_no_signal_can_interrupt() -> None:
    """The admin reads a URL's PDF in a worker thread: a cap by signal cannot reach it."""
    bomb = pdf(SHOWN * 60_000, pages=500)
    with ThreadPoolExecutor(1) as pool:
        reason, seconds = pool.submit(timed_refusal, bomb, max_seconds=2).result(timeout=60)
    assert "over 2 s of CPU time" in reason and seconds < 5


def test_text_is_bounded_as_it_comes_and_pages_are_counted() -> None:
    """A page that draws a form 500 times: a few bytes of its own, 20 MB of text."""
    fan_out = pdf(b"/X1 Do " * 500, form=SHOWN * 5_000)
    reason, seconds = timed_refusal(fan_out, max_bytes=1024 * 1024)
    assert reason.startswith("a PDF that has over 1 MB of text (stopped at page 1)")
    assert seconds < 5
    assert book_text(pdf(SHOWN * 50, pages=10), "application/pdf", max_pages=3).parts == 3


def test_the_crawl_stores_a_bomb_without_text_saying_why() -> None:
    found = digest(pdf(SHOWN * 800_000), "application/pdf", "http://pirate.test/全本.pdf")
    assert found.skip == "unreadable_book" and "drawing instructions" in found.detail
