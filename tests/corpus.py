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
