"""Letter k-grams as integers: base ALPHABET_SIZE, so two k-grams are equal only when their
codes are (up to 13 letters; longer ones modulo 2**64)."""

from __future__ import annotations

import numpy as np

from .params import ALPHABET_SIZE


def kgram_codes(letters: np.ndarray, k: int) -> np.ndarray:
    """Every k-gram of a letter stream as an integer; exact (collision-free) for k ≤ 13."""
    n = len(letters) - k + 1
    if n <= 0:
        return np.empty(0, dtype=np.uint64)
    # Short k-grams fit in 32 bits, where numpy's arithmetic is ~4× faster.
    dtype = np.uint32 if ALPHABET_SIZE**k < 2**32 else np.uint64
    # Codes of `size`-grams doubled in length, and joined into those of k-grams by the
    # binary digits of k: 3 passes over the text for k = 8, not 7.
    codes: np.ndarray | None = None  # codes of width-grams, once any
    width = 0
    part: np.ndarray = letters.astype(dtype)
    size = 1
    while True:
        if k & 1:
            if codes is None:
                codes, width = part, size
            else:
                count = len(letters) - width - size + 1
                codes = codes[:count] * _power(size, dtype) + part[width : width + count]
                width += size
        k >>= 1
        if not k:
            assert codes is not None  # k >= 1 has a bit set
            return codes[:n].astype(np.uint64, copy=False)
        count = len(letters) - 2 * size + 1
        part = part[:count] * _power(size, dtype) + part[size : size + count]
        size *= 2


def _power(exponent: int, dtype: type) -> np.integer:
    """ALPHABET_SIZE ** exponent in ``dtype``, modulo 2**64 as numpy's arithmetic wraps
    (k-grams longer than 13 letters: codes modulo 2**64, as ever)."""
    return dtype(pow(ALPHABET_SIZE, exponent, 1 << 64))
