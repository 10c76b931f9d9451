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

# Granules per chunk: bounds the (chunk × 26) tables to a few tens of MB.
CHUNK_GRANULES = 1 << 17


@dataclass(frozen=True)
class GranuleCounts:
    """Counts of one chunk of granules: ``counts[i, a]`` letters ``a`` in granule ``i``."""

    first: np.ndarray  # index of each granule's first letter in the stream
    counts: np.ndarray  # (granules, 26) int64
    cjk: np.ndarray  # (granules,) number of letters from ideographs


def _counts_at(letters: Letters, first: np.ndarray, granule: int) -> GranuleCounts:
    base, stop = int(first[0]), int(first[-1]) + granule
    is_bound = np.zeros(stop - base + 1, dtype=bool)
    is_bound[first - base] = True
    is_bound[first - base + granule] = True
    # rank[x] = boundaries at or before x. Letters with equal rank lie between the same two
    # boundaries, so one bincount over ranks gives the counts of every segment.
    rank = np.cumsum(is_bound)
    label = rank[:-1]
    segments = int(rank[-1]) + 1
    # Letter-major layout: numpy's cumsum is ~10× faster along the contiguous axis.
    per_segment = np.bincount(
        letters.letters[base:stop].astype(np.int64) * segments + label,
        minlength=ALPHABET_SIZE * segments,
    ).reshape(ALPHABET_SIZE, segments)
    cjk_segment = np.bincount(label[letters.is_cjk[base:stop]], minlength=segments)
    # cumulative[:, j] = counts of the letters before boundary j.
    cumulative = np.cumsum(per_segment, axis=1)
    cjk_cumulative = np.cumsum(cjk_segment)
    left = rank[first - base] - 1
    right = rank[first - base + granule] - 1
    return GranuleCounts(
        first=first,
        counts=(cumulative[:, right] - cumulative[:, left]).T,
        cjk=cjk_cumulative[right] - cjk_cumulative[left],
    )


def iter_granule_counts(
    letters: Letters, starts: np.ndarray, granule: int
) -> Iterator[GranuleCounts]:
    """Yield the letter counts of granules ``[s, s+granule)`` for sorted ``starts``."""
    for lo in range(0, len(starts), CHUNK_GRANULES):
        yield _counts_at(letters, starts[lo : lo + CHUNK_GRANULES], granule)
