"""Samples of the corpus for tests: the shared corpus (``../shared/corpus``) when it sits
beside the repository, else the bundled public-domain one (``testbed/corpus``)."""

from __future__ import annotations

from functools import lru_cache
from itertools import islice

from benchmarks.shared_corpus import iter_documents
from testbed.corpus import default_corpus_dir

CORPUS_DIR = default_corpus_dir()


@lru_cache(maxsize=16)
def documents(name: str, limit: int = 200) -> tuple[dict, ...]:
    """The first ``limit`` documents of one corpus file (zh_news, zh_novel, en_news, en_novel)."""
    return tuple(islice(iter_documents(name, corpus_dir=CORPUS_DIR), limit))


def texts(name: str, limit: int = 200) -> list[str]:
    return [doc["text"] for doc in documents(name, limit)]


def novel_chapters(count: int) -> list[str]:
    """``count`` different stretches of the Chinese novels: whole chapters where the corpus
    has that many (the shared one), else its chapters cut into equal parts (the bundled
    corpus has 30), so a test of a 120-chapter book runs on a clone alone too."""
    chapters = texts("zh_novel", count)
    parts = -(-count // len(chapters))
    if parts > 1:
        chapters = [
            text[i * len(text) // parts : (i + 1) * len(text) // parts]
            for text in chapters
            for i in range(parts)
        ]
    return chapters[:count]
