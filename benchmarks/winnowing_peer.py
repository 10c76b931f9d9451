"""The simple peer a user would write instead of copytrack, run in the benchmark's process:
winnowing (Schleimer et al.) over pinyin initials, k = 12 letters, window w = 8, a sorted
array of (hash, work) as the inverted index, pure Python + numpy.

A suspect is reported as copying a work when at least ``MIN_SHARED`` of its winnowed hashes
are the work's and they make up ``MIN_SHARE`` of the smaller side's hashes, or at least
``MIN_SHARED_LONG`` of them (a long excerpt of a long work).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from fingerprinter import to_letters

K = 12
W = 8
MIN_SHARED = 4
MIN_SHARE = 0.1
MIN_SHARED_LONG = 20
_BASE = np.uint64(1_000_003)
_MASK = np.uint64((1 << 61) - 1)


def winnowed(text: str) -> np.ndarray:
    """Distinct winnowed k-gram hashes of the text's letters."""
    letters = to_letters(text).letters.astype(np.uint64)
    n = len(letters) - K + 1
    if n <= 0:
        return np.empty(0, dtype=np.uint64)
    codes = np.zeros(n, dtype=np.uint64)
    for i in range(K):  # polynomial hash, wrapping in 64 bits
        codes = codes * _BASE + letters[i : i + n] + np.uint64(1)
    codes = (codes * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(3)
    if n <= W:
        return np.unique(codes[[int(np.argmin(codes))]])
    windows = sliding_window_view(codes, W)
    picks = np.argmin(windows, axis=1) + np.arange(len(windows))
    return np.unique(codes[picks])


class WinnowingIndex:
    """Works added one by one, then `freeze` sorts the postings once for lookups."""

    def __init__(self) -> None:
        self._hashes: list[np.ndarray] = []
        self._works: list[np.ndarray] = []
        self.sizes: list[int] = []
        self.keys: np.ndarray = np.empty(0, dtype=np.uint64)
        self.owners: np.ndarray = np.empty(0, dtype=np.int32)

    def add(self, text: str) -> int:
        hashes = winnowed(text)
        work = len(self.sizes)
        self._hashes.append(hashes)
        self._works.append(np.full(len(hashes), work, dtype=np.int32))
        self.sizes.append(len(hashes))
        return work

    def freeze(self) -> None:
        keys = np.concatenate(self._hashes)
        owners = np.concatenate(self._works)
        order = np.argsort(keys, kind="stable")
        self.keys, self.owners = keys[order], owners[order]
        self._hashes, self._works = [], []

    @property
    def postings(self) -> int:
        return len(self.keys)

    @property
    def memory_bytes(self) -> int:
        return self.keys.nbytes + self.owners.nbytes

    def match(self, text: str) -> list[int]:
        """Works the text copies, most shared hashes first."""
        hashes = winnowed(text)
        left = np.searchsorted(self.keys, hashes, side="left")
        right = np.searchsorted(self.keys, hashes, side="right")
        if not (right > left).any():
            return []
        hits = np.concatenate([self.owners[a:b] for a, b in zip(left, right, strict=True) if b > a])
        works, shared = np.unique(hits, return_counts=True)
        sizes = np.array(self.sizes)[works]
        smaller = np.minimum(sizes, len(hashes))
        keep = (shared >= MIN_SHARED_LONG) | (
            (shared >= MIN_SHARED) & (shared >= MIN_SHARE * smaller)
        )
        order = np.argsort(-shared[keep], kind="stable")
        return works[keep][order].tolist()
