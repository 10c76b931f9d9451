"""Files → works for `copytrack library add`: .txt, .md, .html, JSONL and the publishers'
masters (.docx, .epub, .pdf: one work, or one per chapter when asked), directories recurse.

Each work comes with where it was read (``file`` or ``file:line``), and each problem is
reported as a ``LoadError`` naming the file (and line) and what to do; the other files and
lines still load. Only regular files are read (a FIFO would block the reader forever), a
folder that cannot be listed is reported, and two works given one id with different texts
are reported (the first one loads): one id names one work.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..core.jsonl import BadLine, count_lines, not_regular, read_jsonl
from .library import METADATA_FIELDS, Work

TEXT_SUFFIXES = (".txt", ".md")
HTML_SUFFIXES = (".html", ".htm")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz")
#: Masters as publishers keep them, read as the crawl reads books (extractor.books).
DOCUMENT_SUFFIXES = (".docx", ".epub", ".pdf")
MAX_FILE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class LoadError:
    """A file or line that could not be loaded, and why."""

    where: str
    reason: str

    def __str__(self) -> str:
        return f"{shown(self.where)}: {self.reason}"


def shown(where: str) -> str:
    """A path as it can be printed: bytes of a file name that are not UTF-8 (which Python
    keeps as lone surrogates) as ``\\xNN`` escapes."""
    return where.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _utf8_name(path: Path) -> LoadError | None:
    """None when the path is UTF-8; else why its works are not read (a work's id and
    source come from its name, and the library stores UTF-8 only)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return LoadError(
            str(path), "the file name is not UTF-8: rename the file, then add it again"
        )
    return None


@dataclass(frozen=True)
class Loaded:
    """A work and where it was read (``file`` or ``file:line``), for messages about it."""

    where: str
    work: Work


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return ".jsonl.gz" if name.endswith(".jsonl.gz") else path.suffix.lower()


def _work_from_object(obj: dict, where: str) -> Loaded | LoadError:
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        return LoadError(where, 'no "text": every line needs a non-empty "text" string')
    metadata = {name: str(obj[name]) for name in METADATA_FIELDS if obj.get(name) is not None}
    known = {"id", "text", *METADATA_FIELDS}
    extra = {key: value for key, value in obj.items() if key not in known}
    external_id = str(obj["id"]) if obj.get("id") is not None else None
    return Loaded(where, Work(text=text, external_id=external_id, extra=extra, **metadata))


def _document(path: Path, data: bytes, chapters: bool) -> Iterator[Loaded | LoadError]:
    """A .docx, .epub or .pdf master: one work, or one per chapter (``chapters``), each
    named after the file (``stem-001`` …)."""
    from extractor.books import book_text, docx_text
    from extractor.decoding import UnusableContent

    try:
        book = docx_text(data) if path.suffix.lower() == ".docx" else book_text(data, url=path.name)
    except UnusableContent as err:
        yield LoadError(str(path), str(err))
        return
    pieces = book.pieces() if chapters else (book.text,)
    for n, text in enumerate(pieces, start=1):
        one = len(pieces) == 1
        yield Loaded(
            str(path) if one else f"{path}#{n}",
            Work(
                text=text,
                external_id=path.stem if one else f"{path.stem}-{n:03d}",
                title=path.stem if one else f"{path.stem} ({n})",
                source=str(path),
            ),
        )


def _load_file(path: Path, chapters: bool = False) -> Iterator[Loaded | LoadError]:
    suffix = _suffix(path)
    if suffix in JSONL_SUFFIXES:
        for item in read_jsonl(path):
            if isinstance(item, BadLine):
                yield LoadError(f"{item.path}:{item.line_no}", item.reason)
            else:
                line_no, obj = item
                yield _work_from_object(obj, f"{path}:{line_no}")
        return
    if path.stat().st_size > MAX_FILE_BYTES:
        yield LoadError(str(path), f"larger than {MAX_FILE_BYTES // 2**20} MB; split it")
        return
    # Imported here: extraction loads trafilatura (~0.4 s), which JSONL libraries never need.
    from extractor import decode_text_file, html_to_text

    data = path.read_bytes()
    if suffix in DOCUMENT_SUFFIXES:
        yield from _document(path, data, chapters)
        return
    try:
        text = html_to_text(data) if suffix in HTML_SUFFIXES else decode_text_file(data)
    except ValueError as err:
        yield LoadError(str(path), str(err))
        return
    if not text.strip():
        yield LoadError(str(path), "no text found in the file")
        return
    yield Loaded(
        str(path), Work(text=text, external_id=path.stem, title=path.stem, source=str(path))
    )


_SUFFIXES = (*TEXT_SUFFIXES, *HTML_SUFFIXES, *JSONL_SUFFIXES, *DOCUMENT_SUFFIXES)
#: What a file of another type is told.
UNSUPPORTED = "unsupported file type: use .txt, .md, .html, .jsonl, .docx, .epub or .pdf"


def _regular(path: Path) -> LoadError | None:
    """None for a regular file (or a link to one); else why it is not read."""
    problem = not_regular(path)
    return LoadError(str(path), f"{problem}: skipped") if problem else None


def _files(path: Path) -> Iterator[Path | LoadError]:
    if path.is_dir():
        unreadable: list[OSError] = []  # folders the walk could not list, as it meets them
        for root, dirs, names in os.walk(path, onerror=unreadable.append):
            yield from _unreadable(unreadable)
            dirs.sort()
            for name in sorted(names):
                child = Path(root) / name
                if _suffix(child) in _SUFFIXES:
                    yield _utf8_name(child) or _regular(child) or child
        yield from _unreadable(unreadable)
    elif not path.exists():
        yield LoadError(str(path), "no such file or directory")
    elif problem := _utf8_name(path) or _regular(path):
        yield problem
    elif _suffix(path) in _SUFFIXES:
        yield path
    else:
        yield LoadError(str(path), UNSUPPORTED)


def _unreadable(errors: list[OSError]) -> Iterator[LoadError]:
    while errors:
        err = errors.pop(0)
        yield LoadError(
            str(err.filename), f"cannot read the folder ({err.strerror}): its works were not added"
        )


def load_works(paths: Iterable[Path], chapters: bool = False) -> Iterator[Loaded | LoadError]:
    """Works from files and directories (recursively), with a LoadError for each problem;
    ``chapters``: a .docx or .epub master gives a work per chapter."""
    seen: dict[str, tuple[bytes, str]] = {}  # id -> (digest of its text, where it was read)
    for path in paths:
        for file in _files(Path(path)):
            if isinstance(file, LoadError):
                yield file
                continue
            try:
                for item in _load_file(file, chapters):
                    yield item if isinstance(item, LoadError) else _first_of_its_id(item, seen)
            except OSError as err:
                yield LoadError(str(file), f"cannot read: {err.strerror or err}")


def count_works(paths: Iterable[Path]) -> int:
    """About how many works `load_works` reads from ``paths`` (a JSONL file's lines, one
    work per other file), counted quickly: a progress bar's total, and what the index
    makes room for (`tracker.masters.library.add_batches`)."""
    files = (file for path in paths for file in _files(Path(path)))
    return sum(
        count_lines(file) if _suffix(file) in JSONL_SUFFIXES else 1
        for file in files
        if not isinstance(file, LoadError)
    )


def _first_of_its_id(item: Loaded, seen: dict[str, tuple[bytes, str]]) -> Loaded | LoadError:
    """The item, unless an earlier one had its id and another text."""
    external_id = item.work.external_id
    if external_id is None:
        return item
    digest = hashlib.blake2b(
        item.work.text.encode("utf-8", "surrogatepass"), digest_size=16
    ).digest()
    first = seen.setdefault(external_id, (digest, item.where))
    if first[0] == digest:
        return item
    return LoadError(
        item.where,
        f"id {external_id!r} was already given another text at {first[1]}: not added "
        f"(give each work its own id)",
    )
