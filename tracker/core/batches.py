"""Items in batches, and work on the next batch done in a thread while the caller handles
this one (fingerprinting is CPU, storing waits on the servers: the two overlap)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future
from itertools import islice
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of ``size`` items, in order (the last one may be shorter)."""
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def worked_ahead(
    items: Iterable[T], work: Callable[[T], R], executor: Executor
) -> Iterator[tuple[T, R]]:
    """``(item, work(item))`` in order; the next item is taken from ``items`` and ``work``
    done on it in ``executor`` while the caller handles this one. Taking it there too
    matters when items are read from a file or a server: reading the next batch of works
    from a JSONL in the caller's thread held up every batch of a `library add` by ~2 s."""
    iterator = iter(items)  # advanced by the executor's calls only, one at a time

    def next_worked() -> tuple[T, R] | None:
        for item in iterator:
            return item, work(item)
        return None

    upcoming: Future[tuple[T, R] | None] = executor.submit(next_worked)
    while (worked := upcoming.result()) is not None:
        upcoming = executor.submit(next_worked)
        yield worked
