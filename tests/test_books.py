"""Whole-book downloads made into text (extractor.books): a GBK or Big5 TXT, a ZIP holding
one, an EPUB read in spine order, a PDF; and the 40 library chapters such a book holds all
found in it by the matcher (real servers)."""

from __future__ import annotations

import io
import time
import zipfile

import pytest

from crawler.fetch import FetchError, fetch_text
from extractor.books import book_format, book_text
from extractor.decoding import UnusableContent
from tests.corpus import novel_chapters
from tests.loopback import Handler, served
from tracker.campaigns import Campaign, save_campaign, trigger_run, wait_for_run
from tracker.masters.library import Work, add_works
from tracker.matching.matcher import match_text

CHAPTERS = [text[:1500] for text in novel_chapters(40)]
BOOK = "\n\n".join(f"第{n + 1}章\n{text}" for n, text in enumerate(CHAPTERS))


def _zip(files: dict[str, bytes], stored_first: str | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        if stored_first:  # an EPUB's mimetype comes first, stored
            archive.writestr(stored_first, files.pop(stored_first), zipfile.ZIP_STORED)
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def _epub(chapters: list[str]) -> bytes:
    """An EPUB whose files are named in reverse of the reading order its spine gives."""
    n = len(chapters)
    items = "".join(
        f'<item id="c{i}" href="text/part{n - i:03d}.xhtml" media-type="application/xhtml+xml"/>'
        for i in range(n)
    )
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(n))
    files = {
        "mimetype": b"application/epub+zip",
        "META-INF/container.xml": (
            b'<?xml version="1.0"?><container version="1.0" '
            b'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            b'<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            b"</rootfiles></container>"
        ),
        "OEBPS/content.opf": (
            '<?xml version="1.0" encoding="utf-8"?><package xmlns="http://www.idpf.org/2007/opf" '
            f'version="3.0"><manifest>{items}</manifest><spine>{spine}</spine></package>'
        ).encode(),
    }
    for i, text in enumerate(chapters):
        paragraphs = "".join(f"<p>{line}</p>" for line in text.split("\n"))
        files[f"OEBPS/text/part{n - i:03d}.xhtml"] = (
            '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
            f"<head><title>第{i + 1}章</title><style>p {{ margin: 0 }}</style></head>"
            f"<body><h2>第{i + 1}章</h2>{paragraphs}<script>var ad = 1;</script></body></html>"
        ).encode()
    return _zip(files, stored_first="mimetype")


@pytest.fixture
def library(ctx):
    add_works(ctx, [Work(text=text, external_id=f"ch{n:02d}") for n, text in enumerate(CHAPTERS)])
    return ctx


def _found(ctx, text: str) -> set[str]:
    return {match.master.external_id for match in match_text(ctx, text)}


@pytest.mark.parametrize("encoding", ["gbk", "big5", "utf-16", "utf-8-sig"])
def test_a_txt_book_in_any_of_the_usual_encodings(encoding):
    data = BOOK.encode(encoding, "ignore")  # what the encoding can hold of the book
    book = book_text(data, "text/plain", "https://x.example/b.txt")
    assert book.format == "txt" and book.text == data.decode(encoding)


def test_every_chapter_of_a_txt_zip_or_epub_book_is_found(library):
    gbk = BOOK.encode("gbk", "ignore")  # the corpus has a few characters GBK lacks
    downloads = {
        "txt": book_text(gbk, "application/octet-stream", "https://x.example/全本.txt"),
        "zip": book_text(_zip({"全本.txt": gbk, "readme.url": b"[InternetShortcut]"})),
        "epub": book_text(_epub(CHAPTERS), "application/epub+zip"),
    }
    for kind, book in downloads.items():
        assert book.format == kind
        assert _found(library, book.text) == {f"ch{n:02d}" for n in range(40)}, kind
    epub = downloads["epub"].text
    assert downloads["epub"].parts == 40 and "var ad" not in epub and "margin" not in epub
    # Read in the spine's order, not the files' (named in reverse).
    assert epub.index(CHAPTERS[0][:30]) < epub.index(CHAPTERS[39][:30])


def test_a_pdf_book(library):
    import weasyprint

    html = "".join(f"<h2>第{n + 1}章</h2><p>{t}</p>" for n, t in enumerate(CHAPTERS[:5]))
    pdf = weasyprint.HTML(string=f"<html><body>{html}</body></html>").write_pdf()
    book = book_text(pdf, "application/pdf")
    assert book.format == "pdf" and book.parts >= 5
    assert {f"ch{n:02d}" for n in range(5)} <= _found(library, book.text)


def test_books_that_are_not_books_or_too_big_are_refused_quickly():
    assert book_format(b"<html></html>", "text/html", "https://x.example/a.html") is None
    with pytest.raises(UnusableContent, match="not a book"):
        book_text(b"\x89PNG\r\n\x1a\n", "image/png")
    with pytest.raises(UnusableContent, match="damaged ZIP"):
        book_text(b"PK\x03\x04 truncated")
    with pytest.raises(UnusableContent, match=r"without a \.txt or \.epub"):
        book_text(_zip({"cover.jpg": b"\xff\xd8"}))
    bomb = _zip({"book.txt": b"0" * (200 * 2**20)})  # 200 MB of zeros in about 200 KB
    started = time.monotonic()
    with pytest.raises(UnusableContent, match="compression bomb"):
        book_text(bomb, max_bytes=16 * 2**20)
    assert time.monotonic() - started < 10
    with pytest.raises(UnusableContent, match="without a package document"):
        book_text(_zip({"mimetype": b"application/epub+zip", "META-INF/container.xml":
                        b"<container/>"}, stored_first="mimetype"))  # fmt: skip
    with pytest.raises(UnusableContent, match="PDF that cannot be read"):
        book_text(b"%PDF-1.7\nnot really")


class _PirateLibrary(Handler):
    """A pirate novel site: a book page offering the whole book as TXT (GBK), ZIP and EPUB,
    the TXT behind a link that says so but names no file type."""

    def do_GET(self) -> None:
        files = self.server.files  # type: ignore[attr-defined]
        if self.path == "/":
            body = (
                "<html><head><title>红楼梦全本</title></head><body><h1>红楼梦</h1>"
                "<p>本站提供全本小说免费阅读与下载。</p>"
                '<a href="/down?id=1">TXT下载</a> <a href="/files/hlm.zip">ZIP</a> '
                '<a href="/files/hlm.epub">EPUB</a></body></html>'
            ).encode()
            self.send_body(body, "text/html; charset=utf-8")
        elif self.path in files:
            self.send_body(*files[self.path])
        else:
            self.send_error(404)


def test_a_crawl_finds_every_chapter_in_each_whole_book_download(crawl_ctx):
    ctx = crawl_ctx
    add_works(ctx, [Work(text=text, external_id=f"ch{n:02d}") for n, text in enumerate(CHAPTERS)])
    gbk = BOOK.encode("gbk", "ignore")
    files = {
        # A download link that names no file: read as a book by its bytes' type.
        "/down?id=1": (gbk, "text/plain; charset=gbk"),
        "/files/hlm.zip": (_zip({"红楼梦.txt": gbk}), "application/zip"),
        "/files/hlm.epub": (_epub(CHAPTERS), "application/epub+zip"),
    }
    with served(_PirateLibrary, files=files) as server:
        base = f"http://127.0.0.1:{server.server_port}"
        campaign = {"name": "books", "seeds": [f"{base}/"], "delay": 0, "max_depth": 1}
        save_campaign(ctx, Campaign.from_dict(campaign))
        run = wait_for_run(ctx, trigger_run(ctx, "books"), timeout=240)
    assert run["state"] == "finished", run
    for path in files:
        page = ctx.db.pages.find_one({"url": f"{base}{path}"})
        assert page is not None and page["extractor"].startswith("book:"), path
        found = ctx.db.findings.distinct("master_external_id", {"page_id": page["_id"]})
        assert len(found) == 40, (path, len(found))
    assert ctx.db.pages.find_one({"url": f"{base}/files/hlm.epub"})["extractor"] == "book:epub"


class _BigBook(Handler):
    """A 4 MB GBK book, as /big.txt and, the same bytes, as /big.html."""

    def do_GET(self) -> None:
        media = "text/plain; charset=gbk" if self.path.endswith(".txt") else "text/html"
        self.send_body(self.server.book, media)  # type: ignore[attr-defined]


def test_check_url_reads_a_book_download_under_the_book_cap():
    """`copytrack check URL` fetches a URL naming a book like the crawl does: up to
    COPYTRACK_BOOK_MAXSIZE (64 MB), read as a book; a page keeps the 3 MB page cap."""
    book = (BOOK * (1 + 4 * 2**20 // len(BOOK.encode("gbk", "ignore")))).encode("gbk", "ignore")
    assert len(book) > 4 * 2**20
    with served(_BigBook, book=book) as server:
        base = f"http://127.0.0.1:{server.server_port}"
        text = fetch_text(f"{base}/big.txt", allow_private=True)
        assert CHAPTERS[7][:200] in text and len(text) > 1_000_000
        with pytest.raises(FetchError, match="larger than 3 MB"):
            fetch_text(f"{base}/big.html", allow_private=True)
