"""The Daguan granule fingerprint, made shift-robust.

Indexing a master (``fingerprint``) takes granules of ``n`` letters starting at
content-defined anchors (winnowing over letter k-grams: one in every window of ``stride``
positions). Querying a suspect (``query_fingerprints``) takes a granule at every anchor of
windows of ``query_window`` ≤ ``stride`` positions (by default the same windows: a fifth
of the offsets). The minimum of a ``stride`` window is also the minimum of the smaller
windows inside it, so wherever the text is the master's, the suspect is queried at the
master's indexed anchors: whatever was cut, inserted or moved around a copied stretch, the
suspect contains the very granule that was indexed as long as the stretch holds the
first ``stride`` window and the granule at its anchor.

Guarantee: a stretch of at least ``params.guaranteed_span`` letters
(``granule + stride − 1``, 29 with the defaults) copied from a master —
with any homophone substitution, traditional characters, full-/half-width forms,
whitespace or punctuation changes — yields at least one query fingerprint equal to an
indexed fingerprint of that master, wherever the stretch sits in the suspect. Letters are
pinyin initials of Chinese characters and Latin letters, so for Chinese text a letter is a
character, punctuation not counted.

Values are computed from integer arithmetic and table lookups only: identical across
processes and machines (no salted ``hash()``).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from itertools import repeat
from typing import NamedTuple

import numpy as np

from .granule_check import granule_checks
from .initials import Letters, to_letters
from .params import DEFAULT_PARAMS, VALUE_BITS, FingerprintParams
from .reference import ReferenceFrame, load_reference
from .sliding import sliding_values
from .unknown import completed_values, has_unknown
from .winnowing import anchors


class Fingerprint(NamedTuple):
    """One granule's fingerprint; ``start``/``end`` are character offsets in the original text.

    A named tuple rather than a dataclass: a master yields one per ~7 characters, and
    tuples are built ~2× faster (measured in ``benchmarks/bench_fingerprint.py``).
    """

    value: int
    start: int
    end: int


@dataclass(frozen=True)
class FingerprintArray:
    """Fingerprints as parallel numpy arrays (what the index and the matcher consume)."""

    values: np.ndarray  # uint64
    starts: np.ndarray  # int64, character offsets in the original text
    ends: np.ndarray
    checks: np.ndarray  # uint64, `granule_checks` of the granules' letters
    first_letters: np.ndarray  # int64, where each granule starts in the letter stream

    def __len__(self) -> int:
        return len(self.values)

    def tagged(self) -> np.ndarray:
        """The values with their granule's check in the bits above ``VALUE_BITS``: what
        the index keeps with a posting, and a lookup compares beside the value."""
        return self.values | (self.checks << np.uint64(VALUE_BITS))

    def to_list(self) -> list[Fingerprint]:
        columns = (self.values.tolist(), self.starts.tolist(), self.ends.tolist())
        # Hundreds of thousands of new tuples would trigger the cyclic garbage collector
        # over and over, though none can be part of a cycle: pause it (half the time).
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            # tuple.__new__ straight from C: no Python frame per fingerprint (2× faster
            # than calling the class).
            return list(map(tuple.__new__, repeat(Fingerprint), zip(*columns, strict=True)))
        finally:
            if was_enabled:
                gc.enable()


def _located(
    letters: Letters, values: np.ndarray, first: np.ndarray, params: FingerprintParams
) -> FingerprintArray:
    """Attach original character offsets to granule values starting at letters ``first``."""
    if len(values) == 0:
        empty = np.empty(0, dtype=np.int64)
        none = np.empty(0, dtype=np.uint64)
        return FingerprintArray(none, empty, empty, none, empty)
    return FingerprintArray(
        values=values,
        starts=letters.offsets[first],
        ends=letters.offsets[first + params.granule - 1] + 1,
        checks=granule_checks(letters.letters, first, params.granule),
        first_letters=first,
    )


def index_starts(letters: Letters, params: FingerprintParams) -> np.ndarray:
    """First letters of the indexed granules (those that fit in the text)."""
    last = len(letters) - params.granule
    if last < 0:
        return np.empty(0, dtype=np.int64)
    if params.anchoring == "fixed":
        return np.arange(0, last + 1, params.stride, dtype=np.int64)
    starts = anchors(letters.letters, params.stride, params.anchor_k)
    return starts[starts <= last]


def granule_fingerprints(
    letters: Letters,
    params: FingerprintParams,
    starts: np.ndarray,
    frame: ReferenceFrame | None = None,
) -> FingerprintArray:
    """Fingerprints of the granules starting at the (sorted) letter positions ``starts``."""
    frame = frame if frame is not None else load_reference(params.reference)
    return _located(letters, sliding_values(letters, params, frame, starts), starts, params)


def query_starts(letters: Letters, params: FingerprintParams) -> np.ndarray:
    """First letters of the granules a suspect is queried at (see the module docstring)."""
    last = len(letters) - params.granule
    if last < 0:
        return np.empty(0, dtype=np.int64)
    if params.anchoring == "fixed" or params.query_window == 1:
        return np.arange(last + 1, dtype=np.int64)
    starts = anchors(letters.letters, params.query_window, params.anchor_k)
    return starts[starts <= last]


def query_granule_fingerprints(
    letters: Letters, params: FingerprintParams, frame: ReferenceFrame | None = None
) -> FingerprintArray:
    """Fingerprints of the query granules (`query_starts`), distinct values only, in text
    order."""
    frame = frame if frame is not None else load_reference(params.reference)
    if has_unknown(letters):
        completed = completed_values(letters, params, frame)
        if completed is not None:
            return _located(letters, *_first_occurrences(*completed), params)
    starts = query_starts(letters, params)
    if len(starts) == 0:
        return _located(letters, np.empty(0, dtype=np.uint64), starts, params)
    values = sliding_values(letters, params, frame, starts)
    # Neighbouring granules often share a value: drop repeats cheaply before sorting.
    first = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    _, keep = np.unique(values[first], return_index=True)
    first = np.sort(first[keep])
    return _located(letters, values[first], starts[first], params)


def _first_occurrences(values: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``values``, each with the start of its first occurrence, ordered by start and
    then by value. A text with unknown letters makes 15,000-80,000 values: ``np.unique``
    with ``return_index`` (a stable argsort) and a ``lexsort`` of the two keys took 20-80 ms
    of them, an argsort and one sort of start and rank packed together take a tenth."""
    if not len(values):
        return values, starts
    order = np.argsort(values)  # not stable: a value's first occurrence is its least index
    ordered = values[order]
    heads = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    first = np.minimum.reduceat(order, heads)
    # Starts are letters of a text of at most MAX_COMPLETIONS granules: they and the ranks
    # among the distinct values fit in one int64.
    bits = len(heads).bit_length()
    packed = np.sort(starts[first].astype(np.int64) << bits | np.arange(len(heads)))
    return ordered[heads][packed & ((1 << bits) - 1)], packed >> bits


def index_array(
    text: str, params: FingerprintParams | None = None, frame: ReferenceFrame | None = None
) -> FingerprintArray:
    """``fingerprint`` as arrays."""
    params = params or DEFAULT_PARAMS
    letters = to_letters(text, params.latin_mode)
    return granule_fingerprints(letters, params, index_starts(letters, params), frame)


def query_array(
    text: str, params: FingerprintParams | None = None, frame: ReferenceFrame | None = None
) -> FingerprintArray:
    """``query_fingerprints`` as arrays."""
    params = params or DEFAULT_PARAMS
    return query_granule_fingerprints(to_letters(text, params.latin_mode), params, frame)


def fingerprint(text: str, params: FingerprintParams | None = None) -> list[Fingerprint]:
    """Fingerprints of a master text: one per indexed granule (see the module docstring).

    Returns ``[]`` for a text with fewer than ``params.granule`` letters.
    """
    return index_array(text, params).to_list()


def query_fingerprints(text: str, params: FingerprintParams | None = None) -> list[Fingerprint]:
    """Fingerprints of a suspect text: a granule at every query anchor, distinct values only.

    Any copied stretch of ``params.guaranteed_span`` letters of a master yields one of the
    master's indexed fingerprints here (see the module docstring).
    """
    return query_array(text, params).to_list()
