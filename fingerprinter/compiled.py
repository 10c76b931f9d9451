"""The compiled loops (Cython modules built by the package's install): which of them load
in this process, and one warning the first time a numpy fallback stands in for one.

A wheel built without a C compiler has no compiled modules and still works: each loop's
module falls back to numpy passes that give the same results, several times slower. The
warning (and `loaded`, for the status reports) makes that difference visible.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable
from types import ModuleType

log = logging.getLogger(__name__)

SLIDING = "fingerprinter._sliding"
WINNOWING = "fingerprinter._winnowing"
GRANULE_CHECK = "fingerprinter._granule_check"
ALIGN = "fingerprinter._align"
#: This package's compiled modules (pyproject.toml's ext-modules under fingerprinter/).
LOOPS = (SLIDING, WINNOWING, GRANULE_CHECK, ALIGN)

_warned: set[str] = set()


def load(module: str) -> ModuleType | None:
    """The compiled module, or None where it was not built (no C compiler) or does not
    load (built for another Python)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def loaded(modules: Iterable[str]) -> dict[str, bool]:
    """Whether each compiled module loads in this process."""
    return {module: load(module) is not None for module in modules}


def fallback_runs(module: str) -> None:
    """Say once per process, as a warning, that numpy passes stand in for ``module``."""
    if module in _warned:
        return
    _warned.add(module)
    log.warning(
        "%s is not compiled in this installation: its numpy fallback runs instead, several "
        "times slower (install copytrack from a wheel built with a C compiler and Cython)",
        module,
    )
