"""Index blocks a process read lately, kept in its memory (`RedisIndex`'s ``cache_bytes``)."""

from __future__ import annotations

import threading
from collections import deque

import numpy as np

ShardVersion = tuple[bytes | None, int]


class KeptBlocks:
    """Blocks a process read lately, by shard and block number, each kept with the version
    of its shard it was read under (`RedisIndex._epochs`: a block kept under another is
    not the block stored), within ``max_bytes``, the oldest dropped first. First in, first
    out: a page's lookup asks for hundreds of blocks, and moving each to the end of an LRU
    cost more than the Redis reads it saved. Found through a table of slots per shard
    (numpy): in a dict of int keys each block cost a few cache misses, the largest item of
    a small library's check profile. The blocks themselves are in a numpy array of
    objects, gathered for a lookup in one fancy index (a list built block by block took
    ~0.2 µs a block, a tenth of a 10,000-work check's matching). Nothing kept is a
    container the garbage collector tracks (a tuple a block made it collect every page or
    so, in pauses of tens of milliseconds; numpy's arrays of objects it does not walk)."""

    def __init__(self, max_bytes: int, shards: int) -> None:
        self._budget = max_bytes
        self._shards = shards
        self._lock = threading.Lock()  # the threads of a worker look up at once
        self._empty()

    @property
    def budget(self) -> int:
        return self._budget

    def clear(self) -> None:
        with self._lock:
            self._empty()

    def _empty(self) -> None:
        # Slot 0 is no block: a table's empty cell, and the epoch no shard has.
        self._slot_of = np.zeros((self._shards, 0), dtype=np.int64)  # [shard, block] -> slot
        self._blocks = np.full(1, None, dtype=object)  # by slot: bytes, None where none
        self._slots_used = 1
        self._epoch = np.full(1, -1, dtype=np.int64)  # by slot
        self._where = np.zeros((1, 2), dtype=np.int64)  # by slot: shard, block
        self._free: list[int] = []
        # The slots put together, oldest first, with their bytes: a large library drops
        # hundreds of blocks a page, dropped a batch at once.
        self._order: deque[tuple[np.ndarray, int]] = deque()
        self._size = 0

    def get(
        self, shards: np.ndarray, blocks: np.ndarray, epochs: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The kept blocks (an array of objects: bytes, None where none is kept) of these
        shards and numbers, read under these versions of their shards, and which are kept."""
        with self._lock:
            slots = self._slots(shards, blocks, epochs)
            return self._blocks[slots], slots != 0

    def put(
        self, shards: np.ndarray, blocks: np.ndarray, epochs: np.ndarray, data: list[bytes]
    ) -> None:
        with self._lock:
            fresh = self._slots(shards, blocks, epochs) == 0  # else another thread read it too
            if not fresh.all():
                shards, blocks, epochs = shards[fresh], blocks[fresh], epochs[fresh]
                data = [block for block, new in zip(data, fresh.tolist(), strict=True) if new]
            slots = self._new_slots(len(data))
            if len(blocks) and blocks.max() >= self._slot_of.shape[1]:
                wider = np.zeros((self._shards, 2 * int(blocks.max()) + 1), dtype=np.int64)
                wider[:, : self._slot_of.shape[1]] = self._slot_of
                self._slot_of = wider
            self._slot_of[shards, blocks] = slots
            self._epoch[slots] = epochs
            self._where[slots] = np.stack([shards, blocks], axis=1)
            # One by one: numpy would make a list of bytes an array of fixed-width strings.
            deque(map(self._blocks.__setitem__, slots.tolist(), data), maxlen=0)  # in C
            size = sum(map(len, data)) + KEPT_ENTRY_BYTES * len(data)
            self._order.append((slots, size))
            self._size += size
            while self._size > self._budget and self._order:
                self._drop(*self._order.popleft())

    def _slots(self, shards: np.ndarray, blocks: np.ndarray, epochs: np.ndarray) -> np.ndarray:
        inside = blocks < self._slot_of.shape[1]
        slots = np.zeros(len(blocks), dtype=np.int64)
        slots[inside] = self._slot_of[shards[inside], blocks[inside]]
        slots[self._epoch[slots] != epochs] = 0
        return slots

    def _new_slots(self, count: int) -> np.ndarray:
        reused = self._free[len(self._free) - min(count, len(self._free)) :]
        del self._free[len(self._free) - len(reused) :]
        first = self._slots_used
        added = count - len(reused)
        self._slots_used += added
        if self._slots_used > len(self._epoch):  # room for twice as many
            size = 2 * self._slots_used
            more = size - len(self._epoch)
            self._blocks = np.concatenate([self._blocks, np.full(more, None, dtype=object)])
            self._epoch = np.concatenate([self._epoch, np.full(more, -1)])
            self._where = np.concatenate([self._where, np.zeros((more, 2), dtype=np.int64)])
        return np.array(reused + list(range(first, first + added)), dtype=np.int64)

    def _drop(self, slots: np.ndarray, size: int) -> None:
        shards, blocks = self._where[slots].T
        still = self._slot_of[shards, blocks] == slots  # else the block was kept anew
        self._slot_of[shards[still], blocks[still]] = 0
        self._epoch[slots] = -1
        self._blocks[slots] = None
        self._free += slots.tolist()
        self._size -= size


# What an entry of KeptBlocks is counted besides its block: the bytes object's header,
# its slot in the list, the tables and the order, and room for the tables' doubling.
KEPT_ENTRY_BYTES = 150
# Blocks are kept while the budget holds at least 1 / this of the index (`_keeps_blocks`).
KEPT_SHARE_WORTH_IT = 2
