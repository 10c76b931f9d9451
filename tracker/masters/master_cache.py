"""Masters the matcher loaded lately, kept in the process.

The matcher loads every candidate's text, and most candidates are works it saw a moment
ago (a worker keeps meeting the same popular works; a work hit once by chance is met again
by chance): a MongoDB query per page for texts already in memory is most of the time a
check spends in MongoDB (benchmarks/results/scale.md).

Kept copies stay true to the library: every change of a work's text or title
(`note_library_edit`) sets the installation's edit mark in Redis to a new random value,
and a process drops its copies whenever it reads another mark than the one they were
loaded under (a Redis wiped or restarted empty reads as no mark: a change too). The mark
is read after the index lookup, whenever kept copies would be used, so a posting of a new
text is never aligned on the old; a load that finds none kept reads only MongoDB (most
pages of a large library: a Redis round trip fewer), and what it reads is newer than the
mark it is kept under, so at worst dropped at the next change of mark.
"""

from __future__ import annotations

import secrets
import sys
import threading
from collections.abc import Iterable
from typing import Any

from ..context import Context
from ..core.sized_lru import SizedLRU

_KEPT_FIELDS = ("_id", "external_id", "title", "text", "sha256")
_KEPT_AS = "masters"  # its name in Context.kept
_INDEXED = "indexed"  # the state of a work that is neither being updated nor removed


def note_library_edit(ctx: Context) -> None:
    """A work's text or title changed: every process drops the masters it keeps."""
    ctx.redis.set(ctx.keys.library_edit, secrets.token_hex(8))


def cached_masters(ctx: Context, master_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The masters of ``master_ids`` stored as indexed, through the context's cache."""
    return masters_kept(ctx).load(ctx, master_ids)


def masters_kept(ctx: Context) -> MasterCache:
    """The context's cache of masters, made on first use (COPYTRACK_MASTER_CACHE_MB)."""
    cache = ctx.kept.get(_KEPT_AS)
    if cache is None:  # setdefault: two threads meeting here keep one cache
        cache = ctx.kept.setdefault(_KEPT_AS, MasterCache(ctx.settings.master_cache_mb * 2**20))
    return cache


class MasterCache:
    """Master documents (``_id``, ``external_id``, ``title``, ``text``, ``sha256``) by id,
    their texts taking at most ``max_bytes`` (Python's size: 256 MB holds ~100,000 news
    articles), least recently used dropped first; safe to share between threads."""

    def __init__(self, max_bytes: int) -> None:
        self._docs: SizedLRU[int, dict[str, Any]] = SizedLRU(
            max_bytes, lambda doc: sys.getsizeof(doc["text"])
        )
        self._mark: bytes | str | None = None
        self._lock = threading.Lock()

    def load(self, ctx: Context, master_ids: Iterable[int]) -> dict[int, dict[str, Any]]:
        """The masters of ``master_ids`` that exist and are indexed, from memory or else
        from MongoDB. A work being updated or removed (its ``state`` another one; the change
        of state is a library edit) is left out: postings of its old text, which an update
        interrupted before they were gone for good may have left, never match it, and no
        finding is recorded for a work on its way out."""
        wanted = list(master_ids)
        with self._lock:
            kept = {i: self._docs.get(i) for i in wanted}
            found = {i: doc for i, doc in kept.items() if doc is not None}
            mark = self._mark
        if found:  # kept copies are used only under the mark read now
            mark = ctx.redis.get(ctx.keys.library_edit)
            with self._lock:
                if mark != self._mark:
                    self._docs.clear()
                    self._mark = mark
                    found = {}
        missing = [i for i in wanted if i not in found]
        if not missing:
            return found
        # Whole documents, trimmed here: the embedded MongoDB applies a projection in
        # Python, ~0.09 ms of a ~1 ms read, for a few hundred bytes of small fields saved.
        fetched = {
            m["_id"]: {field: m[field] for field in _KEPT_FIELDS if field in m}
            for m in ctx.db.masters.find({"_id": {"$in": missing}})
            if m.get("state", _INDEXED) == _INDEXED
        }
        with self._lock:
            if mark == self._mark:  # else read under an older mark: used once, not kept
                for master_id, doc in fetched.items():
                    self._docs.put(master_id, doc)
        return found | fetched

    def __len__(self) -> int:
        return len(self._docs)
