"""The testbed package (evaluation harness, local pirate sites) for `demo` and `eval`.

testbed/ ships with a source checkout, not with the production image, so these commands
import it when they run rather than when the command line starts, and say where it comes
from when it is missing.
"""

from __future__ import annotations

import click


def testbed_missing(err: ModuleNotFoundError) -> Exception:
    """The error to raise when importing testbed failed with ``err``."""
    if err.name is None or not err.name.startswith("testbed"):
        return err  # testbed is there; something it needs is not
    return click.UsageError(
        "this command needs the testbed package of a source checkout (git clone the "
        "repository); the production image does not ship it"
    )
