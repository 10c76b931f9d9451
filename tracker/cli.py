"""The `copytrack` command line."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="copytrack")
def main() -> None:
    """copytrack: find pirated copies of your texts on the web.

    Register works as a master library, fingerprint suspect pages, and see
    which pages copy which work.
    """


def _register() -> None:
    from .demo import demo

    main.add_command(demo)


_register()
