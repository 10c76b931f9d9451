# cython: boundscheck=False, wraparound=False, cdivision=True, language_level=3
"""Content anchors (`winnowing.anchors`) as one compiled loop: each k-gram's hash, and the
minimum of every window by a monotone queue, O(n). The same positions as the numpy passes
of `fingerprinter.winnowing` (tested on the corpus), in a fraction of their time."""

import numpy as np

from libc.stdint cimport int64_t, uint8_t, uint64_t

from ._mix cimport ALPHABET, mix64


def anchors(const uint8_t[::1] letters, int w, int k, int hash_shift):
    """Positions (int64, sorted, distinct) of the least hash of every window of ``w``
    k-gram hashes, the rightmost on ties; a text of fewer k-grams than ``w`` selects its
    rightmost least one. A k-gram's hash: its letters as a base-26 number, mixed (`mix64`)
    and shifted right by ``hash_shift``."""
    cdef Py_ssize_t grams = letters.shape[0] - k + 1, i, j, head = 0, tail = 0, count = 0
    if grams <= 0:
        return np.empty(0, dtype=np.int64)
    if w > grams:
        w = <int>grams
    hashes_array = np.empty(grams, dtype=np.uint64)
    queue_array = np.empty(grams, dtype=np.int64)
    out = np.empty(grams, dtype=np.int64)
    cdef uint64_t[::1] hashes = hashes_array
    cdef int64_t[::1] queue = queue_array  # positions, their hashes rising from head
    cdef int64_t[::1] selected = out
    cdef uint64_t code = 0, top = 1  # top: 26 ** (k - 1), modulo 2**64 as the codes
    with nogil:
        for j in range(k - 1):
            code = code * ALPHABET + letters[j]
            top *= ALPHABET
        for i in range(grams):
            code = code * ALPHABET + letters[i + k - 1]  # the k-gram at i
            hashes[i] = mix64(code) >> hash_shift
            code -= letters[i] * top  # its first letter out
            # An equal or greater hash before this one is never a window's rightmost least.
            while tail > head and hashes[queue[tail - 1]] >= hashes[i]:
                tail -= 1
            queue[tail] = i
            tail += 1
            if queue[head] <= i - w:
                head += 1
            if i >= w - 1 and (count == 0 or selected[count - 1] != queue[head]):
                selected[count] = queue[head]
                count += 1
    return out[:count].copy()
