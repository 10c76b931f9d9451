"""A cap on the CPU time a block of code may use, for the extraction workers: a page that
sends a parser into a runaway loop is given up (and stored with its raw bytes) instead of
holding its worker process for good."""

from __future__ import annotations

import signal
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
