"""Inverted index: fingerprint (unsigned int < 2**64) → set of integer master ids.

One interface (`InvertedIndex`, in `base`) with interchangeable backends, datasketch-style:

- `MemoryIndex` (`memory`): plain dicts, for unit tests and evaluation sweeps.
- `RedisIndex` (`redis_index`): the production index in Redis/Valkey, compact, sizing
  itself as it grows (`linear_hashing`), one round trip per query; its Lua scripts are in
  `scripts`, the blocks a process keeps in `kept_blocks`.
"""

from .base import (
    MAX_MASTER_ID,
    PLACE_LETTERS,
    PLACES,
    IndexedMaster,
    IndexStats,
    IndexVersionMismatch,
    InvertedIndex,
    MiscountedShard,
    Postings,
    places_of,
)
from .memory import MemoryIndex
from .redis_index import LOAD, MIN_LEVEL, SHARD_BITS, SHARDS, RedisIndex

__all__ = [
    "LOAD",
    "MAX_MASTER_ID",
    "MIN_LEVEL",
    "PLACES",
    "PLACE_LETTERS",
    "SHARDS",
    "SHARD_BITS",
    "IndexStats",
    "IndexVersionMismatch",
    "IndexedMaster",
    "InvertedIndex",
    "MemoryIndex",
    "MiscountedShard",
    "Postings",
    "RedisIndex",
    "places_of",
]
