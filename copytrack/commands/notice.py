"""`copytrack notice`: takedown notices e-mailed to the addresses copytrack proposes."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from tracker.enforcement.sending import PreparedNotice, prepare_notice, send_notice
from tracker.findings import FindingNotFound, WorkflowError, parse_object_id
from tracker.masters.generation import open_ready

_WHICH = [
    click.option("--finding", "finding_id", metavar="ID", help="The notice of this finding."),
    click.option("--domain", help="One notice listing every confirmed finding of this domain."),
    click.option("--lang", type=click.Choice(("zh", "en")), default="zh", show_default=True),
]


def _which(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_WHICH):
        command = option(command)
    return command


def _prepare(finding_id: str | None, domain: str | None, lang: str) -> PreparedNotice:
    ctx = open_ready()
    try:
        oid = parse_object_id(finding_id) if finding_id else None
        return prepare_notice(ctx, lang=lang, finding_id=oid, domain=domain)
    except (ValueError, FindingNotFound) as err:
        click.echo(f"copytrack: {err.args[0]}", err=True)
        sys.exit(1)


@click.group()
def notice() -> None:
    """Takedown notices: whom to send them to, and sending them by e-mail."""


@notice.command()
@_which
def recipients(finding_id: str | None, domain: str | None, lang: str) -> None:
    """The addresses copytrack proposes: `EMAIL<TAB>SOURCE<TAB>WHERE FROM` (the registrar's
    and the hosting network's abuse contacts from RDAP, the site's own contact)."""
    prepared = _prepare(finding_id, domain, lang)
    for r in prepared.proposed:
        click.echo(f"{r.email}\t{r.source}\t{r.detail}")
    for answer in prepared.rdap:
        if answer.error:
            click.echo(f"RDAP {answer.kind} {answer.query}: {answer.error}", err=True)
    if not prepared.proposed:
        click.echo("no address found: give one with `notice send --to ADDR`", err=True)


@notice.command()
@_which
@click.option("--to", "to", multiple=True, metavar="ADDR", help="Send it to this address.")
@click.option("--proposed", is_flag=True,
              help="Send it to every address `notice recipients` lists too.")  # fmt: skip
def send(
    finding_id: str | None, domain: str | None, lang: str, to: tuple[str, ...], proposed: bool
) -> None:
    """E-mail the notice through COPYTRACK_SMTP_URL and record it: the findings become
    'notice sent' and their deadlines start now."""
    prepared = _prepare(finding_id, domain, lang)
    addresses = list(to) + ([r.email for r in prepared.proposed] if proposed else [])
    try:
        sent = send_notice(
            open_ready(), prepared.finding_ids, lang=lang, subject=prepared.subject,
            body=prepared.body, recipients=addresses, by="cli",
        )  # fmt: skip
    except (WorkflowError, FindingNotFound) as err:
        click.echo(f"copytrack: {err.args[0]}", err=True)
        sys.exit(1)
    click.echo(f"sent {sent.message_id} to {', '.join(sent.accepted)} "
               f"({sent.findings} finding(s) of {prepared.domain}): {sent.answer}")  # fmt: skip
    for address, answer in sent.refused.items():
        click.echo(f"refused {address}: {answer}", err=True)
