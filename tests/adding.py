"""Libraries for tests to work on, added in one batch: `add_works` takes a few round trips
where one `add_work` per work waits for each work's durable write (0.1 s each)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tracker.context import Context
from tracker.masters.library import AddResult, Work, add_works


def add_all(ctx: Context, works: Sequence[Work]) -> list[list[AddResult]]:
    """Each work's results, in order; a work that cannot be fingerprinted fails the test."""
    results = add_works(ctx, works)
    for work, result in zip(works, results, strict=True):
        if isinstance(result, ValueError):
            raise AssertionError(f"{work.external_id}: {result}")
    return [result for result in results if not isinstance(result, ValueError)]


def add_texts(ctx: Context, texts: Iterable[str], prefix: str) -> list[int]:
    """``texts`` as works ``{prefix}0``, ``{prefix}1``, …; the master id of each."""
    works = [Work(text=text, external_id=f"{prefix}{i}") for i, text in enumerate(texts)]
    return [results[0].master_id for results in add_all(ctx, works)]
