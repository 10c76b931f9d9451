"""A cap on the CPU time a block of code may use, for the extraction workers: a page that
sends a parser into a runaway loop is given up (and stored with its raw bytes) instead of
holding its worker process for good. ``cpu_cap`` interrupts any Python code but needs the
main thread; ``CpuBudget`` works in any thread (the admin's, `copytrack check URL`'s) where
the work checks it."""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class CpuTimeExceeded(BaseException):
    """The block used up its CPU time.

    A BaseException, as KeyboardInterrupt: extractors wrap their parsers in
    ``except Exception`` (readability does), which would swallow it and go on.
    """


@contextmanager
def cpu_cap(seconds: float) -> Iterator[None]:
    """Raise `CpuTimeExceeded` inside the block once the process has spent ``seconds`` of
    CPU time in it; 0: no cap.

    SIGPROF counts CPU time, not waiting, and leaves SIGALRM to others (pytest-timeout).
    Signals reach the main thread only, so must the block run there. Code in C notices
    the signal only when it returns to Python.
    """
    if seconds <= 0:
        yield
        return

    def expired(signum: int, frame: Any) -> None:
        raise CpuTimeExceeded(f"over {seconds:g} s of CPU time")

    previous = signal.signal(signal.SIGPROF, expired)
    # Again every ``seconds`` after: raised where it cannot propagate (a ``__del__`` run by
    # the garbage collector, a callback that swallows everything), it would be lost.
    signal.setitimer(signal.ITIMER_PROF, seconds, seconds)
    try:
        yield
    finally:
        try:
            signal.setitimer(signal.ITIMER_PROF, 0)
        finally:  # even if the signal came just now
            signal.signal(signal.SIGPROF, previous)


class CpuBudget:
    """CPU time the calling thread may spend from now (0: no limit), for work that looks at
    ``spent`` as it goes (a parser's callbacks), in any thread: only this thread's time
    counts, not that of the process's other threads."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.thread_time() + seconds if seconds > 0 else math.inf

    @property
    def spent(self) -> bool:
        return time.thread_time() > self._end
