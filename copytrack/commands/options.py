"""Options several commands share the shape of."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def repeatable(flag: str, dest: str, metavar: str, help: str) -> Callable[[Any], Any]:
    """An option given once per value (``--email A --email B``): a tuple of them."""
    return click.option(flag, dest, multiple=True, metavar=metavar, help=help)
