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
    """``(item, work(item))`` in order; ``work`` on the next item runs in ``executor`` while
    the caller handles this one."""
    waiting: tuple[T, Future[R]] | None = None
    for item in items:
        upcoming = (item, executor.submit(work, item))
        if waiting is not None:
            yield waiting[0], waiting[1].result()
        waiting = upcoming
    if waiting is not None:
        yield waiting[0], waiting[1].result()
