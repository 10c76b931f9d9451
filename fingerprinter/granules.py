"""Letter counts of granules starting at given letter positions, vectorized.

A granule's counts are differences of cumulative counts at its two ends. Only the
cumulative counts at granule boundaries are built: letters are labelled with the number
of boundaries before them and counted per label with one ``bincount``. Long texts are
processed in chunks of granules so memory stays bounded whatever the text length.
(Granules at *every* offset use ``sliding`` instead, which is cheaper there.)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .initials import Letters
from .params import ALPHABET_SIZE

# Granules per chunk: small enough that a chunk's (26 × segments) tables stay in cache
# (measured: 2^14 is ~1.8× faster than 2^17 on the shared corpus).
CHUNK_GRANULES = 1 << 14


@dataclass(frozen=True)
class GranuleCounts:
    """Counts of one chunk of granules: ``counts[a, i]`` letters ``a`` in granule ``i``."""

    first: np.ndarray  # index of each granule's first letter in the stream
    counts: np.ndarray  # (26, granules) int32, letter-major like everything downstream
    cjk: np.ndarray  # (granules,) number of letters from ideographs


def _counts_at(letters: Letters, first: np.ndarray, granule: int) -> GranuleCounts:
    base, stop = int(first[0]), int(first[-1]) + granule
    is_bound = np.zeros(stop - base + 1, dtype=bool)
    is_bound[first - base] = True
    is_bound[first - base + granule] = True
    # rank[x] = boundaries at or before x. Letters with equal rank lie between the same two
    # boundaries, so one bincount over ranks gives the counts of every segment.
    rank = np.cumsum(is_bound, dtype=np.int32)
    label = rank[:-1]
    segments = int(rank[-1]) + 1
    # Letter-major layout: numpy's cumsum and take are far faster along the contiguous axis.
    per_segment = np.bincount(
        letters.letters[base:stop].astype(np.int32) * segments + label,
        minlength=ALPHABET_SIZE * segments,
    ).reshape(ALPHABET_SIZE, segments)
    # cumulative[:, j] = counts of the letters before boundary j.
    cumulative = np.cumsum(per_segment, axis=1, dtype=np.int32)
    left = rank[first - base] - 1
    right = rank[first - base + granule] - 1
    counts = np.take(cumulative, right, axis=1)
    counts -= np.take(cumulative, left, axis=1)
    cjk_cumulative = np.zeros(stop - base + 1, dtype=np.int32)
    np.cumsum(letters.is_cjk[base:stop], dtype=np.int32, out=cjk_cumulative[1:])
    return GranuleCounts(
        first=first,
        counts=counts,
        cjk=cjk_cumulative[first - base + granule] - cjk_cumulative[first - base],
    )


def iter_granule_counts(
    letters: Letters, starts: np.ndarray, granule: int
) -> Iterator[GranuleCounts]:
    """Yield the letter counts of granules ``[s, s+granule)`` for sorted ``starts``."""
    for lo in range(0, len(starts), CHUNK_GRANULES):
        yield _counts_at(letters, starts[lo : lo + CHUNK_GRANULES], granule)
