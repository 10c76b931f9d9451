"""The crawl's tunables (crawler/settings.py) that the environment may set, by the same
name; light to import, so the crawl process reads them before Scrapy is imported."""

from __future__ import annotations

import math
from collections.abc import Mapping

from tracker.config import ConfigError

from . import settings as crawl_settings

TUNABLES = {
    name: value
    for name, value in vars(crawl_settings).items()
    if name.startswith("COPYTRACK_") and isinstance(value, int | float)
}


def tunables_from_env(environ: Mapping[str, str]) -> dict[str, int | float]:
    """The tunables set in ``environ``, as numbers of their defaults' type (0 or more);
    ConfigError names a value that is not one."""
    out: dict[str, int | float] = {}
    for name, default in TUNABLES.items():
        raw = environ.get(name, "").strip()
        if not raw:
            continue
        kind = type(default)
        try:
            value = kind(raw)
        except ValueError:
            value = -1
        if not 0 <= value < math.inf:  # nan and inf too
            what = "a whole number" if kind is int else "a number"
            raise ConfigError(
                f"{name}={raw!r}: give {what} ≥ 0 (default {default}; see crawler/settings.py)"
            )
        out[name] = value
    return out
