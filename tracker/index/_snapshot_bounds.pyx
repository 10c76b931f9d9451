# cython: boundscheck=False, wraparound=False, language_level=3
"""`snapshot._bounds` as one compiled pass: the same bounds as its numpy passes (tested).
A page with unknown letters looks up 15,000-80,000 keys in an array of millions that is
seldom in the CPU's cache: the loop finds each key's step of the sample first (the keys
ascend, so each search gallops on from the last), then binary-searches the step's keys
while it asks for the steps of the keys a few places ahead, so their reads overlap."""

import numpy as np

from libc.stdint cimport int64_t, uint64_t


cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define copytrack_prefetch(p) __builtin_prefetch((p), 0, 0)
    #else
    #define copytrack_prefetch(p) ((void)(p))
    #endif
    """
    void copytrack_prefetch(const void* p) noexcept nogil

cdef enum:
    _AHEAD = 8  # keys ahead whose steps are asked for
    _LINE = 8  # keys of a 64-byte cache line


cdef inline Py_ssize_t _first_not_below(
    const uint64_t[::1] keys, Py_ssize_t lo, Py_ssize_t hi, uint64_t key
) noexcept nogil:
    """The first position in keys[lo:hi] of a key >= ``key`` (``hi`` if none)."""
    cdef Py_ssize_t mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


def bounds(const uint64_t[::1] keys, const uint64_t[::1] sample, const uint64_t[::1] low,
           const uint64_t[::1] high, Py_ssize_t step):
    """For each (low, high), ``low`` ascending: the first position of a key >= low, and of
    a key > high (none before the first); ``sample``: every ``step``-th key."""
    cdef Py_ssize_t n = keys.shape[0], count = low.shape[0], samples = sample.shape[0]
    starts_out = np.empty(count, dtype=np.int64)
    stops_out = np.empty(count, dtype=np.int64)
    cdef int64_t[::1] starts = starts_out, stops = stops_out
    cdef Py_ssize_t i, lo, at, reach, line, last = 0
    cdef uint64_t key, top
    with nogil:
        # Each key's first sampled key >= it (`samples` past them all), in stops.
        for i in range(count):
            key = low[i]
            lo, reach = last, 1
            while lo + reach < samples and sample[lo + reach - 1] < key:
                lo += reach
                reach *= 2
            lo = _first_not_below(sample, lo, min(lo + reach, samples), key)
            stops[i] = lo
            last = lo
        for i in range(count):
            if i + _AHEAD < count:
                at = stops[i + _AHEAD]
                line = 0 if at == 0 else (at - 1) * step
                while line < min(at * step + 1, n):
                    copytrack_prefetch(&keys[line])
                    line += _LINE
            key, top, at = low[i], high[i], stops[i]
            # The first key >= low lies after the sampled key before it, up to and
            # including the sampled key it found.
            lo = _first_not_below(keys, 0 if at == 0 else (at - 1) * step + 1,
                                  n if at >= samples else at * step, key)
            starts[i] = lo
            at = lo
            while at < n and keys[at] <= top:  # a key's postings: a few, seldom a thousand
                at += 1
            stops[i] = at
    return starts_out, stops_out
