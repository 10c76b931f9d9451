"""Finding a lookup's postings in the blocks it read: the records of each fingerprint's
block whose key is the fingerprint's.

A block is a run of fixed-size records in no order (`redis_index`'s layout), so a lookup
compares every record of its block with the key asked: ~100 records a fingerprint, ~50,000
for a page. A compiled loop (`_record_search.pyx`, built when the package is installed)
does it in one pass over the blocks where they lie; the numpy passes here stand in where it
could not be built, and are the reference the tests compare it with.
"""

from __future__ import annotations

import numpy as np

from fingerprinter import compiled

#: The compiled loop (_record_search.pyx); where it does not load, the numpy passes below
#: give the same records.
LOOP = "tracker.index._record_search"
_loop = compiled.load(LOOP)
_compiled_matching_records = _loop.matching_records if _loop else None


def matching_records(
    blocks: list[bytes | None] | np.ndarray,
    size: int,
    of_block: np.ndarray,
    wanted: np.ndarray,
    head_mask: np.uint64,
) -> tuple[np.ndarray, np.ndarray]:
    """(query, records): for each query q, every record of ``blocks[of_block[q]]`` (runs of
    ``size``-byte records, at least 8 bytes each, or None for none; ``of_block`` sorted,
    naming every block) whose first 8 bytes, read little-endian and masked by ``head_mask``,
    are ``wanted[q]``; a (hits, size) uint8 array of their bytes. ``blocks``: a list, or a
    numpy array of objects."""
    if _compiled_matching_records is not None:
        return _compiled_matching_records(
            blocks, size, np.ascontiguousarray(of_block, np.int64),
            np.ascontiguousarray(wanted, np.uint64), int(head_mask),
        )  # fmt: skip
    compiled.fallback_runs(LOOP)
    # Joined, and padded so that every column's view fits when there is no record.
    filled: list[bytes] = [block or b"" for block in blocks]
    data = b"".join([*filled, bytes(8)])
    records = np.fromiter(map(len, filled), dtype=np.int64, count=len(filled)) // size
    query, record = _numpy_matching_records(data, size, records, of_block, wanted, head_mask)
    rows = np.frombuffer(data, dtype=np.uint8)[record[:, None] * size + np.arange(size)]
    return query, rows.reshape(len(record), size)


def _numpy_matching_records(
    data: bytes,
    size: int,
    records: np.ndarray,
    of_block: np.ndarray,
    wanted: np.ndarray,
    head_mask: np.uint64,
) -> tuple[np.ndarray, np.ndarray]:
    """(query, record number in data) of the matching records."""
    count = int(records.sum())
    first = np.cumsum(records) - records
    heads = np.ndarray((count,), dtype="<u8", buffer=data, strides=(size,))
    # The first query of each block is compared with the records where they lie; the
    # few others (a page's queries rarely share a block) with copies of theirs.
    leads = np.ones(len(of_block), dtype=bool)
    leads[1:] = of_block[1:] != of_block[:-1]
    lead = np.flatnonzero(leads)
    # By the 4 bytes that end the key first (half the memory of the whole heads), then
    # the few equal whole.
    key_bytes = (int(head_mask).bit_length() + 7) // 8  # its last byte holds key bits
    word_at = max(key_bytes - 4, 0)
    word_shift = np.uint64(8 * word_at)
    word_mask = np.uint32(int(head_mask >> word_shift) & 0xFFFFFFFF)
    words = np.ndarray((count,), dtype="<u4", buffer=data, offset=word_at, strides=(size,))
    wanted_words = (wanted[lead] >> word_shift).astype(np.uint32) & word_mask
    record = np.flatnonzero((words & word_mask) == np.repeat(wanted_words, records))
    query = lead[np.searchsorted(first, record, side="right") - 1]
    whole = (heads[record] & head_mask) == wanted[query]
    record, query = record[whole], query[whole]
    others = np.flatnonzero(~leads)
    if len(others):
        span = records[of_block[others]]
        at = np.repeat(first[of_block[others]] - (np.cumsum(span) - span), span)
        at += np.arange(len(at))
        asked = np.repeat(others, span)
        hit = (heads[at] & head_mask) == wanted[asked]
        record = np.concatenate((record, at[hit]))
        query = np.concatenate((query, asked[hit]))
    return query, record
