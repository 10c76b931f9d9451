"""Granule letter counts → quantized deviations from the reference frame → one integer.

For letter ``a`` with expected frequency ``p`` in a granule of ``n`` letters, the count
``c`` becomes ``z = (c − n·p) / sd`` (sd of a binomial count), then a level
``floor(z / width + levels / 2)`` clipped to ``[0, levels)``. Levels are concatenated in
alphabet order (``a`` most significant), 1 or 2 bits per letter, and bit ``SCRIPT_BIT``
says which script's frame was used. Because counts are small integers, the whole mapping
is a precomputed table ``(script, letter, count) → shifted level``: a fingerprint is the
sum of 26 table entries, which ``sliding`` updates with two differences per letter step.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .params import ALPHABET_SIZE, SCRIPT_BIT, FingerprintParams
from .reference import ReferenceFrame

_MIN_SD = 0.5  # letters a script never uses (i, u, v in pinyin) get a constant level


@lru_cache(maxsize=32)
def level_table(params: FingerprintParams, frame: ReferenceFrame) -> np.ndarray:
    """Flat uint64 table indexed by ``(script·26 + letter)·(n+1) + count``."""
    n = params.granule
    p = frame.as_array()[:, :, None]  # (script, letter, 1)
    count = np.arange(n + 1, dtype=np.float64)[None, None, :]
    sd = np.maximum(np.sqrt(n * p * (1.0 - p)), _MIN_SD)
    z = (count - n * p) / sd
    level = np.clip(np.floor(z / params.width + params.levels / 2), 0, params.levels - 1)
    bits = params.bits_per_letter
    shift = (bits * (ALPHABET_SIZE - 1 - np.arange(ALPHABET_SIZE)))[None, :, None]
    table = level.astype(np.uint64) << shift.astype(np.uint64)
    # The script bit goes on one letter's entries only: the 26 entries are summed.
    table[1, 0] |= np.uint64(1) << np.uint64(SCRIPT_BIT)
    table = np.ascontiguousarray(table.reshape(-1))
    table.setflags(write=False)
    return table
