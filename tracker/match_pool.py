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
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import forkserver
from types import TracebackType

from .config import Settings
from .context import Context, open_context
from .library import library_size
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
    start-up cost: a single text, a one-core machine)."""

    def __init__(self, ctx: Context, processes: int) -> None:
        self.ctx = ctx
        self._pool: Executor
        if processes > 1:
            context = multiprocessing.get_context("forkserver")
            # __main__ too (multiprocessing's default): else every worker imports the
            # command's script again, and through it the whole command line.
            context.set_forkserver_preload(["__main__", "tracker.match_preload"])
            # The forkserver imports while this process counts the library once for all
            # the workers (library_size shares the count): each takes most of a second at
            # 100,000 works on the embedded servers.
            starting = threading.Thread(target=forkserver.ensure_running, name="forkserver")
            starting.start()
            try:
                library_size(ctx)
            finally:
                starting.join()
            self._pool = ProcessPoolExecutor(
                processes,
                mp_context=context,
                initializer=_open_worker_context,
                initargs=(ctx.settings,),
            )
        else:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="match")

    def submit(self, texts: Sequence[str]) -> Future[list[Timed]]:
        """The matches of each text, in order, when done."""
        texts = list(texts)
        if isinstance(self._pool, ProcessPoolExecutor):
            return self._pool.submit(_match_in_worker, texts)
        return self._pool.submit(match_timed, self.ctx, texts)

    def __enter__(self) -> MatchPool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # On an error, the texts not started are dropped instead of matched for nobody.
        self._pool.shutdown(wait=True, cancel_futures=error is not None)
