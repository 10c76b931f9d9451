"""The `copytrack` command line: a click group whose subcommands live in copytrack/commands/.

The shell is the top layer: it wires tracker, crawler, admin and the testbed together and
holds no logic that a worker or the admin also needs.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys

# isort: off
import copytrack.mongo_tls  # noqa: F401  first: it chooses pymongo's TLS library
# isort: on

import click
import redis
from pymongo.errors import PyMongoError

from tracker.core.allocator import keep_freed_memory
from tracker.core.config import ConfigError, Settings
from tracker.core.failures import describe
from tracker.core.logs import configure_logging
from tracker.index import IndexVersionMismatch
from tracker.masters.durability import NotDurable
from tracker.masters.generation import IndexNotReady
from tracker.runtime.servers import ServerStartError, stop_started_servers

# The subcommands, by name: "module:attribute" in copytrack.commands, imported when the
# command runs (or help lists them): a command loads only what it uses (`check` starts 0.1 s
# sooner than with every command imported).
COMMANDS = {
    "admin": "admin:admin",
    "alert": "alert:alert",
    "campaign": "campaign:campaign",
    "check": "check:check",
    "delisting": "delisting:delisting",
    "demo": "demo:demo",
    "down": "ops:down",
    "eval": "eval:eval_command",
    "evidence": "evidence:evidence",
    "findings": "findings:findings",
    "library": "library:library",
    "notice": "notice:notice",
    "recheck": "recheck:recheck",
    "reindex": "library:reindex",
    "rescan": "rescan:rescan",
    "scheduler": "campaign:scheduler",
    "status": "ops:status",
    "token": "users:token",
    "up": "ops:up",
    "user": "users:user",
    "worker": "ops:worker",
}


class CopytrackGroup(click.Group):
    """The subcommands of `COMMANDS`, imported when needed; turns expected failures (bad
    configuration, an index to rebuild, servers down or out of disk space) into one clear
    line and a non-zero exit status."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, _, attribute = COMMANDS[name].partition(":")
        return getattr(importlib.import_module(f"copytrack.commands.{module}"), attribute)

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except (
            ConfigError,
            IndexVersionMismatch,
            IndexNotReady,
            NotDurable,
            ServerStartError,
        ) as err:
            click.echo(f"copytrack: {err}", err=True)
            sys.exit(2)
        except (redis.RedisError, PyMongoError, OSError) as err:
            settings = Settings.from_env()
            line = describe(err, settings)
            if line is None:
                raise
            # Servers this command started and could not use would keep running for
            # nobody (and keep holding a full disk's last bytes).
            stop_started_servers(settings.data_dir)
            click.echo(f"copytrack: {line}", err=True)
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


def run() -> None:
    """The `copytrack` console script: ``main``, then an exit without the interpreter's
    teardown.

    What a command prints as done is durable when printed (it survives a kill -9), so no
    command needs the teardown: 0.4 s of module cleanup and of pymongo joining its monitor
    threads, a third of a one-page `check`. Output and logs are flushed first; an error
    still exits with a traceback. Tests call ``main`` in their own process, as usual.
    """
    code: int | str | None = 0
    keep_freed_memory()  # matching's batches reuse their memory (tracker.core.allocator)
    try:
        main(prog_name="copytrack")  # click ends every command with SystemExit
    except SystemExit as done:
        code = done.code
    if isinstance(code, str):  # sys.exit("message")
        print(code, file=sys.stderr)
        code = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        # `| head` may have closed it: the exit status is the command's all the same.
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    os._exit(code or 0)


if __name__ == "__main__":
    run()
