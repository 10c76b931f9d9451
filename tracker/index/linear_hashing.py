"""Linear hashing of an index shard's blocks (`tracker.index`), as pure functions.

A shard in state (level, split) has 2**level + split blocks: a record whose low 32 bits of
``h`` are ``low`` lives in block ``low mod 2**level``, or ``low mod 2**(level + 1)`` when that
is below ``split`` (the blocks already split at this level). Growing by one block splits
block ``split`` into itself and ``split + 2**level``.
"""

from __future__ import annotations

import numpy as np


def block_of(low: np.ndarray, level: np.ndarray | int, split: np.ndarray | int) -> np.ndarray:
    """The blocks of records whose h has these low 32 bits (uint64), under (level, split):
    one state for all, or one per record."""
    one = np.uint64(1)
    level = np.asarray(level, dtype=np.uint64)
    block = low & ((one << level) - one)
    wider = low & ((one << (level + one)) - one)
    return np.where(block < np.asarray(split, dtype=np.uint64), wider, block)


def grown(level: int, split: int, postings: int, load: int, top_level: int) -> tuple[int, int]:
    """The state of a shard in (level, split) once it holds at most ``load`` postings per
    block for ``postings``, or has 2**top_level blocks: it only grows."""
    blocks = (1 << level) + split
    blocks = max(blocks, min(-(-postings // load), 1 << top_level))
    level = blocks.bit_length() - 1
    return level, blocks - (1 << level)


def split_blocks(level: int, split: int, to_level: int, to_split: int) -> np.ndarray:
    """The blocks of a shard in (level, split) that growing it to (to_level, to_split)
    splits, ascending: every record that moves is in one of them, every other stays."""
    before = (1 << level) + split
    sizes = np.arange(before, (1 << to_level) + to_split, dtype=np.int64)
    # Growing from `size` blocks splits block size - 2**floor(log2(size)); frexp gives
    # floor(log2) + 1 exactly for integers below 2**53.
    halves = np.left_shift(1, np.frexp(sizes)[1] - 1)
    divided = sizes - halves
    return np.unique(divided[divided < before])
