"""`SnapshotIndex`: most postings in a read-only mapped snapshot, the recent ones in Redis.

A page's lookup in `RedisIndex` reads ~520 blocks (~600 KB) to find ~220 postings, and an
add rewrites every block its batch touches, so both grow with the library. Here:

- the **snapshot**: every posting as of the last compaction, as three arrays sorted by key
  (the mixed fingerprint of `RedisIndex.mixed`, check bits below it: uint64; the master id:
  uint32; the place: uint8), 13 bytes a posting, in a file of the process's data dir named
  by the snapshot's name (the index generation and a count of compactions), after a header
  naming the layout. A process maps it read-only and finds a page's postings with one
  ``np.searchsorted`` of both bounds of every fingerprint. The file's bytes are also kept
  in Redis in chunks (``{prefix}:snap:{name}:N``; one key each, so a Redis Cluster spreads
  them), from which a process on another host copies it to its data dir once per name.
  The snapshot is a base and a few **runs** (the state's ``runs``): a fresh batch of
  RUN_MIN_POSTINGS or more is sorted into a run of its own, merged with the newest runs no
  larger than what it gathers, and into the base once that reaches the base's size
  (`SnapshotIndex.absorb`; a binary counter: about log2 runs, each posting rewritten about
  log2 times), so a batch's cost does not grow with the library. A lookup searches each.
- the **delta**: postings added since, in `RedisIndex`'s blocks under the same prefix, so an
  add rewrites only blocks of the delta (their size depends on the delta, not the library)
  and a page reads them in one round trip as before. Its layout string is tagged
  (``snap2+ix5:…``): a process that would read the blocks alone refuses them.
- **removals**: a removed master's postings in the snapshot are masked by a set of removed
  ids (``{prefix}:{snap}:removed``), read with the snapshot's name in the page's second
  round trip; the next compaction drops them.
- **compaction** (`SnapshotIndex.compact`, by `copytrack reindex` and after a `library add`
  once the delta passes `COMPACT_SHARE` of the snapshot, never on a request's path) merges
  snapshot and delta (O(postings)) into the next name, switches to it in one transaction,
  and only then removes the merged postings from the delta. Killed at any point it leaves
  every posting readable: before the switch the old snapshot and the delta hold them all,
  after it a posting may be in both for a while (a lookup counts it once). One process
  compacts an index at a time, under a lease (`Lease`) it renews at each stage and checks
  at the switch; it merges the runs into the base too. A fresh batch that would leave
  the delta larger than the snapshot is compacted in directly, never written into the
  delta; so is a run, under the same lease.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import re
import secrets
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import redis

from fingerprinter import compiled

from .base import (
    IndexedMaster,
    IndexStats,
    IndexVersionMismatch,
    InvertedIndex,
    MiscountedShard,
    Postings,
    checked_master,
    distinct_fingerprints,
    posting_lists,
)
from .redis_index import RedisIndex

#: Names this module's layout: the snapshot file's format and the delta's tag.
SNAPSHOT_LAYOUT = "snap2"
_MAGIC = b"CTSNAP1\n"
_HEADER_BYTES = 4096  # the arrays start page-aligned after it
#: madvise(MADV_POPULATE_READ), Linux's (not in Python's mmap module): a part's pages are
#: mapped into the process when the part is, from the page cache. A lookup's keys land on
#: pages far apart, so a fresh process took a page fault for nearly each: a page of 79,000
#: keys made ~79,000 faults in a 392 M-posting base the first time, none after. Mapping
#: the 10 GB of a 1 M-work library's parts so took 0.26 s (the lookups touch them anyway).
_POPULATE_READ = 22
#: Bytes of the file kept in one Redis key.
CHUNK_BYTES = 16 * 2**20
#: A compaction is due once the delta holds this share of the snapshot's postings...
COMPACT_SHARE = 0.10
#: ...and at least this many (a small library is read from its blocks quickly anyway).
COMPACT_MIN_POSTINGS = 200_000
#: A fresh batch of this many postings or more is written as a sorted run of its own.
RUN_MIN_POSTINGS = 200_000
#: ...and merged with the newest runs up to this many times the size it gathers, so
#: batches of about one size (they vary by their texts) merge as equals. 100k works added:
#: 1 kept a run slightly larger than the batch apart, 4 runs and a base (add 60 s, lookup
#: p99 11 ms); 2 rewrote the base 4 times (75 s, 1.5 ms); 1.5: 2 runs (64 s, 2.0 ms).
RUN_MERGE_RATIO = 1.5
#: Bytes of a posting in the snapshot (key, master id, place).
SNAPSHOT_POSTING_BYTES = 13
#: The compiled search of a lookup's bounds (_snapshot_bounds.pyx); where it does not load,
#: the numpy passes of `_bounds` give the same bounds.
BOUNDS_LOOP = "tracker.index._snapshot_bounds"
_loop = compiled.load(BOUNDS_LOOP)
_compiled_bounds = _loop.bounds if _loop else None


@dataclass(frozen=True)
class SnapshotArrays:
    """Postings sorted by key: key (mixed fingerprint above its check bits), master id,
    place."""

    keys: np.ndarray
    ids: np.ndarray
    places: np.ndarray
    #: Every STEP-th key, in memory (see `_bounds`); None: searched whole.
    sample: KeySample | None = None

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(frozen=True)
class KeySample:
    """Every STEP-th key of a part, and its directory: where in it each value of the keys'
    bits above ``shift`` starts (and, last, its end). The keys are mixed fingerprints,
    near-uniform, so a prefix holds 2-4 sampled keys, and a key's step is found with a read
    of each rather than a binary search of the sample, whose ~20 steps mostly miss the CPU's
    caches once a part has 100 M postings."""

    keys: np.ndarray
    directory: np.ndarray
    shift: int


def key_sample(keys: np.ndarray) -> KeySample:
    """The `KeySample` of sorted keys."""
    sample = np.ascontiguousarray(keys[::STEP])
    prefix_bits = max(1, len(sample).bit_length() - 2)
    shift = max(0, int(sample[-1]).bit_length() - prefix_bits) if len(sample) else 0
    counts = np.bincount((sample >> np.uint64(shift)).astype(np.intp), minlength=1 << prefix_bits)
    return KeySample(sample, np.concatenate(([0], np.cumsum(counts))).astype(np.int64), shift)


def _empty() -> SnapshotArrays:
    return SnapshotArrays(np.empty(0, np.uint64), np.empty(0, np.uint32), np.empty(0, np.uint8))


def snapshot_bytes(layout: str, name: str, arrays: SnapshotArrays) -> Iterable[bytes]:
    """The file of a snapshot, in pieces: header, then the three arrays."""
    header = (
        _MAGIC
        + json.dumps(
            {"layout": layout, "name": name, "postings": len(arrays)}, sort_keys=True
        ).encode()
    )
    if len(header) > _HEADER_BYTES:
        raise ValueError("snapshot header too long")
    yield header.ljust(_HEADER_BYTES, b"\0")
    yield arrays.keys.astype("<u8").tobytes()
    yield arrays.ids.astype("<u4").tobytes()
    yield arrays.places.astype(np.uint8).tobytes()


def write_file(path: Path, pieces: Iterable[bytes]) -> None:
    """Write the file whole, then give it its name (a reader never meets half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.name}.{secrets.token_hex(4)}.part")
    try:
        with open(part, "wb") as out:
            for piece in pieces:
                out.write(piece)
            out.flush()
            os.fsync(out.fileno())
    except OSError as err:
        part.unlink(missing_ok=True)  # half a file would hold the disk's last bytes
        # A write's error names no file: this one says which (a full disk, in one line).
        raise OSError(err.errno, err.strerror, str(path)) from err
    os.replace(part, path)


class MappedSnapshot:
    """A snapshot file mapped read-only."""

    def __init__(self, path: Path, layout: str, name: str) -> None:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        if self._map is not None and sys.platform == "linux":
            # A kernel before 5.14 refuses it: the pages then come in as lookups touch them.
            with contextlib.suppress(OSError):
                self._map.madvise(_POPULATE_READ)
        head = bytes(self._map[:_HEADER_BYTES]) if self._map is not None else b""
        try:
            if not head.startswith(_MAGIC):
                raise ValueError
            meta = json.loads(head[len(_MAGIC) :].rstrip(b"\0"))
            found, count = str(meta["layout"]), int(meta["postings"])
        except (ValueError, KeyError, TypeError):
            found, count = "(unreadable)", -1
        if found != layout or meta.get("name") != name or size != _HEADER_BYTES + 13 * count:
            raise IndexVersionMismatch(
                f"index snapshot {path}", f"layout {found}", f"layout {layout}"
            )
        buffer = self._map
        at = _HEADER_BYTES
        keys = np.frombuffer(buffer, "<u8", count, at)  # type: ignore[arg-type]
        self.arrays = SnapshotArrays(
            keys,
            np.frombuffer(buffer, "<u4", count, at + 8 * count),  # type: ignore[arg-type]
            np.frombuffer(buffer, np.uint8, count, at + 12 * count),  # type: ignore[arg-type]
            key_sample(keys),
        )
        self.name = name


def find(
    arrays: SnapshotArrays, keys: np.ndarray, check_bits: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(position in ``keys``, master id, exact, place) of every posting of the keys (as
    `SnapshotArrays` keys them: check bits low), found by the key above the check bits;
    exact: the check bits agree too."""
    return find_all([arrays], keys, check_bits)


def find_all(
    parts: Sequence[SnapshotArrays], keys: np.ndarray, check_bits: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`find` in each part, the postings of all of them. No loop over the keys: they are
    sorted once (the searches then walk each part forward), their bounds in a part searched
    at once, and every posting of every range gathered by one index."""
    checks = np.uint64((1 << check_bits) - 1)
    order = np.argsort(keys)
    low = np.ascontiguousarray(keys[order] & ~checks)
    high = low | checks
    found = []
    for part in parts:
        starts, stops = _bounds(part, low, high)
        counts = stops - starts
        total = int(counts.sum())
        if not total:
            continue
        offsets = np.cumsum(counts) - counts
        at = np.repeat(starts - offsets, counts) + np.arange(total)
        query = np.repeat(order, counts)
        exact = (part.keys[at] & checks) == (keys[query] & checks)
        found.append((query, part.ids[at].astype(np.int64), exact, part.places[at]))
    if not found:
        nothing = np.empty(0, np.int64)
        return nothing, nothing, np.empty(0, bool), np.empty(0, np.uint8)
    if len(found) == 1:
        return found[0]
    query, master, exact, place = (np.concatenate(column) for column in zip(*found, strict=True))
    return query, master, exact, place


def _named_parts(fields: dict[str, str]) -> list[tuple[str, int]]:
    """(name, chunks) of the parts a state names: the base, then its runs."""
    base = [(fields["name"], int(fields.get("chunks", 0)))] if fields.get("name") else []
    return base + [(name, chunks) for name, chunks, _ in _runs(fields)]


def _runs(fields: dict[str, str]) -> list[tuple[str, int, int]]:
    """(name, chunks, postings) of the runs a state names, oldest (largest) first."""
    return [(str(n), int(c), int(p)) for n, c, p in json.loads(fields.get("runs") or "[]")]


#: Keys a step of `SnapshotArrays.sample`: a lookup first searches the sample (every
#: STEP-th key, a few MB that stay in the CPU's caches), then the STEP keys after it (the
#: compiled loop binary-searches them; the numpy passes take every SUB-th key of the STEP,
#: then the SUB keys after that, each at once for all the page's keys). A plain
#: binary search of the whole array missed the caches at most of its ~23 steps (530 keys
#: in 2 M postings: 0.24-0.49 ms); one window of the STEP keys gathered 65 keys a search
#: (10k works, a page's 528 keys, in turns: 2.3 ms against 1.1 ms, load 3.8).
STEP = 64
SUB = 8


def _bounds(
    arrays: SnapshotArrays, low: np.ndarray, high: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each (low, high): the first position of a key >= low, and of a key > high."""
    sample, keys = arrays.sample, arrays.keys
    n = len(keys)
    if sample is None or n < 4 * STEP:
        return (np.searchsorted(keys, low, side="left"),
                np.searchsorted(keys, high, side="right"))  # fmt: skip
    if _compiled_bounds is not None:
        return _compiled_bounds(keys, sample.keys, sample.directory, sample.shift, low, high, STEP)
    compiled.fallback_runs(BOUNDS_LOOP)
    # The first key >= low lies within the STEP + 1 keys from the sampled key before it,
    # and within the SUB + 1 from the last SUB-th of those below low.
    base = np.maximum(np.searchsorted(sample.keys, low, side="left") - 1, 0) * STEP
    coarse = keys[np.minimum(base[:, None] + np.arange(0, STEP + 1, SUB), n - 1)]
    first = base + SUB * np.maximum((coarse < low[:, None]).sum(axis=1) - 1, 0)
    near = keys[np.minimum(first[:, None] + np.arange(SUB + 1), n - 1)]
    starts = first + (near < low[:, None]).sum(axis=1)
    below = (near <= high[:, None]).sum(axis=1)
    stops = first + below
    # A range past the window (a fingerprint many works hold), or one running to the end.
    far = (below == SUB + 1) | (stops >= n)
    if far.any():
        stops[far] = np.searchsorted(keys, high[far], side="right")
    starts = np.minimum(starts, n)
    return starts, np.maximum(stops, starts)


def merged(
    old: SnapshotArrays,
    keys: np.ndarray,
    ids: np.ndarray,
    places: np.ndarray,
    fresh: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> SnapshotArrays:
    """``old`` (sorted) with the postings given added, each (key, id) once: the new ones
    sorted and inserted, O(old + new log new). ``fresh``: more postings (keys, ids,
    places) of ids nothing holds yet."""
    if fresh is not None and len(fresh[0]):
        keys, ids, places = (
            np.concatenate((a, b)) for a, b in zip((keys, ids, places), fresh, strict=True)
        )
    # One plain sort of the keys: lexsort's second key cost 4x (7.5 M postings: 7.6 s
    # against 1.9 s), and the order of a key's postings does not matter to `find`.
    order = np.argsort(keys)
    keys, ids, places = keys[order], ids[order], places[order]
    keep = ~_repeated(keys, ids)
    # Those already in old (an interrupted compaction's): only ids old holds can be.
    if len(old) and len(keys):
        # np.isin looks the ids up in a table over their range (or sorts, were it huge).
        rows = np.flatnonzero(np.isin(ids, old.ids) & keep)
        if len(rows):
            query, master, _, _ = find(old, keys[rows], 0)
            keep[rows[query[master == ids[rows][query]]]] = False
    if not keep.all():
        keys, ids, places = keys[keep], ids[keep], places[keep]
    if not len(old):
        return SnapshotArrays(keys, ids, places)
    # Where each new posting lands: np.insert would sort these (sorted already) for each
    # of the three arrays (24 M into 24 M postings: 6.7 s, this 1.5 s).
    at = np.searchsorted(old.keys, keys, side="left") + np.arange(len(keys))
    olds = np.ones(len(old) + len(keys), dtype=bool)
    olds[at] = False
    arrays = []
    for before, added in ((old.keys, keys), (old.ids, ids), (old.places, places)):
        both = np.empty(len(olds), dtype=before.dtype)
        both[olds], both[at] = before, added
        arrays.append(both)
    keys, ids, places = arrays
    return SnapshotArrays(keys, ids, places)


def _repeated(keys: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """For postings sorted by key: True where a (key, id) comes a second time. Only the
    runs of a key shared by several postings are sorted by id to find them."""
    repeated = np.zeros(len(keys), dtype=bool)
    shared = keys[1:] == keys[:-1]
    if not shared.any():
        return repeated
    rows = np.flatnonzero(np.concatenate(([False], shared)) | np.concatenate((shared, [False])))
    rows = rows[np.lexsort((ids[rows], keys[rows]))]
    again = (keys[rows[1:]] == keys[rows[:-1]]) & (ids[rows[1:]] == ids[rows[:-1]])
    repeated[rows[1:][again]] = True
    return repeated


class CompactionLost(Exception):
    """The compaction's lease went to another process (it expired, or the index was
    cleared): this one must not switch."""


class SnapshotIndex(InvertedIndex):
    """The index as a mapped snapshot and a delta in Redis; see the module docstring.

    delta: a `RedisIndex` made with ``layout_tag=SNAPSHOT_LAYOUT``; data_dir: where this
    process keeps the snapshot's file; copies_in_redis: keep each file's bytes in Redis too,
    for processes on other hosts (False: every process shares ``data_dir``, and Redis holds
    none of the snapshot's ~13 bytes a posting)."""

    def __init__(self, delta: RedisIndex, data_dir: Path, copies_in_redis: bool = True) -> None:
        if not delta.layout.startswith(SNAPSHOT_LAYOUT + "+"):
            raise ValueError(f"the delta's layout must be tagged {SNAPSHOT_LAYOUT}")
        self.delta = delta
        self.client = delta.client
        self.prefix = delta.prefix
        self.layout = delta.layout
        self.data_dir = Path(data_dir)
        self.copies_in_redis = copies_in_redis
        self._check_bits = delta.check_bits
        # One hash tag: the state and the removed ids change in one transaction.
        self._state_key = f"{delta.prefix}:{{snap}}:state"
        self._removed_key = f"{delta.prefix}:{{snap}}:removed"
        self._mapped: dict[str, MappedSnapshot] = {}
        self._one_node = isinstance(delta.client, redis.Redis)
        self._page_state = self.client.register_script(_PAGE_STATE)
        self._delta_was_empty = self._one_node

    # -- keys of the snapshot ------------------------------------------------------------

    def _as_keys(self, x: np.ndarray) -> np.ndarray:
        """Mixed fingerprints (check bits above) as snapshot keys (check bits below)."""
        bits = self.delta.fingerprint_bits
        plain = x & np.uint64((1 << bits) - 1)
        return (plain << np.uint64(self._check_bits)) | (x >> np.uint64(bits))

    def _as_mixed(self, keys: np.ndarray) -> np.ndarray:
        bits, checks = self.delta.fingerprint_bits, self._check_bits
        check = keys & np.uint64((1 << checks) - 1)
        return (keys >> np.uint64(checks)) | (check << np.uint64(bits))

    def _chunk_key(self, name: str, n: int) -> str:
        return f"{self.prefix}:snap:{name}:{n}"

    def _path(self, name: str) -> Path:
        return self.data_dir / f"{_safe(self.prefix)}.{_safe(name)}.ctsnap"

    # -- reading -------------------------------------------------------------------------

    def _parts(self, fields: dict[str, str]) -> list[SnapshotArrays]:
        """The parts the state's fields name, the base first, then its runs, each mapped
        (copied from Redis first if this host has no file of it)."""
        named = _named_parts(fields)
        if named and fields.get("layout") != self.layout:
            raise IndexVersionMismatch(
                f"index {self.prefix}", f"layout {fields.get('layout')}", f"layout {self.layout}"
            )
        if set(self._mapped) != {name for name, _ in named}:
            self._mapped = {
                name: self._mapped.get(name) or self._map(name, chunks) for name, chunks in named
            }
            kept = {self._path(name) for name in self._mapped}
            for other in self.data_dir.glob(f"{_safe(self.prefix)}.*.ctsnap"):
                if other not in kept:  # an older name's (a process mapping it keeps its pages)
                    other.unlink(missing_ok=True)
        return [self._mapped[name].arrays for name, _ in named]

    def _map(self, name: str, chunks: int) -> MappedSnapshot:
        path = self._path(name)
        if not path.exists():
            if not chunks:  # written with COPYTRACK_INDEX_SNAPSHOT_IN_REDIS=false
                raise IndexVersionMismatch(
                    f"index snapshot {path}", None, self.layout,
                    f"index snapshot {path} is not in this data dir, and Redis keeps no copy "
                    "of it (COPYTRACK_INDEX_SNAPSHOT_IN_REDIS=false): give every process the "
                    "data dir the index was built in, or run `copytrack reindex` here",
                )  # fmt: skip
            write_file(path, self._chunks(name, chunks))
        return MappedSnapshot(path, self.layout, name)

    def _chunks(self, name: str, chunks: int) -> Iterable[bytes]:
        for n in range(chunks):
            piece = self.client.get(self._chunk_key(name, n))
            if piece is None:
                raise IndexVersionMismatch(
                    f"index snapshot {name}", "its chunks missing in Redis", self.layout
                )
            yield piece if isinstance(piece, bytes) else piece.encode()

    def _current(
        self, delta_counts: bool = False
    ) -> tuple[list[SnapshotArrays], set[int], dict[str, str], int]:
        """The snapshot's parts named now, the ids it masks and the state's fields, in one
        round trip; delta_counts: also the postings the delta holds, read before them (else
        -1)."""
        if delta_counts and self._one_node:
            # One script rather than a pipeline of the 16 shards' counts and the two reads:
            # 0.06 against 0.13-0.25 ms a page (most of it the client's, per command).
            keys = [self._state_key, self._removed_key, *self.delta.shard_keys]
            recent, flat, members = self._page_state(keys=keys)
            state = dict(zip(flat[::2], flat[1::2], strict=True))
        else:
            pipe = self.client.pipeline(transaction=False)
            if delta_counts:
                for key in self.delta.shard_keys:
                    pipe.hget(key, "postings")
            pipe.hgetall(self._state_key)
            pipe.smembers(self._removed_key)
            *counts, state, members = pipe.execute()
            recent = sum(int(c or 0) for c in counts) if delta_counts else -1
        fields = _fields(state)
        return self._parts(fields), {int(m) for m in members}, fields, int(recent)

    def postings(
        self, fingerprints: Sequence[int] | np.ndarray, max_df: int | None = None, kept: bool = True
    ) -> Postings:
        recent: Postings | None = None
        parts: list[SnapshotArrays] = []
        recent_count = -1
        removed: set[int] = set()
        if self._delta_was_empty:
            # One round trip, no block read, while the delta is empty (after a compaction):
            # its counts are read before the snapshot's name, and a posting that left the
            # delta did so for a snapshot named after it. (A cluster's pipeline sends each
            # node its own commands, in no order between them: there the delta is read.)
            self.delta.check_layout()
            parts, removed, _, recent_count = self._current(delta_counts=True)
        if recent_count != 0:
            # The delta first, then the snapshot's name: a compaction removes postings from
            # the delta only after it switched names, so a name unchanged since means the
            # delta was read whole; a new name holds what the delta lost.
            recent = self.delta.postings(fingerprints, None, kept)
            parts, removed, _, _ = self._current()
        self._delta_was_empty = self._one_node and (
            recent_count == 0 or self.delta.postings_seen == 0
        )
        keys = self._as_keys(self.delta.mixed(fingerprints))
        query, master, exact, place = find_all(parts, keys, self._check_bits)
        if removed and len(master):
            live = ~np.isin(master, np.fromiter(removed, np.int64, len(removed)))
            query, master, exact, place = query[live], master[live], exact[live], place[live]
        if recent is not None and len(recent):
            query = np.concatenate((query, recent.query))
            master = np.concatenate((master, recent.master))
            exact = np.concatenate((exact, recent.exact))
            place = np.concatenate((place, recent.place))
        # By query, then master; one row per pair (a posting in both snapshot and delta
        # after an interrupted compaction).
        _, first = np.unique(query << 32 | master, return_index=True)
        query, master, exact, place = query[first], master[first], exact[first], place[first]
        df = np.bincount(query, minlength=len(keys))[query] if len(query) else query
        if max_df is not None:
            keep = df <= max_df
            query, master, df, exact, place = (c[keep] for c in (query, master, df, exact, place))
        return Postings(query, master, df, exact, place)

    def _read(
        self, fingerprints: Sequence[int], max_df: int | None
    ) -> list[tuple[int, ...] | None]:
        return posting_lists(self.postings(fingerprints, None), len(fingerprints), max_df)

    # -- writing -------------------------------------------------------------------------

    def add(
        self, master_id: int, fingerprints: Iterable[int], places: Iterable[int] | None = None
    ) -> int:
        return self.add_many([(master_id, fingerprints, places)])

    def add_many(self, masters: Sequence[IndexedMaster], fresh: bool = False) -> int:
        """Into the delta, less the postings the snapshot holds already (unless ``fresh``:
        new ids, none held), so the count of new postings is the index's.

        A fresh batch of RUN_MIN_POSTINGS or more, or one that would leave the delta larger
        than the snapshot (the first batches of a library), goes straight into the snapshot
        (`build`, `absorb`): its postings are sorted and written once as a run of their own,
        not into blocks that a compaction would read back and write again."""
        x, tag = self.delta._records_of(masters)
        direct = fresh and len(x) and (len(x) >= RUN_MIN_POSTINGS or self.builds_directly(len(x)))
        if direct and build(self, (x, tag)):
            return len(x)
        if not fresh and len(x):
            parts, removed, _, _ = self._current()
            query, master, _, _ = find_all(parts, self._as_keys(x), 0)
            held = master == (tag[query] >> np.uint64(8)).astype(np.int64)
            if removed:
                held &= ~np.isin(master, np.fromiter(removed, np.int64, len(removed)))
            new = np.ones(len(x), dtype=bool)
            new[query[held]] = False
            x, tag = x[new], tag[new]
        return self.delta.add_mixed(x, tag, fresh=fresh)

    def remove(self, master_id: int, fingerprints: Iterable[int]) -> int:
        """Mask the master's postings in the snapshot (those of other fingerprints than
        these go back into the delta first), then remove them from the delta."""
        master_id = checked_master(master_id)
        values = distinct_fingerprints(fingerprints)
        gone = np.unique(self._as_keys(self.delta.mixed(values)) >> np.uint64(self._check_bits))
        masked = 0
        while True:
            with self.client.pipeline(transaction=True) as pipe:
                try:
                    # Counted whether or not the snapshot holds the master: a compaction
                    # that read its postings from the delta must not switch after this.
                    pipe.watch(self._state_key, self._removed_key)
                    state = _fields(pipe.hgetall(self._state_key))
                    held = [_empty()]
                    if not pipe.sismember(self._removed_key, str(master_id)):
                        held += [
                            SnapshotArrays(part.keys[rows], part.ids[rows], part.places[rows])
                            for part in self._parts(state)
                            if len(rows := np.flatnonzero(part.ids == master_id))
                        ]
                    keys = np.concatenate([part.keys for part in held])
                    places = np.concatenate([part.places for part in held])
                    kept = ~np.isin(keys >> np.uint64(self._check_bits), gone)
                    if kept.any():  # a removal of some of its postings: the rest stay
                        tag = (np.uint64(master_id) << np.uint64(8)) | places[kept]
                        self.delta.add_mixed(self._as_mixed(keys[kept]), tag)
                    pipe.multi()
                    if len(keys):
                        pipe.sadd(self._removed_key, master_id)
                        pipe.hincrby(self._state_key, "live", -len(keys))
                    pipe.hincrby(self._state_key, "removes", 1)
                    pipe.execute()
                    masked = int((~kept).sum())
                    break
                except redis.WatchError:
                    continue
        return masked + self.delta.remove(master_id, values)

    # -- compaction ----------------------------------------------------------------------

    def builds_directly(self, postings: int) -> bool:
        """Whether a batch of that many new postings would leave the delta holding more
        than the snapshot (see `add_many`)."""
        live = self.client.hget(self._state_key, "live")
        return self.delta.generation()[1] + postings > int(live or 0)

    def compaction_due(self) -> bool:
        """Whether the delta holds COMPACT_SHARE of the snapshot's postings (and
        COMPACT_MIN_POSTINGS)."""
        state = _fields(self.client.hgetall(self._state_key))
        _, recent = self.delta.generation()
        return recent >= max(COMPACT_MIN_POSTINGS, COMPACT_SHARE * int(state.get("live", 0)))

    def compact(
        self, fresh: tuple[np.ndarray, np.ndarray] | None = None, lease: Lease | None = None
    ) -> bool:
        """Merge the delta (and ``fresh``: mixed fingerprints and tags of new ids) into a new
        snapshot and switch to it; False when a removal came meanwhile (nothing changed: to
        be run again). O(postings), off any request's path. ``lease``: held by this
        process (`Lease`), renewed at each stage and checked at the switch; lost, it
        raises `CompactionLost` and switches nothing."""
        renew = lease.renew if lease is not None else _nothing
        held, removed, state, _ = self._current()
        old_name, old_runs = state.get("name"), state.get("runs") or "[]"
        removes = state.get("removes", "0")
        parts = list(self.delta.records())
        x = np.concatenate([np.empty(0, np.uint64), *(p[2] for p in parts)])
        tag = np.concatenate([np.empty(0, np.uint64), *(p[3] for p in parts)])
        if removed:
            gone = np.fromiter(removed, np.uint32, len(removed))
            held = [_without(part, ~np.isin(part.ids, gone)) for part in held]
        old, *runs = held or [_empty()]
        # The runs hold ids nothing else does: fresh postings, as those given.
        news = [(r.keys, r.ids, r.places) for r in runs]
        news += [] if fresh is None else [self._split(*fresh)]
        renew()
        new = merged(old, *self._split(x, tag), fresh=_joined(news))
        renew()
        name, chunks = self._store(new, str(int(state.get("compactions", 0)) + 1), renew)

        def unchanged(now: dict[str, str]) -> bool:
            return (now.get("name") == old_name and (now.get("runs") or "[]") == old_runs
                    and now.get("removes", "0") == removes)  # fmt: skip

        def switch(pipe: redis.client.Pipeline) -> None:
            pipe.hset(self._state_key, mapping={
                "name": name, "layout": self.layout, "chunks": chunks, "runs": "[]",
                "postings": len(new), "live": len(new),
                "compactions": int(state.get("compactions", 0)) + 1,
            })  # fmt: skip
            if removed:
                pipe.srem(self._removed_key, *removed)

        if not self._switch(name, chunks, lease, unchanged, switch, [self._removed_key]):
            return False
        # Switched: the merged postings leave the delta (a kill here leaves them in both).
        for shard, version, shard_x, shard_tag in parts:
            if len(shard_x) and not self.delta.emptied(shard, version):
                self.delta.remove_mixed(shard_x, shard_tag >> np.uint64(8))
        for merged_name, merged_chunks in _named_parts(state):
            self._drop(merged_name, merged_chunks)
        return True

    def absorb(self, fresh: tuple[np.ndarray, np.ndarray], lease: Lease | None = None) -> bool:
        """Take a fresh batch (mixed fingerprints and tags of new ids) in as a sorted run
        of its own, merged with the newest runs no larger than RUN_MERGE_RATIO times what it
        gathers (a binary counter: about log2 runs, each posting rewritten about log2
        times); into the base, with the delta (`compact`), once the base is no larger
        either. The cost
        of a batch depends on it and on the runs it meets, not on the library. False when
        the state changed meanwhile (nothing changed: to be run again)."""
        renew = lease.renew if lease is not None else _nothing
        parts, _, state, _ = self._current()
        runs = _runs(state)
        gathered, merging = len(fresh[0]), 0
        while merging < len(runs) and runs[-1 - merging][2] <= RUN_MERGE_RATIO * gathered:
            gathered += runs[-1 - merging][2]
            merging += 1
        if merging == len(runs) and (not parts or len(parts[0]) <= RUN_MERGE_RATIO * gathered):
            return self.compact(fresh, lease)
        kept = runs[: len(runs) - merging]
        runs_merged = [(p.keys, p.ids, p.places) for p in parts[1 + len(kept) :]]
        new = merged(_empty(), *self._split(*fresh), fresh=_joined(runs_merged))
        renew()
        name, chunks = self._store(new, f"{int(state.get('compactions', 0))}.run", renew)
        added = len(new) - sum(postings for _, _, postings in runs[len(kept) :])

        def unchanged(now: dict[str, str]) -> bool:
            return now.get("name") == state.get("name") and now.get("runs") == state.get("runs")

        def switch(pipe: redis.client.Pipeline) -> None:
            pipe.hset(self._state_key, "runs", json.dumps([*kept, (name, chunks, len(new))]))
            pipe.hincrby(self._state_key, "postings", added)
            pipe.hincrby(self._state_key, "live", added)

        if not self._switch(name, chunks, lease, unchanged, switch):
            return False
        for merged_name, merged_chunks, _ in runs[len(kept) :]:
            self._drop(merged_name, merged_chunks)
        return True

    def _store(
        self, arrays: SnapshotArrays, label: str, renew: Callable[[], None]
    ) -> tuple[str, int]:
        """A new part's file of ``arrays``, named by the index generation and ``label``,
        written and copied into Redis (unless `copies_in_redis` is off: 0 chunks); its
        (name, chunks)."""
        name = f"{self.delta.generation()[0] or 'none'}.{label}.{secrets.token_hex(3)}"
        write_file(self._path(name), snapshot_bytes(self.layout, name, arrays))
        copied = self._upload(self._path(name), name, renew) if self.copies_in_redis else 0
        return name, copied

    def _switch(
        self,
        name: str,
        chunks: int,
        lease: Lease | None,
        unchanged: Callable[[dict[str, str]], bool],
        switch: Callable[[redis.client.Pipeline], None],
        watched: Sequence[str] = (),
    ) -> bool:
        """Name the new part ``name`` in one transaction (``switch``'s commands) while the
        lease is held and the state is ``unchanged``; else drop the part: False when the
        state changed meanwhile, `CompactionLost` when the lease was lost."""
        with self.client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(self._state_key, *watched, *lease_keys(lease))
                now = _fields(pipe.hgetall(self._state_key))
                if lease is not None and not lease.held_in(pipe):
                    self._drop(name, chunks)
                    raise CompactionLost(f"index {self.prefix}: compaction lease lost")
                if not unchanged(now):
                    raise redis.WatchError
                pipe.multi()
                switch(pipe)
                pipe.execute()
            except redis.WatchError:
                self._drop(name, chunks)
                return False
        return True

    def _split(self, x: np.ndarray, tag: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Mixed fingerprints and tags as the snapshot's keys, ids and places."""
        ids = (tag >> np.uint64(8)).astype(np.uint32)
        return self._as_keys(x), ids, (tag & np.uint64(255)).astype(np.uint8)

    def _upload(self, path: Path, name: str, renew: Callable[[], None] = lambda: None) -> int:
        """Copy the file's bytes into Redis in CHUNK_BYTES keys; returns their number."""
        count = 0
        with open(path, "rb") as f:
            while piece := f.read(CHUNK_BYTES):
                renew()
                self.client.set(self._chunk_key(name, count), piece)
                count += 1
        return count

    def drop_strays(self) -> None:
        """Delete the chunks of snapshots not named now (a compaction killed before its
        switch leaves them); only while no other compaction runs."""
        state = _fields(self.client.hgetall(self._state_key))
        current = tuple(f"{self.prefix}:snap:{name}:" for name, _ in _named_parts(state))
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", self.prefix) + ":snap:*"
        for key in self.client.scan_iter(match=pattern, count=1000):
            if not _text(key).startswith(current):
                self.client.delete(key)

    def _drop(self, name: str, chunks: int) -> None:
        for n in range(chunks):
            self.client.delete(self._chunk_key(name, n))
        self._path(name).unlink(missing_ok=True)

    # -- the rest, as the delta answers it -------------------------------------------------

    def stats(self) -> IndexStats:
        recent = self.delta.stats()
        state = _fields(self.client.hgetall(self._state_key))
        held = int(state.get("postings", 0))
        postings = recent.postings + int(state.get("live", 0))
        memory = recent.memory_bytes + SNAPSHOT_POSTING_BYTES * held
        return IndexStats(postings, recent.keys, memory, memory / postings if postings else 0.0)

    def clear(self) -> None:
        self.delta.clear()  # every key under the prefix, the snapshot's too
        self._mapped = {}
        for path in self.data_dir.glob(f"{_safe(self.prefix)}.*.ctsnap"):
            path.unlink(missing_ok=True)

    def ensure_version(self, version: str) -> None:
        # A library built straight into a snapshot leaves the delta empty: its postings
        # count, or a process with other parameters would take the index as its own.
        live = int(self.client.hget(self._state_key, "live") or 0)
        self.delta.ensure_version(version, held_elsewhere=live)

    def generation(self) -> tuple[str | None, int]:
        generation, recent = self.delta.generation()
        live = int(self.client.hget(self._state_key, "live") or 0)
        return generation, recent + live

    def set_generation(self, generation: str) -> None:
        self.delta.set_generation(generation)

    def begin_removal(self, token: str, until: float) -> None:
        self.delta.begin_removal(token, until)

    def end_removal(self, token: str) -> None:
        self.delta.end_removal(token)

    def removals(self, now: float) -> tuple[int, int]:
        return self.delta.removals(now)

    def reserve(self, postings: int) -> None:
        """Room in the delta for what it will hold of them: no more than the snapshot (the
        rest goes straight into snapshots, `add_many`); a delta grown for a whole library
        would have a later small batch write a block a posting."""
        live = int(self.client.hget(self._state_key, "live") or 0)
        self.delta.reserve(min(postings, max(live - self.delta.generation()[1], 0)))

    def miscounted_shards(self) -> list[MiscountedShard]:
        return self.delta.miscounted_shards()

    def block_check_due(self, every: float, now: float) -> bool:
        return self.delta.block_check_due(every, now)


#: The delta's postings (the shards' counts, KEYS[3:]), the state's fields (KEYS[1]) and
#: the removed ids (KEYS[2]); on one node only (the keys are in several hash slots).
_PAGE_STATE = """
local n = 0
for i = 3, #KEYS do n = n + tonumber(redis.call('HGET', KEYS[i], 'postings') or '0') end
return {n, redis.call('HGETALL', KEYS[1]), redis.call('SMEMBERS', KEYS[2])}
"""


def _without(part: SnapshotArrays, keep: np.ndarray) -> SnapshotArrays:
    return SnapshotArrays(part.keys[keep], part.ids[keep], part.places[keep])


def _joined(
    pieces: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Postings given in pieces (keys, ids, places) as one of each, or None for none."""
    if not pieces:
        return None
    keys, ids, places = (np.concatenate(column) for column in zip(*pieces, strict=True))
    return keys, ids, places


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def _fields(mapping: dict) -> dict[str, str]:
    """A Redis hash's fields and values as text."""
    return {_text(k): _text(v) for k, v in mapping.items()}


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _nothing() -> None:
    pass


class Lease:
    """The right to compact one index, held by one process at a time: a key (in the
    state's hash slot) holding this holder's token for LEASE_SECONDS, renewed at each stage
    of a compaction. A holder killed midway holds it LEASE_SECONDS at most; one that
    lost it (expired while it stalled, or the index cleared) switches nothing."""

    def __init__(self, index: SnapshotIndex, seconds: float | None = None) -> None:
        self.client = index.client
        self.key = f"{index.prefix}:{{snap}}:compacting"
        self.token = secrets.token_hex(8)
        self.ms = int(1000 * (LEASE_SECONDS if seconds is None else seconds))

    def take(self) -> bool:
        return bool(self.client.set(self.key, self.token, nx=True, px=self.ms))

    def renew(self) -> None:
        """Keep the lease another LEASE_SECONDS; raises `CompactionLost` if it is gone."""
        if not self.client.eval(_RENEW, 1, self.key, self.token, self.ms):
            raise CompactionLost(f"{self.key}: compaction lease lost")

    def held_in(self, pipe: redis.client.Pipeline) -> bool:
        """Whether this holder has the lease, read in a watching pipeline."""
        return bool(pipe.get(self.key) == self.token.encode())

    def give_back(self) -> None:
        self.client.eval(_GIVE_BACK, 1, self.key, self.token)


_RENEW = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end"
)
_GIVE_BACK = (
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) "
    "else return 0 end"
)


def lease_keys(lease: Lease | None) -> list[str]:
    return [] if lease is None else [lease.key]


def compact_when_due(index: InvertedIndex, always: bool = False) -> bool:
    """Compact a `SnapshotIndex` whose delta passed its share (``always``: in any case, as
    after a reindex), unless another process holds the lease (`Lease`); other indexes
    have nothing to compact. Retried while removals interrupt it. Returns whether it
    compacted."""
    if not isinstance(index, SnapshotIndex) or not (always or index.compaction_due()):
        return False
    return build(index, None, strays=True)


def claim_compaction(index: InvertedIndex, hold: float) -> bool:
    """Whether a worker is to queue a compaction of the index now: a `SnapshotIndex` whose
    delta passed its share, no process holding the lease, and no compaction queued in the
    last ``hold`` seconds (a mark taken here, given back by `compact_queued`): works
    added through the API or the admin reach the snapshot without a `library add`."""
    if not isinstance(index, SnapshotIndex) or index.client.exists(Lease(index).key):
        return False
    if not index.compaction_due():
        return False
    return bool(index.client.set(_queued_key(index), 1, nx=True, px=int(1000 * hold)))


def compact_queued(index: InvertedIndex) -> bool:
    """The queued compaction (`claim_compaction`): `compact_when_due`, then the mark given
    back. Returns whether it compacted."""
    try:
        return compact_when_due(index)
    finally:
        if isinstance(index, SnapshotIndex):
            index.client.delete(_queued_key(index))


def _queued_key(index: SnapshotIndex) -> str:
    return f"{index.prefix}:{{snap}}:compaction-queued"


def build(
    index: SnapshotIndex, fresh: tuple[np.ndarray, np.ndarray] | None, strays: bool = False
) -> bool:
    """`SnapshotIndex.compact` (with ``fresh`` postings) under the lease; False, having
    changed nothing, when another process holds it or removals kept interrupting."""
    lease = Lease(index)
    if not lease.take():
        return False
    try:
        if strays:
            index.drop_strays()
        if fresh is None:
            return any(index.compact(None, lease) for _ in range(_COMPACT_TRIES))
        return any(index.absorb(fresh, lease) for _ in range(_COMPACT_TRIES))
    except CompactionLost:
        return False
    finally:
        lease.give_back()


_COMPACT_TRIES = 5
#: Seconds a compaction's lease lasts unless renewed (each stage renews it): a process
#: killed while compacting keeps others from compacting this long at most.
LEASE_SECONDS = 120.0
