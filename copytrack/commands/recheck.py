"""`copytrack recheck`: after a takedown notice's deadline, is the copy gone?"""

from __future__ import annotations

import sys

import click

from tracker.context import Context
from tracker.findings import parse_object_id
from tracker.masters.generation import open_ready
from tracker.scanning.rechecks import RECHECK_BATCH, Recheck, recheck_due, recheck_page


def describe_recheck(check: Recheck) -> str:
    """One line: OUTCOME, URL, noticed findings, and why (a page gone, a fetch failure)."""
    detail = f"\t{check.detail}" if check.detail else ""
    return f"{check.outcome}\t{check.url}\t{check.findings} finding(s){detail}"


def recheck_due_pages(ctx: Context, limit: int = RECHECK_BATCH) -> list[Recheck]:
    """Re-check the pages whose notices' deadlines passed, fetching as the crawler does."""
    from crawler.fetch import fetch_page  # the crawler's fetch: guarded, with its limits

    return recheck_due(ctx, fetch_page, limit=limit)


@click.command()
@click.option(
    "--page",
    "page_ids",
    multiple=True,
    metavar="PAGE_ID",
    help="Re-check this page now (its id, as the admin shows it), deadline or not.",
)
@click.option("--limit", type=click.IntRange(min=1), default=RECHECK_BATCH, show_default=True,
              help="Pages at most, earliest deadline first.")  # fmt: skip
def recheck(page_ids: tuple[str, ...], limit: int) -> None:
    """Fetch again the pages whose takedown notices' deadlines passed, store them as new
    evidence, scan them, and record on each finding whether the copy is still there.

    One line per page: `OUTCOME<TAB>URL<TAB>N finding(s)[<TAB>DETAIL]`, the outcome being
    removed, still_there or unreachable (tried again after six hours). `copytrack
    scheduler` does this on its own.
    """
    ctx = open_ready()
    if page_ids:
        from crawler.fetch import fetch_page

        try:
            ids = [parse_object_id(page_id, "page") for page_id in page_ids]
            checks = [recheck_page(ctx, page_id, fetch_page, by="cli") for page_id in ids]
        except (ValueError, LookupError) as err:
            click.echo(f"copytrack: {err.args[0]}", err=True)
            sys.exit(1)
    else:
        checks = recheck_due_pages(ctx, limit)
    for check in checks:
        click.echo(describe_recheck(check))
    if not checks:
        click.echo("no notice is past its deadline without a re-check", err=True)
