"""`copytrack delisting`: search-engine removal requests for confirmed copies."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tracker.discovery.providers import SearchError
from tracker.enforcement.delisting import (
    ENGINES,
    export_delisting,
    recheck_with_configured_provider,
)
from tracker.findings import WorkflowError
from tracker.masters.generation import open_ready


@click.group()
def delisting() -> None:
    """Ask search engines to drop the confirmed copies from their results."""


@delisting.command()
@click.option(
    "--engine",
    type=click.Choice(tuple(ENGINES)),
    required=True,
    help="Whose form the requests are written for.",
)
@click.option("--work", metavar="ID", help="The confirmed copies of this work.")
@click.option("--domain", help="The confirmed copies on this domain.")
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the CSV here [default: standard output].",
)
@click.option("--no-record", is_flag=True,
              help="Only show the requests; do not record the URLs as requested.")  # fmt: skip
def export(
    engine: str, work: str | None, domain: str | None, output: Path | None, no_record: bool
) -> None:
    """The removal requests as CSV, one request per work batched to the form's limit; each
    URL is recorded as requested (re-checked later through the search provider)."""
    try:
        made = export_delisting(open_ready(), engine, work=work, domain=domain, by="cli",
                                record=not no_record)  # fmt: skip
    except WorkflowError as err:
        click.echo(f"copytrack: {err}", err=True)
        sys.exit(1)
    if output:
        output.write_text(made.csv, encoding="utf-8")
    else:
        click.echo(made.csv, nl=False)
    click.echo(f"{made.urls} URL(s) in {made.batches} request(s) for {ENGINES[engine]}"
               + ("" if no_record else ", recorded as requested"), err=True)  # fmt: skip


@delisting.command()
def recheck() -> None:
    """Ask the search provider whether each requested URL is still found (a week after the
    request, then weekly while it is); `copytrack scheduler` does this on its own."""
    try:
        checks = recheck_with_configured_provider(open_ready())
    except SearchError as err:
        click.echo(f"copytrack: {err}", err=True)
        sys.exit(1)
    for check in checks:
        click.echo(f"{check.state}\t{check.engine}\t{check.url}")
    if not checks:
        click.echo("no requested URL is due for a re-check (or no search provider)", err=True)
