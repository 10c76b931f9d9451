"""Which compiled loops this process runs: the fingerprinter's, the index's record
search and the snapshot's search of bounds. `copytrack status`, the health report and a
worker's start-up log name them, so an installation that runs the slower numpy fallbacks
says so."""

from __future__ import annotations

from fingerprinter import compiled

from ..index.record_search import LOOP as RECORD_SEARCH
from ..index.snapshot import BOUNDS_LOOP as SNAPSHOT_BOUNDS

#: Every compiled module of the package (pyproject.toml's ext-modules).
COMPILED_LOOPS = (*compiled.LOOPS, RECORD_SEARCH, SNAPSHOT_BOUNDS)


def compiled_loops() -> dict[str, bool]:
    """Whether each compiled loop loads in this process."""
    return compiled.loaded(COMPILED_LOOPS)


def fallback_problem(loops: dict[str, bool]) -> str | None:
    """One sentence naming the loops that are not compiled, or None when all are."""
    missing = [name for name, ok in loops.items() if not ok]
    if not missing:
        return None
    return (
        f"not compiled: {', '.join(missing)}; their numpy fallbacks run, several times "
        "slower (install copytrack from a wheel built with a C compiler and Cython, as "
        "the Dockerfile's builder stage does)"
    )


def summary(loops: dict[str, bool]) -> str:
    """One line for a log: the compiled loops, then those not compiled."""
    compiled_names = [name for name, ok in loops.items() if ok]
    line = f"compiled loops: {', '.join(compiled_names) or 'none'}"
    return f"{line}; {problem}" if (problem := fallback_problem(loops)) else line
