"""Whether the index holds the postings the library put in it: its blocks counted, works'
postings looked up.

The generation check (`tracker.masters.generation`) compares counters, and counters survive what
loses postings while leaving them: index blocks deleted or evicted, a bad restore. So the
index is also checked against its data, two ways:

- every block of every shard against the counts of blocks and postings each shard keeps,
  changed in the same atomic write as its blocks (`InvertedIndex.miscounted_shards`): one
  block gone, of any work, shows;
- the library's own data, a work's text: its fingerprints are made again and looked up in
  Redis (not in the blocks a process keeps), and every one must list the work.

Either loss (a work's postings missing while it is still stored as indexed with that
text) is recorded (`generation.record_loss`): it makes every check refuse the index until
`copytrack reindex`.

- `audit_sample`: the blocks counted and a few works drawn at random, when a process last
  did so AUDIT_EVERY ago or more (scans; after its first count, a process counts the
  blocks only when no process of the installation did within AUDIT_EVERY) or now
  (`status`, `check`, the admin's health);
- `audit_works`: the works a scan is about to close findings of, every time: a finding is
  closed only when its work's postings are all there (the copy is gone, not the index).

A work being updated or removed (not ``indexed``) is not checked: its postings are in
flux; a scan leaves its findings open.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..context import Context
from ..core.store import last_id
from ..masters.generation import IndexNotReady, current, record_loss
from ..masters.library import fingerprint_values
from ..masters.master_cache import cached_masters

#: Works looked up by one sample, and the characters of text fingerprinted for it at most
#: (one work at least, however long): a few milliseconds.
SAMPLED_WORKS = 8
SAMPLED_CHARS = 100_000
#: Fingerprints of one work looked up by a sample (all of them before closing a finding).
SAMPLED_POSTINGS = 256
#: Seconds a process trusts the last sample it took, per installation and generation.
AUDIT_EVERY = 60.0
_INDEXED = "indexed"
_sampled_at: dict[tuple[int, str, str], float] = {}
_counted: set[tuple[int, str, str]] = set()  # the blocks counted by this process
_lock = threading.Lock()


def audit_sample(ctx: Context, every: float = AUDIT_EVERY) -> None:
    """Count the index's blocks and look the postings of SAMPLED_WORKS random works up,
    unless this process did within ``every`` seconds; raise `IndexNotReady` (recording the
    loss) if any is missing."""
    generation = current(ctx)
    key = (id(ctx.db.client), ctx.db.name, generation)
    with _lock:
        if time.monotonic() - _sampled_at.get(key, -every) < every:
            return
        _sampled_at[key] = time.monotonic()
    try:
        # Every block is read (~0.1 s of Valkey at 10,000 works, 1 s at 100,000): by a
        # process's first audit and by commands (every 0), else once per AUDIT_EVERY by
        # whichever process of the installation comes first.
        due = ctx.index.block_check_due(AUDIT_EVERY, time.time())
        if due or not every or key not in _counted:
            _count_blocks(ctx, generation)
            _counted.add(key)
        _audit(ctx, _sample(ctx), SAMPLED_POSTINGS)
    except BaseException:
        with _lock:
            _sampled_at.pop(key, None)  # not checked after all: the next call checks
        raise


def audit_works(ctx: Context, master_ids: Iterable[int]) -> set[int]:
    """Look every posting of these works up; raise `IndexNotReady` (recording the loss) if
    one is missing. Returns the works that could not be checked (not stored as indexed:
    being updated or removed, or gone), whose findings are to stay as they are."""
    wanted = list(dict.fromkeys(master_ids))
    masters = cached_masters(ctx, wanted)  # only works stored as indexed
    _audit(ctx, [masters[i] for i in wanted if i in masters], None)
    return {i for i in wanted if i not in masters}


def _sample(ctx: Context) -> list[dict[str, Any]]:
    """Up to SAMPLED_WORKS indexed works drawn at random (by id: found at once), within
    SAMPLED_CHARS of text (one at least)."""
    last = last_id(ctx.db, "masters")
    if not last:
        return []
    ids = random.sample(range(1, last + 1), min(last, 4 * SAMPLED_WORKS))
    # By id alone, which the embedded MongoDB answers from its index at once.
    found = ctx.db.masters.find({"_id": {"$in": ids}}, {"chars": 1, "state": 1})
    chosen: list[int] = []
    chars = 0
    for doc in (doc for doc in found if doc.get("state") == _INDEXED):
        if len(chosen) == SAMPLED_WORKS or (chosen and chars + doc.get("chars", 0) > SAMPLED_CHARS):
            break
        chosen.append(doc["_id"])
        chars += doc.get("chars", 0)
    return list(cached_masters(ctx, chosen).values())


def _audit(ctx: Context, masters: list[dict[str, Any]], per_work: int | None) -> None:
    """Raise `IndexNotReady` for the first of masters with a posting missing (all of its
    fingerprints looked up, or ``per_work`` of them at random)."""
    rng = np.random.default_rng()
    for master in masters:
        values = fingerprint_values(ctx, master["text"]).values
        if per_work is not None and len(values) > per_work:
            values = rng.choice(values, per_work, replace=False)
        found = ctx.index.postings(values, kept=False)
        held = np.unique(found.query[found.master == master["_id"]])
        if len(held) < len(values):
            _lost(ctx, master, len(values) - len(held), len(values))


def _count_blocks(ctx: Context, generation: str) -> None:
    """Raise `IndexNotReady` (recording the loss) if a shard's blocks disagree with its
    counts, unless the index is being rebuilt meanwhile."""
    if not generation:
        return
    wrong = ctx.index.miscounted_shards()
    if not wrong or ctx.index.generation()[0] != generation:
        return
    blocks = sum(shard.blocks for shard in wrong)
    found = sum(shard.blocks_found for shard in wrong)
    detail = (
        f"the index lacks {blocks - found:,} of the {blocks:,} blocks its counts list"
        if found < blocks
        else f"the index holds {found - blocks:,} blocks more than its counts list"
    ) + (
        f" in {len(wrong)} of its shards: Redis lost part of the index (keys deleted or "
        f"evicted, or a bad restore)"
    )
    record_loss(ctx, generation, detail)
    raise IndexNotReady(f"{detail}; run `copytrack reindex` to rebuild it from the library")


def _lost(ctx: Context, master: dict[str, Any], missing: int, looked_up: int) -> None:
    """Record and raise the loss, unless the work changed since its text was read (its
    update or removal marks it first, then takes its postings out) or the index is being
    rebuilt."""
    generation = current(ctx)
    now = ctx.db.masters.find_one({"_id": master["_id"]}, {"state": 1, "sha256": 1})
    same = now is not None and now.get("state") == _INDEXED and now["sha256"] == master["sha256"]
    if not same or not generation or ctx.index.generation()[0] != generation:
        return
    detail = (
        f"the index lacks {missing:,} of {looked_up:,} postings of work "
        f"{master.get('external_id')!r} (#{master['_id']}) looked up from its text: Redis "
        f"lost part of the index (keys deleted or evicted, or a bad restore)"
    )
    record_loss(ctx, generation, detail)
    raise IndexNotReady(f"{detail}; run `copytrack reindex` to rebuild it from the library")
