"""Which build of the index the library is matched against: the index generation.

The index in Redis can vanish (a wipe, a restart without its append-only file) or be
swapped for another (a restored copy, another installation's Redis), and a scan against
it finds nothing and closes real findings. So every build of the index gets a generation,
a random id, recorded twice:

- in MongoDB, document ``index`` of collection ``index_state``: ``generation`` and
  ``postings``, the number of postings the library put into the index;
- in Redis beside the postings (`InvertedIndex.generation`), where a wipe or a loss takes
  it away with them, together with the index's own posting counter.

A generation starts with a new library (`ensure`) and with every `rebuild` (`copytrack
reindex`). An index without a generation, of another generation, or holding fewer
postings than the library put in is not the library's index: `ensure` (every command
that opens a context) and `require` (every scan) refuse it with `IndexNotReady`, whose
message says what happened and to run `copytrack reindex`. An index holding more postings
than the library counted (an add or removal interrupted between its two writes) still
answers every query right: `IndexState.warning` reports it, nothing refuses it.

Counting: the library counts postings after the index gained them (`postings_added`) and
discounts them before the index loses them (`removing_postings`), so in flight the
library's count is never above the index's, and only a real loss shows as fewer postings.
The two counts live on two servers and cannot be read at once: a check reads the library's
first, so postings added meanwhile only raise the index's; a removal racing the check
would lower the index's count after the library's was read, so every removal is noted
beside the postings while it runs (`InvertedIndex.begin_removal`), and a reading that a
removal overlapped is taken again (`inspect`).

The counts say nothing of the postings themselves: blocks deleted or evicted with the
shards' counters left, or a bad restore, keep them equal. `tracker.matching.index_audit` looks
sampled works' postings up; a loss it finds is recorded with the generation (``lost``),
and the index is refused as any other until it is rebuilt.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pymongo.errors import DuplicateKeyError

from fingerprinter import FingerprintParams

from ..context import Context, closed_on_error, open_context
from ..core.config import Settings

COLLECTION = "index_state"
_DOC_ID = "index"
# How long a process trusts the library's generation it read (the index side is read at
# every check): a stale value can only make a check more lenient about the posting count.
_CACHE_SECONDS = 2.0
_cache: dict[tuple[int, str], tuple[float, dict[str, Any] | None]] = {}

_REINDEX = "run `copytrack reindex` to rebuild it from the library"
# How long a removal of postings is taken to be under way at most: a process killed in the
# middle of one never says it ended.
REMOVAL_SECONDS = 300.0
# Readings of both counts `inspect` takes while removals keep overlapping them, and the
# pause between two.
_READINGS = 10
_READING_PAUSE = 0.05


class IndexNotReady(RuntimeError):
    """The index in Redis is not the library's (lost, another build, being rebuilt)."""


def _postings(count: int) -> str:
    return f"{count:,} posting{'' if count == 1 else 's'}"


@dataclass(frozen=True)
class IndexState:
    """Both sides of the generation check: what MongoDB recorded and what Redis holds."""

    library_generation: str | None
    library_postings: int
    index_generation: str | None
    index_postings: int
    has_works: bool
    #: A loss of postings found by looking works up (`record_loss`), if any.
    lost: str | None = None
    #: False when removals overlapped every reading: the posting counts are not compared.
    settled: bool = True

    @property
    def problem(self) -> str | None:
        """Why scans must not run on this index (one sentence with the remedy), or None."""
        lib, index = self.library_generation, self.index_generation
        have, put = self.index_postings, self.library_postings
        if lib is None:
            if not self.has_works and index is None and have == 0:
                return None  # a new library: `ensure` starts its generation
            if not self.has_works:
                return (
                    f"the index holds {_postings(have)} but the library has no works: it is "
                    f"another library's (is COPYTRACK_REDIS_URL shared?); {_REINDEX}"
                )
            return (
                f"the library's works were indexed before index generations were recorded "
                f"and the index does not hold exactly their postings; {_REINDEX}"
            )
        if index is None:
            if have == 0 and put == 0:
                return None  # nothing indexed yet: `ensure` records the generation in Redis
            if have == 0:
                return (
                    f"the index is empty but the library put {_postings(put)} in it: Redis "
                    f"lost its data (wiped, or restarted without its append-only file); "
                    f"{_REINDEX}"
                )
            return (
                f"the index ({_postings(have)}) has no generation: a `copytrack reindex` is "
                f"running or was interrupted; wait for it to finish, or run it again"
            )
        if index != lib:
            return (
                f"the index is build {index[:8]} but the library was indexed as build "
                f"{lib[:8]}: Redis holds another copy of the index (an old one, or another "
                f"installation's); {_REINDEX}"
            )
        if self.lost:
            return f"{self.lost}; {_REINDEX}"
        if have < put and self.settled:
            return (
                f"the index holds {_postings(have)} but the library put {put:,} in it: Redis "
                f"lost recent writes (a crash?); {_REINDEX}"
            )
        return None

    @property
    def warning(self) -> str | None:
        """Something to tidy that does not make matching wrong, or None."""
        extra = self.index_postings - self.library_postings
        if self.problem or self.library_generation is None or extra <= 0 or not self.settled:
            return None
        return (
            f"the index holds {extra:,} postings more than the library counted (an add or "
            f"removal was interrupted): matching is right; `copytrack reindex` tidies it"
        )


def _read_library(ctx: Context, fresh: bool = False) -> dict[str, Any] | None:
    key = (id(ctx.db.client), ctx.db.name)
    cached = _cache.get(key)
    if not fresh and cached and time.monotonic() - cached[0] < _CACHE_SECONDS:
        return cached[1]
    doc = ctx.db[COLLECTION].find_one({"_id": _DOC_ID})
    _cache[key] = (time.monotonic(), doc)
    return doc


def _state(ctx: Context, library: dict[str, Any] | None) -> IndexState:
    index_generation, index_postings = ctx.index.generation()
    generation = (library or {}).get("generation")
    has_works = bool(generation) or ctx.db.masters.find_one({}, {"_id": 1}) is not None
    return IndexState(
        generation,
        int((library or {}).get("postings", 0)),
        index_generation,
        index_postings,
        has_works,
        _loss_of(library),
    )


def _loss_of(library: dict[str, Any] | None) -> str | None:
    """The loss recorded for the library's generation, if any."""
    library = library or {}
    lost = library.get("lost") or {}
    return lost.get("detail") if lost.get("generation") == library.get("generation") else None


def inspect(ctx: Context) -> IndexState:
    """Both sides of the check, read now (writes nothing but expired removal notes): the
    library's count first, then the index's, taken again while a removal overlaps them
    (its discount read, its removal not, or the other way round); after _READINGS tries
    the counts go uncompared (``settled`` False) rather than raise a false alarm."""
    for reading in range(_READINGS):
        if reading:
            time.sleep(_READING_PAUSE)
        begun, under_way = ctx.index.removals(time.time())
        state = _state(ctx, _read_library(ctx, fresh=True))
        if not under_way and ctx.index.removals(time.time())[0] == begun:
            return state
    return replace(state, settled=False)


def ensure(ctx: Context) -> str:
    """The library's generation, started for a new library (or for an index built before
    generations existed, if it holds exactly the library's postings); raises
    `IndexNotReady` when the index is not the library's."""
    state = inspect(ctx)
    if (
        state.library_generation is None
        and state.index_generation is None
        and state.index_postings == _indexed_postings(ctx)
    ):
        return _start(ctx, state.index_postings)
    if state.problem:
        raise IndexNotReady(state.problem)
    generation = state.library_generation
    assert generation is not None
    if state.index_generation is None:  # nothing indexed yet: Redis learns it now
        ctx.index.set_generation(generation)
    return generation


def open_ready(
    settings: Settings | None = None, params: FingerprintParams | None = None
) -> Context:
    """A context whose index is the library's (`ensure`), for a command about to use it:
    raises ``IndexVersionMismatch`` when the index was built with other parameters and
    `IndexNotReady` when it is not the library's (lost, rebuilding, another build)."""
    ctx = open_context(settings, params)
    with closed_on_error(ctx):
        ensure(ctx)
    return ctx


def require(ctx: Context) -> str:
    """The generation of the index, for a scan about to use it; raises `IndexNotReady`
    when the index is not the library's. One round trip to Redis while all is well; else
    `ensure` decides (and starts the generation of a new library)."""
    index_generation, index_postings = ctx.index.generation()
    library = _read_library(ctx)
    if (
        library is not None
        and index_generation is not None
        and library.get("generation") == index_generation
        and index_postings >= library.get("postings", 0)
        and _loss_of(library) is None
    ):
        return index_generation
    return ensure(ctx)


def current(ctx: Context) -> str:
    """The library's generation as recorded in MongoDB ('' before the first work)."""
    return str((_read_library(ctx) or {}).get("generation") or "")


def postings_added(ctx: Context, count: int) -> None:
    """Count postings the index has just gained."""
    if count:
        ctx.db[COLLECTION].update_one({"_id": _DOC_ID}, {"$inc": {"postings": count}})


@contextlib.contextmanager
def removing_postings(ctx: Context, count: int) -> Iterator[None]:
    """Discount ``count`` postings the index is about to lose (the block takes them out),
    the removal noted beside the postings while it runs (see the module's docstring)."""
    token = uuid.uuid4().hex
    ctx.index.begin_removal(token, time.time() + REMOVAL_SECONDS)
    try:
        if count:
            ctx.db[COLLECTION].update_one({"_id": _DOC_ID}, {"$inc": {"postings": -count}})
        yield
    finally:
        ctx.index.end_removal(token)


def record_loss(ctx: Context, generation: str, detail: str) -> None:
    """Record that the index of ``generation`` lost postings (``detail``: which, how it was
    found): until a rebuild, every check refuses it."""
    ctx.db[COLLECTION].update_one(
        {"_id": _DOC_ID, "generation": generation},
        {"$set": {"lost": {"generation": generation, "detail": detail, "at": datetime.now(UTC)}}},
    )
    _cache.clear()


def rebuild(ctx: Context, build: Callable[[Context], int]) -> int:
    """Rebuild the index under a new generation; ``build`` refills it from the library
    (`tracker.masters.library.reindex`) and returns the number of masters.

    The library takes the new generation first: until the index is complete and carries
    it, every scan is refused; a rebuild that dies leaves it so until it is run again.
    """
    generation = uuid.uuid4().hex
    library = ctx.db[COLLECTION]
    library.update_one(
        {"_id": _DOC_ID},
        {
            "$set": {"generation": generation, "postings": 0, "started_at": datetime.now(UTC)},
            "$unset": {"lost": ""},
        },
        upsert=True,
    )
    _cache.clear()
    count = build(ctx)
    _, postings = ctx.index.generation()
    library.update_one({"_id": _DOC_ID}, {"$set": {"postings": postings}})
    ctx.index.set_generation(generation)
    _cache.clear()
    return count


def _indexed_postings(ctx: Context) -> int:
    """Postings the library's indexed masters hold (one per distinct fingerprint)."""
    rows = ctx.db.masters.aggregate(
        [
            {"$match": {"state": "indexed"}},
            {"$group": {"_id": None, "postings": {"$sum": "$fingerprints"}}},
        ]
    )
    totals: Mapping[str, Any] = next(iter(rows), {})
    return int(totals.get("postings", 0))


def _start(ctx: Context, postings: int) -> str:
    """Record a first generation for the library, then for its index; the first process
    to record one wins and the others take it."""
    library = ctx.db[COLLECTION]
    with contextlib.suppress(DuplicateKeyError):  # another process started one meanwhile
        library.update_one(
            {"_id": _DOC_ID, "generation": {"$exists": False}},
            {
                "$set": {
                    "generation": uuid.uuid4().hex,
                    "postings": postings,
                    "started_at": datetime.now(UTC),
                }
            },
            upsert=True,
        )
    _cache.clear()
    started = library.find_one({"_id": _DOC_ID})
    assert started is not None  # upserted above
    generation = str(started["generation"])
    if ctx.index.generation()[0] is None:
        ctx.index.set_generation(generation)
    return generation
