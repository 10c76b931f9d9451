"""Second-round comparison: which passages of a suspect copy which passages of a master.

Both texts are reduced to letter streams; every k-gram of letters is encoded exactly as
an integer (base 26, so two k-grams match only when equal). Suspect k-grams are looked up
among the master's, matches on the same diagonal (master position − suspect position)
form runs, and runs are chained across small gaps, so a passage with scattered edits
(inserted or deleted characters, an ad line) stays one span. Spans shorter than
``params.align_min_span`` letters are dropped as chance; Latin letters count at
``params.latin_weight`` there, since a run of English letters says less than a run of
pinyin initials (common phrases repeat across unrelated English texts). Compiled loops
(`_align.pyx`, built when the package is installed) find the pairs, the runs and the
k-grams a text shares with a master near its hits; the numpy passes here stand in where
they could not be built, and are the reference they are tested against.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from . import compiled
from .initials import Letters, to_letters
from .kgrams import kgram_codes
from .params import ALPHABET_SIZE, DEFAULT_PARAMS, FingerprintParams
from .unknown import fill_unknown

# The compiled loops (_align.pyx), or None: the numpy passes below, the same results.
_loop = compiled.load(compiled.ALIGN)
_compiled_diagonal_runs = _loop.diagonal_runs if _loop else None
_compiled_linked_or_long = _loop.linked_or_long if _loop else None
_compiled_matching_pairs = _loop.matching_pairs if _loop else None
_compiled_shared_within = _loop.shared_within if _loop else None

_MAX_OCCURRENCES = 4  # master k-grams repeated more often than this are too common to anchor
_FILL_ROUNDS = 3  # reading unknown letters from the master: each round bridges a few more


class Span(NamedTuple):
    """A matched passage, as character offsets in the original master and suspect texts."""

    master_start: int
    master_end: int
    suspect_start: int
    suspect_end: int


@dataclass(frozen=True)
class Alignment:
    """The matched passages and how much of each text they cover (fractions of letters)."""

    spans: tuple[Span, ...]
    master_coverage: float
    suspect_coverage: float
    matched_letters: int
    matched_weight: float  # matched letters, Latin ones counted at params.latin_weight
    # The part of matched_weight inside k-grams that match exactly: the evidence of copying,
    # without the gaps that chaining bridges (edits, or mere paraphrase of the same story).
    exact_weight: float
    # Per span, its longest stretch matching exactly (same weights): a quoted or excerpted
    # passage shows as one long stretch, phrases shared by chance as several short ones.
    longest_exact: tuple[float, ...] = ()


@dataclass(frozen=True)
class KgramIndex:
    """A master's k-grams sorted (``codes``) with their positions (``order``): what each
    alignment against the master would otherwise sort again."""

    k: int
    codes: np.ndarray
    order: np.ndarray

    @classmethod
    def of(cls, letters: np.ndarray, k: int) -> KgramIndex:
        codes, order = _sorted_kgrams(kgram_codes(letters, k), k)
        return cls(k, codes, order.astype(np.int32))

    def shared_within(self, text_kgrams: np.ndarray, first: np.ndarray, last: np.ndarray) -> int:
        """How many k-grams of a text (``text_kgrams``: its `kgram_codes`) that lie wholly
        inside one of the ranges ``[first[i], last[i])`` (letter indices, clipped to the
        text) occur here."""
        if _compiled_shared_within is not None:
            return _compiled_shared_within(
                self.codes, np.ascontiguousarray(text_kgrams, np.uint64),
                np.ascontiguousarray(first, np.int64), np.ascontiguousarray(last, np.int64),
                self.k,
            )  # fmt: skip
        compiled.fallback_runs(compiled.ALIGN)
        return self.count_present(kgrams_within(text_kgrams, first, last, self.k))

    def count_present(self, codes: np.ndarray) -> int:
        """How many of these k-gram codes, sorted, occur here."""
        if not len(codes) or not len(self.codes):
            return 0
        # Sorted needles: the binary searches walk the codes in order (2x faster).
        at = np.minimum(np.searchsorted(self.codes, codes), len(self.codes) - 1)
        return int(np.count_nonzero(self.codes[at] == codes))


def kgrams_within(
    text_kgrams: np.ndarray, first: np.ndarray, last: np.ndarray, k: int
) -> np.ndarray:
    """The k-grams of a text (its `kgram_codes`) that lie wholly inside one of the ranges
    ``[first[i], last[i])`` (letter indices, clipped to the text), sorted."""
    if not len(text_kgrams):
        return text_kgrams
    n = len(text_kgrams) + k - 1  # letters
    # Letters inside some range: +1 where one opens, -1 where it closes.
    opens = np.clip(first, 0, n)
    closes = np.maximum(np.clip(last, 0, n), opens)  # empty if reversed
    edges = np.bincount(opens, minlength=n + 1) - np.bincount(closes, minlength=n + 1)
    inside = np.concatenate(([0], np.cumsum(np.cumsum(edges[:-1]) > 0)))
    return np.sort(text_kgrams[inside[k:] - inside[: n - k + 1] == k])


def _sorted_kgrams(codes: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k-gram codes of a letter stream (`kgram_codes`) in ascending order, and their
    positions (in ascending order among equal codes). Codes and positions are packed into
    one integer and sorted together when both fit in 64 bits: ~15× faster than an
    argsort."""
    shift = 64 - math.ceil(k * math.log2(ALPHABET_SIZE))
    if shift <= 0 or len(codes) >= 1 << shift:
        order = np.argsort(codes, kind="stable")
        return codes[order], order
    packed = np.sort((codes << np.uint64(shift)) | np.arange(len(codes), dtype=np.uint64))
    order = (packed & np.uint64((1 << shift) - 1)).astype(np.int64)
    return packed >> np.uint64(shift), order


def _matching_pairs(
    master: KgramIndex, suspect_kgrams: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """(master position, suspect position) of every shared k-gram, common k-grams excluded."""
    # Sorted needles: the binary searches walk the master's codes in order (~5× faster).
    s_codes, s_order = _sorted_kgrams(suspect_kgrams, k)
    order, sorted_codes = master.order, master.codes
    if not len(sorted_codes):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    if _compiled_matching_pairs is not None:
        return _compiled_matching_pairs(
            np.ascontiguousarray(sorted_codes, np.uint64), np.ascontiguousarray(order, np.int32),
            np.ascontiguousarray(s_codes, np.uint64), np.ascontiguousarray(s_order, np.int64),
            _MAX_OCCURRENCES,
        )  # fmt: skip
    compiled.fallback_runs(compiled.ALIGN)
    left = np.searchsorted(sorted_codes, s_codes, side="left")
    # Most codes occur once or not at all: the end of a run is searched for only where
    # the code after the first is the same (a second search of every code cost a third
    # of this function).
    last = len(sorted_codes) - 1
    hits = (sorted_codes[np.minimum(left, last)] == s_codes).astype(np.int64)
    longer = np.flatnonzero(hits)
    after = left[longer] + 1
    longer = longer[(after <= last) & (sorted_codes[np.minimum(after, last)] == s_codes[longer])]
    hits[longer] = np.searchsorted(sorted_codes, s_codes[longer], side="right") - left[longer]
    usable = (hits > 0) & (hits <= _MAX_OCCURRENCES)
    suspect_pos = np.repeat(s_order[usable], hits[usable])
    # Position of each pair inside its master range: 0, 1, … per suspect k-gram.
    firsts = np.repeat(left[usable], hits[usable])
    offsets = np.arange(len(suspect_pos)) - np.repeat(
        np.cumsum(hits[usable]) - hits[usable], hits[usable]
    )
    master_pos = order[firsts + offsets]
    return master_pos.astype(np.int64), suspect_pos.astype(np.int64)


def _diagonal_runs(master_pos: np.ndarray, suspect_pos: np.ndarray, k: int) -> np.ndarray:
    """Maximal runs of consecutive matches on one diagonal: rows (m0, m1, s0, s1), end-exclusive."""
    if len(master_pos) == 0:
        return np.empty((0, 4), dtype=np.int64)
    # (diagonal, suspect position) packed in one int64, below 2**63 for texts of up to
    # 10**9 letters: one sort instead of a lexsort (3x faster).
    span = np.int64(suspect_pos.max() + 1)
    diagonal = master_pos - suspect_pos + span  # positive
    packed = np.sort(diagonal * span + suspect_pos)
    if _compiled_diagonal_runs is not None:
        runs = _compiled_diagonal_runs(packed, int(span), k)
        return runs[np.argsort(runs[:, 2], kind="stable")]
    compiled.fallback_runs(compiled.ALIGN)
    d, s = np.divmod(packed, span)
    breaks = np.flatnonzero((np.diff(d) != 0) | (np.diff(s) != 1)) + 1
    starts = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [len(s)])) - 1
    d = d[starts] - span
    s0, s1 = s[starts], s[ends] + k
    runs = np.stack([s0 + d, s1 + d, s0, s1], axis=1)
    return runs[np.argsort(s0, kind="stable")]


def _linked_or_long(
    runs: np.ndarray, weight: np.ndarray, k: int, gap: int, min_span: float
) -> np.ndarray:
    """Which runs can matter to `_chain`'s reported chains: those that could follow or be
    followed by another run (its start within ``gap`` letters after the other's end, and no
    more than ``k`` before, on both texts), and those long enough to be a span alone. Any
    other run would chain with none and be dropped as too short; between unrelated texts
    that is nearly every run, and chaining them one by one in Python is most of aligning."""
    by_end = np.argsort(runs[:, 3], kind="stable")
    if _compiled_linked_or_long is not None:
        return _compiled_linked_or_long(
            np.ascontiguousarray(runs, np.int64), by_end, np.ascontiguousarray(weight, np.float64),
            k, gap, float(min_span),
        )  # fmt: skip
    compiled.fallback_runs(compiled.ALIGN)
    long_enough = weight[runs[:, 1]] - weight[runs[:, 0]] >= min_span
    ends = runs[by_end, 3]
    first = np.searchsorted(ends, runs[:, 2] - gap, side="left")
    count = np.searchsorted(ends, runs[:, 2] + k, side="left") - first
    # Every (earlier, later) pair whose suspect ends are close, then their master ends.
    later = np.repeat(np.arange(len(runs)), count)
    earlier = by_end[np.repeat(first - (np.cumsum(count) - count), count) + np.arange(count.sum())]
    dm = runs[later, 0] - runs[earlier, 1]
    pair = (dm > -k) & (dm <= gap) & (earlier != later)
    linked = np.zeros(len(runs), dtype=bool)
    linked[later[pair]] = True
    linked[earlier[pair]] = True
    return linked | long_enough


def _chain(runs: np.ndarray, k: int, gap: int) -> list[list[Any]]:
    """Chain runs that follow each other within ``gap`` letters on both texts.

    A chain is ``[m0, m1, s0, s1, master intervals of its runs]``.
    """
    chains: list[list[Any]] = []
    open_chains: list[list[Any]] = []
    for m0, m1, s0, s1 in runs.tolist():
        open_chains = [c for c in open_chains if s0 - c[3] <= gap]
        best = None
        for chain in open_chains:
            ds, dm = s0 - chain[3], m0 - chain[1]
            if -k < ds and -k < dm <= gap and s1 > chain[3] and m1 > chain[1]:
                skew = abs(ds - dm)
                if best is None or skew < best[0]:
                    best = (skew, chain)
        if best is not None:
            chain = best[1]
            chain[1], chain[3] = m1, s1
            chain[4].append((m0, m1))
        else:
            chain = [m0, m1, s0, s1, [(m0, m1)]]
            chains.append(chain)
            open_chains.append(chain)
    return chains


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Disjoint, sorted intervals covering the same letters."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _weights(letters: Letters, latin_weight: float) -> np.ndarray:
    """Cumulative information weight: 1 per pinyin initial, ``latin_weight`` per Latin letter."""
    weight = np.where(letters.is_cjk, 1.0, latin_weight)
    return np.concatenate(([0.0], np.cumsum(weight)))


def align_letters(
    master: Letters,
    suspect: Letters,
    params: FingerprintParams | None = None,
    keep: Callable[[Span], bool] | None = None,
    master_kgrams: KgramIndex | None = None,
    suspect_kgrams: np.ndarray | None = None,
) -> Alignment:
    """``align`` on letter streams that the caller already computed.

    ``keep`` may veto spans (e.g. boilerplate) before coverage is computed;
    ``master_kgrams``, the master's ``KgramIndex`` for ``params.align_k``, saves sorting
    its k-grams again when the caller keeps it, and ``suspect_kgrams``, the suspect's
    `kgram_codes`, computing them again.
    """
    params = params or DEFAULT_PARAMS
    k = params.align_k
    if master_kgrams is None or master_kgrams.k != k:
        master_kgrams = KgramIndex.of(master.letters, k)
    if suspect_kgrams is None:
        suspect_kgrams = kgram_codes(suspect.letters, k)
    runs = _diagonal_runs(*_matching_pairs(master_kgrams, suspect_kgrams, k), k)
    for _ in range(_FILL_ROUNDS):
        # Unknown letters (private-use code points) read as the master's letters beside
        # the copied runs around them; the runs they joined may bridge more.
        filled = fill_unknown(master.letters, suspect, runs, params.align_gap)
        if filled is None:
            break
        suspect = filled
        suspect_kgrams = kgram_codes(suspect.letters, k)
        runs = _diagonal_runs(*_matching_pairs(master_kgrams, suspect_kgrams, k), k)
    weight = _weights(master, params.latin_weight)
    runs = runs[_linked_or_long(runs, weight, k, params.align_gap, params.align_min_span)]
    chains = [
        c
        for c in _chain(runs, k, params.align_gap)
        if weight[c[1]] - weight[c[0]] >= params.align_min_span
    ]
    chains.sort(key=lambda c: (c[2], c[0]))
    mo, so = master.offsets, suspect.offsets
    located = [
        (Span(int(mo[m0]), int(mo[m1 - 1]) + 1, int(so[s0]), int(so[s1 - 1]) + 1), chain)
        for chain in chains
        for m0, m1, s0, s1 in [chain[:4]]
    ]
    if keep is not None:
        located = [(span, chain) for span, chain in located if keep(span)]
    spans = tuple(span for span, _ in located)
    chains = [chain for _, chain in located]
    master_union = _union([(c[0], c[1]) for c in chains])
    master_letters = sum(hi - lo for lo, hi in master_union)
    suspect_letters = sum(hi - lo for lo, hi in _union([(c[2], c[3]) for c in chains]))
    exact_union = _union([run for c in chains for run in c[4]])

    def total(intervals: list[tuple[int, int]]) -> float:
        return round(float(sum(weight[hi] - weight[lo] for lo, hi in intervals)), 2)

    return Alignment(
        spans=spans,
        master_coverage=master_letters / len(master) if len(master) else 0.0,
        suspect_coverage=suspect_letters / len(suspect) if len(suspect) else 0.0,
        matched_letters=master_letters,
        matched_weight=total(master_union),
        exact_weight=total(exact_union),
        longest_exact=tuple(
            max((float(weight[hi] - weight[lo]) for lo, hi in chain[4]), default=0.0)
            for chain in chains
        ),
    )


def align(
    master_text: str, suspect_text: str, params: FingerprintParams | None = None
) -> Alignment:
    """Matched passages between a master and a suspect, with coverage of each.

    Spans are in original character offsets; coverages are the fractions of each text's
    letters inside a span. Homophones, traditional characters and punctuation changes do
    not break a span; scattered character edits shorten it by at most a few letters.
    """
    params = params or DEFAULT_PARAMS
    return align_letters(
        to_letters(master_text, params.latin_mode),
        to_letters(suspect_text, params.latin_mode),
        params,
    )
