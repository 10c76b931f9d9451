"""The master library: works in MongoDB (source of truth) and their postings in the index.

A master has a compact integer id (``_id``, what the index stores), the caller's
``external_id``, metadata, its text and the text's SHA-256. Adding the same text again is
a no-op; adding a new text under an existing external id replaces the old one. Works
longer than ``MAX_MASTER_CHARS`` are split into chapters, each a master linked to its
work by ``work_id``.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np
from pymongo import UpdateOne
from pymongo.errors import BulkWriteError, DuplicateKeyError

from fingerprinter import index_array, rewrite_stream, synonym_index_array, to_letters

from ..context import Context
from ..core.batches import batched, worked_ahead
from ..core.store import find_in, last_id, next_id, update_in
from ..core.times import now
from ..index import MAX_MASTER_ID, places_of
from .durability import wait_index_durable
from .generation import postings_added, removing_postings
from .master_cache import note_library_edit

#: The state of a work whose update is under way, or died midway (adding it again finishes
#: it); every other work is "indexed", or REMOVING.
INDEXING = "indexing"
#: The state of a work being removed (`withdraw_master`), or whose removal died midway
#: (removing it again finishes it; adding its text again restores it).
REMOVING = "removing"

#: Where a deleted work's document is kept for the findings it leaves
#: (tracker.scanning.library_edits).
ARCHIVE = "deleted_masters"
MAX_MASTER_CHARS = 400_000  # keeps a master document far below MongoDB's 16 MB limit
CHAPTER_CHARS = 200_000
# Batches of an import whose postings the index makes room for ahead (`_make_room`):
# blocks split while empty spare moving records (30,000 works into an empty library: 51-60
# -> 42-51 s, alternating), but every batch rewrites each block it touches, and blocks
# made long before their postings come multiply those rewrites (room made for all of a
# 100,000-work import, 13 batches: Valkey's CPU 93-102 -> 121-122 s, the import no faster).
ROOM_AHEAD_BATCHES = 4
# Masters read, fingerprinted and indexed together when rebuilding the index: as in
# `library add`, each index block a batch touches is rewritten once for all its postings
# (100,000 works: 343 s in batches of 4,000, 291 in batches of 8,000; later 223 s in
# batches of 8,000, 202-206 in batches of 16,000, and 170-172 once each batch was marked
# indexed while the next one's postings were written; ~1.2 GB resident).
REINDEX_BATCH = 16_000
LIBRARY_COUNT_SECONDS = 60.0  # how long a process trusts its count of the masters
# How long the shared count is kept up to date by adds and removals before it is counted
# again: a process killed between storing works and counting them leaves it off till then.
LIBRARY_RECOUNT_SECONDS = 3600.0
# How long the others wait for the process counting the masters before counting themselves.
LIBRARY_COUNTING_SECONDS = 10.0
DUPLICATE_KEY = 11000  # MongoDB's error code

METADATA_FIELDS = ("title", "author", "lang", "kind", "source")

T = TypeVar("T")


@dataclass(frozen=True)
class Work:
    """A work to register: its text and what the caller knows about it."""

    text: str
    external_id: str | None = None
    title: str | None = None
    author: str | None = None
    lang: str | None = None
    kind: str | None = None
    source: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AddResult:
    """What happened to one master: added, unchanged, updated or duplicate (of another id)."""

    external_id: str
    master_id: int
    status: str
    detail: str = ""


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _chapters(text: str) -> list[str]:
    """Split a long text at paragraph breaks into pieces of about CHAPTER_CHARS."""
    if len(text) <= MAX_MASTER_CHARS:
        return [text]
    pieces, start = [], 0
    while start < len(text):
        stop = min(start + CHAPTER_CHARS, len(text))
        if stop < len(text):
            cut = text.rfind("\n", start + CHAPTER_CHARS // 2, stop)
            stop = cut + 1 if cut > 0 else stop
        pieces.append(text[start:stop])
        start = stop
    return pieces


class MasterFingerprints(NamedTuple):
    """A master's distinct index fingerprints, sorted by value, each tagged with its
    granule's check (`FingerprintArray.tagged`), and where each granule lies in the text
    (`tracker.index.places_of`); the first granule's where values repeat."""

    values: np.ndarray
    places: np.ndarray

    def __len__(self) -> int:
        return len(self.values)


#: Masters to index, by id: their text, and its fingerprints when computed already.
_Indexing = dict[int, tuple[str, MasterFingerprints | None]]


def fingerprint_values(ctx: Context, text: str) -> MasterFingerprints:
    """The `MasterFingerprints` of a master text: its pinyin stream's, and its synonym
    stream's (`fingerprinter.synonyms`) where it has one."""
    streams = [index_array(text, ctx.params)]
    synonyms = rewrite_stream(text, ctx.params)
    if synonyms is not None:
        streams.append(synonym_index_array(synonyms, ctx.params))
    values = np.concatenate([s.values for s in streams])
    tagged = np.concatenate([s.tagged() for s in streams])
    first_letters = np.concatenate([s.first_letters for s in streams])
    _, first = np.unique(values, return_index=True)
    return MasterFingerprints(tagged[first], places_of(first_letters[first]))


# Characters of a text whose letters are counted first: a prefix has no more letters than
# the whole text, and nearly every text holds a granule's letters within its first few
# dozen characters (counting whole texts took 3 s of CPU per 100,000 works, this 0.9 s).
_VALIDATE_PREFIX_CHARS = 256


def _validate(work: Work, ctx: Context) -> None:
    mode = ctx.params.latin_mode
    letters = len(to_letters(work.text[:_VALIDATE_PREFIX_CHARS], mode))
    if letters < ctx.params.granule and len(work.text) > _VALIDATE_PREFIX_CHARS:
        letters = len(to_letters(work.text, mode))
    if letters < ctx.params.granule:
        raise ValueError(
            f"text too short to fingerprint: {letters} letters, copytrack needs at least "
            f"{ctx.params.granule} (Chinese characters or Latin letters)"
        )


@dataclass(frozen=True)
class _Piece:
    """One master to register: a whole work, or a chapter of a long one, with its
    fingerprints when they were computed ahead (None: computed when needed)."""

    work: Work
    external_id: str
    text: str
    sha: str
    work_id: str | None
    fingerprints: MasterFingerprints | None = None


@dataclass(frozen=True)
class PreparedWorks:
    """Works cut into masters and fingerprinted ahead, for `add_works`: per work, its
    pieces, or the ValueError saying why it cannot be fingerprinted."""

    outcomes: list[list[_Piece] | ValueError]

    @property
    def pieces(self) -> list[_Piece]:
        """Every piece of the works that can be fingerprinted, in order."""
        return [
            piece for outcome in self.outcomes if isinstance(outcome, list) for piece in outcome
        ]


def prepare_works(ctx: Context, works: Sequence[Work]) -> PreparedWorks:
    """The CPU-bound part of `add_works` (validation, chapters, hashes, fingerprints), so a
    caller can run it for the next batch while the servers store this one. Writes
    nothing; pieces already stored with the same text are not fingerprinted."""
    outcomes: list[list[_Piece] | ValueError] = []
    for work in works:
        try:
            outcomes.append(_pieces(ctx, work))
        except ValueError as err:
            outcomes.append(err)
    names = [piece.external_id for piece in PreparedWorks(outcomes).pieces]
    stored = {
        (m["external_id"], m["sha256"])
        for m in find_in(ctx.db.masters, "external_id", names, {"external_id": 1, "sha256": 1})
    }
    return PreparedWorks(
        [
            [
                piece
                if (piece.external_id, piece.sha) in stored
                else replace(piece, fingerprints=fingerprint_values(ctx, piece.text))
                for piece in outcome
            ]
            if isinstance(outcome, list)
            else outcome
            for outcome in outcomes
        ]
    )


# Levels of objects and arrays a work's extra fields may nest (MongoDB refuses documents
# nested past 100 levels).
MAX_EXTRA_DEPTH = 20
_INT64 = range(-(2**63), 2**63)


def _storable(name: str, value: Any, depth: int = 0) -> None:
    """Raise ValueError, naming the field, for a value MongoDB cannot store as given: a
    string holding a lone surrogate (JSON's ``"\\ud800"`` is one: not a character), an
    integer beyond 64 bits, nesting past MAX_EXTRA_DEPTH, an odd field name."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(
                f"field {name!r} holds {value[err.start : err.end]!a} at character "
                f"{err.start}, a lone surrogate (half of a UTF-16 pair), not a character: "
                "fix the text"
            ) from None
    elif isinstance(value, bool | float) or value is None:
        return
    elif isinstance(value, int):
        if value not in _INT64:
            raise ValueError(
                f"field {name!r} holds an integer beyond 64 bits, which MongoDB cannot store: "
                "give it as a string"
            )
    elif isinstance(value, dict | list):
        if depth >= MAX_EXTRA_DEPTH:
            raise ValueError(f"field {name!r} nests more than {MAX_EXTRA_DEPTH} levels")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str):
                _storable(f"{name}.{key}" if name else key, key)  # the key is stored too
                if not key or key.startswith("$") or "." in key or "\0" in key:
                    raise ValueError(
                        f"field name {key!a} cannot be stored (empty, or with '$', '.' "
                        "or NUL): rename it"
                    )
            _storable(f"{name}.{key}" if name else str(key), item, depth + 1)
    else:
        raise ValueError(f"field {name!r} holds a {type(value).__name__}, not JSON data")


def _pieces(ctx: Context, work: Work) -> list[_Piece]:
    """The masters of a work (split into chapters when long); ValueError if it cannot be
    fingerprinted or stored."""
    if not isinstance(work.text, str) or not work.text.strip():
        raise ValueError("empty text: nothing to register")
    for name in ("text", "external_id", *METADATA_FIELDS):
        _storable("id" if name == "external_id" else name, getattr(work, name))
    _storable("", work.extra)
    _validate(work, ctx)
    sha = text_sha256(work.text)
    external_id = work.external_id or f"sha256:{sha[:16]}"
    chapters = _chapters(work.text)
    if len(chapters) == 1:
        return [_Piece(work, external_id, work.text, sha, None)]
    return [
        _Piece(work, f"{external_id}#{n}", chapter, text_sha256(chapter), external_id)
        for n, chapter in enumerate(chapters, start=1)
    ]


def add_work(ctx: Context, work: Work, index_on_disk: bool = False) -> list[AddResult]:
    """Register a work (split into chapters when long); idempotent. ``index_on_disk``: as
    `add_works`.

    Raises ValueError (with the reason) when the text cannot be fingerprinted.
    """
    (result,) = add_works(ctx, [work], index_on_disk)
    if isinstance(result, ValueError):
        raise result
    return result


def add_works(
    ctx: Context, works: Sequence[Work] | PreparedWorks, index_on_disk: bool = False
) -> list[list[AddResult] | ValueError]:
    """`add_work` for a batch (of works, or of works prepared by `prepare_works`), in a few
    round trips to each server: per work, its results, or the ValueError saying why it
    cannot be fingerprinted.

    New masters get their postings first, then their documents (``state: indexed``) in one
    insert: a kill in between leaves postings of ids that no document has, which no match
    can report and a reindex drops. ``index_on_disk``: works are stored as indexed only
    once their postings are on the index's disk (`_insert_documents`; up to a second more),
    so a Redis that loses postings it acknowledged leaves no work stored without them.
    """
    adding = _start_adding(ctx, works, index_on_disk)
    return _finish_adding(ctx, adding, _insert_documents(ctx, adding.new, index_on_disk))


def add_batches(
    ctx: Context, batches: Iterable[tuple[T, PreparedWorks]], expected_works: int | None = None
) -> Iterator[tuple[T, list[list[AddResult] | ValueError]]]:
    """`add_works` for a stream of prepared batches (each with a tag of the caller's, given
    back with its results), in stages that overlap: a batch's known works are settled
    (MongoDB) while the postings of the one before are written (the index, in a thread) and
    the documents of the one before that inserted (in another), once its postings are on
    the index's disk (`_insert_documents`). A batch's results come once
    its documents are in, in the order of the batches; a batch naming a work (external id
    or text) of one under way waits for it, so that it finds it.

    ``expected_works``: about how many works the batches hold in all; the index makes room
    ahead (`InvertedIndex.reserve`) for the postings of the first few batches, judged by
    the first one's.
    """
    with (
        ThreadPoolExecutor(1, thread_name_prefix="postings") as postings,
        ThreadPoolExecutor(1, thread_name_prefix="documents") as documents,
    ):
        stages: _Stages[T] = _Stages(ctx, postings, documents)
        for number, (tag, works) in enumerate(batches):
            if number == 0 and expected_works:  # pieces stored already bring no postings
                computed = [p.fingerprints for p in works.pieces if p.fingerprints is not None]
                _make_room(ctx, sum(map(len, computed)), len(works.outcomes), expected_works)
            if stages.names & _names(works.pieces):
                yield from stages.drained()
            settled, new = _settle_known(ctx, works.pieces, index_on_disk=True)
            yield from stages.advanced(_Settled(tag, works.outcomes, settled, new))
        yield from stages.drained()


@dataclass(frozen=True)
class _Settled(Generic[T]):
    """A batch whose stored works are settled: the caller's tag, per work its pieces or why
    it cannot be fingerprinted, the settled results (by position), the new pieces
    (position, piece)."""

    tag: T
    outcomes: list[list[_Piece] | ValueError]
    settled: dict[int, AddResult]
    new: list[tuple[int, _Piece]]


class _Stages(Generic[T]):
    """The batches of `add_batches` under way: one whose new masters are having their
    postings written, and the one before, its documents inserted (each in its thread)."""

    def __init__(self, ctx: Context, postings: Executor, documents: Executor) -> None:
        self.ctx, self.postings, self.documents = ctx, postings, documents
        self.indexing: tuple[_Settled[T], Future[_NewMasters]] | None = None
        self.inserting: tuple[T, _Adding, Future[set[int]]] | None = None

    @property
    def names(self) -> set[str]:
        """The external ids and text hashes of the new masters under way."""
        names: set[str] = set()
        if self.indexing is not None:
            names |= _names(piece for _, piece in self.indexing[0].new)
        if self.inserting is not None:
            names |= self.inserting[1].new.names
        return names

    def advanced(
        self, batch: _Settled[T] | None
    ) -> list[tuple[T, list[list[AddResult] | ValueError]]]:
        """Each batch a stage on: the one whose postings were being written has its
        documents inserted, once they are; the one inserted before is done (its results
        returned); ``batch``, if any, has its postings written."""
        done = []
        if self.indexing is not None:
            settled, indexed = self.indexing
            adding = _Adding(settled.outcomes, settled.settled, indexed.result())
            if self.inserting is not None:
                done.append(_finished(self.ctx, self.inserting))
            inserted = self.documents.submit(_insert_documents, self.ctx, adding.new, True)
            self.inserting = (settled.tag, adding, inserted)
            self.indexing = None
        if batch is not None:
            self.indexing = (batch, self.postings.submit(_index_new, self.ctx, batch.new))
        return done

    def drained(self) -> list[tuple[T, list[list[AddResult] | ValueError]]]:
        """Every batch under way, done (their results)."""
        done = self.advanced(None)
        if self.inserting is not None:
            done.append(_finished(self.ctx, self.inserting))
            self.inserting = None
        return done


def _make_room(ctx: Context, postings: int, works: int, total_works: int) -> None:
    """Room in the index for the postings of the first ROOM_AHEAD_BATCHES batches of an
    import of ``total_works`` works, at the rate of its first batch (``postings`` new
    postings for ``works`` works)."""
    batches = min(total_works / max(works, 1), ROOM_AHEAD_BATCHES)
    ctx.index.reserve(int(postings * batches))


@dataclass(frozen=True)
class _NewMasters:
    """A batch's new masters (position of the piece, piece), with the ids, fingerprints and
    documents they get; repeats: later pieces with the external id or text of one of them
    (position, piece, index of that one); postings: how many the index gained for them,
    counted by the library when their documents go in."""

    fresh: list[tuple[int, _Piece]] = field(default_factory=list)
    ids: range = range(0)
    values: list[MasterFingerprints] = field(default_factory=list)
    docs: list[dict[str, Any]] = field(default_factory=list)
    repeats: list[tuple[int, _Piece, int]] = field(default_factory=list)
    postings: int = 0

    @property
    def names(self) -> set[str]:
        """The external ids and text hashes the batch adds."""
        return _names(piece for _, piece in self.fresh)


@dataclass(frozen=True)
class _Adding:
    """A batch under way: per work, its pieces or why it cannot be fingerprinted; the
    results of the pieces settled already (by position); its new masters, indexed but not
    yet stored."""

    outcomes: list[list[_Piece] | ValueError]
    settled: dict[int, AddResult]
    new: _NewMasters


def _names(pieces: Iterable[_Piece]) -> set[str]:
    """The external ids and text hashes of pieces."""
    return {name for piece in pieces for name in (piece.external_id, piece.sha)}


def _start_adding(
    ctx: Context, works: Sequence[Work] | PreparedWorks, index_on_disk: bool
) -> _Adding:
    """What `add_works` does before inserting the new masters' documents: known texts
    settled, updates made, new masters given ids and their postings."""
    if not isinstance(works, PreparedWorks):
        works = prepare_works(ctx, works)
    settled, new = _settle_known(ctx, works.pieces, index_on_disk)
    return _Adding(works.outcomes, settled, _index_new(ctx, new))


def _finished(
    ctx: Context, inserting: tuple[T, _Adding, Future[set[int]]]
) -> tuple[T, list[list[AddResult] | ValueError]]:
    tag, adding, lost = inserting
    return tag, _finish_adding(ctx, adding, lost.result())


def _finish_adding(
    ctx: Context, adding: _Adding, lost: set[int]
) -> list[list[AddResult] | ValueError]:
    """Per work, its results once the new masters' documents are inserted (lost: those
    another process inserted first)."""
    results = {**adding.settled, **dict(_results_of_new(ctx, adding.new, lost))}
    out: list[list[AddResult] | ValueError] = []
    position = 0
    for outcome in adding.outcomes:
        if isinstance(outcome, ValueError):
            out.append(outcome)
            continue
        out.append([results[i] for i in range(position, position + len(outcome))])
        position += len(outcome)
    return out


def _settle_known(
    ctx: Context, pieces: list[_Piece], index_on_disk: bool = False
) -> tuple[dict[int, AddResult], list[tuple[int, _Piece]]]:
    """The results of pieces whose external id or text is stored (by position), and the
    new pieces (position, piece). The stored works given a new text (`_updated`), or left
    unindexed by an earlier add, are indexed last, together (`_index_many`)."""
    masters = ctx.db.masters
    names = [piece.external_id for piece in pieces]
    existing = {m["external_id"]: m for m in find_in(masters, "external_id", names, {"text": 0})}
    twins = {
        m["sha256"]: m
        for m in find_in(masters, "sha256", [p.sha for p in pieces],
                         {"external_id": 1, "sha256": 1}, also={"state": "indexed"})
    }  # fmt: skip
    settled: dict[int, AddResult] = {}
    new: list[tuple[int, _Piece]] = []
    indexing: _Indexing = {}
    updates: list[tuple[int, _Piece, int]] = []
    for i, piece in enumerate(pieces):
        old = existing.get(piece.external_id)
        if old is not None and old["sha256"] == piece.sha:
            if old.get("state") != "indexed":  # an earlier add or update died before finishing
                indexing[old["_id"]] = (piece.text, piece.fingerprints)
                settled[i] = AddResult(
                    piece.external_id, old["_id"], "updated", "finished an interrupted update"
                )
            else:
                settled[i] = AddResult(piece.external_id, old["_id"], "unchanged")
        elif old is not None:
            updates.append((i, piece, old["_id"]))
        elif (twin := twins.get(piece.sha)) is not None:
            settled[i] = AddResult(
                piece.external_id, twin["_id"], "duplicate", f"same text as {twin['external_id']}"
            )
        else:
            new.append((i, piece))
    settled |= _updated(ctx, updates, indexing)
    _index_many(ctx, indexing, index_on_disk)
    return settled, new


def _document(ctx: Context, piece: _Piece) -> dict[str, Any]:
    # The caller's other fields apart, under ``extra``: none can take a key of the
    # library's (``_id``, ``state``, ``sha256``…).
    extra = {"extra": piece.work.extra} if piece.work.extra else {}
    return {
        **extra,
        **{name: getattr(piece.work, name) for name in METADATA_FIELDS},
        "external_id": piece.external_id,
        "work_id": piece.work_id,
        "text": piece.text,
        "sha256": piece.sha,
        "chars": len(piece.text),
        "params_version": ctx.params.version,
        "updated_at": now(),
    }


def _index_new(ctx: Context, pieces: list[tuple[int, _Piece]]) -> _NewMasters:
    """Ids and postings for new masters (position, piece), and their documents to insert.
    A piece with the external id or the text of an earlier piece of the batch is that
    piece's (a repeat)."""
    fresh: list[tuple[int, _Piece]] = []
    first_of: dict[str, int] = {}  # external id or sha → index in fresh of the piece having it
    repeats: list[tuple[int, _Piece, int]] = []
    for i, piece in pieces:
        first = first_of.get(piece.external_id, first_of.get(piece.sha))
        if first is None:
            first_of[piece.external_id] = first_of[piece.sha] = len(fresh)
            fresh.append((i, piece))
        else:
            repeats.append((i, piece, first))
    if not fresh:
        return _NewMasters(repeats=repeats)
    first_id = next_id(ctx.db, "masters", len(fresh))
    ids = range(first_id, first_id + len(fresh))
    values = [
        fingerprint_values(ctx, piece.text) if piece.fingerprints is None else piece.fingerprints
        for _, piece in fresh
    ]
    # Ids just taken from the counter: nothing of theirs can be in the index yet.
    postings = ctx.index.add_many(
        [(i, fps.values, fps.places) for i, fps in zip(ids, values, strict=True)], fresh=True
    )
    created_at = now()
    docs = [
        {
            "_id": master_id,
            "created_at": created_at,
            **_document(ctx, piece),
            "state": "indexed",
            "fingerprints": len(fps),
        }
        for master_id, (_, piece), fps in zip(ids, fresh, values, strict=True)
    ]
    return _NewMasters(fresh, ids, values, docs, repeats, postings)


def _insert_documents(ctx: Context, new: _NewMasters, index_on_disk: bool = False) -> set[int]:
    """Count the new masters' postings and insert their documents; the indexes (in
    new.fresh) of those whose external id or text another process registered at the same
    moment.

    ``index_on_disk``: first wait until the postings are on the index's disk
    (`wait_index_durable`). Else a disk filling up, or a kill, between Redis acknowledging
    them and writing them, leaves works stored as indexed whose postings are gone: every
    scan refused until a reindex. Waited for, such works are not stored, and adding them
    again registers them."""
    if not new.docs:
        return set()
    if index_on_disk:
        wait_index_durable(ctx)
    postings_added(ctx, new.postings)
    started = _library_size_changing(ctx)
    try:
        ctx.db.masters.insert_many(new.docs, ordered=False)
    except BulkWriteError as err:
        refused = err.details.get("writeErrors", [])
        # Unordered: every document but the refused ones went in.
        _library_size_changed(ctx, len(new.docs) - len(refused), started)
        if any(e.get("code") != DUPLICATE_KEY for e in refused):
            raise
        return {e["index"] for e in refused}
    except BaseException:
        _library_size_unknown(ctx)  # how many went in is not known
        raise
    _library_size_changed(ctx, len(new.docs), started)
    return set()


def _results_of_new(
    ctx: Context, new: _NewMasters, lost: set[int]
) -> Iterator[tuple[int, AddResult]]:
    """(position, result) of the new masters and their repeats; the lost ones give their
    postings back."""
    for n, (master_id, (i, piece), fps) in enumerate(
        zip(new.ids, new.fresh, new.values, strict=True)
    ):
        if n in lost:
            with removing_postings(ctx, len(fps)):
                ctx.index.remove(master_id, fps.values)
            yield i, _winner(ctx, piece)
        else:
            yield i, AddResult(piece.external_id, master_id, "added")
    for i, piece, first in new.repeats:
        owner = new.fresh[first][1]
        if owner.external_id == piece.external_id:
            yield i, AddResult(piece.external_id, new.ids[first], "unchanged")
        else:
            yield (
                i,
                AddResult(
                    piece.external_id,
                    new.ids[first],
                    "duplicate",
                    f"same text as {owner.external_id}",
                ),
            )


def _winner(ctx: Context, piece: _Piece, by_id: bool = True) -> AddResult:
    """The result of a piece whose write lost a race: the master now holding its external
    id (unchanged, unless by_id is False), or else its text (duplicate: the text's hash has
    a unique index)."""
    same_id = by_id and ctx.db.masters.find_one({"external_id": piece.external_id}, {"_id": 1})
    if same_id:
        return AddResult(piece.external_id, same_id["_id"], "unchanged")
    twin = ctx.db.masters.find_one({"sha256": piece.sha}, {"external_id": 1})
    if twin is None:  # the winner was removed meanwhile: adding again registers it
        raise ValueError("registered by another process and removed at once: add it again")
    return AddResult(
        piece.external_id, twin["_id"], "duplicate", f"same text as {twin['external_id']}"
    )


def _updated(
    ctx: Context, updates: list[tuple[int, _Piece, int]], indexing: _Indexing
) -> dict[int, AddResult]:
    """New texts under existing external ids (position, piece, master id): the results by
    position; the texts to index are left in ``indexing`` (`_index_many`). A text another
    master has already is not taken (duplicate).

    Each work is marked unindexed (the matcher leaves it out from then on) and its old
    postings go first; the new texts are stored only once those removals are on the
    index's disk. A kill midway leaves a work marked NOT INDEXED and never matched, by its
    old text or any (re-adding finishes it); once it holds its new text, its old postings
    are gone for good, even if Redis dies then and loses what it had not written."""
    results: dict[int, AddResult] = {}
    replacing: list[tuple[int, _Piece, int, str, MasterFingerprints]] = []
    for i, piece, master_id in updates:
        twin = ctx.db.masters.find_one({"sha256": piece.sha}, {"external_id": 1})
        if twin is not None:
            results[i] = AddResult(
                piece.external_id,
                twin["_id"],
                "duplicate",
                f"not updated: same text as {twin['external_id']}",
            )
            continue
        old = ctx.db.masters.find_one({"_id": master_id}, {"text": 1, "state": 1})
        assert old is not None  # the work its external id names
        values = fingerprint_values(ctx, old["text"])
        _withdraw(ctx, master_id, old.get("state"), INDEXING, values)
        replacing.append((i, piece, master_id, old["text"], values))
    if replacing:
        wait_index_durable(ctx)
    for i, piece, master_id, old_text, values in replacing:
        try:
            ctx.db.masters.update_one({"_id": master_id}, {"$set": _document(ctx, piece)})
            note_library_edit(ctx)  # before the new postings: none is aligned on the old text
        except DuplicateKeyError:  # another master took this text meanwhile: keep the old one
            indexing[master_id] = (old_text, values)
            results[i] = _winner(ctx, piece, by_id=False)
            continue
        indexing[master_id] = (piece.text, piece.fingerprints)
        results[i] = AddResult(piece.external_id, master_id, "updated")
    return results


def _withdraw(
    ctx: Context, master_id: int, state: str | None, to: str, values: MasterFingerprints
) -> None:
    """Take a master's postings (``values``) out of the index, the master marked ``to``
    (INDEXING or REMOVING) first: the matcher leaves it out from then on. Discounted first,
    unless an interrupted update or removal (``state`` other than indexed) discounted them
    already: a kill in between leaves the index holding more postings than counted (a
    warning), never fewer (a loss)."""
    with removing_postings(ctx, len(values) if state == "indexed" else 0):
        ctx.db.masters.update_one({"_id": master_id}, {"$set": {"state": to, "updated_at": now()}})
        note_library_edit(ctx)
        ctx.index.remove(master_id, values.values)


def _index_many(ctx: Context, masters: _Indexing, index_on_disk: bool = False) -> None:
    """Index masters being updated, or whose update died midway, and mark them indexed.
    None of their postings is counted yet (`_withdraw` discounted the old text's; the new
    one's count once the masters are marked): counted afterwards, all of them, a kill in
    between leaving more postings than counted. index_on_disk: marked only once the
    postings are on the index's disk (`_insert_documents`)."""
    if not masters:
        return
    values = [
        fingerprint_values(ctx, text) if fps is None else fps for text, fps in masters.values()
    ]
    _, counts = _add_postings(ctx, list(masters), values, fresh=False, index_on_disk=index_on_disk)
    _mark_indexed(ctx, counts, {})
    postings_added(ctx, sum(counts.values()))


def _add_postings(
    ctx: Context,
    master_ids: Sequence[int],
    values: Sequence[MasterFingerprints],
    fresh: bool,
    index_on_disk: bool = False,
) -> tuple[int, dict[int, int]]:
    """Add the masters' postings to the index (and wait until they are on its disk, with
    ``index_on_disk``); the postings the index gained, and the masters' fingerprint counts.
    fresh: none of the masters has a posting yet (`InvertedIndex.add_many`)."""
    indexed = [(i, fps.values, fps.places) for i, fps in zip(master_ids, values, strict=True)]
    added = ctx.index.add_many(indexed, fresh=fresh)
    if index_on_disk:
        wait_index_durable(ctx)
    return added, {master_id: len(fps) for master_id, fps in zip(master_ids, values, strict=True)}


def _mark_indexed(ctx: Context, counts: dict[int, int], stored: Mapping[int, int]) -> None:
    """Mark masters indexed under the current parameters, with their fingerprint counts:
    those whose count changed from ``stored`` with it (a write each, in one round trip), the
    others by their ids (a rebuilt index mostly changes no count: a write per master took
    SecantusDB 0.8 ms each, a third of a reindex)."""
    marks = {"state": "indexed", "params_version": ctx.params.version}
    changed = [
        UpdateOne({"_id": master_id}, {"$set": {**marks, "fingerprints": count}})
        for master_id, count in counts.items()
        if stored.get(master_id) != count
    ]
    if changed:
        ctx.db.masters.bulk_write(changed, ordered=False)
    unchanged = [master_id for master_id, count in counts.items() if stored.get(master_id) == count]
    update_in(ctx.db.masters, "_id", unchanged, {"$set": marks})


def replace_text(ctx: Context, master_id: int, text: str) -> AddResult:
    """Give a master a new text, re-indexed: ``updated``; ``unchanged`` when it is the same
    text; ``duplicate`` (not updated) when another master has it. Raises LookupError for
    an unknown master, ValueError for a text that cannot be fingerprinted or is longer than
    one master holds (a long work is split into chapters: add it as a work instead)."""
    master = ctx.db.masters.find_one({"_id": master_id}, {"text": 0})
    if master is None:
        raise LookupError(f"no work #{master_id}")
    work = Work(
        text=text,
        external_id=master["external_id"],
        **{name: master.get(name) for name in METADATA_FIELDS},
    )
    if not text.strip():
        raise ValueError("empty text: give the work's text")
    _validate(work, ctx)
    if len(text) > MAX_MASTER_CHARS:
        raise ValueError(
            f"{len(text):,} characters: one work holds at most {MAX_MASTER_CHARS:,}; add a "
            "text this long as a new work, which is split into chapters"
        )
    sha = text_sha256(text)
    if sha == master["sha256"]:
        return AddResult(master["external_id"], master_id, "unchanged")
    fingerprints = fingerprint_values(ctx, text)
    piece = _Piece(work, master["external_id"], text, sha, master.get("work_id"), fingerprints)
    indexing: _Indexing = {}
    (result,) = _updated(ctx, [(0, piece, master_id)], indexing).values()
    _index_many(ctx, indexing)
    return result


def find_masters(ctx: Context, key: str) -> list[dict[str, Any]]:
    """Masters named by external id, integer id, or work id (all chapters of a work), in
    id order."""
    queries: list[dict[str, Any]] = [{"external_id": key}, {"work_id": key}]
    # ASCII digits only ("²".isdigit() is true), and no more than an id can be.
    if key.isascii() and key.isdigit() and int(key) <= MAX_MASTER_ID:
        queries.append({"_id": int(key)})
    # One query per field, each found by its index: the embedded MongoDB answers an $or of
    # them by reading the whole library (5.8 s at 100,000 works, against milliseconds).
    found = {m["_id"]: m for query in queries for m in ctx.db.masters.find(query)}
    return [found[i] for i in sorted(found)]


def withdraw_master(ctx: Context, master: dict[str, Any]) -> None:
    """Mark a master (its document, with its text) REMOVING and take it out of the index:
    from then on no scan records a finding of it (`tracker.findings.record`); what becomes
    of its findings is tracker.scanning.library_edits', which then deletes it (`delete_master`)."""
    values = fingerprint_values(ctx, master["text"])
    _withdraw(ctx, master["_id"], master.get("state"), REMOVING, values)


def delete_master(ctx: Context, master_id: int) -> None:
    """Delete a withdrawn master's document."""
    started = _library_size_changing(ctx)
    if ctx.db.masters.delete_one({"_id": master_id}).deleted_count:
        _library_size_changed(ctx, -1, started)


def master_or_archived(ctx: Context, master_id: int) -> dict[str, Any]:
    """A master with its text; one deleted since comes from the archive (with
    ``deleted_at``), for the findings kept of it; {} when neither has it."""
    return (
        ctx.db.masters.find_one({"_id": master_id})
        or ctx.db[ARCHIVE].find_one({"_id": master_id})
        or {}
    )


class LibraryPage(NamedTuple):
    """A page of the library, newest first: its masters (without their texts), its number,
    how many pages there are, and how many masters in all."""

    masters: list[dict[str, Any]]
    page: int
    pages: int
    total: int


def library_page(ctx: Context, page: int, per_page: int, search: str = "") -> LibraryPage:
    """Page ``page`` (from 1; past the last: the last) of the library, newest first; with
    ``search``, of the masters whose external id, title or author holds it (any case).

    The whole library is paged by number: the masters whose ids are the page's ``per_page``
    numbers, counted down from the last id given (a work removed leaves its page shorter),
    rather than a sorted query that skips, which the embedded MongoDB answers by reading and
    sorting the whole library (4-5 s at 100,000 works; it finds ids at once). A search
    reads the whole library (there, ~15 s at 100,000 works; a real MongoDB takes a
    fraction of a second) for the matches' ids, then the page's works by id."""
    if search:
        pattern = {"$regex": re.escape(search), "$options": "i"}
        query = {"$or": [{"external_id": pattern}, {"title": pattern}, {"author": pattern}]}
        matches = sorted((m["_id"] for m in ctx.db.masters.find(query, {"_id": 1})), reverse=True)
        total = len(matches)
        pages = max(1, -(-total // per_page))
        page = min(page, pages)
        ids: Sequence[int] = matches[(page - 1) * per_page : page * per_page]
    else:
        total = library_size(ctx, fresh=True)
        last = last_id(ctx.db, "masters")
        pages = max(1, -(-last // per_page))
        page = min(page, pages)
        high = last - (page - 1) * per_page
        ids = range(high, max(0, high - per_page), -1)
    return LibraryPage(_masters_by_ids(ctx, ids, {"text": 0}), page, pages, total)


def _masters_by_ids(
    ctx: Context, ids: Sequence[int], fields: dict[str, Any]
) -> list[dict[str, Any]]:
    """The masters of ``ids`` that exist (``fields`` of them), in the order of ``ids``:
    found by id, which the embedded MongoDB answers at once."""
    found = {m["_id"]: m for m in ctx.db.masters.find({"_id": {"$in": list(ids)}}, fields)}
    return [found[i] for i in ids if i in found]


def masters_after(
    ctx: Context, after: int, count: int, fields: dict[str, Any]
) -> list[dict[str, Any]]:
    """The first ``count`` masters (``fields`` of them) whose ids follow ``after``, round
    the library: past the last id, from the first again, each master at most once.

    Found by ids, a window at a time (most ids are works: few windows): the embedded
    MongoDB reads the whole library for a sorted range of ids (14 s at 100,000 works)."""
    last = last_id(ctx.db, "masters")
    found: list[dict[str, Any]] = []
    start, window, left = after + 1, max(count, 16), last
    while len(found) < count and left > 0:
        if start > last:
            start = 1
        ids = range(start, min(last + 1, start + min(window, left)))
        found += _masters_by_ids(ctx, ids, fields)
        start, window, left = ids.stop, window * 2, left - len(ids)
    return found[:count]


def list_masters(ctx: Context) -> Iterator[dict[str, Any]]:
    """Every master without its text, in id order."""
    yield from ctx.db.masters.find({}, {"text": 0}).sort("_id", 1)


def library_size(ctx: Context, fresh: bool = False) -> int:
    """How many masters the library holds: the shared count, kept by adds and removals and
    counted again every LIBRARY_RECOUNT_SECONDS, as this process read it at most
    LIBRARY_COUNT_SECONDS ago (the matcher scales a threshold with it); fresh: read now
    (what a reviewer is shown).

    The embedded MongoDB counts a collection by reading it (0.7-2 s at 100,000 works), so
    one process counts and shares the count in Redis, instead of every worker process
    counting each minute; adds and removals keep it up to date (`_library_size_changed`).
    """
    at = time.monotonic()
    count = ctx.library_count
    if fresh or count is None or at - count[0] > LIBRARY_COUNT_SECONDS:
        count = ctx.library_count = (at, _shared_library_size(ctx))
    return count[1]


def _shared_library_size(ctx: Context) -> int:
    """The count shared in Redis, or else counted here by one process at a time: workers
    starting together after an add would each read the whole collection (three at 100,000
    works: +2.2 s on a check), so the others wait for its count."""
    waited_until = time.monotonic() + LIBRARY_COUNTING_SECONDS
    while True:
        shared = ctx.redis.get(ctx.keys.library_size)
        if shared is not None:
            return int(shared)
        counting = ctx.redis.set(
            ctx.keys.library_counting, 1, nx=True, ex=int(LIBRARY_COUNTING_SECONDS)
        )
        if counting or time.monotonic() > waited_until:  # else counting elsewhere
            # Read again: the one counting before may have shared its count and let go
            # between this process's read and its taking over.
            shared = ctx.redis.get(ctx.keys.library_size)
            count = int(shared) if shared is not None else _count_masters(ctx)
            if counting:
                ctx.redis.delete(ctx.keys.library_counting)
            return count
        time.sleep(0.02)


def _count_masters(ctx: Context) -> int:
    """Count the masters and share the count for LIBRARY_RECOUNT_SECONDS, unless works
    were added or removed meanwhile: the count may hold them or not, so the next reader
    counts again."""
    changes = ctx.redis.get(ctx.keys.library_size_changes) or 0
    count = ctx.db.masters.estimated_document_count()
    ctx.redis.eval(_SHARE_COUNT, 2, ctx.keys.library_size, ctx.keys.library_size_changes,
                   count, changes, int(LIBRARY_RECOUNT_SECONDS))  # fmt: skip
    return count


#: Shares ARGV[1] as the count, for ARGV[3] seconds, if KEYS[2] (the changes) is still
#: ARGV[2]; counts the sharing as a change, so an add under way when it was counted does
#: not add its works again.
_SHARE_COUNT = """
if (redis.call('get', KEYS[2]) or '0') ~= ARGV[2] then return 0 end
redis.call('set', KEYS[1], ARGV[1], 'EX', ARGV[3])
redis.call('incr', KEYS[2])
return 1
"""

#: Adds ARGV[1] to the shared count, if there is one and nothing changed since this
#: change began (KEYS[2], the changes, was ARGV[2] then); else drops it, as it may hold
#: this change already or miss another: the next reader counts.
_ADJUST_SHARED_COUNT = """
local now = redis.call('incr', KEYS[2])
if redis.call('exists', KEYS[1]) == 0 then return false end
if now ~= tonumber(ARGV[2]) + 1 then
  redis.call('del', KEYS[1])
  return false
end
return redis.call('incrby', KEYS[1], ARGV[1])
"""


def _library_size_changing(ctx: Context) -> int:
    """Noted before works are stored or deleted: a count taken from here on is not kept
    as is (`_SHARE_COUNT`, `_ADJUST_SHARED_COUNT`); what to pass `_library_size_changed`."""
    return int(ctx.redis.incr(ctx.keys.library_size_changes))


def _library_size_changed(ctx: Context, by: int, started: int) -> None:
    """The shared count kept as works are added and removed, rather than counted again:
    counting read the whole collection (1.1 s at 100,000 works, at the end of every
    `library add`). ``started``: what `_library_size_changing` gave before the change."""
    if by:
        ctx.redis.eval(_ADJUST_SHARED_COUNT, 2, ctx.keys.library_size,
                       ctx.keys.library_size_changes, by, started)  # fmt: skip


def _library_size_unknown(ctx: Context) -> None:
    ctx.redis.delete(ctx.keys.library_size)


def reindex(ctx: Context, progress: Callable[[int], object] | None = None) -> int:
    """Rebuild the index from MongoDB (after a Redis loss or a parameter change), as
    `add_batches` fills it: masters read in batches, each fingerprinted in a thread while
    the one before is indexed, with room made ahead for the first few, and marked indexed
    in MongoDB, in another thread, while the next one is indexed."""
    ctx.index.clear()
    ctx.index.ensure_version(ctx.params.version)
    total = library_size(ctx)  # shared in Redis: the embedded MongoDB counts by reading all
    cursor = ctx.db.masters.find({}, {"text": 1, "fingerprints": 1}).sort("_id", 1)
    batches = batched(cursor, REINDEX_BATCH)

    def fingerprinted(batch: list[dict[str, Any]]) -> list[MasterFingerprints]:
        return [fingerprint_values(ctx, master["text"]) for master in batch]

    count = 0
    marking: tuple[Future[None], int] | None = None  # a batch being marked indexed

    def marked() -> int:
        """The works of the batch being marked, once they are (else 0)."""
        if marking is None:
            return 0
        future, works = marking
        future.result()
        if progress:
            progress(works)
        return works

    with (
        ThreadPoolExecutor(1, thread_name_prefix="fingerprints") as ahead,
        ThreadPoolExecutor(1, thread_name_prefix="marks") as marks,
    ):
        for batch, values in worked_ahead(batches, fingerprinted, ahead):
            if marking is None:  # the first batch
                _make_room(ctx, sum(map(len, values)), len(batch), total)
            added, counts = _add_postings(
                ctx, [master["_id"] for master in batch], values, fresh=True
            )
            postings_added(ctx, added)
            # The batch before was marked indexed (MongoDB) while these postings were
            # written (Valkey): 100,000 works in 183 s of the two back to back, 132 of them
            # the postings.
            count += marked()
            stored = {master["_id"]: master.get("fingerprints") for master in batch}
            marking = marks.submit(_mark_indexed, ctx, counts, stored), len(batch)
        count += marked()
    return count
