"""`copytrack rescan`: scan stored pages again."""

from __future__ import annotations

import sys

import click
from tqdm import tqdm

from tracker.masters.generation import open_ready
from tracker.matching.index_audit import audit_sample
from tracker.scanning.pages import scan_page, unscanned_pages
from tracker.tasks import enqueue_scan


@click.command()
@click.option("--campaign", metavar="NAME", help="Only the pages this campaign stored.")
@click.option(
    "--all",
    "every_page",
    is_flag=True,
    help="Every page, even one scanned already (after changing match settings or the whitelist).",
)
@click.option(
    "--inline",
    is_flag=True,
    help="Scan in this process instead of queueing the scans for workers.",
)
def rescan(campaign: str | None, every_page: bool, inline: bool) -> None:
    """Scan stored pages again: by default those whose current text was never scanned with
    the current fingerprint parameters (a scan lost to a Redis crash or a dead worker,
    or the parameters changed, after `copytrack reindex`).

    The scans are queued for the workers (`copytrack worker`), or done here with
    --inline. Findings are updated in place: one per page and work, never twice.
    """
    ctx = open_ready()
    audit_sample(ctx, every=0)  # a scan on an index that lost postings would close findings
    if every_page:
        query = {} if campaign is None else {"campaign": campaign}
        page_ids = [page["_id"] for page in ctx.db.pages.find(query, {"_id": 1})]
    else:
        page_ids = unscanned_pages(ctx, campaign)
    if not inline:
        for page_id in page_ids:
            enqueue_scan(page_id, force=every_page)
        click.echo(f"queued {len(page_ids)} scans for the workers")
        return
    with_findings = 0
    progress = tqdm(
        page_ids, desc="scanning", unit="page", file=sys.stderr, disable=not sys.stderr.isatty()
    )
    for page_id in progress:
        with_findings += scan_page(ctx, page_id, force=every_page).matches > 0
    click.echo(f"scanned {len(page_ids)} pages: {with_findings} copy a work")
