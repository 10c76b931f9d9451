"""`MemoryIndex`: the index as dicts in this process (unit tests, evaluation sweeps)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import replace

import numpy as np

from .base import (
    IndexStats,
    IndexVersionMismatch,
    InvertedIndex,
    Postings,
    as_ints,
    checked_master,
    distinct_fingerprints,
    given_places,
    width_error,
)


class MemoryIndex(InvertedIndex):
    """Dict-of-dicts index in this process: unit tests and evaluation sweeps. Fingerprints
    may carry ``check_bits`` above their ``fingerprint_bits``, as in `RedisIndex`."""

    def __init__(self, fingerprint_bits: int = 64, check_bits: int = 0) -> None:
        # fingerprint → {master id: (check, place)}
        self._lists: dict[int, dict[int, tuple[int, int]]] = {}
        self._bits, self._check_bits = fingerprint_bits, check_bits
        self._mask = (1 << fingerprint_bits) - 1
        self._postings = 0
        self._version: str | None = None
        self._generation: str | None = None
        self._removals = 0
        self._removing: dict[str, float] = {}  # token -> until when

    def add(
        self, master_id: int, fingerprints: Iterable[int], places: Iterable[int] | None = None
    ) -> int:
        master_id = checked_master(master_id)
        before = self._postings
        fingerprints = as_ints(fingerprints)
        placed = given_places(places, len(fingerprints)).tolist()
        # The first place of a fingerprint given twice (a dict keeps the last it is given).
        first_places = dict(reversed(list(zip(self._fitting(fingerprints), placed, strict=True))))
        for fp, place in first_places.items():
            ids = self._lists.setdefault(fp & self._mask, {})
            if master_id not in ids:
                ids[master_id] = (fp >> self._bits, place)
                self._postings += 1
        return self._postings - before

    def remove(self, master_id: int, fingerprints: Iterable[int]) -> int:
        master_id = checked_master(master_id)
        before = self._postings
        for fp in self._fitting(distinct_fingerprints(fingerprints)):
            ids = self._lists.get(fp & self._mask)
            if ids and master_id in ids:
                del ids[master_id]
                self._postings -= 1
                if not ids:
                    del self._lists[fp & self._mask]
        return before - self._postings

    def _read(
        self, fingerprints: Sequence[int], max_df: int | None
    ) -> list[tuple[int, ...] | None]:
        out: list[tuple[int, ...] | None] = []
        for fp in self._fitting(fingerprints):
            ids = self._lists.get(fp & self._mask, {})
            out.append(None if max_df is not None and len(ids) > max_df else tuple(sorted(ids)))
        return out

    def _fitting(self, fingerprints: Sequence[int]) -> Sequence[int]:
        if any(fp >> (self._bits + self._check_bits) for fp in fingerprints):
            raise width_error(self._bits, self._check_bits)
        return fingerprints

    def postings(
        self, fingerprints: Sequence[int] | np.ndarray, max_df: int | None = None, kept: bool = True
    ) -> Postings:
        found = super().postings(fingerprints, max_df)
        asked = as_ints(fingerprints)
        stored = [
            self._lists[asked[q] & self._mask][m]
            for q, m in zip(found.query.tolist(), found.master.tolist(), strict=True)
        ]
        exact = [check == asked[q] >> self._bits
                 for q, (check, _) in zip(found.query.tolist(), stored, strict=True)]  # fmt: skip
        place = np.array([place for _, place in stored], dtype=np.uint8)
        return replace(found, exact=np.array(exact, dtype=bool), place=place)

    def stats(self) -> IndexStats:
        memory = sys.getsizeof(self._lists) + sum(map(sys.getsizeof, self._lists.values()))
        return IndexStats(
            self._postings,
            len(self._lists),
            memory,
            memory / self._postings if self._postings else 0.0,
        )

    def clear(self) -> None:
        self._lists.clear()
        self._postings = 0
        self._version = None
        self._generation = None
        self._removals = 0
        self._removing.clear()

    def ensure_version(self, version: str) -> None:
        if self._postings == 0:
            self._version = version
        elif self._version != version:
            raise IndexVersionMismatch("in-memory index", self._version, version)

    def generation(self) -> tuple[str | None, int]:
        return self._generation, self._postings

    def set_generation(self, generation: str) -> None:
        self._generation = generation

    def begin_removal(self, token: str, until: float) -> None:
        self._removing[token] = until
        self._removals += 1

    def end_removal(self, token: str) -> None:
        self._removing.pop(token, None)

    def removals(self, now: float) -> tuple[int, int]:
        return self._removals, sum(until > now for until in self._removing.values())

    def reserve(self, postings: int) -> None:
        """Dicts grow as postings come at no extra cost: nothing to do."""
