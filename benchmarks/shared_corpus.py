"""Read the shared corpus (``../shared/corpus``) for benchmarks, tests and fitting."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from tracker.jsonl import BadLine, read_jsonl

SHARED_DIR = Path(__file__).resolve().parents[1].parent / "shared"
CORPUS_DIR = SHARED_DIR / "corpus"
FILES = ("zh_news", "zh_novel", "en_news", "en_novel")


def iter_documents(*names: str, corpus_dir: Path = CORPUS_DIR) -> Iterator[dict]:
    """Documents of the named corpus files (all four by default), in file order."""
    for name in names or FILES:
        path = corpus_dir / f"{name}.jsonl.gz"
        if not path.exists():
            raise FileNotFoundError(
                f"{path} not found: the shared corpus must sit beside the repository"
            )
        for item in read_jsonl(path):
            if isinstance(item, BadLine):
                raise ValueError(str(item))
            yield item[1]


def first_documents(name: str, limit: int) -> list[dict]:
    """The first ``limit`` documents of one corpus file."""
    return list(islice(iter_documents(name), limit))
