"""A few bits that tell whether two granules with the same fingerprint have the same letters.

A granule's fingerprint counts its letters, so it survives edits inside the granule and
small shifts of it; it also lets unrelated text collide by chance (similar counts in
another order), and in a library of 100,000 works most masters a page hits only by chance
are hit that way. The check hashes ``CHECK_LETTERS`` letters in the middle of the granule,
at a content-defined place (the least hash among a few positions, as winnowing does): a
copied granule agrees (homophones, traditional forms, punctuation and spacing aside:
letters are pinyin initials), also when it is shifted by a few letters or its ends were
edited or fall outside a short copied excerpt; a chance collision disagrees 63 times in 64.
The index keeps it beside each posting (`FingerprintArray.tagged`), so the matcher can
tell the two apart before reading a work. A compiled loop (`_granule_check.pyx`, built when
the package is installed) makes the same checks; the numpy passes here stand in where it
could not be built.
"""

from __future__ import annotations

import numpy as np

from . import compiled
from .kgrams import kgram_codes
from .winnowing import mix64

# The compiled loop (_granule_check.pyx), or None: the numpy passes below, the same checks.
_loop = compiled.load(compiled.GRANULE_CHECK)
_compiled_checks = _loop.granule_checks if _loop else None

#: Bits of a check (what fits beside a posting's key in the index's records).
CHECK_BITS = 6
#: Letters a check covers.
CHECK_LETTERS = 8
# Positions in the middle of a granule where the checked letters may start.
_CHOICES = 9


def granule_checks(letters: np.ndarray, starts: np.ndarray, granule: int) -> np.ndarray:
    """The CHECK_BITS-bit check (uint64) of the granule of ``granule`` letters (codes
    0..25) at each start; every granule must lie within ``letters``."""
    if len(starts) == 0:
        return np.empty(0, dtype=np.uint64)
    choices = min(_CHOICES, granule - CHECK_LETTERS + 1)
    first = starts + (granule - CHECK_LETTERS + 1 - choices) // 2
    if _compiled_checks is not None:
        first = np.ascontiguousarray(first, np.int64)
        letters = np.ascontiguousarray(letters, np.uint8)
        return _compiled_checks(letters, first, CHECK_LETTERS, choices, CHECK_BITS)
    compiled.fallback_runs(compiled.GRANULE_CHECK)
    hashes = mix64(kgram_codes(letters, CHECK_LETTERS))
    # The least of each granule's choices, one shifted gather at a time (a view of every
    # window, gathered and reduced along its short axis, took half again as long).
    least = hashes[first]
    for shift in range(1, choices):
        np.minimum(least, hashes[first + shift], out=least)
    # The low bits: choosing the least hash biases its high ones.
    return least & np.uint64((1 << CHECK_BITS) - 1)
