"""`RedisIndex`: the production index in Redis/Valkey.

Two interchangeable backends behind one interface (datasketch-style storage):

- `MemoryIndex`: plain dicts, for unit tests and evaluation sweeps.
- `RedisIndex`: the production index in Redis/Valkey, compact, sizing itself as it grows,
  one round trip per query.

RedisIndex layout (prefix ``copytrack:ix`` by default: tracker.core.keys). A fingerprint is first
mixed by a bijection of its ``fingerprint_bits`` (so skewed fingerprints still spread
evenly); the low ``SHARD_BITS`` of the mixed value pick one of 16 shards, the rest (``h``)
a block of the shard by linear hashing, and ``h`` without its low ``MIN_LEVEL`` bits (which
every block number holds) is the record's key:

- ``{prefix}:meta``  HASH: ``version`` (fingerprint parameters), ``layout``,
  ``generation``, ``removals`` (removals of postings begun) and ``removing:TOKEN`` (the
  time until which a removal is under way): see `tracker.masters.generation`; and
  ``blocks_checked_until``, when the next check of every block is due
  (`RedisIndex.block_check_due`).
- ``{prefix}:{SS}``  HASH per shard (SS = shard number in hex, a Redis Cluster hash tag):
  ``level`` and ``split`` of its linear hashing, ``postings`` and ``blocks`` counters
  (changed in the same script or transaction as the blocks: `miscounted_shards` counts
  the blocks against them, so a block deleted or evicted alone shows), ``layout``, and
  ``born`` (when it was created) and ``writes`` (how many times its blocks changed), by
  which a process keeps the blocks it read (``cache_bytes``): a block kept
  under the shard's current ``born`` and ``writes`` is the block stored.
- ``{prefix}:{SS}:{block}``  STRING: the block's postings as fixed-size records in no
  order (new ones are appended), key bytes (big-endian), the master id (uint32
  big-endian), then the posting's place (one byte, see `places_of`); a lookup reads its
  blocks with plain ``MGET`` and finds the keys' records in the client (numpy): Redis only
  copies bytes.

A fingerprint may carry ``check_bits`` more bits above its ``fingerprint_bits``: a check of
its granule's letters (`fingerprinter.granule_check`). The record keeps them above the key;
a lookup finds a posting by the fingerprint alone and says whether the checks agree
(`Postings.exact`).

A shard starts with 2**MIN_LEVEL blocks and splits one block in two whenever it holds more
than ``LOAD`` postings per block on average, so blocks stay under a kilobyte at any
library size: a posting costs its record (11 bytes with the default 54-bit fingerprints)
plus its share of a block key, about 12 bytes in all, with no server setting to tune
(`linear_hashing`). The writer splits the blocks: it reads them, divides their
records and writes them back in a transaction that applies only if nothing wrote to the
shard meanwhile, or, when writes keep coming, has a script split them in Valkey.
Every script and transaction touches the keys of one shard only (one hash slot), so the
layout also suits Redis Cluster.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError, WatchError

from ..core.batches import batched
from .base import (
    IndexedMaster,
    IndexStats,
    IndexVersionMismatch,
    InvertedIndex,
    MiscountedShard,
    Postings,
    as_uint64,
    checked_master,
    distinct_fingerprints,
    given_places,
    posting_lists,
    width_error,
)
from .kept_blocks import KEPT_ENTRY_BYTES, KEPT_SHARE_WORTH_IT, KeptBlocks, ShardVersion
from .linear_hashing import block_of, grown, split_blocks
from .record_search import matching_records
from .scripts import (
    ADD_SCRIPT,
    APPEND_SCRIPT,
    BLOCK_CHECK_DUE_SCRIPT,
    COUNT_SCRIPT,
    REMOVE_SCRIPT,
    SPLIT_SCRIPT,
)

SHARD_BITS = 4
SHARDS = 1 << SHARD_BITS
MIN_LEVEL = 8  # a shard starts with 2**MIN_LEVEL blocks
# Postings per block, on average, before a block is split. 96 rather than 48: in a large
# library each block is rewritten once per batch of works that touches it, and fewer,
# larger blocks take more of a batch's postings per rewrite (100,000 works: ingest 435 ->
# 555 works/s, 11.8 -> 10.9 bytes per posting, lookups no slower).
LOAD = 96

# Records sent per script call, and blocks read per MGET: bounds the time a command blocks
# the server, while a pipeline still sends every command of a batch in one round trip.
_CHUNK = 4000
# Fingerprints looked up per round trip: bounds the client's memory (each reads a block of
# about a kilobyte) on a whole book, while a 5k-character page takes one.
_LOOKED_UP_AT_ONCE = 16_384
# Records routed in one go; more are routed a shard at a time (bounded memory).
_ROUTED_AT_ONCE = 200_000
# Fingerprints mixed at once when a batch's postings are made (bounded memory).
_MIXED_AT_ONCE = 1 << 20
# Records a shard may hold for `RedisIndex.reserve` to split its blocks ahead (~22 MB
# read at once); a fuller shard grows as postings come.
_RESERVE_MOVES = 2_000_000
# Times a shard's blocks are split in the client (RedisIndex._split_here) before a script
# splits them in Valkey: other processes wrote to the shard each time in between.
_SPLIT_TRIES = 3
# Blocks one COUNT_SCRIPT call looks at (~2 ms of the server's time), and the times a shard
# is counted again when writes changed it while it was counted.
_COUNTED_AT_ONCE = 2048
_COUNT_TRIES = 3

# Odd multipliers of the fingerprint mixer (MurmurHash3's fmix64 constants).
_MIX = (np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53))


class RedisIndex(InvertedIndex):
    """Sharded, self-sizing index in Redis/Valkey; see the module docstring.

    fingerprint_bits is the width the fingerprinter emits (every fingerprint must be below
    2**fingerprint_bits), check_bits those of the check it may carry above them;
    narrower fingerprints make shorter records. Both are part of the layout stored with
    the index, and a process using others gets IndexVersionMismatch. cache_bytes: the
    blocks this process keeps after reading them (a page's fingerprints meet many blocks
    the pages before it met: boilerplate, popular works), read again only once their shard
    changed.
    """

    def __init__(
        self,
        client: redis.Redis | redis.RedisCluster,
        prefix: str,
        fingerprint_bits: int = 64,
        check_bits: int = 0,
        cache_bytes: int = 0,
        layout_tag: str = "",
    ):
        if not 32 <= fingerprint_bits <= 64:
            raise ValueError("fingerprint_bits must be within 32..64")
        if not 0 <= check_bits <= 64 - fingerprint_bits:
            raise ValueError("check_bits must be within 0..64 - fingerprint_bits")
        self.client = client
        self.prefix = prefix
        self.fingerprint_bits = fingerprint_bits
        self.check_bits = check_bits
        # "ix5" names this encoding: a change of mixer, sharding or record format bumps it.
        # layout_tag names an index built around these blocks (`snapshot`): a process
        # reading the blocks alone would miss postings, so it must refuse them.
        self.layout = (
            f"{layout_tag + '+' if layout_tag else ''}"
            f"ix5:fingerprint_bits={fingerprint_bits},check_bits={check_bits},"
            f"shards={SHARDS},load={LOAD}"
        )
        self._meta = f"{prefix}:meta"
        self._shards = [f"{prefix}:{{{shard:02x}}}" for shard in range(SHARDS)]
        # What the names of a shard's blocks start with (of one length for every shard).
        self._block_prefixes = np.array(
            [list(f"{key}:".encode()) for key in self._shards], dtype=np.uint8
        )
        self._mask = np.uint64((1 << fingerprint_bits) - 1)
        self._shift = np.uint64(fingerprint_bits // 2)
        h_bits = fingerprint_bits - SHARD_BITS
        # A record's key: h without its low MIN_LEVEL bits, then the check above it.
        self._key_len = (h_bits - MIN_LEVEL + check_bits + 7) // 8
        self._key_mask = np.uint64((1 << (h_bits - MIN_LEVEL)) - 1)
        # A record's first 8 bytes hold its key in the high bytes (big-endian); read as a
        # little-endian number they compare with _as_record_head(key) under this mask
        # (the check bits aside) with no byte swap of every record.
        self._key_shift = np.uint64(64 - 8 * self._key_len)
        self._head_mask = self._as_record_head(np.array([self._key_mask]))[0]
        # Splitting reads bit `level` of h within the key's last 3 bytes.
        self._top_level = min(h_bits, MIN_LEVEL + 24) - 1
        self._layout_checked = False
        self._shard_state: dict[int, tuple[int, int]] = {}
        self._blocks_kept = KeptBlocks(cache_bytes, SHARDS) if cache_bytes else None
        # The version of each shard as last read: (born, writes), and how many it has had.
        self._versions: dict[int, ShardVersion] = {}
        self._epochs = [0] * SHARDS
        self._postings_seen: dict[int, int] = {}  # of each shard, as its last read found
        # A plain client's lookups are packed here, their hundreds of block names at once
        # (redis-py packs a command's arguments one by one: ~0.2 ms a page); a cluster's
        # go through its pipeline, which sends each command to its node.
        self._packs_reads = isinstance(client, redis.Redis) and client.connection is None
        self._state_reads = [_hmget_packed(key.encode(), *_STATE_FIELDS) for key in self._shards]
        self._add = client.register_script(ADD_SCRIPT)
        self._append = client.register_script(APPEND_SCRIPT)
        self._split = client.register_script(SPLIT_SCRIPT)
        self._remove = client.register_script(REMOVE_SCRIPT)
        self._count = client.register_script(COUNT_SCRIPT)
        self._block_check_due = client.register_script(BLOCK_CHECK_DUE_SCRIPT)

    @property
    def shard_keys(self) -> list[str]:
        """The keys of the shards' states (``postings`` among their fields)."""
        return list(self._shards)

    @property
    def postings_seen(self) -> int:
        """The postings of the shards as this process's last lookup found them."""
        return sum(self._postings_seen.values())

    def check_layout(self) -> None:
        """Refuse an index of another layout (`IndexVersionMismatch`); read once a process."""
        self._check_layout()

    @property
    def record_bytes(self) -> int:
        """Bytes of one posting's record in a block (key, the uint32 master id, place)."""
        return self._key_len + 5

    def add(
        self, master_id: int, fingerprints: Iterable[int], places: Iterable[int] | None = None
    ) -> int:
        return self.add_many([(master_id, fingerprints, places)])

    def add_many(self, masters: Sequence[IndexedMaster], fresh: bool = False) -> int:
        return self.add_mixed(*self._records_of(masters), fresh=fresh)

    def add_mixed(self, x: np.ndarray, master: np.ndarray, fresh: bool = False) -> int:
        """`add_many` of postings given as mixed fingerprints (`mixed`) and their tags (the
        master id above the place byte, as `records` gives them)."""
        shard_sizes = np.bincount((x & np.uint64(SHARDS - 1)).astype(np.int64), minlength=SHARDS)
        touched = np.flatnonzero(shard_sizes).tolist()
        if fresh:  # every record will be new: make room first, so none is moved at once
            self._grow(touched, shard_sizes)
        added = 0
        script = self._append if fresh else self._add
        for reply in self._routed(script, x, master, lambda n: [], fresh=fresh):
            added += reply[0]
        if not fresh:
            self._grow(touched)
        return added

    def reserve(self, postings: int) -> None:
        """Split, now, the blocks of the shards that hold few records yet, as the postings
        to come will need: a block split while empty costs only its shard's state, one split
        as postings come moves every record it holds (30,000 works added to an empty
        library: 44-46 -> 38-39 s). Shards holding more than a quarter of their
        share of ``postings``, or more than _RESERVE_MOVES records, grow as postings come
        (splitting them now would move as many records, all read at once)."""
        share = max(postings, 0) // SHARDS  # the mixed fingerprints spread evenly
        pipe = self.client.pipeline(transaction=False)
        for key in self._shards:
            pipe.hget(key, "postings")
        held = [int(count or 0) for count in pipe.execute()]
        ahead = [n for n in range(SHARDS) if held[n] <= min(share // 4, _RESERVE_MOVES)]
        if share and ahead:
            self._grow(ahead, np.full(SHARDS, share, dtype=np.int64))

    def _grow(self, shards: list[int], coming: np.ndarray | None = None) -> None:
        """Split blocks of shards until each holds at most LOAD postings per block,
        counting in ``coming`` (per shard) about to be added.

        The blocks are split in this process (`_split_here`); those of a shard that other
        processes keep changing meanwhile, by a script in Valkey."""
        coming = np.zeros(SHARDS, dtype=np.int64) if coming is None else coming
        pipe = self.client.pipeline(transaction=False)
        for n in shards:
            pipe.hmget(self._shards[n], "level", "split", "postings")
        busy = []
        for n, (level, split, postings) in zip(shards, pipe.execute(), strict=True):
            state = (int(level or MIN_LEVEL), int(split or 0))
            if grown(*state, int(postings or 0) + int(coming[n]), LOAD, self._top_level) != state:
                for _ in range(_SPLIT_TRIES):
                    if grown_state := self._split_here(n, int(coming[n])):
                        state = grown_state
                        break
                else:
                    busy.append(n)
                    continue
            self._shard_state[n] = state
        calls = [
            [self._shards[n], self.layout, self._key_len, LOAD, self._top_level, int(coming[n])]
            for n in busy
        ]
        for n, (level, split) in zip(busy, self._run(self._split, calls), strict=True):
            self._shard_state[n] = (int(level), int(split))

    def _split_here(self, shard: int, coming: int) -> tuple[int, int] | None:
        """Grow a shard as `_grow` does, splitting its blocks in this process: the blocks to
        split are read, their records divided among the blocks they now belong in (numpy),
        and the blocks written with the shard's new state in one transaction, applied only
        if nothing wrote to the shard since it was read (WATCH). Returns the new state, or
        None when something had. (Splitting in Lua loops over the records: at 100,000 works
        that took Valkey a third of an ingest's time.)"""
        key = self._shards[shard]
        with self.client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(key)
                layout, level, split, postings, blocks, born = pipe.hmget(
                    key, "layout", "level", "split", "postings", "blocks", "born"
                )
                if layout is not None and _text(layout) != self.layout:
                    self._layout_error(_text(layout))
                state = (int(level or MIN_LEVEL), int(split or 0))
                target = grown(*state, int(postings or 0) + coming, LOAD, self._top_level)
                if target == state:
                    return state
                divided = split_blocks(*state, *target)
                names = self._names_listed(shard, divided)
                old: list[bytes | None] = [None] * len(divided)
                if int(postings or 0):  # else no block holds a record
                    old = [block for start in range(0, len(names), _CHUNK)
                           for block in pipe.execute_command("MGET", *names[start : start + _CHUNK])
                           ]  # fmt: skip
                numbers, contents = self._divided(divided, old, *target)
                emptied = np.setdiff1d(divided[[bool(block) for block in old]], numbers)
                pipe.multi()
                self._write_divided(pipe, shard, numbers, contents, emptied)
                holding = int(blocks or 0) - sum(map(bool, old)) + len(numbers)
                pipe.hset(key, mapping={"layout": self.layout, "level": target[0],
                                        "split": target[1], "blocks": holding})  # fmt: skip
                if not born:  # a new shard: a stamp of its creation (see scripts._COMMON)
                    pipe.hsetnx(key, "born", secrets.token_hex(8))
                pipe.hincrby(key, "writes", 1)
                pipe.execute()
            except WatchError:
                return None
        return target

    def _write_divided(
        self,
        pipe: redis.client.Pipeline,
        shard: int,
        numbers: np.ndarray,
        contents: list[bytes],
        emptied: np.ndarray,
    ) -> None:
        """Queue in ``pipe`` the writes of a split: the shard's blocks ``numbers`` with
        their ``contents``, and the deletion of the blocks ``emptied``."""
        written = self._names_listed(shard, numbers)
        pairs = [item for pair in zip(written, contents, strict=True) for item in pair]
        # Plain commands: a cluster's pipeline refuses its multi-key helpers (mset, delete).
        for start in range(0, len(pairs), 2 * _CHUNK):
            pipe.execute_command("MSET", *pairs[start : start + 2 * _CHUNK])
        gone = self._names_listed(shard, emptied)
        for start in range(0, len(gone), _CHUNK):
            pipe.execute_command("DEL", *gone[start : start + _CHUNK])

    def _divided(
        self, blocks: np.ndarray, data: list[bytes | None], level: int, split: int
    ) -> tuple[np.ndarray, list[bytes]]:
        """The records of ``blocks`` (their stored ``data``) regrouped by the blocks they
        belong in under (level, split): those blocks' numbers, and their new contents."""
        size = self.record_bytes
        counts = np.fromiter((len(d or b"") // size for d in data), dtype=np.int64,
                             count=len(data))  # fmt: skip
        joined = b"".join(d or b"" for d in data)
        # Bits MIN_LEVEL.. of h are the key's low bits (its last 3 bytes hold those of every
        # level: see _top_level); the lower ones, the block number's.
        tail = np.frombuffer(joined, dtype=np.uint8).reshape(-1, size)
        tail = tail[:, self._key_len - 3 : self._key_len].astype(np.uint64)
        high = (tail[:, 0] << np.uint64(16)) | (tail[:, 1] << np.uint64(8)) | tail[:, 2]
        low_bits = np.repeat(blocks.astype(np.uint64), counts) & np.uint64(2**MIN_LEVEL - 1)
        low = ((high & self._key_mask) << np.uint64(MIN_LEVEL)) | low_bits
        belongs = block_of(low, level, split)
        order = np.argsort(belongs, kind="stable")
        belongs = belongs[order]
        # Runs of one block in the sorted blocks (sorted already: no np.unique).
        new = np.ones(len(belongs), dtype=bool)
        new[1:] = belongs[1:] != belongs[:-1]
        starts = np.flatnonzero(new)
        regrouped = np.frombuffer(joined, dtype=np.dtype((np.void, size)))[order].tobytes()
        bounds = (np.append(starts, len(belongs)) * size).tolist()
        return belongs[starts].astype(np.int64), [
            regrouped[start:end] for start, end in pairwise(bounds)
        ]

    def _names_listed(self, shard: int, blocks: np.ndarray) -> list[bytes]:
        """`_block_names` of one shard's blocks, as a list of bytes."""
        return _as_list(self._block_names(np.full(len(blocks), shard), blocks))

    def remove(self, master_id: int, fingerprints: Iterable[int]) -> int:
        return self._mutate(self._remove, [(master_id, fingerprints)], [])

    def postings(
        self, fingerprints: Sequence[int] | np.ndarray, max_df: int | None = None, kept: bool = True
    ) -> Postings:
        self._check_layout()
        x = self._mixed(fingerprints)
        found = [
            self._found_in_blocks(x[start : start + _LOOKED_UP_AT_ONCE], start, kept)
            for start in range(0, len(x), _LOOKED_UP_AT_ONCE)
        ]
        query = np.concatenate([np.empty(0, dtype=np.int64), *(f[0] for f in found)])
        master = np.concatenate([np.empty(0, dtype=np.int64), *(f[1] for f in found)])
        exact = np.concatenate([np.empty(0, dtype=bool), *(f[2] for f in found)])
        place = np.concatenate([np.empty(0, dtype=np.uint8), *(f[3] for f in found)])
        df = np.bincount(query, minlength=len(x))[query]
        if max_df is not None:
            kept = df <= max_df
            query, master, df, exact, place = (column[kept] for column in
                                               (query, master, df, exact, place))  # fmt: skip
        # By query, then master: one key (positions < 2**31, ids < 2**32), faster than a
        # lexsort of the two.
        order = np.argsort(query << 32 | master, kind="stable")
        return Postings(query[order], master[order], df[order], exact[order], place[order])

    def _found_in_blocks(
        self, x: np.ndarray, first: int, kept: bool = True
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(position + first, master id, exact, place) of every posting of the mixed
        fingerprints x, read in one round trip per state of the shards (a shard that split
        meanwhile is read again)."""
        position = np.arange(len(x))
        query, master, exact, place = [], [], [], []
        while len(position):
            shard, block, keys = self._route(x[position])
            # By shard, then block (one key: blocks < 2**32; faster than a lexsort).
            order = np.argsort(shard.astype(np.uint64) << np.uint64(32) | block, kind="stable")
            shard, block, keys, position = shard[order], block[order], keys[order], position[order]
            new = np.ones(len(order), dtype=bool)
            new[1:] = (shard[1:] != shard[:-1]) | (block[1:] != block[:-1])
            blocks, stale = self._read_blocks(shard[new], block[new], kept)
            of_block = np.cumsum(new) - 1
            hit_query, hit_master, hit_exact, hit_place = self._records_with_keys(
                blocks, of_block, keys
            )
            query.append(position[hit_query] + first)
            master.append(hit_master)
            exact.append(hit_exact)
            place.append(hit_place)
            if not stale:
                break
            position = position[np.isin(shard, stale)]
        if len(query) == 1:
            return query[0], master[0], exact[0], place[0]
        return (
            np.concatenate(query),
            np.concatenate(master),
            np.concatenate(exact),
            np.concatenate(place),
        )

    def _read_blocks(
        self, shards: np.ndarray, blocks: np.ndarray, use_kept: bool = True
    ) -> tuple[list[bytes | None] | np.ndarray, list[int]]:
        """The blocks (numbers, grouped by shard) as stored now (None or b"" for none; a
        list, or an array of objects when some were kept), and the shards whose state
        changed since they were routed, or whose kept blocks another process changed
        meanwhile (their blocks read as none). ``use_kept=False``: every block is read."""
        bounds = np.searchsorted(shards, np.arange(SHARDS + 1))
        read = [n for n in range(SHARDS) if bounds[n] < bounds[n + 1]]
        kept_blocks = self._blocks_kept if use_kept and self._keeps_blocks() else None
        if kept_blocks is None:  # every block is read
            kept, cut = None, bounds
            names = self._block_names(shards, blocks)
        else:
            epochs = np.array(self._epochs, dtype=np.int64)[shards]
            numbers = blocks.astype(np.int64)
            kept, found = kept_blocks.get(shards, numbers, epochs)
            asked = np.flatnonzero(~found)
            # The blocks not kept are read, in order: shard n's are asked[cut[n]:cut[n + 1]].
            cut = np.searchsorted(asked, bounds)
            names = self._block_names(shards[asked], blocks[asked])
        got, states = self._block_reads(read, cut, names)
        stale: list[int] = []
        fresh: list[int] = []  # shards with no write since their blocks were kept and read
        for n, (layout, level, split, born, writes, postings) in zip(read, states, strict=True):
            if layout is not None and layout.decode() != self.layout:
                self._layout_error(layout.decode())
            self._postings_seen[n] = int(postings or 0)
            state = (int(level or MIN_LEVEL), int(split or 0))
            version, known = (born, int(writes or 0)), self._versions.get(n)
            if version != known:  # blocks kept under the old version are named anew
                self._versions[n] = version
                self._epochs[n] += 1
            kept_some = cut[n + 1] - cut[n] < bounds[n + 1] - bounds[n]
            if state != self._state(n) or (kept_some and version != known):
                self._shard_state[n] = state
                stale.append(n)
                got[cut[n] : cut[n + 1]] = [None] * (cut[n + 1] - cut[n])
                if kept is not None:
                    kept[bounds[n] : bounds[n + 1]] = None
            elif version == known:
                fresh.append(n)
        if kept_blocks is None or kept is None:  # (both or neither)
            return got, stale
        for i, block in zip(asked.tolist(), got, strict=True):  # one by one: bytes stay bytes
            kept[i] = block
        keep_at = np.concatenate([np.empty(0, dtype=np.int64),
                                  *(asked[cut[n] : cut[n + 1]] for n in fresh)])  # fmt: skip
        if len(keep_at):
            kept_blocks.put(shards[keep_at], numbers[keep_at], epochs[keep_at],
                            [kept[i] or b"" for i in keep_at.tolist()])  # fmt: skip
        return kept, stale

    def _block_reads(
        self, read: list[int], cut: np.ndarray, names: np.ndarray
    ) -> tuple[list[bytes | None], list[list]]:
        """In one round trip, the blocks ``names`` (shard n's are names[cut[n]:cut[n + 1]],
        the shards ``read`` in order) as stored (None for none), then the state
        (_STATE_FIELDS) of each shard read: read after its blocks, a split completed since
        the routing changed it (it only grows), so the same state means the blocks were
        read as routed. A plain client reads the blocks of every shard in one MGET per
        _CHUNK; a cluster's pipeline sends each shard's to its node."""
        # The names read by one MGET: all shards' at once on a plain client, a shard's on a
        # cluster; _CHUNK at most.
        runs = [(0, len(names))] if self._packs_reads else [(cut[n], cut[n + 1]) for n in read]
        chunks = [(a, min(a + _CHUNK, stop)) for start, stop in runs
                  for a in range(start, stop, _CHUNK)]  # fmt: skip
        if self._packs_reads:
            bulk = _bulk_strings(names)
            payload = [
                part
                for start, stop in chunks
                for part in (b"*%d\r\n$4\r\nMGET\r\n" % (stop - start + 1), bulk[start:stop])
            ]
            payload += [self._state_reads[n] for n in read]
            # numpy's stubs give arrays the buffer protocol on Python >= 3.12 only.
            joined = b"".join(payload)  # type: ignore[arg-type]
            replies = self._exchange(joined, len(chunks) + len(read))
        else:
            listed = _as_list(names)
            pipe = self.client.pipeline(transaction=False)
            for start, stop in chunks:
                pipe.execute_command("MGET", *listed[start:stop])
            for n in read:
                pipe.hmget(self._shards[n], *_STATE_FIELDS)
            replies = pipe.execute()
        blocks = [block for reply in replies[: len(chunks)] for block in reply]
        return blocks, replies[len(chunks) :]

    def _exchange(self, payload: bytes, count: int) -> list:
        """The ``count`` replies of commands packed in Redis's protocol, through a
        connection of the client's pool, retried as the client retries a command."""
        assert isinstance(self.client, redis.Redis)  # reads are packed on a plain client only
        pool = self.client.connection_pool
        connection = pool.get_connection()
        try:
            return connection.retry.call_with_retry(
                lambda: _send_and_read(connection, payload, count),
                lambda _error: connection.disconnect(),
            )
        finally:
            pool.release(connection)

    def _keeps_blocks(self) -> bool:
        """Whether this process keeps the blocks it reads: while its budget holds at least
        half of what keeping the whole index would take (by the shards' sizes as last read).
        With less, most reads miss what is kept, and keeping and dropping blocks costs more
        than the Redis reads it saves (100,000 works and the default 128 MB, a seventh of
        the index: 15% of a page's blocks found kept, p50 0.2-1.4 ms slower than keeping
        none over five alternations; a whole check's CPU, Valkey's included, the same).
        What was kept is let go once the index outgrows the budget."""
        if self._blocks_kept is None:
            return False
        postings = sum(self._postings_seen.values())
        blocks = sum((1 << level) + split for level, split in self._shard_state.values())
        # Blocks that hold postings (a small index has many empty ones), each an entry.
        whole = postings * self.record_bytes + min(blocks, postings) * KEPT_ENTRY_BYTES
        if whole <= self._blocks_kept.budget * KEPT_SHARE_WORTH_IT:
            return True
        self._blocks_kept.clear()
        return False

    def _records_with_keys(
        self, blocks: list[bytes | None] | np.ndarray, of_block: np.ndarray, keys: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(query, master id, exact, place) of the records of blocks[of_block[q]] whose key
        is keys[q], check bits aside (exact: theirs agree too); of_block is sorted and names
        every block."""
        query, rows = matching_records(
            blocks, self.record_bytes, of_block, self._as_record_head(keys) & self._head_mask,
            self._head_mask,
        )  # fmt: skip
        key_len = self._key_len
        ids = np.ascontiguousarray(rows[:, key_len : key_len + 4]).view(">u4").ravel()
        stored = np.ascontiguousarray(rows[:, :8]).view(">u8").ravel()
        exact = stored >> self._key_shift == keys[query]
        return query, ids.astype(np.int64), exact, rows[:, key_len + 4].copy()

    def _as_record_head(self, keys: np.ndarray) -> np.ndarray:
        """Keys as the first 8 bytes of their records read little-endian (any host)."""
        return (keys << self._key_shift).astype(">u8").view("<u8")

    def _block_names(self, shards: np.ndarray, blocks: np.ndarray) -> np.ndarray:
        """Key names of blocks, a row of bytes each (all of one length): the shard's key,
        ':', the block number in 10 digits."""
        width = self._block_prefixes.shape[1]
        names = np.empty((len(blocks), width + 10), dtype=np.uint8)
        names[:, :width] = self._block_prefixes[shards]
        names[:, width:] = np.frombuffer(_digits(blocks), dtype=np.uint8).reshape(-1, 10)
        return names

    def _route(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Shard, block (by the shard's state as last read) and record key of each mixed
        fingerprint."""
        shard = (x & np.uint64(SHARDS - 1)).astype(np.int64)
        h = x >> np.uint64(SHARD_BITS)
        low = h & np.uint64(0xFFFFFFFF)
        state = np.array([self._state(n) for n in range(SHARDS)], dtype=np.uint64)
        return shard, block_of(low, state[shard, 0], state[shard, 1]), h >> np.uint64(MIN_LEVEL)

    def _routed(
        self,
        script: Script,
        x: np.ndarray,
        tag: np.ndarray,
        extra: Callable[[int], list[Any]],
        fresh: bool = False,
    ) -> Iterator[list]:
        """Run script on the mixed fingerprints x, each with its tag (a posting's master id
        and place, `_records_of`), routed to their blocks here: one call per shard and
        _CHUNK fingerprints, a group of them (`_groups`) in one round trip; calls answered
        with a newer shard state (the shard split since it was read) are routed again.
        Yields the other replies."""
        for group in self._groups(x):
            pending = group
            while len(pending):
                calls, shards = self._routed_calls(x[pending], tag[pending], extra, fresh)
                stale = set()
                for reply, shard in zip(self._run(script, calls), shards, strict=True):
                    if isinstance(reply[0], int) and reply[0] == -1:
                        self._shard_state[shard] = (int(reply[-2]), int(reply[-1]))
                        stale.add(shard)
                    else:
                        yield reply
                shard_of = (x[pending] & np.uint64(SHARDS - 1)).astype(np.int64)
                pending = pending[np.isin(shard_of, list(stale))]

    def _groups(self, x: np.ndarray) -> Iterator[np.ndarray]:
        """The rows of x routed and sent together: all of them when few, else a shard's at
        a time. A batch of works brings millions of postings, and routing takes a few dozen
        bytes of arrays per record, its calls a dozen more: 16 round trips instead of one
        bound them (with the postings made in place, `_records_of`, a batch of 16,000 works
        peaked at 2.2 GB instead of 2.7)."""
        if len(x) <= _ROUTED_AT_ONCE:
            yield np.arange(len(x))
            return
        for _, rows in self._by_shard(x):
            yield rows

    def _routed_calls(
        self, x: np.ndarray, tag: np.ndarray, extra: Callable[[int], list[Any]], fresh: bool
    ) -> tuple[list[list], list[int]]:
        """Script calls (see ADD_SCRIPT and APPEND_SCRIPT) for mixed fingerprints x and their
        tags, and the shard of each call. A posting record is the block index, the key and
        the tag (master id, place), sorted by block, key and tag; a fresh posting the key
        and the tag, grouped by block, with the run length of each block after the records."""
        shard, block, keys = self._route(x)
        if fresh:
            # A block's records are a set: new ones need grouping by block, not ordering
            # (one sort of a number instead of four; a batch's routing ~4x faster).
            order = np.argsort((shard.astype(np.uint64) << np.uint64(32)) | block)
        else:  # a repeated posting is adjacent in its block's records (ADD_SCRIPT)
            order = np.lexsort((tag, keys, block, shard))
        shard, block = shard[order], block[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (shard[1:] != shard[:-1]) | (block[1:] != block[:-1])
        ordinal = np.cumsum(new) - 1
        numbers = _digits(block[new])
        bounds = np.searchsorted(shard, np.arange(SHARDS + 1))
        # Each call carries at most _CHUNK records of one shard; a record names its block
        # by its index among the call's blocks.
        at = np.arange(len(order))
        chunk_start = bounds[shard] + (at - bounds[shard]) // _CHUNK * _CHUNK
        which = _be_bytes((ordinal - ordinal[chunk_start]).astype(np.uint64), 2)
        key_bytes = _be_bytes(keys[order], self._key_len)
        tags = _be_bytes(tag[order].astype(np.uint64), 5)
        parts = (key_bytes, tags) if fresh else (which, key_bytes, tags)
        records = np.concatenate(parts, axis=1)
        calls, shards = [], []
        for n in range(SHARDS):
            for start in range(bounds[n], bounds[n + 1], _CHUNK):
                stop = min(start + _CHUNK, bounds[n + 1])
                level_n, split_n = self._state(n)
                call = [
                    self._shards[n], self.layout, self._key_len, level_n, split_n, *extra(n),
                    numbers[10 * ordinal[start] : 10 * (ordinal[stop - 1] + 1)],
                    records[start:stop].tobytes(),
                ]  # fmt: skip
                if fresh:
                    runs = np.bincount(ordinal[start:stop] - ordinal[start])
                    call.append(_be_bytes(runs.astype(np.uint64), 2).tobytes())
                calls.append(call)
                shards.append(n)
        return calls, shards

    def _records_of(self, masters: Sequence[IndexedMaster]) -> tuple[np.ndarray, np.ndarray]:
        """The postings of masters: mixed fingerprints, and their tags, the master id above
        the place (the last 5 bytes of a record, as one number); a fingerprint given twice
        keeps its first place. Built in place, _MIXED_AT_ONCE at a time: a batch of works
        brings millions of postings, and mixing them all at once took five arrays as large."""
        given = []
        for master_id, fingerprints, *places in masters:
            values = as_uint64(fingerprints)
            placed = given_places(places[0] if places else None, len(values))
            given.append((checked_master(master_id), values, placed))
        counts = np.array([len(values) for _, values, _ in given], dtype=np.int64)
        starts = np.cumsum(counts) - counts
        x = np.empty(int(counts.sum()), dtype=np.uint64)
        tag = np.empty(len(x), dtype=np.uint64)
        for (master_id, values, placed), start, count in zip(given, starts, counts, strict=True):
            x[start : start + count] = values
            tag[start : start + count] = placed
            tag[start : start + count] |= np.uint64(master_id << 8)
        # Each master's fingerprints come in ascending order (`MasterFingerprints`), so
        # distinct: checked before mixing, which is no order.
        rising = np.ones(len(x), dtype=bool)  # x[i] above x[i - 1], or a master's first
        for at in range(1, len(x), _MIXED_AT_ONCE):
            plain = x[at - 1 : at + _MIXED_AT_ONCE] & self._mask
            rising[at : at + len(plain) - 1] = plain[1:] > plain[:-1]
        rising[starts[counts > 0]] = True  # (a master may have no fingerprint)
        for at in range(0, len(x), _MIXED_AT_ONCE):
            x[at : at + _MIXED_AT_ONCE] = self._mixed(x[at : at + _MIXED_AT_ONCE])
        if rising.all():
            return x, tag
        keep = [np.empty(0, dtype=np.int64)]
        for start, stop in zip(starts, starts + counts, strict=True):
            _, first = np.unique(x[start:stop], return_index=True)
            keep.append(first + start)
        kept = np.concatenate(keep)
        return x[kept], tag[kept]

    def _state(self, shard: int) -> tuple[int, int]:
        """(level, split) of a shard as last read; all shards are read when one was never
        read (a first add learns only the shards it touched)."""
        if shard not in self._shard_state:
            pipe = self.client.pipeline(transaction=False)
            for key in self._shards:
                pipe.hmget(key, "level", "split")
            for n, (level, split) in enumerate(pipe.execute()):
                self._shard_state[n] = (int(level or MIN_LEVEL), int(split or 0))
        return self._shard_state[shard]

    def _read(
        self, fingerprints: Sequence[int], max_df: int | None
    ) -> list[tuple[int, ...] | None]:
        return posting_lists(self.postings(fingerprints, None), len(fingerprints), max_df)

    def stats(self) -> IndexStats:
        """Counters from the shards; memory is MEMORY USAGE summed over the index keys.

        The memory figure walks the index keys (one pipelined round trip per 1000 keys), so
        it costs O(keys): fine for a report, not for a dashboard refresh.
        """
        pipe = self.client.pipeline(transaction=False)
        for shard in self._shards:
            pipe.hmget(shard, "postings", "blocks")
        counters = pipe.execute()
        postings = sum(int(p or 0) for p, _ in counters)
        keys = sum(int(b or 0) for _, b in counters)
        memory = 0
        for batch in batched(self._scan(), 1000):
            pipe = self.client.pipeline(transaction=False)
            for key in batch:
                pipe.memory_usage(key, samples=0)
            memory += sum(m or 0 for m in pipe.execute())
        return IndexStats(postings, keys, memory, memory / postings if postings else 0.0)

    def clear(self) -> None:
        for batch in batched(self._scan(), 1000):
            self.client.unlink(*batch)
        self._layout_checked = False
        self._shard_state.clear()

    def miscounted_shards(self) -> list[MiscountedShard]:
        """Every shard's blocks counted (COUNT_SCRIPT, slice by slice, all in one round trip)
        against the ``blocks`` counter the scripts and splits keep beside them; a
        shard written to while it was counted (its ``born`` or ``writes`` changed between
        slices) is counted again, _COUNT_TRIES times at most, then left unchecked: a busy
        shard is no proof of a loss. 7.5 M postings in 78,541 blocks (10,000 works): 0.07-0.14
        s of Valkey's time, in slices of a few ms."""
        pending, wrong = list(range(SHARDS)), []
        for _ in range(_COUNT_TRIES):
            if not pending:
                break
            pipe = self.client.pipeline(transaction=False)
            for n in pending:
                pipe.hmget(self._shards[n], "level", "split")
            calls, of_shard = [], []
            for n, (level, split) in zip(pending, pipe.execute(), strict=True):
                size = (1 << int(level or MIN_LEVEL)) + int(split or 0)
                for first in range(0, size, _COUNTED_AT_ONCE):
                    calls.append([self._shards[n], self.layout, self._key_len, first,
                                  _COUNTED_AT_ONCE])  # fmt: skip
                    of_shard.append((n, size))
            slices: dict[int, list[list]] = {}
            for (n, size), reply in zip(of_shard, self._run(self._count, calls), strict=True):
                slices.setdefault(n, []).append([size, *reply])
            changed = []
            for n, counted in slices.items():
                # [size cut by, born, writes, blocks, size, found]: every slice read under
                # one version of the shard, of the size it was cut by.
                if (
                    len({tuple(reply[:4]) for reply in counted}) > 1
                    or counted[0][0] != counted[0][4]
                ):
                    changed.append(n)
                    continue
                found = sum(reply[5] for reply in counted)
                if found != counted[0][3]:
                    wrong.append(MiscountedShard(n, counted[0][3], found))
            pending = changed
        return wrong

    def block_check_due(self, every: float, now: float) -> bool:
        return bool(self._block_check_due(keys=[self._meta], args=[repr(now), repr(every)]))

    def generation(self) -> tuple[str | None, int]:
        pipe = self.client.pipeline(transaction=False)
        pipe.hget(self._meta, "generation")
        for shard in self._shards:
            pipe.hget(shard, "postings")
        generation, *postings = pipe.execute()
        return (generation.decode() if generation else None), sum(int(p or 0) for p in postings)

    def set_generation(self, generation: str) -> None:
        self.client.hset(self._meta, "generation", generation)

    def begin_removal(self, token: str, until: float) -> None:
        # One transaction on one key (a cluster's too): counted only once noted.
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self._meta, f"{_REMOVING}{token}", repr(until))
        pipe.hincrby(self._meta, "removals", 1)
        pipe.execute()

    def end_removal(self, token: str) -> None:
        self.client.hdel(self._meta, f"{_REMOVING}{token}")

    def removals(self, now: float) -> tuple[int, int]:
        meta = self.client.hgetall(self._meta)
        under_way = [(k, float(v)) for k, v in meta.items() if _text(k).startswith(_REMOVING)]
        if expired := [k for k, until in under_way if until <= now]:
            self.client.hdel(self._meta, *expired)  # ended by a process that died midway
        return int(meta.get(b"removals", 0)), len(under_way) - len(expired)

    def ensure_version(self, version: str, held_elsewhere: int = 0) -> None:
        """Refuse an index built with another fingerprint version or layout, unless it holds
        no posting: then it takes this one. ``held_elsewhere``: postings of this index kept
        outside these blocks (a `SnapshotIndex`'s snapshot), which count as held."""
        built, layout = (
            _text(v) if v else None for v in self.client.hmget(self._meta, "version", "layout")
        )
        if (built, layout) == (version, self.layout):
            self._layout_checked = True
            return
        if self.generation()[1] + held_elsewhere == 0:
            self.client.hset(self._meta, mapping={"version": version, "layout": self.layout})
            self._layout_checked = True
            return
        raise IndexVersionMismatch(
            f"index {self.prefix}",
            f"{built or '(none)'} ({layout or 'no layout'})",
            f"{version} ({self.layout})",
        )

    def _check_layout(self) -> None:
        """Once per process: an index written with another layout is refused, not misread."""
        if self._layout_checked:
            return
        layout = self.client.hget(self._meta, "layout")
        if layout is None:
            self.client.hsetnx(self._meta, "layout", self.layout)
            layout = self.client.hget(self._meta, "layout")
        if layout is None or _text(layout) != self.layout:
            self._layout_error(_text(layout or b""))
        self._layout_checked = True

    def _layout_error(self, found: str) -> None:
        raise IndexVersionMismatch(
            f"index {self.prefix}", f"layout {found}", f"layout {self.layout}"
        )

    def mixed(self, fingerprints: Sequence[int] | np.ndarray) -> np.ndarray:
        """The fingerprints as the index keys them (`_mixed`), check bits above."""
        return self._mixed(fingerprints)

    def records(self) -> Iterator[tuple[int, tuple[Any, Any], np.ndarray, np.ndarray]]:
        """Every posting stored, a shard at a time: (shard, its version (born, writes) as
        read before its blocks, mixed fingerprints, tags: the master id above the place
        byte). Postings written meanwhile may be left out, none is given twice: blocks are
        read by the shard's state as read just before them (a split meanwhile moves
        records only to blocks above those read)."""
        self._check_layout()
        size = self.record_bytes
        for shard, key in enumerate(self._shards):
            level, split, born, writes = self.client.hmget(key, "level", "split", "born", "writes")
            count = (1 << int(level or MIN_LEVEL)) + int(split or 0)
            xs, tags = [np.empty(0, np.uint64)], [np.empty(0, np.uint64)]
            for first in range(0, count, _CHUNK):
                numbers = np.arange(first, min(first + _CHUNK, count))
                blocks = self.client.execute_command("MGET", *self._names_listed(shard, numbers))
                lengths = [len(b or b"") // size for b in blocks]
                if not sum(lengths):
                    continue
                rows = np.frombuffer(b"".join(b or b"" for b in blocks), np.uint8).reshape(-1, size)
                head = np.zeros((len(rows), 8), dtype=np.uint8)
                head[:, 8 - self._key_len :] = rows[:, : self._key_len]
                keys = head.view(">u8").ravel().astype(np.uint64)
                low = np.repeat(numbers.astype(np.uint64), lengths) & np.uint64(2**MIN_LEVEL - 1)
                xs.append((((keys << np.uint64(MIN_LEVEL)) | low) << np.uint64(SHARD_BITS))
                          | np.uint64(shard))  # fmt: skip
                ids = np.ascontiguousarray(rows[:, self._key_len : self._key_len + 4])
                tag = ids.view(">u4").ravel().astype(np.uint64) << np.uint64(8)
                tags.append(tag | rows[:, self._key_len + 4].astype(np.uint64))
            yield shard, (born, writes), np.concatenate(xs), np.concatenate(tags)

    def emptied(self, shard: int, version: tuple[Any, Any]) -> bool:
        """Delete every block of the shard, in one transaction, if nothing wrote to it since
        it had ``version`` (`records`); False, changing nothing, if something did. (Cheaper
        than removing its records one by one: the shard's blocks are deleted whole.) The
        shard starts again from 2**MIN_LEVEL blocks, as a new one (a new ``born``): a
        shard grown for the whole library would have a small batch write one block a
        posting (1,000 works into an emptied 100k-work delta: 3.6x their cost into an
        empty library). Routings of the old state are refused as after a split."""
        key = self._shards[shard]
        with self.client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(key)
                level, split, born, writes = pipe.hmget(key, "level", "split", "born", "writes")
                if (born, writes) != version:
                    return False
                count = (1 << int(level or MIN_LEVEL)) + int(split or 0)
                pipe.multi()
                names = self._names_listed(shard, np.arange(count))
                for start in range(0, len(names), _CHUNK):
                    pipe.execute_command("DEL", *names[start : start + _CHUNK])
                pipe.hset(key, mapping={"postings": 0, "blocks": 0, "level": MIN_LEVEL,
                                        "split": 0, "born": secrets.token_hex(8)})  # fmt: skip
                pipe.hincrby(key, "writes", 1)
                pipe.execute()
            except WatchError:
                return False
        self._shard_state[shard] = (MIN_LEVEL, 0)
        return True

    def _mixed(self, fingerprints: Sequence[int] | np.ndarray) -> np.ndarray:
        """The fingerprints through the mixer: two rounds of multiply-by-odd-constant and
        xor-shift, both bijections of fingerprint_bits-bit integers, so every bit of the
        shard and block numbers depends on every input bit."""
        x = as_uint64(fingerprints).copy()
        width = self.fingerprint_bits + self.check_bits
        if width < 64 and (x >> np.uint64(width)).any():
            raise width_error(self.fingerprint_bits, self.check_bits)
        # The check bits stay where they are, above the mixed value (and the record's key).
        checks = x & ~self._mask
        x &= self._mask
        for constant in _MIX:
            x = (x * constant) & self._mask
            x ^= x >> self._shift
        return x | checks

    def _keys(self, h: np.ndarray) -> np.ndarray:
        """Record keys: h without the low MIN_LEVEL bits, big-endian, key_len bytes."""
        return _be_bytes(h >> np.uint64(MIN_LEVEL), self._key_len)

    @staticmethod
    def _by_shard(x: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
        # Bytes: numpy sorts them stably by radix (a batch's millions 5x faster than int64).
        shards = (x & np.uint64(SHARDS - 1)).astype(np.uint8)
        order = np.argsort(shards, kind="stable")
        bounds = np.searchsorted(shards[order], np.arange(SHARDS + 1))
        for shard in range(SHARDS):
            if bounds[shard] < bounds[shard + 1]:
                yield shard, order[bounds[shard] : bounds[shard + 1]]

    def _calls(self, shard: int, records: np.ndarray, extra: list) -> list[list]:
        """Script calls of one shard: [shard key, layout, key length, chunk, *extra]."""
        return [
            [self._shards[shard], self.layout, self._key_len, chunk.tobytes(), *extra]
            for chunk in np.array_split(records, -(-len(records) // _CHUNK))
        ]

    def _mutate(
        self, script: Script, masters: Sequence[tuple[int, Iterable[int]]], extra: list
    ) -> int:
        ids, values = [], []
        for master_id, fingerprints in masters:
            distinct = np.unique(self._mixed(distinct_fingerprints(fingerprints)))
            ids.append(np.full(len(distinct), checked_master(master_id), dtype=np.uint32))
            values.append(distinct)
        if not values:
            return 0
        return self._mutate_mixed(script, np.concatenate(values), np.concatenate(ids), extra)

    def remove_mixed(self, x: np.ndarray, master: np.ndarray) -> int:
        """`remove` of postings given as mixed fingerprints and their master ids."""
        return self._mutate_mixed(self._remove, x, master.astype(np.uint32), [])

    def _mutate_mixed(self, script: Script, x: np.ndarray, master: np.ndarray, extra: list) -> int:
        if not len(x):
            return 0
        calls = []
        for shard, rows in self._by_shard(x):
            h = x[rows] >> np.uint64(SHARD_BITS)
            # Sorted by (key, id): the order of the records in a block.
            order = np.lexsort((master[rows], h >> np.uint64(MIN_LEVEL)))
            h = h[order]
            records = np.concatenate(
                (_be_bytes(h, 4), self._keys(h), _be_bytes(master[rows][order], 4)), axis=1
            )
            calls += self._calls(shard, records, extra)
        return sum(self._run(script, calls))

    def _run(self, script: Script, calls: list[list]) -> list:
        """Run script once per call (shard key, then ARGV), all in one pipelined round trip.

        redis-py's pipelined Script asks SCRIPT EXISTS first, a second round trip on every
        query; instead a NOSCRIPT reply (server restarted, SCRIPT FLUSH) loads the script and
        reruns the calls that got it.
        """
        self._check_layout()
        if not calls:
            return []
        replies = self._evalsha(script, calls)
        missing = [i for i, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
        if missing:
            script.sha = self.client.script_load(script.script)
            retried = self._evalsha(script, [calls[i] for i in missing])
            for i, reply in zip(missing, retried, strict=True):
                replies[i] = reply
        for reply in replies:
            if isinstance(reply, redis.ResponseError):
                if str(reply).startswith("CTLAYOUT "):
                    self._layout_error(str(reply)[9:])
                raise reply
        return replies

    def _evalsha(self, script: Script, calls: list[list]) -> list:
        pipe = self.client.pipeline(transaction=False)
        for shard, *args in calls:
            # execute_command, not evalsha: cluster pipelines route it by its key too.
            pipe.execute_command("EVALSHA", script.sha, 1, shard, *args)
        return pipe.execute(raise_on_error=False)

    def _scan(self) -> Iterator[bytes]:
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", self.prefix) + ":*"
        return self.client.scan_iter(match=pattern, count=1000)


#: Fields of the meta hash naming the removals under way (`begin_removal`).
_REMOVING = "removing:"
_STATE_FIELDS = (b"layout", b"level", b"split", b"born", b"writes", b"postings")


def _hmget_packed(key: bytes, *fields: bytes) -> bytes:
    """HMGET of ``fields`` of ``key`` in Redis's protocol."""
    args = (b"HMGET", key, *fields)
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def _text(value: bytes | str) -> str:
    # redis-py types replies as bytes or str; this client's are bytes (no decode_responses).
    return value.decode() if isinstance(value, bytes) else value


def _bulk_strings(rows: np.ndarray) -> np.ndarray:
    """Rows of bytes of one length as rows of Redis's protocol's bulk strings."""
    head = b"$%d\r\n" % rows.shape[1]
    out = np.empty((len(rows), len(head) + rows.shape[1] + 2), dtype=np.uint8)
    out[:, : len(head)] = np.frombuffer(head, dtype=np.uint8)
    out[:, len(head) : -2] = rows
    out[:, -2:] = np.frombuffer(b"\r\n", dtype=np.uint8)
    return out


def _as_list(names: np.ndarray) -> list[bytes]:
    """Rows of bytes (`RedisIndex._block_names`) as a list of bytes."""
    return names.view(f"S{names.shape[1]}").ravel().tolist()


def _send_and_read(connection: redis.Connection, payload: bytes, count: int) -> list:
    try:
        connection.send_packed_command([payload])
        return [connection.read_response() for _ in range(count)]
    except BaseException:
        # Replies may be left unread (an error reply raises at once): not a connection
        # to give back to the pool as it is.
        connection.disconnect()
        raise


def _be_bytes(values: np.ndarray, width: int) -> np.ndarray:
    """The low ``width`` bytes of each value, big-endian, as a (len, width) uint8 array."""
    full = values.astype(">u8").view(np.uint8).reshape(-1, 8)
    return full[:, 8 - width :]


_POWERS = np.uint64(10) ** np.arange(9, -1, -1, dtype=np.uint64)


def _digits(numbers: np.ndarray) -> bytes:
    """Block numbers as one string of 10-digit decimals (the names' fixed-width suffixes)."""
    digits = numbers.astype(np.uint64)[:, None] // _POWERS % np.uint64(10) + np.uint64(48)
    return digits.astype(np.uint8).tobytes()
