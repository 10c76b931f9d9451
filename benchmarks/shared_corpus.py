"""Read the shared corpus (``../shared/corpus``) for benchmarks, tests and fitting."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from tracker.core.jsonl import BadLine, read_jsonl

SHARED_DIR = Path(__file__).resolve().parents[1].parent / "shared"
CORPUS_DIR = SHARED_DIR / "corpus"
WEBPAGES_DIR = SHARED_DIR / "webpages"
FILES = ("zh_news", "zh_novel", "en_news", "en_novel")


def require_shared(path: Path = CORPUS_DIR) -> None:
    """Exit with one line when ``path`` (part of ``../shared``) is missing.

    Benchmarks measure the shared corpus and real web pages at full size; the small
    corpus bundled for the demo and the tests would measure something else.
    """
    if not path.exists():
        sys.exit(
            f"benchmarks: {path} not found: benchmarks need the developers' shared corpus "
            "and web pages in ../shared beside the repository (the demo and tests do not)"
        )


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
