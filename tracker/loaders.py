"""Files → works for `copytrack library add`: .txt, .md, .html and JSONL, directories recurse.

Each problem is reported as a ``LoadError`` naming the file (and line) and what to do;
the other files and lines still load.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .jsonl import BadLine, read_jsonl
from .library import METADATA_FIELDS, Work

TEXT_SUFFIXES = (".txt", ".md")
HTML_SUFFIXES = (".html", ".htm")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz")
MAX_FILE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class LoadError:
    """A file or line that could not be loaded, and why."""

    where: str
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


def _suffix(path: Path) -> str:
    name = path.name.lower()
    return ".jsonl.gz" if name.endswith(".jsonl.gz") else path.suffix.lower()


def _work_from_object(obj: dict, where: str) -> Work | LoadError:
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        return LoadError(where, 'no "text": every line needs a non-empty "text" string')
    metadata = {name: str(obj[name]) for name in METADATA_FIELDS if obj.get(name) is not None}
    known = {"id", "text", *METADATA_FIELDS}
    extra = {key: value for key, value in obj.items() if key not in known}
    external_id = str(obj["id"]) if obj.get("id") is not None else None
    return Work(text=text, external_id=external_id, extra=extra, **metadata)


def _load_file(path: Path) -> Iterator[Work | LoadError]:
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
    try:
        text = html_to_text(data) if suffix in HTML_SUFFIXES else decode_text_file(data)
    except ValueError as err:
        yield LoadError(str(path), str(err))
        return
    if not text.strip():
        yield LoadError(str(path), "no text found in the file")
        return
    yield Work(text=text, external_id=path.stem, title=path.stem, source=str(path))


def _files(path: Path) -> Iterator[Path | LoadError]:
    if path.is_dir():
        for root, dirs, names in os.walk(path):
            dirs.sort()
            for name in sorted(names):
                child = Path(root) / name
                if _suffix(child) in (*TEXT_SUFFIXES, *HTML_SUFFIXES, *JSONL_SUFFIXES):
                    yield child
    elif path.is_file():
        if _suffix(path) in (*TEXT_SUFFIXES, *HTML_SUFFIXES, *JSONL_SUFFIXES):
            yield path
        else:
            yield LoadError(str(path), "unsupported file type: use .txt, .md, .html or .jsonl")
    else:
        yield LoadError(str(path), "no such file or directory")


def load_works(paths: Iterable[Path]) -> Iterator[Work | LoadError]:
    """Works from files and directories (recursively), with a LoadError for each problem."""
    for path in paths:
        for file in _files(Path(path)):
            if isinstance(file, LoadError):
                yield file
                continue
            try:
                yield from _load_file(file)
            except OSError as err:
                yield LoadError(str(file), f"cannot read: {err.strerror or err}")
