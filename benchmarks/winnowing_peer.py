"""The simple peers a user would write instead of copytrack, run in the benchmark's process:
winnowing (Schleimer et al.) over pinyin initials (the fingerprinter's letter stream),
k = 12 letters, window w = 8, two sorted numpy arrays (hash, work) as the inverted index.

- `StrongWinnowingIndex`, the peer the benchmarks compare against: a query looks every
  hash up at once (``np.searchsorted`` of both bounds), drops hashes more than
  ``MAX_OWNERS`` works hold (boilerplate), gathers the owners of the remaining ranges with
  one vectorized index and counts them with ``np.bincount``; a work sharing at least
  ``STRONG_MIN_SHARED`` hashes scores shared / min(hashes of either side), and is reported
  at ``STRONG_MIN_SCORE`` or more. No Python loop per hash.
- `WinnowingIndex`, the weak peer of earlier reports (kept so their rows can be rerun): it
  gathers each hash's owners in a Python list comprehension and has no cut for hashes that
  many works share. A suspect is reported as copying a work when at least ``MIN_SHARED``
  of its winnowed hashes are the work's and they make up ``MIN_SHARE`` of the smaller
  side's hashes, or at least ``MIN_SHARED_LONG`` of them (a long excerpt of a long work).
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
MAX_OWNERS = 100
STRONG_MIN_SHARED = 2
STRONG_MIN_SCORE = 0.1
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
    """The weak peer: works added one by one, then `freeze` sorts the postings once for
    lookups; a query gathers each hash's owners in Python."""

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


class StrongWinnowingIndex(WinnowingIndex):
    """The strong peer: the same postings, a query vectorized end to end (module docstring)."""

    def freeze(self) -> None:
        super().freeze()
        self._sizes = np.array(self.sizes, dtype=np.int64)

    def scores(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(works sharing at least STRONG_MIN_SHARED hashes with the text, their scores)."""
        hashes = winnowed(text)
        left = np.searchsorted(self.keys, hashes, side="left")
        counts = np.searchsorted(self.keys, hashes, side="right") - left
        held = (counts > 0) & (counts <= MAX_OWNERS)
        left, counts = left[held], counts[held]
        # Each range's start repeated over its length, plus 0, 1, 2... within it.
        ends = np.cumsum(counts)
        at = np.repeat(left - (ends - counts), counts) + np.arange(ends[-1] if len(ends) else 0)
        shared = np.bincount(self.owners[at])
        works = np.flatnonzero(shared >= STRONG_MIN_SHARED)
        smaller = np.maximum(np.minimum(self._sizes[works], len(hashes)), 1)
        return works, shared[works] / smaller

    def match(self, text: str) -> list[int]:
        """Works the text copies, best score first."""
        works, score = self.scores(text)
        keep = score >= STRONG_MIN_SCORE
        order = np.argsort(-score[keep], kind="stable")
        return works[keep][order].tolist()
