"""Matching many texts on every core (`copytrack check --jsonl`).

Matching a text is mostly Python CPU (fingerprints, candidates, alignment) between short
waits on Redis and MongoDB, so the threads of one process share one core (the GIL). A
`MatchPool` of several processes keeps every core busy: each opens its own connections.
They are forked from the command's process, which has imported everything they need, when
it runs no other thread yet (a fork copies only the thread that forks: another's locks
would stay locked in the child); else a forkserver that imported the matcher once
(`tracker.matching.match_preload`) forks them warm.
Texts go in batches, matched together (`match_texts`: one index round trip and one read of
works per batch, and fewer messages between processes); each batch's results come back as
one future.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from multiprocessing.context import BaseContext
from types import TracebackType

from fingerprinter import DEFAULT_PARAMS, query_array

from ..context import Context
from ..core.config import Settings
from ..masters.generation import open_ready
from .matcher import Match, match_texts

#: The matches of one text, and the milliseconds of matching it took: its batch's time
#: divided among the batch's texts, which are matched together.
Timed = tuple[list[Match], float]

_worker_context: Context | None = None


def match_timed(ctx: Context, texts: Sequence[str]) -> list[Timed]:
    """`match_texts`, timed."""
    started = time.perf_counter()
    found = match_texts(ctx, texts)
    each = round((time.perf_counter() - started) * 1000 / max(len(texts), 1), 2)
    return [(matches, each) for matches in found]


_worker_failure: Exception | None = None


def load_tables() -> None:
    """Load the fingerprinter's tables that a process otherwise loads on its first text
    (the pinyin table and the reference frame, 0.1-0.3 s) or on its first with a word in
    pinyin inside Chinese (the syllables, ~50 ms): processes forked afterwards share them."""
    query_array("版权追踪 copyright tracking 盗版xiaoshuo网站 " * 4, DEFAULT_PARAMS)


def _open_worker_context(settings: Settings) -> None:
    global _worker_context, _worker_failure
    try:
        _worker_context = open_ready(settings)
    except Exception as error:  # raised with the first batch: an initializer's would print
        _worker_failure = error  # a traceback, and the command's own open_ready says it


def _match_in_worker(texts: Sequence[str]) -> list[Timed]:
    if _worker_failure is not None:
        raise _worker_failure
    assert _worker_context is not None, "started without its initializer"
    return match_timed(_worker_context, texts)


class MatchPool:
    """Matches batches of texts on ``processes`` processes, or in this process when 1 (no
    start-up cost: a single text, a one-core machine).

    The workers start at once: create the pool before the command opens its own context
    (whose MongoDB client runs threads), and they are forked from this process (~10 ms);
    then give it that context (`match_here`). Until every worker has opened its
    connections this process matches the batches itself; later batches go to the workers.

    ``preload``: modules the command's script imports, for the forkserver that starts the
    workers when this process already runs threads. Every worker it starts runs the script
    again (multiprocessing's preload of ``__main__`` does nothing before Python 3.13.8,
    CPython gh-137996), and finds them imported instead of importing them each (0.15-0.3 s
    of CPU per worker for the command line).
    """

    def __init__(self, settings: Settings, processes: int, preload: Sequence[str] = ()) -> None:
        self.ctx: Context | None = None
        # One thread: JSON parsing in the caller overlaps the matching.
        self._here = ThreadPoolExecutor(1, thread_name_prefix="match")
        self._workers: ProcessPoolExecutor | None = None
        self._starting: threading.Thread | None = None
        if processes > 1:
            context: BaseContext
            if threading.active_count() == 1:
                load_tables()  # once, here, rather than in every worker
                context = multiprocessing.get_context("fork")
            else:
                server = multiprocessing.get_context("forkserver")
                server.set_forkserver_preload(
                    ["__main__", "tracker.matching.match_preload", *preload]
                )
                context = server
            pool = ProcessPoolExecutor(
                processes,
                mp_context=context,
                initializer=_open_worker_context,
                initargs=(settings,),
            )
            # A submit starts one worker while none is idle (forkserver), or all (fork: from
            # this thread, before the pool's own threads start).
            started = [pool.submit(_started) for _ in range(processes)]
            self._starting = threading.Thread(
                target=self._hand_over, args=(pool, started), name="match-workers"
            )
            self._starting.start()

    def _hand_over(self, pool: ProcessPoolExecutor, started: list[Future[None]]) -> None:
        """Once every worker is up, send them the batches."""
        wait(started)
        self._workers = pool

    def match_here(self, ctx: Context) -> None:
        """Match with ``ctx`` in this process until the workers are up (always, with one
        process)."""
        self.ctx = ctx

    @property
    def in_workers(self) -> bool:
        """Whether batches now go to the worker processes (all of them started)."""
        return self._workers is not None

    def submit(self, texts: Sequence[str]) -> Future[list[Timed]]:
        """The matches of each text, in order, when done."""
        texts = list(texts)
        if self._workers is not None:  # once set, never unset
            return self._workers.submit(_match_in_worker, texts)
        assert self.ctx is not None, "match_here first"
        return self._here.submit(match_timed, self.ctx, texts)

    def __enter__(self) -> MatchPool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # On an error, the texts not started are dropped instead of matched for nobody.
        self._here.shutdown(wait=True, cancel_futures=error is not None)
        if self._starting is not None:
            self._starting.join()
            assert self._workers is not None
            self._workers.shutdown(wait=True, cancel_futures=error is not None)


def _started() -> None:
    """Nothing: run once by each worker, to start it."""
