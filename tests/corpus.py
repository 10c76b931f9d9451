"""Samples of the shared corpus (``../shared/corpus``) for tests."""

from __future__ import annotations

from functools import lru_cache

import pytest

from benchmarks.shared_corpus import first_documents


@lru_cache(maxsize=16)
def documents(name: str, limit: int = 200) -> tuple[dict, ...]:
    """The first ``limit`` documents of one corpus file (zh_news, zh_novel, en_news, en_novel)."""
    try:
        return tuple(first_documents(name, limit))
    except FileNotFoundError as missing:
        pytest.skip(str(missing), allow_module_level=True)


def texts(name: str, limit: int = 200) -> list[str]:
    return [doc["text"] for doc in documents(name, limit)]
