"""The master library: works in MongoDB (source of truth) and their postings in the index.

A master has a compact integer id (``_id``, what the index stores), the caller's
``external_id``, metadata, its text and the text's SHA-256. Adding the same text again is
a no-op; adding a new text under an existing external id replaces the old one. Works
longer than ``MAX_MASTER_CHARS`` are split into chapters, each a master linked to its
work by ``work_id``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from pymongo.errors import DuplicateKeyError

from fingerprinter import index_array, to_letters

from .context import Context
from .generation import postings_added, postings_removing
from .store import next_id

MAX_MASTER_CHARS = 400_000  # keeps a master document far below MongoDB's 16 MB limit
CHAPTER_CHARS = 200_000

METADATA_FIELDS = ("title", "author", "lang", "kind", "source")


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


def _now() -> datetime:
    return datetime.now(UTC)


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


def fingerprint_values(ctx: Context, text: str) -> list[int]:
    """Distinct index fingerprints of a master text."""
    return np.unique(index_array(text, ctx.params).values).tolist()


def _validate(work: Work, ctx: Context) -> None:
    letters = len(to_letters(work.text, ctx.params.latin_mode))
    if letters < ctx.params.granule:
        raise ValueError(
            f"text too short to fingerprint: {letters} letters, copytrack needs at least "
            f"{ctx.params.granule} (Chinese characters or Latin letters)"
        )


def add_work(ctx: Context, work: Work) -> list[AddResult]:
    """Register a work (split into chapters when long); idempotent.

    Raises ValueError (with the reason) when the text cannot be fingerprinted.
    """
    if not isinstance(work.text, str) or not work.text.strip():
        raise ValueError("empty text: nothing to register")
    _validate(work, ctx)
    sha = text_sha256(work.text)
    external_id = work.external_id or f"sha256:{sha[:16]}"
    pieces = _chapters(work.text)
    if len(pieces) == 1:
        return [_add_master(ctx, work, external_id, work.text, sha, work_id=None)]
    return [
        _add_master(ctx, work, f"{external_id}#{n}", piece, text_sha256(piece), work_id=external_id)
        for n, piece in enumerate(pieces, start=1)
    ]


def _add_master(
    ctx: Context, work: Work, external_id: str, text: str, sha: str, work_id: str | None
) -> AddResult:
    masters = ctx.db.masters
    existing = masters.find_one({"external_id": external_id}, {"text": 0})
    if existing and existing["sha256"] == sha:
        if existing.get("state") != "indexed":  # an earlier add died before finishing
            _index(ctx, existing["_id"], text)
        return AddResult(external_id, existing["_id"], "unchanged")
    if existing is None:
        twin = masters.find_one({"sha256": sha, "state": "indexed"}, {"external_id": 1})
        if twin is not None:
            return AddResult(
                external_id, twin["_id"], "duplicate", f"same text as {twin['external_id']}"
            )
    metadata = {name: getattr(work, name) for name in METADATA_FIELDS}
    doc = {
        **work.extra,
        **metadata,
        "external_id": external_id,
        "work_id": work_id,
        "text": text,
        "sha256": sha,
        "chars": len(text),
        "params_version": ctx.params.version,
        "state": "indexing",
        "updated_at": _now(),
    }
    if existing is not None:
        old = masters.find_one({"_id": existing["_id"]}, {"text": 1})
        masters.update_one({"_id": existing["_id"]}, {"$set": doc})
        _unindex(ctx, existing["_id"], old["text"])
        _index(ctx, existing["_id"], text)
        return AddResult(external_id, existing["_id"], "updated")
    master_id = next_id(ctx.db, "masters")
    try:
        masters.insert_one({"_id": master_id, "created_at": doc["updated_at"], **doc})
    except DuplicateKeyError:  # another process registered it at the same moment
        winner = masters.find_one({"external_id": external_id}, {"_id": 1})
        return AddResult(external_id, winner["_id"] if winner else master_id, "unchanged")
    _index(ctx, master_id, text)
    return AddResult(external_id, master_id, "added")


def _index(ctx: Context, master_id: int, text: str) -> None:
    values = fingerprint_values(ctx, text)
    postings_added(ctx, ctx.index.add(master_id, values))
    ctx.db.masters.update_one(
        {"_id": master_id}, {"$set": {"state": "indexed", "fingerprints": len(values)}}
    )


def _unindex(ctx: Context, master_id: int, text: str) -> None:
    values = fingerprint_values(ctx, text)
    postings_removing(ctx, len(values))
    ctx.index.remove(master_id, values)


def find_masters(ctx: Context, key: str) -> list[dict[str, Any]]:
    """Masters named by external id, integer id, or work id (all chapters of a work)."""
    query: list[dict[str, Any]] = [{"external_id": key}, {"work_id": key}]
    if key.isdigit():
        query.append({"_id": int(key)})
    return list(ctx.db.masters.find({"$or": query}))


def remove_work(ctx: Context, key: str) -> list[str]:
    """Remove a work (or one master) and its postings; returns the external ids removed."""
    removed = []
    for master in find_masters(ctx, key):
        _unindex(ctx, master["_id"], master["text"])
        ctx.db.masters.delete_one({"_id": master["_id"]})
        removed.append(master["external_id"])
    return removed


def list_masters(ctx: Context) -> Iterator[dict[str, Any]]:
    """Every master without its text, in id order."""
    yield from ctx.db.masters.find({}, {"text": 0}).sort("_id", 1)


def master_texts(ctx: Context, master_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """Masters (with text) by integer id."""
    return {m["_id"]: m for m in ctx.db.masters.find({"_id": {"$in": list(master_ids)}})}


def reindex(ctx: Context, progress: Callable[[int], None] | None = None) -> int:
    """Rebuild the index from MongoDB (after a Redis loss or a parameter change)."""
    ctx.index.clear()
    ctx.index.ensure_version(ctx.params.version)
    count = 0
    for master in ctx.db.masters.find({}, {"text": 1}).sort("_id", 1):
        _index(ctx, master["_id"], master["text"])
        ctx.db.masters.update_one(
            {"_id": master["_id"]}, {"$set": {"params_version": ctx.params.version}}
        )
        count += 1
        if progress:
            progress(1)
    return count
