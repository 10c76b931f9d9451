"""Reading JSONL files (plain or gzip) line by line, reporting bad lines instead of failing."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class BadLine:
    """A line that could not be used, with what to do about it."""

    path: Path
    line_no: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line_no}: {self.reason}"


def read_jsonl(path: Path) -> Iterator[tuple[int, dict] | BadLine]:
    """Yield ``(line_no, object)`` for each JSON object line and ``BadLine`` for the others.

    Blank lines are skipped; undecodable bytes, invalid JSON and non-objects are reported
    with their line number, and reading goes on with the next line.
    """
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as lines:
        for line_no, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as err:
                yield BadLine(
                    path,
                    line_no,
                    f"not UTF-8 ({err.reason} at byte {err.start}); re-save the file as UTF-8",
                )
                continue
            except json.JSONDecodeError as err:
                yield BadLine(path, line_no, f"invalid JSON ({err.msg} at column {err.colno})")
                continue
            if not isinstance(obj, dict):
                yield BadLine(path, line_no, f"expected a JSON object, got {type(obj).__name__}")
                continue
            yield line_no, obj
