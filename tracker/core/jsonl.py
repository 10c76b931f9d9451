"""Reading JSONL files (plain or gzip) line by line, reporting bad lines instead of failing."""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# What reading gzip data that is damaged, cut short or not gzip at all raises.
_GZIP_DAMAGE = (gzip.BadGzipFile, EOFError, zlib.error)


@dataclass(frozen=True)
class BadLine:
    """A line that could not be used, with what to do about it."""

    path: Path
    line_no: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line_no}: {self.reason}"


def not_regular(path: Path) -> str | None:
    """None for a regular file (or a link to one); else why it is not read: reading a FIFO
    would wait for a writer forever."""
    try:
        mode = os.stat(path).st_mode
    except OSError as err:
        return f"cannot read: {err.strerror or err}"
    return None if stat.S_ISREG(mode) else "not a regular file (a FIFO, socket or device)"


def read_jsonl(path: Path) -> Iterator[tuple[int, dict] | BadLine]:
    """Yield ``(line_no, object)`` for each JSON object line and ``BadLine`` for the others.

    Blank lines are skipped; undecodable bytes, invalid JSON and non-objects are reported
    with their line number, and reading goes on with the next line. Gzip data that is
    damaged or cut short ends the file with a BadLine where it broke. (Callers first make
    sure the path is a regular file: `not_regular`.)
    """
    line_no = 0
    try:
        with _open(path) as lines:
            for line_no, raw in enumerate(lines, start=1):
                if raw.strip():
                    yield _parsed(path, line_no, raw)
    except _GZIP_DAMAGE as err:
        yield BadLine(
            path,
            line_no + 1,
            f"not readable as gzip ({err}): this line and the rest of the file were not "
            "read; compress the file again",
        )


def _parsed(path: Path, line_no: int, raw: bytes) -> tuple[int, dict] | BadLine:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        return BadLine(
            path,
            line_no,
            f"not UTF-8 ({err.reason} at byte {err.start}); re-save the file as UTF-8",
        )
    except json.JSONDecodeError as err:
        return BadLine(path, line_no, f"invalid JSON ({err.msg} at column {err.colno})")
    except RecursionError:
        return BadLine(path, line_no, "JSON nested too deeply to read")
    if not isinstance(obj, dict):
        return BadLine(path, line_no, f"expected a JSON object, got {type(obj).__name__}")
    return line_no, obj


def count_lines(path: Path) -> int:
    """How many lines the file has (blank ones too), read a megabyte at a time; 0 when
    it cannot be read (`read_jsonl` says why)."""
    count, last = 0, b"\n"
    try:
        with _open(path) as data:
            while chunk := data.read(1 << 20):
                count += chunk.count(b"\n")
                last = chunk[-1:]
    except (OSError, *_GZIP_DAMAGE):
        return 0
    return count + (last != b"\n")  # a last line without its newline


def _open(path: Path) -> gzip.GzipFile | io.BufferedReader:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
