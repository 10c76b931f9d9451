"""`copytrack findings`: which pages copy which works, newest first."""

from __future__ import annotations

import json
from typing import Any

import click

from tracker.core.times import iso
from tracker.findings import DEFAULT_SIZE, SIZES, STATUSES, list_findings
from tracker.masters.generation import open_ready


def finding_record(doc: dict[str, Any]) -> dict[str, Any]:
    """A finding as the JSON object `findings --json` prints."""
    return {
        "id": str(doc["_id"]),
        "url": doc["url"],
        "master_id": doc.get("master_external_id"),
        "master_title": doc.get("master_title"),
        "score": doc.get("score"),
        "master_coverage": doc.get("master_coverage"),
        "suspect_coverage": doc.get("suspect_coverage"),
        "status": doc.get("status"),
        "first_seen": iso(doc.get("first_seen")),
        "last_seen": iso(doc.get("last_seen")),
        "campaign": doc.get("campaign"),
        "domain": doc.get("domain"),
        "page_id": str(doc["page_id"]),
        "run_id": str(doc["run_id"]) if doc.get("run_id") else None,
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--campaign", help="Only findings of this campaign.")
@click.option("--status", type=click.Choice(STATUSES), help="Only findings in this state.")
@click.option(
    "--size",
    type=click.Choice(SIZES),
    default=DEFAULT_SIZE,
    show_default=True,
    help="Copies, quotation-sized findings (kept out of the queue), or any.",
)
@click.option("--limit", type=click.IntRange(min=0), default=0, help="At most N [default: all].")
def findings(
    as_json: bool, campaign: str | None, status: str | None, size: str, limit: int
) -> None:
    """List findings: status, score, share of the work copied, work id, page URL."""
    ctx = open_ready()
    for doc in list_findings(ctx, campaign=campaign, status=status, limit=limit, size=size):
        record = finding_record(doc)
        if as_json:
            click.echo(json.dumps(record, ensure_ascii=False))
        else:
            click.echo(
                f"{record['status']:<11} {record['score']:6.2f} "
                f"{record['master_coverage']:>5.0%}  {record['master_id']}\t{record['url']}"
            )
