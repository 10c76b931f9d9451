# cython: boundscheck=False, wraparound=False, language_level=3
"""`record_search.matching_records` as one compiled pass over the blocks: the same records
as its numpy passes (tested), in a fraction of their time."""

import numpy as np

from libc.stdint cimport int64_t, uint8_t, uint64_t


cdef inline uint64_t _head(const uint8_t* p) noexcept nogil:
    # The record's first 8 bytes read little-endian on any host (one load on x86).
    return (<uint64_t>p[0] | <uint64_t>p[1] << 8 | <uint64_t>p[2] << 16
            | <uint64_t>p[3] << 24 | <uint64_t>p[4] << 32 | <uint64_t>p[5] << 40
            | <uint64_t>p[6] << 48 | <uint64_t>p[7] << 56)


def matching_records(const uint8_t[::1] data, Py_ssize_t size, const int64_t[::1] first,
                     const int64_t[::1] records, const int64_t[::1] of_block,
                     const uint64_t[::1] wanted, uint64_t head_mask):
    """(query, record) of every record of block of_block[q] whose head, masked, is
    wanted[q]: queries in order, each one's records in order."""
    cdef Py_ssize_t queries = of_block.shape[0], q, r, end, hits = 0, n = 0
    cdef const uint8_t* base = &data[0]
    cdef uint64_t key
    # Two passes, counting then filling: a page's blocks stay in the CPU's cache between
    # them, and the output is allocated once at its size.
    for q in range(queries):
        key = wanted[q]
        end = first[of_block[q]] + records[of_block[q]]
        for r in range(first[of_block[q]], end):
            if _head(base + r * size) & head_mask == key:
                hits += 1
    query_array = np.empty(hits, dtype=np.int64)
    record_array = np.empty(hits, dtype=np.int64)
    if hits == 0:
        return query_array, record_array
    cdef int64_t[::1] query = query_array, record = record_array
    for q in range(queries):
        key = wanted[q]
        end = first[of_block[q]] + records[of_block[q]]
        for r in range(first[of_block[q]], end):
            if _head(base + r * size) & head_mask == key:
                query[n] = q
                record[n] = r
                n += 1
    return query_array, record_array
