"""Whole books as pirate sites offer them for download ("TXT下载 / 全本下载"): a plain-text
file (GBK, GB18030, Big5, UTF-8, UTF-16), a ZIP holding such files or EPUBs, an EPUB
(its XHTML in spine order), a PDF (pypdf) — made into one text to scan against every
chapter of the library.

Bounded like a page: what a ZIP or EPUB inflates to counts against ``max_bytes`` as it is
read (a few kilobytes can inflate to gigabytes). A PDF is read up to ``max_pages``, its
pages' drawing instructions and its text up to ``max_bytes`` each, in ``max_seconds`` of
CPU time (in whichever thread reads it), with pypdf's own bounds on one content stream
tightened (``PDF_LIMITS``): a few kilobytes of PDF can hold instructions that take pypdf
minutes to work through. A body that is none of these, or breaks a bound, raises
UnusableContent naming why.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from dataclasses import dataclass
from typing import Any, NoReturn

import lxml.etree
import lxml.html

from .cpucap import CpuBudget
from .decoding import UnusableContent, decode_html
from .documents import mostly_chinese

__all__ = ["BOOK_SUFFIXES", "MAX_BOOK_BYTES", "Book", "book_format", "book_text", "docx_text"]

#: What a download link to a whole book ends with.
BOOK_SUFFIXES = (".txt", ".zip", ".epub", ".pdf")
#: Text a book may inflate to, all its parts together.
MAX_BOOK_BYTES = 64 * 1024 * 1024
MAX_PDF_PAGES = 5000
#: CPU time a PDF's text may take to read: pypdf reads a novel's page in about 30 ms.
MAX_PDF_SECONDS = 30.0
#: A page's drawing instructions, inflated: a page of text has kilobytes. pypdf parses a
#: page's instructions whole before reading any, with no check of the time meanwhile
#: (about 4 MB a second of them).
MAX_PDF_PAGE_BYTES = 1024 * 1024
#: pypdf's bounds (its ``Configuration``) while a book is read, for what the page bound
#: does not see: operands and operators parsed from one stream (a page of text has a few
#: thousand; at pypdf's default, 2 M, the parse takes half a minute), and how often one
#: page may draw a form (a watermark or a header is drawn once or twice).
PDF_LIMITS: dict[str, Any] = {
    "stream_parsing_work_maximum_count": 200_000,
    "xform_maximum_invocations_per_extraction": 500,
}
_CHUNK = 1 << 20
_CONTAINER = "META-INF/container.xml"
_BLOCKS = ("p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "br", "section", "blockquote")


@dataclass(frozen=True)
class Book:
    """A book's text, its format (txt, zip, epub, pdf) and how many parts it was read from
    (files in a ZIP, documents in an EPUB's spine, pages of a PDF)."""

    text: str
    format: str
    parts: int
    #: The book cut where its author cut it: an EPUB's spine documents, a DOCX's sections
    #: under its first-level headings; one piece for the others (a PDF's pages are no
    #: chapters).
    chapters: tuple[str, ...] = ()

    def pieces(self) -> tuple[str, ...]:
        """Its chapters, or the whole text as one."""
        return self.chapters or (self.text,)


def book_format(body: bytes, media_type: str | None = None, url: str | None = None) -> str | None:
    """The book format of a download (by its bytes first, then its media type or name), or
    None when it is no book."""
    if body.startswith(b"%PDF-"):
        return "pdf"
    if body.startswith(b"PK\x03\x04"):
        return "epub" if body[30:38] == b"mimetype" and b"epub" in body[38:90] else "zip"
    media = (media_type or "").split(";")[0].strip().lower()
    path = (url or "").split("#")[0].split("?")[0]  # no urllib here: this package does no I/O
    suffix = posixpath.splitext(path.lower())[1]
    if media == "text/plain" or suffix == ".txt":
        return "txt"
    return None


def book_text(
    body: bytes,
    media_type: str | None = None,
    url: str | None = None,
    max_bytes: int = MAX_BOOK_BYTES,
    max_pages: int = MAX_PDF_PAGES,
    max_seconds: float = MAX_PDF_SECONDS,
) -> Book:
    """The text of a downloaded book; UnusableContent when it is none or breaks a bound."""
    kind = book_format(body, media_type, url)
    if kind == "txt":
        return Book(_plain_text(body, media_type), "txt", 1)
    if kind == "pdf":
        return _pdf(body, max_pages, max_bytes, max_seconds)
    if kind in ("zip", "epub"):
        try:
            archive = zipfile.ZipFile(io.BytesIO(body))
        except (zipfile.BadZipFile, ValueError) as err:
            raise UnusableContent(f"a damaged {kind.upper()} file ({err})") from None
        budget = _Budget(max_bytes)
        with archive:
            return _epub(archive, budget) if kind == "epub" else _zip(archive, budget)
    raise UnusableContent(f"not a book download ({media_type or 'no media type'})")


#: Legacy Chinese encodings a book is tried in when the detector gives up (it can, on long
#: Big5 texts): Big5 first, since GBK bytes seldom decode as Big5 but Big5 bytes do as GBK.
_LEGACY_CHINESE = ("big5", "gb18030")


def _plain_text(body: bytes, media_type: str | None) -> str:
    decoded = decode_html(body, media_type or "text/plain")
    if not decoded.undecodable:
        return decoded.text.replace("\r\n", "\n")
    for codec in _LEGACY_CHINESE:
        try:
            text = body.decode(codec)
        except UnicodeDecodeError:
            continue
        if mostly_chinese(text):
            return text.replace("\r\n", "\n")
    raise UnusableContent(
        f"{decoded.replaced} byte sequences are not valid {decoded.encoding}, nor is it "
        "GBK or Big5: not a text file in a known encoding"
    )


class _Budget:
    """What is left of ``max_bytes`` while an archive's members are inflated."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = self.left = max_bytes

    def read(self, archive: zipfile.ZipFile, name: str) -> bytes:
        try:
            member = archive.open(name)
        except KeyError:
            raise UnusableContent(f"the archive names {name!r} but does not hold it") from None
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError) as err:
            raise UnusableContent(f"{name!r} cannot be read ({err})") from None
        chunks = []
        with member:
            while chunk := member.read(min(_CHUNK, self.left + 1)):
                self.left -= len(chunk)
                if self.left < 0:
                    raise UnusableContent(
                        f"inflates past {self.max_bytes / 2**20:g} MB: not a book (a "
                        "compression bomb?)"
                    )
                chunks.append(chunk)
        return b"".join(chunks)


def _zip(archive: zipfile.ZipFile, budget: _Budget) -> Book:
    """Every text file and EPUB of a ZIP, in name order."""
    texts = []
    for name in sorted(archive.namelist()):
        suffix = posixpath.splitext(name.lower())[1]
        if name.endswith("/") or suffix not in (".txt", ".epub"):
            continue
        data = budget.read(archive, name)
        if suffix == ".txt":
            texts.append(_plain_text(data, "text/plain"))
        else:
            with zipfile.ZipFile(io.BytesIO(data)) as inner:
                texts.append(_epub(inner, budget).text)
    if not texts:
        raise UnusableContent("a ZIP without a .txt or .epub file in it")
    return Book("\n".join(texts), "zip", len(texts))


def _xml(data: bytes, what: str, kind: str = "an EPUB") -> lxml.etree._Element:
    try:
        return lxml.etree.fromstring(data, parser=lxml.etree.XMLParser(resolve_entities=False))
    except lxml.etree.XMLSyntaxError as err:
        raise UnusableContent(f"{kind} whose {what} is not XML ({err})") from None


def _epub(archive: zipfile.ZipFile, budget: _Budget) -> Book:
    """The EPUB's documents in its spine's order (the reading order, not the files')."""
    container = _xml(budget.read(archive, _CONTAINER), _CONTAINER)
    rootfile = container.find(".//{*}rootfile")
    opf_path = None if rootfile is None else rootfile.get("full-path")
    if not opf_path:
        raise UnusableContent("an EPUB without a package document (container.xml)")
    package = _xml(budget.read(archive, opf_path), opf_path)
    base = posixpath.dirname(opf_path)
    hrefs = {
        item.get("id"): item.get("href") for item in package.iterfind(".//{*}manifest/{*}item")
    }
    texts = []
    for ref in package.iterfind(".//{*}spine/{*}itemref"):
        href = hrefs.get(ref.get("idref"))
        if href:
            path = posixpath.normpath(posixpath.join(base, href.split("#")[0]))
            texts.append(_xhtml_text(budget.read(archive, path)))
    texts = [text for text in texts if text]
    if not texts:
        raise UnusableContent("an EPUB without text in its spine")
    return Book("\n".join(texts), "epub", len(texts), tuple(texts))


_DOCX_BODY = "word/document.xml"
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def docx_text(body: bytes, max_bytes: int = MAX_BOOK_BYTES) -> Book:
    """A Word document's text, a line per paragraph, cut into chapters at its first-level
    headings (style Heading1 / 标题 1, or outline level 0); UnusableContent if it is none."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(body))
    except (zipfile.BadZipFile, ValueError) as err:
        raise UnusableContent(f"a damaged DOCX file ({err})") from None
    with archive:
        root = _xml(_Budget(max_bytes).read(archive, _DOCX_BODY), _DOCX_BODY, "a DOCX")
    chapters: list[list[str]] = [[]]
    for paragraph in root.iter(f"{_W}p"):
        line = "".join(node.text or "" for node in paragraph.iter(f"{_W}t", f"{_W}tab")).strip()
        if not line:
            continue
        if _docx_heading(paragraph) and chapters[-1]:
            chapters.append([])
        chapters[-1].append(line)
    texts = tuple("\n".join(lines) for lines in chapters if lines)
    if not texts:
        raise UnusableContent("a DOCX without text")
    return Book("\n".join(texts), "docx", len(texts), texts if len(texts) > 1 else ())


def _docx_heading(paragraph: lxml.etree._Element) -> bool:
    style = paragraph.find(f"{_W}pPr/{_W}pStyle")
    level = paragraph.find(f"{_W}pPr/{_W}outlineLvl")
    name = (style.get(f"{_W}val") if style is not None else "") or ""
    return name.replace(" ", "").lower() in ("heading1", "title1", "1") or (
        level is not None and level.get(f"{_W}val") == "0"
    )


def _xhtml_text(data: bytes) -> str:
    """A chapter's text, a line per paragraph (scripts and styles left out)."""
    try:
        root = lxml.html.document_fromstring(data)
    except (lxml.etree.ParserError, ValueError):
        return ""
    for element in root.iter("script", "style"):
        element.drop_tree()
    for element in root.iter(*_BLOCKS):
        element.tail = "\n" + (element.tail or "")
    lines = (line.strip() for line in root.text_content().splitlines())
    return "\n".join(line for line in lines if line)


def _pdf(body: bytes, max_pages: int, max_bytes: int, max_seconds: float) -> Book:
    from pypdf import PdfReader, apply_configuration  # loaded on first use: PDFs are rare
    from pypdf.errors import LimitReachedError, PyPdfError

    reading = _PdfReading(max_bytes, max_seconds)
    try:
        with apply_configuration(**PDF_LIMITS):
            for page in PdfReader(io.BytesIO(body)).pages[:max_pages]:
                reading.read(page)
    except _BoundBroken as broken:
        raise UnusableContent(str(broken)) from None
    except LimitReachedError as err:
        raise UnusableContent(
            f"a PDF past pypdf's bounds on page {len(reading.pages) + 1} ({err}): a PDF bomb?"
        ) from None
    # pypdf raises many kinds of error on a malformed or hostile file; each means the same.
    except (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError,
            RecursionError, AssertionError, ZeroDivisionError) as err:  # fmt: skip
        raise UnusableContent(f"a PDF that cannot be read ({type(err).__name__}: {err})") from None
    text = "\n".join(page.strip() for page in reading.pages if page.strip())
    if not text:
        raise UnusableContent("a PDF without text (scanned images?)")
    return Book(text, "pdf", len(reading.pages))


class _BoundBroken(BaseException):
    """A PDF broke a bound of its reading. A BaseException: pypdf logs an Exception raised
    while it reads a form and goes on."""


class _PdfReading:
    """A PDF's pages read one by one within the bounds: each page's drawing instructions at
    most MAX_PDF_PAGE_BYTES, all pages' and all their text at most ``max_bytes``, in
    ``max_seconds`` of CPU time. pypdf calls ``instruction`` before each drawing instruction
    and ``text`` with each piece of text it finds, those of the forms a page draws too."""

    def __init__(self, max_bytes: int, max_seconds: float) -> None:
        self.max_bytes = max_bytes
        self.budget = CpuBudget(max_seconds)
        self.pages: list[str] = []
        self.instructions = 0
        self.characters = 0

    def read(self, page: Any) -> None:
        size = _content_size(page)
        if size > MAX_PDF_PAGE_BYTES:
            self._broken(
                f"holds {size / 2**20:.1f} MB of drawing instructions on a page (a page of "
                f"text: kilobytes; at most {MAX_PDF_PAGE_BYTES / 2**20:g} MB are read)"
            )
        self.instructions += size
        if self.instructions > self.max_bytes:
            self._broken(f"holds over {self.max_bytes / 2**20:g} MB of drawing instructions")
        text = page.extract_text(visitor_operand_before=self.instruction, visitor_text=self.text)
        self.pages.append(text or "")

    def instruction(self, *args: Any) -> None:
        if self.budget.spent:
            self._broken(f"takes over {self.budget.seconds:g} s of CPU time to read")

    def text(self, text: str, *args: Any) -> None:
        self.characters += len(text)
        if self.characters > self.max_bytes:
            self._broken(f"has over {self.max_bytes / 2**20:g} MB of text")

    def _broken(self, what: str) -> NoReturn:
        raise _BoundBroken(
            f"a PDF that {what} (stopped at page {len(self.pages) + 1}): not a book, or too "
            "big a one to read (a PDF bomb?)"
        )


def _content_size(page: Any) -> int:
    """The bytes of a page's content streams, inflated (pypdf keeps them for its reading)."""
    contents = page.get("/Contents")
    if contents is None:
        return 0
    streams = contents.get_object()
    if not isinstance(streams, list):  # one stream, or an array of them
        streams = [streams]
    return sum(len(stream.get_object().get_data()) for stream in streams)
