"""Inverted index: fingerprint (unsigned int < 2**64) → set of integer master ids.

Two interchangeable backends behind one interface (datasketch-style storage):

- `MemoryIndex`: plain dicts, for unit tests and evaluation sweeps.
- `RedisIndex`: the production index in Redis/Valkey, compact and one round trip per query.

RedisIndex layout (prefix ``ct:ix`` by default):

- ``{prefix}:meta``  HASH: ``version`` (fingerprint parameters), ``layout`` (bucket and
  fingerprint bits), ``postings`` and ``keys`` counters kept by the Lua scripts, and
  ``generation`` (see `tracker.generation`).
- ``{prefix}:{bucket hex}``  HASH, one per bucket. A fingerprint is first mixed by a
  bijection of its ``fingerprint_bits`` (so skewed fingerprints still spread evenly); the
  top ``bucket_bits`` pick the bucket, the remaining bits, as big-endian bytes, are the field.
  The value is the posting list:
    * one id: its decimal string, which the listpack stores as a 1–5 byte integer;
    * several ids: ``b"+"`` then the sorted ids as LEB128 varint deltas;
    * ``b""``: the list outgrew 64 bytes and lives in the spill key below.
- ``{prefix}:{bucket hex}:{field}``  STRING: a spilled (long) posting list, sorted uint32
  little-endian, so its length is ``STRLEN / 4`` and appends are O(1).

The server must keep small hashes listpack-encoded: ``hash-max-listpack-entries 1024`` and
``hash-max-listpack-value 64`` (Redis' default for the entries limit is 128, so production
Redis needs that setting; the embedded server is started with both). Buckets hold a few
hundred fields when ``bucket_bits`` suits the index size (`suggest_bucket_bits`), and then a
posting costs about 10–14 bytes of server memory.

Standalone or replicated Redis only, not Redis Cluster: the scripts derive the bucket and
spill key names from their arguments, and one call spans many hash slots.
"""

from __future__ import annotations

import math
import re
import struct
import sys
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TypeVar

import numpy as np
import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError

MAX_MASTER_ID = 2**32 - 1  # spilled lists are packed as uint32

# Fields and values sent per script call: bounds the time a call blocks the server and the
# Lua stack size of one HMGET, while a pipeline still sends every chunk in one round trip.
_CHUNK = 2000

T = TypeVar("T")

# Odd multipliers of the fingerprint mixer (MurmurHash3's fmix64 constants).
_MIX = (np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53))

_MULTI_TAG = b"+"  # never starts a decimal integer, so it tells lists from single ids

# Helpers shared by the mutation and read scripts. Lua numbers are doubles, exact for uint32.
_LUA_COMMON = r"""
local INLINE_MAX = 64   -- hash-max-listpack-value: a longer value makes the bucket a hashtable
local UNSPILL_AT = 12   -- 12 ids of at most 5 varint bytes always fit inline again
local floor = math.floor

-- ARGV[2] is the bucket key format, ARGV[3] the field length, ARGV[4] the records: for each
-- fingerprint a 4-byte big-endian bucket number then its field. Yields (bucket key, field).
local function records()
  local fmt, len, blob = ARGV[2], tonumber(ARGV[3]), ARGV[4]
  local i = -3 - len
  return function()
    i = i + 4 + len
    if i > #blob then return nil end
    local a, b, c, d = string.byte(blob, i, i + 3)
    local key = string.format(fmt, ((a * 256 + b) * 256 + c) * 256 + d)
    return key, string.sub(blob, i + 4, i + 3 + len)
  end
end

local function layout_error(write)
  local layout = redis.call('HGET', KEYS[1], 'layout')
  if not layout then
    if write then redis.call('HSET', KEYS[1], 'layout', ARGV[1]) end
  elseif layout ~= ARGV[1] then
    return redis.error_reply('CTLAYOUT ' .. layout)
  end
end

local function decode(v)
  if string.byte(v, 1) ~= 43 then return {tonumber(v)} end  -- 43 = '+'
  local ids, id, acc, mul = {}, 0, 0, 1
  for i = 2, #v do
    local b = string.byte(v, i)
    if b >= 128 then
      acc = acc + (b - 128) * mul
      mul = mul * 128
    else
      id = id + acc + b * mul
      ids[#ids + 1] = id
      acc, mul = 0, 1
    end
  end
  return ids
end

local function encode(ids)
  if #ids == 1 then return string.format('%d', ids[1]) end
  local out, prev = {'+'}, 0
  for _, id in ipairs(ids) do
    local d = id - prev
    prev = id
    while d >= 128 do
      out[#out + 1] = string.char(d % 128 + 128)
      d = floor(d / 128)
    end
    out[#out + 1] = string.char(d)
  end
  return table.concat(out)
end

local function u32(s, i)  -- i-th (0-based) uint32 of a packed list
  local a, b, c, d = string.byte(s, 4 * i + 1, 4 * i + 4)
  return a + b * 256 + c * 65536 + d * 16777216
end

local function p32(v)
  return string.char(v % 256, floor(v / 256) % 256, floor(v / 65536) % 256, floor(v / 16777216))
end

local function pack(ids)
  local out = {}
  for i, id in ipairs(ids) do out[i] = p32(id) end
  return table.concat(out)
end

local function unpack32(s)
  local ids = {}
  for i = 0, #s / 4 - 1 do ids[i + 1] = u32(s, i) end
  return ids
end

local function search(s, id)  -- position where id is or would go, and whether it is there
  local lo, hi = 0, #s / 4
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if u32(s, mid) < id then lo = mid + 1 else hi = mid end
  end
  return lo, lo < #s / 4 and u32(s, lo) == id
end

local function search_table(ids, id)
  local lo, hi = 1, #ids + 1
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if ids[mid] < id then lo = mid + 1 else hi = mid end
  end
  return lo, ids[lo] == id
end
"""

# KEYS[1] meta; ARGV: layout, key format, field length, records, master id. Returns the
# number of postings added; HINCRBY keeps the counters that stats() reads.
_LUA_ADD = (
    _LUA_COMMON
    + r"""
local err = layout_error(true)
if err then return err end
local id_s = ARGV[5]
local id = tonumber(id_s)
local added, keys = 0, 0
for key, field in records() do
  -- Most fields are new at ingest: HSETNX settles those in one call.
  local v = redis.call('HSETNX', key, field, id_s) == 0 and redis.call('HGET', key, field)
  if not v then
    if redis.call('HLEN', key) == 1 then keys = keys + 1 end
    added = added + 1
  elseif v == '' then
    local skey = key .. ':' .. field
    local last = u32(redis.call('GETRANGE', skey, -4, -1), 0)
    if id > last then  -- ingest assigns growing ids: the common case is an O(1) append
      redis.call('APPEND', skey, p32(id))
      added = added + 1
    elseif id < last then
      local s = redis.call('GET', skey)
      local pos, found = search(s, id)
      if not found then
        redis.call('SET', skey, string.sub(s, 1, 4 * pos) .. p32(id) .. string.sub(s, 4 * pos + 1))
        added = added + 1
      end
    end
  else
    local ids = decode(v)
    local pos, found = search_table(ids, id)
    if not found then
      table.insert(ids, pos, id)
      local enc = encode(ids)
      if #enc > INLINE_MAX then
        redis.call('SET', key .. ':' .. field, pack(ids))
        enc = ''
        keys = keys + 1
      end
      redis.call('HSET', key, field, enc)
      added = added + 1
    end
  end
end
if added > 0 then redis.call('HINCRBY', KEYS[1], 'postings', added) end
if keys ~= 0 then redis.call('HINCRBY', KEYS[1], 'keys', keys) end
return added
"""
)

# Same arguments as the add script. Empty fields are deleted (and Redis deletes a bucket
# hash once its last field goes); a spilled list that shrinks back to a few ids is inlined.
_LUA_REMOVE = (
    _LUA_COMMON
    + r"""
local err = layout_error(false)
if err then return err end
local id = tonumber(ARGV[5])
local removed, keys = 0, 0
for key, field in records() do
  local v = redis.call('HGET', key, field)
  if v == '' then
    local skey = key .. ':' .. field
    local s = redis.call('GET', skey)
    local pos, found = search(s, id)
    if found then
      s = string.sub(s, 1, 4 * pos) .. string.sub(s, 4 * pos + 5)
      removed = removed + 1
      if #s / 4 <= UNSPILL_AT then
        redis.call('DEL', skey)
        redis.call('HSET', key, field, encode(unpack32(s)))
        keys = keys - 1
      else
        redis.call('SET', skey, s)
      end
    end
  elseif v then
    local ids = decode(v)
    local pos, found = search_table(ids, id)
    if found then
      table.remove(ids, pos)
      removed = removed + 1
      if #ids == 0 then
        redis.call('HDEL', key, field)
        if redis.call('EXISTS', key) == 0 then keys = keys - 1 end
      else
        redis.call('HSET', key, field, encode(ids))
      end
    end
  end
end
if removed > 0 then redis.call('HINCRBY', KEYS[1], 'postings', -removed) end
if keys ~= 0 then redis.call('HINCRBY', KEYS[1], 'keys', keys) end
return removed
"""
)

# KEYS[1] meta; ARGV: layout, key format, field length, records (sorted by bucket: one
# HMGET per bucket), max_df (-1: no cut). One reply element per record, in order: false
# (absent), the inline value, {packed uint32 list} for a spilled list, or its length when
# over max_df (so boilerplate lists never cross the network).
_LUA_READ = (
    "#!lua flags=no-writes\n"
    + _LUA_COMMON
    + r"""
local err = layout_error(false)
if err then return err end
local max_df = tonumber(ARGV[5])
local out, bucket, fields = {}, nil, {}
local function read_bucket()
  if #fields == 0 then return end
  local vals = redis.call('HMGET', bucket, unpack(fields))
  for j, field in ipairs(fields) do
    local v = vals[j]
    if v == '' then
      local skey = bucket .. ':' .. field
      local df = redis.call('STRLEN', skey) / 4
      if max_df >= 0 and df > max_df then v = df else v = {redis.call('GET', skey)} end
    end
    out[#out + 1] = v
  end
  fields = {}
end
for key, field in records() do
  if key ~= bucket then
    read_bucket()
    bucket = key
  end
  fields[#fields + 1] = field
end
read_bucket()
return out
"""
)

# KEYS[1] meta; ARGV: version, layout. An empty index takes both; otherwise returns the
# stored {version, layout} when either differs, nil when they match.
_LUA_ENSURE_VERSION = r"""
local cur = redis.call('HMGET', KEYS[1], 'version', 'layout', 'postings')
if (tonumber(cur[3]) or 0) == 0 then
  redis.call('HSET', KEYS[1], 'version', ARGV[1], 'layout', ARGV[2])
  return false
end
if cur[1] == ARGV[1] and cur[2] == ARGV[2] then return false end
return {cur[1] or '', cur[2] or ''}
"""


class IndexVersionMismatch(RuntimeError):
    """The index was built with other fingerprint parameters or another layout."""

    def __init__(self, where: str, built: str | None, current: str) -> None:
        super().__init__(
            f"{where} was built with version {built or '(none)'}, current parameters are "
            f"{current}: run `copytrack reindex` to rebuild it"
        )
        self.built = built
        self.current = current


@dataclass(frozen=True)
class IndexStats:
    """Size figures of an index; memory_bytes is what the backend's storage uses."""

    postings: int
    keys: int
    memory_bytes: int
    bytes_per_posting: float


class InvertedIndex(ABC):
    """fingerprint → master ids. Mutations are idempotent; queries keep query order."""

    @abstractmethod
    def add(self, master_id: int, fingerprints: Iterable[int]) -> int:
        """Index master_id under each fingerprint; returns the number of new postings."""

    @abstractmethod
    def remove(self, master_id: int, fingerprints: Iterable[int]) -> int:
        """Drop master_id from each fingerprint's list; returns the postings removed."""

    @abstractmethod
    def _read(
        self, fingerprints: Sequence[int], max_df: int | None
    ) -> list[tuple[int, ...] | None]:
        """Sorted posting list per fingerprint, None where it is longer than max_df."""

    @abstractmethod
    def stats(self) -> IndexStats:
        """Postings, keys and memory figures."""

    @abstractmethod
    def clear(self) -> None:
        """Delete every posting and the version metadata."""

    @abstractmethod
    def ensure_version(self, version: str) -> None:
        """Record version on an empty index; raise IndexVersionMismatch if it differs."""

    @abstractmethod
    def generation(self) -> tuple[str | None, int]:
        """(the generation given by `set_generation`, the number of postings), both kept with
        the postings and read in one round trip: (None, 0) once the index is cleared or lost."""

    @abstractmethod
    def set_generation(self, generation: str) -> None:
        """Record which build of the index this is (`tracker.generation`)."""

    def lookup(self, fingerprints: Sequence[int]) -> list[tuple[int, ...]]:
        """Posting list (sorted master ids) of each fingerprint, in query order."""
        return [ids or () for ids in self._read(_as_ints(fingerprints), None)]

    def count_hits(self, fingerprints: Iterable[int], max_df: int | None = None) -> dict[int, int]:
        """master id → number of distinct query fingerprints that hit it.

        Fingerprints whose posting list is longer than max_df are skipped: text that many
        masters share (site footers, boilerplate) must not create matches on its own.
        """
        hits: Counter[int] = Counter()
        for ids in self._read(_distinct(fingerprints), max_df):
            if ids:
                hits.update(ids)
        return dict(hits)


def _as_ints(fingerprints: Iterable[int]) -> list[int]:
    """Fingerprints as Python ints (numpy scalars included), each an unsigned 64-bit."""
    out = [int(fp) for fp in fingerprints]
    if any(fp < 0 or fp >> 64 for fp in out):
        raise ValueError("fingerprints must be unsigned 64-bit integers")
    return out


def _distinct(fingerprints: Iterable[int]) -> list[int]:
    """Distinct fingerprints in first-seen order."""
    return list(dict.fromkeys(_as_ints(fingerprints)))


def _check_master(master_id: int) -> int:
    master_id = int(master_id)
    if not 0 <= master_id <= MAX_MASTER_ID:
        raise ValueError(f"master id {master_id} is outside 0..{MAX_MASTER_ID}")
    return master_id


class MemoryIndex(InvertedIndex):
    """Dict-of-sets index in this process: unit tests and evaluation sweeps."""

    def __init__(self) -> None:
        self._lists: dict[int, set[int]] = {}
        self._postings = 0
        self._version: str | None = None
        self._generation: str | None = None

    def add(self, master_id: int, fingerprints: Iterable[int]) -> int:
        master_id = _check_master(master_id)
        before = self._postings
        for fp in _distinct(fingerprints):
            ids = self._lists.setdefault(fp, set())
            if master_id not in ids:
                ids.add(master_id)
                self._postings += 1
        return self._postings - before

    def remove(self, master_id: int, fingerprints: Iterable[int]) -> int:
        master_id = _check_master(master_id)
        before = self._postings
        for fp in _distinct(fingerprints):
            ids = self._lists.get(fp)
            if ids and master_id in ids:
                ids.discard(master_id)
                self._postings -= 1
                if not ids:
                    del self._lists[fp]
        return before - self._postings

    def _read(
        self, fingerprints: Sequence[int], max_df: int | None
    ) -> list[tuple[int, ...] | None]:
        out: list[tuple[int, ...] | None] = []
        for fp in fingerprints:
            ids = self._lists.get(fp, ())
            out.append(None if max_df is not None and len(ids) > max_df else tuple(sorted(ids)))
        return out

    def stats(self) -> IndexStats:
        memory = sys.getsizeof(self._lists) + sum(map(sys.getsizeof, self._lists.values()))
        return IndexStats(
            self._postings,
            len(self._lists),
            memory,
            memory / self._postings if self._postings else 0.0,
        )

    def clear(self) -> None:
        self._lists.clear()
        self._postings = 0
        self._version = None
        self._generation = None

    def ensure_version(self, version: str) -> None:
        if self._postings == 0:
            self._version = version
        elif self._version != version:
            raise IndexVersionMismatch("in-memory index", self._version, version)

    def generation(self) -> tuple[str | None, int]:
        return self._generation, self._postings

    def set_generation(self, generation: str) -> None:
        self._generation = generation


def suggest_bucket_bits(distinct_fingerprints: int, fields_per_bucket: int = 400) -> int:
    """Fewest bucket bits that keep the mean bucket at most fields_per_bucket fields.

    The default leaves room to grow 2x before the fullest buckets pass the listpack
    limit of 1024 fields, beyond which a bucket costs several times more memory.
    """
    return max(0, math.ceil(math.log2(max(distinct_fingerprints, 1) / fields_per_bucket)))


class RedisIndex(InvertedIndex):
    """Bucketed, listpack-compact index in Redis/Valkey; see the module docstring.

    bucket_bits sets 2**bucket_bits bucket hashes: pick it with `suggest_bucket_bits` for
    the expected number of distinct fingerprints (the default, 14, suits 1e6–6e6 of them).
    fingerprint_bits is the width the fingerprinter emits (every fingerprint must be below
    2**fingerprint_bits); narrower fingerprints make shorter fields. Both are stored in the
    index metadata, and a process using other values gets IndexVersionMismatch.
    """

    def __init__(
        self,
        client: redis.Redis,
        prefix: str = "ct:ix",
        bucket_bits: int = 14,
        fingerprint_bits: int = 64,
    ) -> None:
        if not 1 <= fingerprint_bits <= 64:
            raise ValueError("fingerprint_bits must be within 1..64")
        if not 0 <= bucket_bits <= min(32, fingerprint_bits - 1):
            raise ValueError("bucket_bits must be within 0..min(32, fingerprint_bits - 1)")
        self.client = client
        self.prefix = prefix
        self.bucket_bits = bucket_bits
        self.fingerprint_bits = fingerprint_bits
        # "ix1" names this encoding: a change of mixer or value format must bump it.
        self.layout = f"ix1:bucket_bits={bucket_bits},fingerprint_bits={fingerprint_bits}"
        self._meta = f"{prefix}:meta"
        self._mask = np.uint64((1 << fingerprint_bits) - 1)
        self._shift = np.uint64(max(fingerprint_bits // 2, 1))
        field_bits = fingerprint_bits - bucket_bits
        self._field_shift = np.uint64(field_bits - 1)  # then 1 more: a shift by 64 is undefined
        self._field_mask = np.uint64((1 << field_bits) - 1)
        self._field_len = (field_bits + 7) // 8
        # Lua's string.format builds bucket key names from this: ct:ix:%04x
        digits = max(1, (bucket_bits + 3) // 4)
        self._key_format = f"{prefix.replace('%', '%%')}:%0{digits}x"
        self._add = client.register_script(_LUA_ADD)
        self._remove = client.register_script(_LUA_REMOVE)
        self._read_script = client.register_script(_LUA_READ)
        self._ensure = client.register_script(_LUA_ENSURE_VERSION)

    def add(self, master_id: int, fingerprints: Iterable[int]) -> int:
        return self._mutate(self._add, master_id, fingerprints)

    def remove(self, master_id: int, fingerprints: Iterable[int]) -> int:
        return self._mutate(self._remove, master_id, fingerprints)

    def _read(
        self, fingerprints: Sequence[int], max_df: int | None
    ) -> list[tuple[int, ...] | None]:
        calls, positions = [], []
        for offset in range(0, len(fingerprints), _CHUNK):
            order, records = self._records(fingerprints[offset : offset + _CHUNK])
            calls.append([*records, -1 if max_df is None else max_df])
            positions += (offset + i for i in order)
        replies = (value for reply in self._run(self._read_script, calls) for value in reply)
        out: list[tuple[int, ...] | None] = [()] * len(fingerprints)
        for i, value in zip(positions, replies, strict=True):
            ids = _decode(value)
            out[i] = None if ids is None or (max_df is not None and len(ids) > max_df) else ids
        return out

    def stats(self) -> IndexStats:
        """Counters from the metadata; memory is MEMORY USAGE summed over the index keys.

        The memory figure walks the index keys (one pipelined round trip per 1000 keys), so
        it costs O(keys): fine for a report, not for a dashboard refresh.
        """
        postings, keys = (int(v or 0) for v in self.client.hmget(self._meta, "postings", "keys"))
        memory = 0
        for batch in _batched(self._scan()):
            pipe = self.client.pipeline(transaction=False)
            for key in batch:
                pipe.memory_usage(key, samples=0)
            memory += sum(m or 0 for m in pipe.execute())
        return IndexStats(postings, keys, memory, memory / postings if postings else 0.0)

    def clear(self) -> None:
        for batch in _batched(self._scan()):
            self.client.unlink(*batch)

    def generation(self) -> tuple[str | None, int]:
        generation, postings = self.client.hmget(self._meta, "generation", "postings")
        return (generation.decode() if generation else None), int(postings or 0)

    def set_generation(self, generation: str) -> None:
        self.client.hset(self._meta, "generation", generation)

    def ensure_version(self, version: str) -> None:
        stored = self._ensure(keys=[self._meta], args=[version, self.layout])
        if stored:
            built, layout = (s.decode() for s in stored)
            raise IndexVersionMismatch(
                f"index {self.prefix}",
                f"{built or '(none)'} ({layout})",
                f"{version} ({self.layout})",
            )

    def _records(self, fingerprints: Sequence[int]) -> tuple[list[int], list]:
        """Where each fingerprint lives, as the first script arguments, sorted by bucket.

        Returns the order of the fingerprints in the records, and [layout, key format,
        field length, records]; a record is the 4-byte big-endian bucket number then the
        field. Two rounds of multiply-by-odd-constant and xor-shift, both bijections of
        fingerprint_bits-bit integers, mix the fingerprint first: (bucket, field) is unique
        per fingerprint, and the top bits that pick the bucket depend on every input bit,
        so skewed fingerprints still fill buckets evenly.
        """
        x = np.array(fingerprints, dtype=np.uint64)
        if (x > self._mask).any():
            raise ValueError(f"fingerprints must fit in {self.fingerprint_bits} bits")
        for constant in _MIX:
            x = (x * constant) & self._mask
            x ^= x >> self._shift
        buckets = x >> self._field_shift >> np.uint64(1)
        order = np.argsort(buckets, kind="stable")
        records = np.empty((len(x), 4 + self._field_len), dtype=np.uint8)
        records[:, :4] = buckets[order].astype(">u4").view(np.uint8).reshape(-1, 4)
        fields = (x[order] & self._field_mask).astype(">u8").view(np.uint8).reshape(-1, 8)
        records[:, 4:] = fields[:, 8 - self._field_len :]
        return order.tolist(), [self.layout, self._key_format, self._field_len, records.tobytes()]

    def _mutate(self, script: Script, master_id: int, fingerprints: Iterable[int]) -> int:
        master_id = _check_master(master_id)
        distinct = _distinct(fingerprints)
        calls = [
            [*self._records(distinct[offset : offset + _CHUNK])[1], master_id]
            for offset in range(0, len(distinct), _CHUNK)
        ]
        return sum(self._run(script, calls))

    def _run(self, script: Script, calls: list[list]) -> list:
        """Run script once per ARGV list of calls, all in one pipelined round trip.

        redis-py's pipelined Script asks SCRIPT EXISTS first, a second round trip on every
        query; instead a NOSCRIPT reply (server restarted, SCRIPT FLUSH) loads the script and
        reruns the calls that got it.
        """
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
                    raise IndexVersionMismatch(
                        f"index {self.prefix}", f"layout {str(reply)[9:]}", f"layout {self.layout}"
                    )
                raise reply
        return replies

    def _evalsha(self, script: Script, calls: list[list]) -> list:
        pipe = self.client.pipeline(transaction=False)
        for args in calls:
            pipe.evalsha(script.sha, 1, self._meta, *args)
        return pipe.execute(raise_on_error=False)

    def _scan(self) -> Iterator[bytes]:
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", self.prefix) + ":*"
        return self.client.scan_iter(match=pattern, count=1000)


def _batched(items: Iterator[T], size: int = 1000) -> Iterator[list[T]]:
    while batch := list(islice(items, size)):
        yield batch


def _decode(value: bytes | list[bytes] | int | None) -> tuple[int, ...] | None:
    """A read-script reply element → sorted ids; None for a list cut by max_df."""
    if value is None:
        return ()
    if isinstance(value, int):
        return None
    if isinstance(value, list):
        packed = value[0]
        return struct.unpack(f"<{len(packed) // 4}I", packed)
    if not value.startswith(_MULTI_TAG):
        return (int(value),)
    ids = []
    last = acc = shift = 0
    for byte in value[1:]:
        acc |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
        else:
            last += acc
            ids.append(last)
            acc = shift = 0
    return tuple(ids)
