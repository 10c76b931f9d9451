"""Winnowing (Schleimer, Wilkerson & Aiken 2003): content-defined anchor positions.

In every window of ``w`` consecutive hashes the minimum is selected (the rightmost one on
ties), so every window holds a selected position and the same text selects the same
positions wherever it sits. copytrack starts its indexed granules at these anchors: a
passage shared by several masters (a site footer) then gets identical fingerprints in
each of them, which the index sees as boilerplate. A compiled loop (`_winnowing.pyx`, built
when the package is installed) selects the same anchors in half the time; the numpy passes
here stand in where it could not be built.
"""

from __future__ import annotations

import numpy as np

from . import compiled
from .kgrams import kgram_codes

# The compiled loop (_winnowing.pyx), or None: the numpy passes below, the same positions.
_loop = compiled.load(compiled.WINNOWING)
_compiled_anchors = _loop.anchors if _loop else None

_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)


def mix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer: a fixed, well-spread permutation of uint64 values."""
    z = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * _MIX_1
    z = (z ^ (z >> np.uint64(27))) * _MIX_2
    return z ^ (z >> np.uint64(31))


_POSITION_BITS = 24
_CHUNK = (1 << _POSITION_BITS) - (1 << 16)  # positions per chunk; leaves room for the overlap
HASH_BITS = 64 - _POSITION_BITS


def sliding_min(keys: np.ndarray, w: int) -> np.ndarray:
    """Minimum of every window of ``w`` keys, by doubling: O(n log w) whole-array passes.

    (Faster in numpy than van Herk's O(n) block scans, whose accumulations run along
    rows of only ``w`` elements: measured 4× on the shared corpus with w = 10.)
    """
    minima, span = keys, 1
    while 2 * span <= w:
        minima = np.minimum(minima[:-span], minima[span:])
        span *= 2
    # minima[i] = min(keys[i : i + span]); two overlapping spans cover a window of w.
    windows = len(keys) - w + 1
    return np.minimum(minima[:windows], minima[w - span : w - span + windows])


def winnow(hashes: np.ndarray, w: int) -> np.ndarray:
    """Positions selected by winnowing with window ``w`` (sorted, distinct).

    ``hashes`` must be below ``2**HASH_BITS``. Ties go to the rightmost position; a
    sequence shorter than one window selects its rightmost minimum.
    """
    hashes = np.asarray(hashes, dtype=np.uint64)
    if len(hashes) == 0:
        return np.empty(0, dtype=np.int64)
    if int(hashes.max()) >> HASH_BITS:
        raise ValueError(f"winnow needs hashes below 2**{HASH_BITS}")
    w = min(w, len(hashes))
    selected = []
    top = (1 << _POSITION_BITS) - 1
    for first in range(0, len(hashes) - w + 1, _CHUNK):
        chunk = hashes[first : first + _CHUNK + w - 1]
        # Key = hash, then the position counted from the right: the minimum key is the
        # minimal hash at its rightmost position.
        keys = chunk << np.uint64(_POSITION_BITS)
        keys |= np.arange(top, top - len(chunk), -1, dtype=np.int64).view(np.uint64)
        minima = sliding_min(keys, w)
        # Window minima move only rightwards: a repeated minimum is the same position.
        minima = minima[np.concatenate(([True], minima[1:] != minima[:-1]))]
        selected.append((first + top) - (minima & np.uint64(top)).astype(np.int64))
    positions = np.concatenate(selected)
    # Neighbouring chunks overlap by w - 1 windows, which may select the same position.
    return positions[np.concatenate(([True], positions[1:] != positions[:-1]))]


def anchors(letters: np.ndarray, w: int, k: int) -> np.ndarray:
    """Content-defined anchor positions of a letter stream: winnowed hashes of letter k-grams."""
    if _compiled_anchors is not None:
        return _compiled_anchors(np.ascontiguousarray(letters, np.uint8), w, k, 64 - HASH_BITS)
    compiled.fallback_runs(compiled.WINNOWING)
    return winnow(kgram_hashes(kgram_codes(letters, k)), w)


def kgram_hashes(codes: np.ndarray) -> np.ndarray:
    """The hashes `anchors` winnows, below 2**HASH_BITS, of k-gram codes (`kgram_codes`)."""
    return mix64(codes.astype(np.uint64, copy=False)) >> np.uint64(64 - HASH_BITS)
