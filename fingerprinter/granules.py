"""Letter counts of overlapping granules, vectorized.

Counts are differences of cumulative counts taken at block boundaries, where a block is
``gcd(granule, stride)`` letters: indexing (stride n/2) touches 26 numbers per n/2
letters, querying (stride 1) builds the full per-letter cumulative table. Long texts are
processed in chunks so memory stays bounded whatever the text length.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from math import gcd

import numpy as np

from .initials import Letters
from .params import ALPHABET_SIZE

# Granules per chunk: bounds the (chunk × 26) int32 tables to a few tens of MB.
CHUNK_GRANULES = 1 << 17


@dataclass(frozen=True)
class GranuleCounts:
    """Counts of one chunk of granules: ``counts[i, a]`` letters ``a`` in granule ``i``."""

    first: np.ndarray  # index of each granule's first letter in the stream
    counts: np.ndarray  # (granules, 26) int32
    cjk: np.ndarray  # (granules,) number of letters from ideographs


def granule_starts(n_letters: int, granule: int, stride: int) -> np.ndarray:
    """Start letter of every granule; a text shorter than one granule has none."""
    if n_letters < granule:
        return np.empty(0, dtype=np.int64)
    return np.arange(0, n_letters - granule + 1, stride, dtype=np.int64)


def iter_granule_counts(letters: Letters, granule: int, stride: int) -> Iterator[GranuleCounts]:
    """Yield the letter counts of granules ``[s, s+granule)`` for s = 0, stride, 2·stride, …"""
    starts = granule_starts(len(letters), granule, stride)
    block = gcd(granule, stride)
    codes = letters.letters
    cjk_flags = letters.is_cjk
    for lo in range(0, len(starts), CHUNK_GRANULES):
        first = starts[lo : lo + CHUNK_GRANULES]
        base = int(first[0])
        stop = int(first[-1]) + granule
        n_blocks = (stop - base) // block
        block_of = np.arange(stop - base, dtype=np.int64) // block
        per_block = np.bincount(
            block_of * ALPHABET_SIZE + codes[base:stop],
            minlength=n_blocks * ALPHABET_SIZE,
        ).reshape(n_blocks, ALPHABET_SIZE)
        cumulative = np.zeros((n_blocks + 1, ALPHABET_SIZE), dtype=np.int32)
        np.cumsum(per_block, axis=0, out=cumulative[1:])
        cjk_cumulative = np.zeros(stop - base + 1, dtype=np.int32)
        np.cumsum(cjk_flags[base:stop], out=cjk_cumulative[1:])
        left = (first - base) // block
        right = left + granule // block
        yield GranuleCounts(
            first=first,
            counts=cumulative[right] - cumulative[left],
            cjk=cjk_cumulative[first - base + granule] - cjk_cumulative[first - base],
        )
