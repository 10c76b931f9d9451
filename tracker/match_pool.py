"""Matching many texts on every core (`copytrack check --jsonl`).

Matching a text is mostly Python CPU (fingerprints, candidates, alignment) between short
waits on Redis and MongoDB, so the threads of one process share one core (the GIL). A
`MatchPool` of several processes keeps every core busy: each opens its own connections, and
a forkserver that imported the matcher once (`tracker.match_preload`) forks them warm.
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
from types import TracebackType

from .config import Settings
from .context import Context, open_context
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


def _open_worker_context(settings: Settings) -> None:
    global _worker_context
    _worker_context = open_context(settings)


def _match_in_worker(texts: Sequence[str]) -> list[Timed]:
    assert _worker_context is not None, "started without its initializer"
    return match_timed(_worker_context, texts)


class MatchPool:
    """Matches batches of texts on ``processes`` processes, or in this process when 1 (no
    start-up cost: a single text, a one-core machine).

    Worker processes take most of a second to start (the forkserver imports the matcher,
    each worker opens its connections): meanwhile this process matches the batches itself,
    and the workers take the batches submitted once they are all up.

    ``preload``: modules the command's script imports. Every worker runs the script again
    (multiprocessing's preload of ``__main__`` does nothing before Python 3.13.8, CPython
    gh-137996), and finds them imported by the forkserver instead of importing them each
    (0.15-0.3 s of CPU per worker for the command line).
    """

    def __init__(self, ctx: Context, processes: int, preload: Sequence[str] = ()) -> None:
        self.ctx = ctx
        # One thread: JSON parsing in the caller overlaps the matching.
        self._here = ThreadPoolExecutor(1, thread_name_prefix="match")
        self._workers: ProcessPoolExecutor | None = None
        self._starting: threading.Thread | None = None
        if processes > 1:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["__main__", "tracker.match_preload", *preload])
            pool = ProcessPoolExecutor(
                processes,
                mp_context=context,
                initializer=_open_worker_context,
                initargs=(ctx.settings,),
            )
            self._starting = threading.Thread(
                target=self._start, args=(pool, processes), name="match-workers"
            )
            self._starting.start()

    def _start(self, pool: ProcessPoolExecutor, processes: int) -> None:
        """Start every worker (a submit starts one while none is idle), then hand them the
        batches."""
        wait([pool.submit(_started) for _ in range(processes)])
        self._workers = pool

    @property
    def in_workers(self) -> bool:
        """Whether batches now go to the worker processes (all of them started)."""
        return self._workers is not None

    def submit(self, texts: Sequence[str]) -> Future[list[Timed]]:
        """The matches of each text, in order, when done."""
        texts = list(texts)
        if self._workers is not None:  # once set, never unset
            return self._workers.submit(_match_in_worker, texts)
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
