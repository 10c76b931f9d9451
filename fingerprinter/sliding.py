"""Fingerprints of the granules at every letter offset, computed incrementally.

Sliding a granule by one letter changes at most two letter counts: the letter that
leaves and the letter that enters. So value(w+1) = value(w) + Δ(w), where Δ needs only
those two counts, which come from comparing the letter stream with itself shifted by
1..n (2n byte-wide SIMD passes) instead of 26 lookups per offset; the result equals
counting each granule's letters (tested). A compiled loop (`_sliding.pyx`, built when the
package is installed) gives the same values ~8x faster, one letter at a time; these numpy
passes stand in where it could not be built.
Values are uint64 and the running sum wraps modulo 2**64, which is exact for differences.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from . import compiled
from .initials import Letters
from .params import ALPHABET_SIZE, FingerprintParams
from .quantize import level_table
from .reference import ReferenceFrame

# The compiled loop (_sliding.pyx), or None: the numpy passes below, the same values.
_loop = compiled.load(compiled.SLIDING)
_compiled_window_values = _loop.window_values if _loop else None

# Letters per chunk: bounds memory to a few hundred MB whatever the text length.
CHUNK_LETTERS = 1 << 21
NO_LETTER = 255  # pads the letter stream; never equal to a letter code


def _window_counts_of_own_letter(codes: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For each position p with letter a: a's count in [p, p+n) and in [p-n, p)."""
    # n byte-wise comparisons of the stream with itself shifted: each is one SIMD sweep
    # over bytes, ~15× faster than binary searches in per-letter position lists.
    # equal[p] (for shift j) says letter p recurs j later: it counts ahead of p and
    # behind p + j.
    length = len(codes)
    padded = np.full(length + n, NO_LETTER, dtype=np.uint8)
    padded[:length] = codes
    ahead = np.ones(length, dtype=np.uint8)  # counts ≤ n ≤ MAX_GRANULE = 255
    behind = np.zeros(length + n, dtype=np.uint8)
    for shift in range(1, n + 1):
        equal = padded[shift : shift + length] == codes
        if shift < n:
            ahead += equal
        behind[shift : shift + length] += equal
    behind = behind[:length]
    return ahead, behind


@lru_cache(maxsize=32)
def _step_tables(params: FingerprintParams, frame: ReferenceFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per (frame, letter, count): value change when that letter leaves / enters a granule."""
    n = params.granule
    levels = level_table(params, frame).reshape(2, ALPHABET_SIZE, n + 1)
    leave = np.zeros_like(levels)
    enter = np.zeros_like(levels)
    leave[:, :, 1:] = levels[:, :, :-1] - levels[:, :, 1:]
    enter[:, :, :-1] = levels[:, :, 1:] - levels[:, :, :-1]
    leave, enter = leave.reshape(2, -1), enter.reshape(2, -1)
    leave.setflags(write=False)  # cached: shared by every call
    enter.setflags(write=False)
    return leave, enter


def _chunk_values(
    codes: np.ndarray, cjk: np.ndarray, params: FingerprintParams, frame: ReferenceFrame
) -> np.ndarray:
    if _compiled_window_values is not None:
        table = level_table(params, frame)
        return _compiled_window_values(codes, cjk.view(np.uint8), params.granule, table)
    compiled.fallback_runs(compiled.SLIDING)
    return _numpy_chunk_values(codes, cjk, params, frame)


def _numpy_chunk_values(
    codes: np.ndarray, cjk: np.ndarray, params: FingerprintParams, frame: ReferenceFrame
) -> np.ndarray:
    """The values of every granule of a chunk by numpy passes (where the compiled loop was
    not built; the reference it is tested against)."""
    n = params.granule
    windows = len(codes) - n + 1
    ahead, behind = _window_counts_of_own_letter(codes, n)
    leaving, entering = codes[: windows - 1], codes[n:]
    # Row of (letter, count) for the leaving letter's count in the window it leaves, and
    # for the entering letter's count before it enters.
    out_row = leaving.astype(np.int32) * (n + 1)
    out_row += ahead[: windows - 1]
    in_row = entering.astype(np.int32) * (n + 1)
    in_row += behind[n:]
    same = leaving == entering
    first_row = np.arange(ALPHABET_SIZE) * (n + 1) + np.bincount(codes[:n], minlength=ALPHABET_SIZE)
    cjk_cumulative = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum(cjk, out=cjk_cumulative[1:])
    uses_cjk_frame = 2 * (cjk_cumulative[n:] - cjk_cumulative[:windows]) >= n
    leave, enter = _step_tables(params, frame)
    levels = level_table(params, frame).reshape(2, -1)
    by_frame = {}
    # Most texts are one script: compute the second frame only when some granule needs it.
    needed = (not uses_cjk_frame.all(), bool(uses_cjk_frame.any()))  # latin, cjk
    for frame_index in (index for index, used in enumerate(needed) if used):
        delta = leave[frame_index][out_row] + enter[frame_index][in_row]
        delta[same] = 0
        values = np.empty(windows, dtype=np.uint64)
        values[0] = levels[frame_index][first_row].sum(dtype=np.uint64)
        np.cumsum(delta, out=values[1:])
        values[1:] += values[0]
        by_frame[frame_index] = values
    if len(by_frame) == 1:
        return next(iter(by_frame.values()))
    return np.where(uses_cjk_frame, by_frame[1], by_frame[0])


def sliding_values(
    letters: Letters,
    params: FingerprintParams,
    frame: ReferenceFrame,
    starts: np.ndarray | None = None,
) -> np.ndarray:
    """Fingerprint values (uint64) of the granules at every letter offset, or at ``starts``.

    ``starts`` (sorted letter positions whose granules fit in the text) picks values out
    chunk by chunk, so memory stays bounded by the chunk, not the text. Computing every
    offset and keeping a fifth of them is still ~2× faster than counting each granule.
    """
    n = params.granule
    total = len(letters) - n + 1
    if total <= 0:
        return np.empty(0, dtype=np.uint64)
    codes, cjk = letters.letters, letters.is_cjk
    parts = []
    for first in range(0, total, CHUNK_LETTERS):
        last = min(first + CHUNK_LETTERS, total)
        stop = last + n - 1
        values = _chunk_values(codes[first:stop], cjk[first:stop], params, frame)
        if starts is not None:
            wanted = starts[np.searchsorted(starts, first) : np.searchsorted(starts, last)]
            values = values[wanted - first]
        parts.append(values)
    return np.concatenate(parts)
