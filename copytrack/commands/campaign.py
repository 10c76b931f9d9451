"""`copytrack campaign add|import|list|show|run|stop|rm` and `copytrack scheduler`."""

from __future__ import annotations

import getpass
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from tracker.campaigns import (
    KINDS,
    Campaign,
    CampaignBusy,
    CampaignError,
    crawl_log_path,
    get_campaign,
    list_campaigns,
    load_campaign_file,
    refresh_run,
    refresh_runs,
    remove_campaign,
    run_due_campaigns,
    run_history,
    save_campaign,
    stop_run,
    trigger_run,
    wait_for_run,
)
from tracker.context import Context, reconnected
from tracker.core.config import Settings
from tracker.core.failures import CONNECTION_ERRORS
from tracker.enforcement.alerts import send_due_alerts
from tracker.enforcement.delisting import recheck_with_configured_provider
from tracker.masters.generation import open_ready
from tracker.operators.grouping import update_operators
from tracker.runtime.processes import recorded
from tracker.runtime.servers import ServerStartError

from .alert import describe_alerts
from .ops import interrupt_on_termination
from .options import repeatable
from .recheck import describe_recheck, recheck_due_pages

HISTORY = 10


class _CampaignCommand(click.Command):
    """Turns campaign errors into one clear line and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (CampaignError, CampaignBusy) as err:
            raise click.ClickException(str(err)) from None


@click.group()
def campaign() -> None:
    """Crawl campaigns: what to crawl, how politely, and when."""


@campaign.command(cls=_CampaignCommand)
@click.argument("name")
@repeatable(
    "--seed",
    "seeds",
    "URL",
    "Page, sitemap (or robots.txt) or RSS/Atom feed to start from; repeatable "
    "(none for --kind discover).",
)
@click.option(
    "--kind",
    type=click.Choice(KINDS),
    default="sites",
    show_default=True,
    help="sites: crawl the seeds' sites; discover: crawl what a search engine finds for "
    "the library's most distinctive sentences (COPYTRACK_SEARCH_URL).",
)
@click.option(
    "--sample",
    type=int,
    default=Campaign.sample,
    show_default=True,
    help="discover: works whose sentences one run looks up (in turn, round the library).",
)
@repeatable(
    "--allow-domain",
    "allowed_domains",
    "HOST[:PORT]",
    "Host (with subdomains) or host:port to stay on [default: the seeds'].",
)
@click.option(
    "--allow",
    multiple=True,
    metavar="REGEX",
    help="Follow only links matching one of these; repeatable.",
)
@click.option(
    "--deny", multiple=True, metavar="REGEX", help="Never follow links matching this; repeatable."
)
@click.option(
    "--max-pages",
    type=int,
    default=Campaign.max_pages,
    show_default=True,
    help="Responses per run.",
)
@click.option(
    "--depth",
    "max_depth",
    type=int,
    default=None,
    help="Link hops from a seed [default: unlimited].",
)
@click.option("--schedule", metavar="CRON", help="Cron expression (UTC), e.g. '0 3 * * *'.")
@click.option("--delay", type=float, help="Seconds between requests to one site.")
@click.option("--concurrency", type=int, help="Parallel requests to one site.")
@click.option(
    "--refetch-days",
    type=float,
    default=0.0,
    show_default=True,
    help="Do not fetch again pages fetched this recently.",
)
@click.option(
    "--render",
    is_flag=True,
    help="Run each page's scripts in Chromium before reading it (sites that write their "
    "text by script; slower).",
)
@click.option(
    "--ocr",
    is_flag=True,
    help="Read the text of each page's article images with Tesseract (sites that post "
    "chapters as pictures of text; slower).",
)
@click.option("--disabled", is_flag=True, help="Store it without scheduling it.")
@click.option("--notes", default="", help="Free text.")
def add(name: str, disabled: bool, **fields: Any) -> None:  # fmt: skip
    """Add campaign NAME (seeds on private addresses need COPYTRACK_ALLOW_PRIVATE_NETWORKS=1)."""
    definition = {key: list(v) if isinstance(v, tuple) else v for key, v in fields.items()}
    found = Campaign.from_dict({"name": name, "enabled": not disabled, **definition})
    save_campaign(open_ready(), found)
    click.echo(f"added campaign {name}")


@campaign.command(name="import", cls=_CampaignCommand)
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def import_(file: Path) -> None:
    """Add or replace the campaigns of a YAML or JSON FILE (one, a list, or {campaigns: [...]}).

    Fields: name, seeds, allowed_domains, allow, deny, max_depth, max_pages, schedule,
    enabled, delay, concurrency, refetch_days, render, ocr, kind, sample, notes. The file is
    checked as a whole before anything is stored.
    """
    campaigns = load_campaign_file(file)
    ctx = open_ready()
    for found in campaigns:
        click.echo(f"{save_campaign(ctx, found, replace=True)}\t{found.name}")


@campaign.command(name="list", cls=_CampaignCommand)
def list_() -> None:
    """One line per campaign: name, state, schedule, seeds, last run."""
    ctx = open_ready()
    for found in list_campaigns(ctx):
        runs = run_history(ctx, found.name, limit=1)
        last = "never run"
        if runs:
            run = refresh_run(ctx, runs[0]["_id"])
            last = f"last run {_when(run['started_at'])} {run['state']}"
        state = "enabled" if found.enabled else "disabled"
        click.echo(
            f"{found.name}\t{state}\t{found.schedule or 'manual'}\t"
            f"{len(found.seeds)} seed(s)\t{last}"
        )


@campaign.command(cls=_CampaignCommand)
@click.argument("name")
def show(name: str) -> None:
    """Show campaign NAME and its latest runs."""
    ctx = open_ready()
    found = get_campaign(ctx, name)
    for key, value in found.to_doc().items():
        if isinstance(value, list):
            value = ", ".join(value) or "-"
        click.echo(f"{key:<16} {'-' if value is None else value}")
    click.echo(f"runs (latest {HISTORY})")
    runs = run_history(ctx, name, HISTORY)
    for run in runs:
        click.echo("  " + describe_run(refresh_run(ctx, run["_id"])))
    if not runs:
        click.echo("  none yet (`copytrack campaign run NAME`)")


@campaign.command(cls=_CampaignCommand)
@click.argument("name")
@click.option(
    "--wait",
    is_flag=True,
    help="Return once the pages are crawled and scanned (scanning here if no worker does).",
)
@click.option("--timeout", type=float, default=None, help="Give up waiting after SECONDS.")
def run(name: str, wait: bool, timeout: float | None) -> None:  # fmt: skip
    """Start a run of campaign NAME now, in a crawl process here (or, with
    COPYTRACK_CRAWL_DISPATCH=queue, queued for a crawler worker: `copytrack worker`).

    Without --wait it returns at once; the crawl's log is DATA/logs/crawl-RUN.log, and its
    pages are scanned by the workers (`copytrack worker` or `copytrack up`). With --wait
    it scans the run's pages itself as they arrive, so it needs no scan worker, and exits
    1 if the run failed.
    """
    ctx = open_ready()
    run_id = trigger_run(ctx, name)
    if ctx.settings.crawl_dispatch == "queue":
        click.echo(f"queued run {run_id} of {name} for a crawler worker (crawl queue)")
    else:
        click.echo(f"started run {run_id} of {name}; log: {crawl_log_path(ctx, run_id)}")
    if not wait:
        return
    try:
        done = wait_for_run(ctx, run_id, scan=True, timeout=timeout)
    except TimeoutError as err:
        raise click.ClickException(str(err)) from None
    click.echo(describe_run(done))
    if done["state"] != "finished":
        raise SystemExit(1)


@campaign.command(cls=_CampaignCommand)
@click.argument("name")
@click.option(
    "--by",
    default=getpass.getuser,
    show_default="your login name",
    help="Who stops it, as the run records it.",
)
def stop(name: str, by: str) -> None:
    """Stop the run of campaign NAME under way: recorded cancelled, with who and when; its
    crawl ends after the requests under way, and the campaign can run again at once."""
    run = stop_run(open_ready(), name, by)
    click.echo(
        f"stopped run {run['_id']} of {name}: cancelled by {by} at {_when(run['finished_at'])} UTC"
    )


@campaign.command(cls=_CampaignCommand)
@click.argument("name")
def rm(name: str) -> None:
    """Remove campaign NAME (its runs and findings stay)."""
    remove_campaign(open_ready(), name)
    click.echo(f"removed campaign {name}")


@click.command()
@click.option("--interval", type=click.FloatRange(min=1), default=30.0, show_default=True,
              help="Seconds between two looks at the schedules.")  # fmt: skip
def scheduler(interval: float) -> None:
    """Start campaigns when their schedule (cron, UTC) fires, close finished runs,
    re-check the pages whose takedown notices' deadlines passed, and send the alerts of
    the subscriptions (`copytrack alert`) with their retries.

    Several schedulers may run side by side: each fire time starts one run. Ctrl-C stops it;
    crawls it started go on.
    """
    settings = Settings.from_env()
    ctx = open_ready(settings)
    interrupt_on_termination()  # `up` and `down` stop it with SIGTERM: clean up the record
    with recorded(settings.data_dir, "scheduler"):
        click.echo(f"scheduler: looking at the campaigns every {interval:g} s")
        try:
            while True:
                ctx = _tick(ctx)
                time.sleep(interval)
        except KeyboardInterrupt:
            click.echo("scheduler stopped")


def _tick(ctx: Context) -> Context:
    """One look at the campaigns; the context to use next (another if a server moved)."""
    try:
        for run_id in run_due_campaigns(ctx, datetime.now(UTC)):
            click.echo(f"started scheduled run {run_id}")
        refresh_runs(ctx)
        for check in recheck_due_pages(ctx):
            click.echo(f"re-checked: {describe_recheck(check)}")
        queued, attempted = send_due_alerts(ctx)
        if queued.deliveries or attempted:
            click.echo(f"alerts: {describe_alerts(queued, attempted)}")
        for delisting in recheck_with_configured_provider(ctx):
            click.echo(
                f"delisting re-checked: {delisting.state} {delisting.engine} {delisting.url}"
            )
        if read := update_operators(ctx):  # new captures of findings: group domains again
            click.echo(f"operators grouped again ({read} captures read)")
    except Exception as err:  # a server restarting must not end the scheduler
        click.echo(f"scheduler: tick failed ({type(err).__name__}: {err}); retrying", err=True)
        if isinstance(err, CONNECTION_ERRORS):
            try:
                return reconnected(ctx)
            except ServerStartError as start_error:
                click.echo(f"scheduler: {start_error}; retrying", err=True)
    return ctx


# --------------------------------------------------------------------------- display


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items()) if n) or "none"


def describe_run(run: dict[str, Any]) -> str:
    """One line: id, state, times, pages fetched/changed/unchanged, skips, failures, findings
    (then the run it resumes, the crawler worker that crawled it, its error)."""
    pages = run.get("pages", {})
    findings = run.get("findings")
    found = f"findings new {findings['new']}, updated {findings['updated']}" if findings else (
        "findings pending scans"
    )  # fmt: skip
    line = (
        f"{run['_id']}  {run['state']:<8}  {_when(run['started_at'])} → "
        f"{_when(run.get('finished_at'))}  fetched {pages.get('fetched', 0)} "
        f"(changed {pages.get('changed', 0)}, unchanged {pages.get('unchanged', 0)}"
        f"{', read by OCR ' + str(pages['read_by_ocr']) if pages.get('read_by_ocr') else ''})  "
        f"skipped: {_counts(run.get('skipped', {}))}  failed: {_counts(run.get('failed', {}))}  "
        f"{found}"
    )
    line += f"  resumes {run['resumes']}" if run.get("resumes") else ""
    line += f"  crawled by {run['worker']}" if run.get("worker") else ""
    if stopped := run.get("cancelled"):
        line += f"  stopped by {stopped['by']} at {_when(stopped['at'])}"
    return line + (f"  error: {run['error']}" if run.get("error") else "")
