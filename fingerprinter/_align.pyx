# cython: boundscheck=False, wraparound=False, cdivision=True, language_level=3
"""The alignment's pair-finding, diagonal runs, runs worth chaining and shared k-grams near
the hits (`align._matching_pairs`, `align._diagonal_runs`, `align._linked_or_long`,
`align.KgramIndex.shared_within`) as compiled loops: the same results as the numpy passes
of `fingerprinter.align` (tested), without their dozen array passes a candidate."""

import numpy as np

from libc.stdint cimport int32_t, int64_t, uint64_t


def matching_pairs(const uint64_t[::1] master_codes, const int32_t[::1] master_order,
                   const uint64_t[::1] suspect_codes, const int64_t[::1] suspect_order,
                   int max_occurrences):
    """(master position, suspect position) of every k-gram both have, by one walk of the
    two sorted code arrays; a code the master has more than ``max_occurrences`` times
    pairs with nothing. Each suspect k-gram (in code order) with its master positions in
    their order."""
    cdef Py_ssize_t masters = master_codes.shape[0], suspects = suspect_codes.shape[0]
    cdef Py_ssize_t j, lo = 0, hi = 0, m, n = 0
    master_out = np.empty(suspects * max_occurrences, dtype=np.int64)
    suspect_out = np.empty(suspects * max_occurrences, dtype=np.int64)
    cdef int64_t[::1] master_pos = master_out, suspect_pos = suspect_out
    cdef uint64_t code
    with nogil:
        for j in range(suspects):
            code = suspect_codes[j]
            if j == 0 or code != suspect_codes[j - 1]:  # else the run found for the last one
                lo = hi
                while lo < masters and master_codes[lo] < code:
                    lo += 1
                hi = lo
                while hi < masters and master_codes[hi] == code:
                    hi += 1
            if hi > lo and hi - lo <= max_occurrences:
                for m in range(lo, hi):
                    master_pos[n] = master_order[m]
                    suspect_pos[n] = suspect_order[j]
                    n += 1
    return master_out[:n], suspect_out[:n]


def diagonal_runs(const int64_t[::1] packed, int64_t span, int k):
    """Rows (m0, m1, s0, s1), end-exclusive, of the maximal runs of matches at consecutive
    suspect positions on one diagonal (master position - suspect position), the matches
    given sorted, each packed as (diagonal + span) * span + suspect position; in that
    order."""
    cdef Py_ssize_t pairs = packed.shape[0], i, n = 0
    cdef int64_t diagonal, position, start_diagonal = 0, start_position = 0, last = -2, last_d = 0
    out = np.empty((pairs, 4), dtype=np.int64)
    cdef int64_t[:, ::1] runs = out
    if pairs == 0:
        return out
    with nogil:
        for i in range(pairs + 1):
            if i < pairs:
                diagonal = packed[i] // span - span
                position = packed[i] % span
            if i == pairs or (i > 0 and (diagonal != last_d or position != last + 1)):
                runs[n, 0] = start_position + start_diagonal
                runs[n, 1] = last + k + start_diagonal
                runs[n, 2] = start_position
                runs[n, 3] = last + k
                n += 1
            if i < pairs:
                if i == 0 or diagonal != last_d or position != last + 1:
                    start_diagonal, start_position = diagonal, position
                last_d, last = diagonal, position
    return out[:n]


def shared_within(const uint64_t[::1] codes, const uint64_t[::1] text_kgrams,
                  const int64_t[::1] first, const int64_t[::1] last, int k):
    """How many k-grams of a text (``text_kgrams``) lying wholly inside the union of the
    letter ranges ``[first[i], last[i])`` (clipped to the text) occur in ``codes`` (a
    master's, sorted): `align.KgramIndex.shared_within` in one pass, no sort."""
    cdef Py_ssize_t grams = text_kgrams.shape[0], letters, i, j, opens, closes
    cdef Py_ssize_t lo, hi, mid, run = 0, depth = 0, found = 0, size = codes.shape[0]
    cdef uint64_t code
    if grams == 0 or size == 0:
        return 0
    letters = grams + k - 1
    edges_array = np.zeros(letters + 1, dtype=np.int64)
    cdef int64_t[::1] edges = edges_array
    with nogil:
        for i in range(first.shape[0]):
            opens = min(max(first[i], 0), letters)
            closes = max(min(max(last[i], 0), letters), opens)  # empty if reversed
            edges[opens] += 1
            edges[closes] -= 1
        for j in range(letters):
            depth += edges[j]
            run = run + 1 if depth > 0 else 0
            if run >= k:  # the k-gram ending at letter j is covered
                code = text_kgrams[j - k + 1]
                lo, hi = 0, size
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if codes[mid] < code:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo < size and codes[lo] == code:
                    found += 1
    return found


def linked_or_long(const int64_t[:, ::1] runs, const int64_t[::1] by_end,
                   const double[::1] weight, int k, int gap, double min_span):
    """`align._linked_or_long` in one pass: for each run (rows m0, m1, s0, s1), the runs
    whose suspect ends (``by_end``: the rows by s1, stably) lie from ``gap`` letters before
    its start to ``k`` after are checked against it, no array of candidate pairs made."""
    cdef Py_ssize_t count = runs.shape[0], i, j, p, lo, hi, mid
    cdef int64_t low_end, high_end, dm
    out = np.zeros(count, dtype=bool)
    cdef unsigned char[::1] keep = out.view(np.uint8)
    with nogil:
        for i in range(count):
            if weight[runs[i, 1]] - weight[runs[i, 0]] >= min_span:
                keep[i] = 1
            # The runs by end from the first ending at or after s0 - gap, to the first
            # ending at or after s0 + k.
            low_end, high_end = runs[i, 2] - gap, runs[i, 2] + k
            lo, hi = 0, count
            while lo < hi:
                mid = (lo + hi) >> 1
                if runs[by_end[mid], 3] < low_end:
                    lo = mid + 1
                else:
                    hi = mid
            for p in range(lo, count):
                j = by_end[p]
                if runs[j, 3] >= high_end:
                    break
                dm = runs[i, 0] - runs[j, 1]
                if dm > -k and dm <= gap and j != i:
                    keep[i] = 1
                    keep[j] = 1
    return out
