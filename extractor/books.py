"""Whole books as pirate sites offer them for download ("TXT下载 / 全本下载"): a plain-text
file (GBK, GB18030, Big5, UTF-8, UTF-16), a ZIP holding such files or EPUBs, an EPUB
(its XHTML in spine order), a PDF (pypdf) — made into one text to scan against every
chapter of the library.

Bounded like a page: what a ZIP or EPUB inflates to counts against ``max_bytes`` as it is
read (a few kilobytes can inflate to gigabytes), a PDF is read up to ``max_pages``. A
body that is none of these, or breaks a bound, raises UnusableContent naming why.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
from dataclasses import dataclass

import lxml.etree
import lxml.html

from .decoding import UnusableContent, decode_html
from .documents import mostly_chinese

__all__ = ["BOOK_SUFFIXES", "MAX_BOOK_BYTES", "Book", "book_format", "book_text"]

#: What a download link to a whole book ends with.
BOOK_SUFFIXES = (".txt", ".zip", ".epub", ".pdf")
#: Text a book may inflate to, all its parts together.
MAX_BOOK_BYTES = 64 * 1024 * 1024
MAX_PDF_PAGES = 5000
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
) -> Book:
    """The text of a downloaded book; UnusableContent when it is none or breaks a bound."""
    kind = book_format(body, media_type, url)
    if kind == "txt":
        return Book(_plain_text(body, media_type), "txt", 1)
    if kind == "pdf":
        return _pdf(body, max_pages)
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


def _xml(data: bytes, what: str) -> lxml.etree._Element:
    try:
        return lxml.etree.fromstring(data, parser=lxml.etree.XMLParser(resolve_entities=False))
    except lxml.etree.XMLSyntaxError as err:
        raise UnusableContent(f"an EPUB whose {what} is not XML ({err})") from None


def _epub(archive: zipfile.ZipFile, budget: _Budget) -> Book:
    """The EPUB's documents in its spine's order (the reading order, not the files')."""
    container = _xml(budget.read(archive, _CONTAINER), _CONTAINER)
    rootfile = container.find(".//{*}rootfile")
    if rootfile is None or not rootfile.get("full-path"):
        raise UnusableContent("an EPUB without a package document (container.xml)")
    opf_path = rootfile.get("full-path")
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
    return Book("\n".join(texts), "epub", len(texts))


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


def _pdf(body: bytes, max_pages: int) -> Book:
    from pypdf import PdfReader  # loaded on first use: PDFs are rare among downloads
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(body))
        pages = [page.extract_text() or "" for page in reader.pages[:max_pages]]
    # pypdf raises many kinds of error on a malformed or hostile file; each means the same.
    except (PyPdfError, ValueError, KeyError, TypeError, IndexError, AttributeError,
            RecursionError, AssertionError, ZeroDivisionError) as err:  # fmt: skip
        raise UnusableContent(f"a PDF that cannot be read ({type(err).__name__}: {err})") from None
    text = "\n".join(page.strip() for page in pages if page.strip())
    if not text:
        raise UnusableContent("a PDF without text (scanned images?)")
    return Book(text, "pdf", len(pages))
