"""The `copytrack` command line: a click group whose subcommands live in tracker/commands/."""

from __future__ import annotations

import sys
from importlib import import_module

import click

from .config import ConfigError, Settings
from .index import IndexVersionMismatch
from .logs import configure_logging
from .servers import ServerStartError

#: Subcommands, by dotted path (module:attribute), in the order `--help` lists them.
COMMANDS = (
    "tracker.commands.demo:demo",
    "tracker.commands.library:library",
    "tracker.commands.library:reindex",
    "tracker.commands.rescan:rescan",
    "tracker.commands.check:check",
    "tracker.commands.eval:eval_command",
    "tracker.commands.campaign:campaign",
    "tracker.commands.findings:findings",
    "tracker.commands.campaign:scheduler",
    "tracker.commands.ops:up",
    "tracker.commands.ops:down",
    "tracker.commands.ops:status",
    "tracker.commands.ops:worker",
    "tracker.commands.admin:admin",
    "tracker.commands.users:user",
    "tracker.commands.users:token",
)


class CopytrackGroup(click.Group):
    """Turns expected failures (bad configuration, servers down) into one clear line."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (ConfigError, IndexVersionMismatch, ServerStartError) as err:
            click.echo(f"copytrack: {err}", err=True)
            sys.exit(2)


@click.group(cls=CopytrackGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="copytrack")
def main() -> None:
    """copytrack: find pirated copies of your texts on the web.

    Register works as a master library, fingerprint suspect pages, and see
    which pages copy which work. Configuration comes from COPYTRACK_* environment
    variables; with none set, copytrack starts its own servers in ./.copytrack.
    """
    settings = Settings.from_env()
    configure_logging(settings.log_level, settings.log_format)


for _path in COMMANDS:
    _module, _, _name = _path.partition(":")
    main.add_command(getattr(import_module(_module), _name))


if __name__ == "__main__":
    main()
