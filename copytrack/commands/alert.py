"""`copytrack alert`: subscriptions to new findings and other events, and their log."""

from __future__ import annotations

import sys

import click

from tracker.enforcement.alerts import AlertRun, send_due_alerts
from tracker.enforcement.deliveries import Attempted, list_deliveries
from tracker.enforcement.subscriptions import (
    EVENTS,
    FREQUENCIES,
    SubscriptionError,
    add_subscription,
    describe_filters,
    list_subscriptions,
    remove_subscription,
)
from tracker.masters.generation import open_ready

from .options import repeatable


def describe_alerts(queued: AlertRun, attempted: list[Attempted]) -> str:
    """One line: deliveries queued (findings, runs) and the attempts' outcomes."""
    states = [a.state for a in attempted]
    tried = ", ".join(f"{states.count(s)} {s}" for s in sorted(set(states))) or "none tried"
    return (
        f"{queued.deliveries} queued ({queued.findings} finding(s), {queued.runs} run(s)); {tried}"
    )


@click.group()
def alert() -> None:
    """Alerts: who is told of new findings (e-mail or a signed webhook), about what, how often."""


@alert.command()
@click.argument("name")
@repeatable("--email", "emails", "ADDR", "Send the alerts to this address (repeat for more).")
@click.option("--webhook", metavar="URL", help="POST the alerts as signed JSON to this URL.")
@click.option(
    "--secret",
    metavar="S",
    help="The webhook's secret: each request's HMAC-SHA256 signature is made with it.",
)
@click.option(
    "--when",
    "events",
    multiple=True,
    type=click.Choice(EVENTS),
    help="What to alert about (repeat for more) [default: new].",
)
@click.option(
    "--every",
    type=click.Choice(tuple(FREQUENCIES)),
    default="now",
    show_default=True,
    help="At once, or one digest an hour or a day.",
)
@click.option(
    "--lang",
    type=click.Choice(("en", "zh")),
    default="en",
    show_default=True,
    help="Language of the e-mails.",
)
@click.option("--campaign", help="Only findings of this campaign.")
@repeatable("--work", "works", "ID", "Only findings of this work (its id; repeat for more).")
@click.option("--domain", help="Only findings on this domain.")
@click.option("--min-score", type=click.FloatRange(0, 1), help="Only findings scoring this much.")
@click.option("--min-chars", type=click.IntRange(min=0),
              help="Only findings copying this many characters.")  # fmt: skip
def add(
    name: str,
    emails: tuple[str, ...],
    webhook: str | None,
    secret: str | None,
    events: tuple[str, ...],
    every: str,
    lang: str,
    campaign: str | None,
    works: tuple[str, ...],
    domain: str | None,
    min_score: float | None,
    min_chars: int | None,
) -> None:
    """Subscribe NAME to alerts: to e-mail addresses (--email ADDR …) or to a webhook
    (--webhook URL --secret S). `copytrack scheduler` sends them."""
    try:
        sub = add_subscription(
            open_ready(), name, emails=emails, webhook=webhook, secret=secret,
            when=events or ("new",), every=every, lang=lang, campaign=campaign, works=works,
            domain=domain, min_score=min_score, min_chars=min_chars, by="cli",
        )  # fmt: skip
    except SubscriptionError as err:
        click.echo(f"copytrack: {err}", err=True)
        sys.exit(1)
    click.echo(f"added subscription {sub['name']} ({_channel(sub)}; {', '.join(sub['when'])}, "
               f"every {sub['every']})")  # fmt: skip


def _channel(sub: dict) -> str:
    return f"webhook {sub['webhook']}" if sub.get("webhook") else ", ".join(sub["emails"])


@alert.command(name="list")
def list_command() -> None:
    """The subscriptions: `NAME<TAB>CHANNEL<TAB>EVENTS<TAB>EVERY<TAB>FILTERS` (secrets
    are never shown)."""
    subs = list_subscriptions(open_ready())
    for sub in subs:
        click.echo("\t".join([sub["name"], _channel(sub), ",".join(sub["when"]), sub["every"],
                              describe_filters(sub) or "-"]))  # fmt: skip
    if not subs:
        click.echo("no subscription: add one with `copytrack alert add`", err=True)


@alert.command()
@click.argument("name")
def remove(name: str) -> None:
    """Remove subscription NAME (what was sent stays in the log)."""
    if not remove_subscription(open_ready(), name):
        click.echo(f"copytrack: no subscription {name!r} (see `copytrack alert list`)", err=True)
        sys.exit(1)
    click.echo(f"removed subscription {name}")


@alert.command()
def send() -> None:
    """Send the due alerts now, and retry the deliveries whose time has come."""
    queued, attempted = send_due_alerts(open_ready())
    click.echo(describe_alerts(queued, attempted))


@alert.command()
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--subscription", help="Only this subscription's deliveries.")
def log(limit: int, subscription: str | None) -> None:
    """The delivery log, newest first: `TIME<TAB>STATE<TAB>SUBSCRIPTION<TAB>TO<TAB>ANSWER`."""
    for d in list_deliveries(open_ready(), limit, subscription):
        when = f"{d['created_at']:%Y-%m-%d %H:%M:%S}"
        to = ", ".join(d["to"])
        click.echo("\t".join([when, d["state"], d["subscription"], to, d.get("answer", "")]))
