"""`copytrack demo`: the whole story on the embedded default, in a couple of minutes.

A library from the corpus (the shared one beside the repository, else the bundled
public-domain one in testbed/corpus) → the local test web full of pirated copies → a crawl
campaign over it → findings → the admin, with a demo user and a one-time password.
The test web comes from testbed/, which the production image does not ship: it is
imported when the demo runs, not when the command line starts.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import click

from tracker.campaigns import Campaign, save_campaign, trigger_run, wait_for_run
from tracker.config import Settings
from tracker.context import Context, open_context
from tracker.library import Work, add_work
from tracker.servers import stop_servers
from tracker.users import add_user, get_user, set_password

from .testbed import testbed_missing

DEMO_DATA_DIR = ".copytrack-demo"
DEMO_USER = "demo"
CAMPAIGN = "demo-pirate-sites"


def load_library(ctx: Context, masters: list[dict[str, Any]]) -> int:
    """Register the test web's masters; returns how many are in the library."""
    for master in masters:
        fields = {k: master.get(k) for k in ("title", "lang", "kind")}
        add_work(ctx, Work(text=master["text"], external_id=master["id"], **fields))
    return len(masters)


def demo_user(ctx: Context) -> str:
    """Create (or reset) the demo admin user; returns its new one-time password."""
    password = secrets.token_urlsafe(12)
    if get_user(ctx, DEMO_USER):
        set_password(ctx, DEMO_USER, password)
    else:
        add_user(ctx, DEMO_USER, password, "admin")
    return password


def _summary(ctx: Context, run: dict[str, Any]) -> None:
    click.echo(
        f"crawled: {run.get('pages', {}).get('fetched', 0)} pages; "
        f"findings: {ctx.db.findings.count_documents({})} "
        f"on {len(ctx.db.findings.distinct('url'))} pages"
    )
    for finding in ctx.db.findings.find().sort("score", -1).limit(5):
        click.echo(
            f"  {finding['master_coverage']:>4.0%} of {finding['master_external_id']:<20}"
            f" copied at {finding['url']}"
        )


@click.command()
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8000,
    show_default=True,
    help="Port of the admin on 127.0.0.1.",
)
@click.option(
    "--masters",
    type=click.IntRange(2),
    default=60,
    show_default=True,
    help="Works in the demo library.",
)
@click.option(
    "--pages",
    type=click.IntRange(4),
    default=150,
    show_default=True,
    help="Article pages on the pirate sites.",
)
@click.option("--serve/--no-serve", default=True, help="Serve the admin at the end.")
def demo(port: int, masters: int, pages: int, serve: bool) -> None:
    """Run the demo: library → crawl of a local site full of copies → findings in the admin.

    Uses its own data dir (./.copytrack-demo unless COPYTRACK_DATA_DIR is set) and crawls
    only 127.0.0.1. Ctrl-C stops the admin, the test web and the demo's servers.
    """
    try:
        from testbed import testweb
        from testbed.corpus import describe
    except ModuleNotFoundError as err:
        raise testbed_missing(err) from None
    os.environ.setdefault("COPYTRACK_DATA_DIR", DEMO_DATA_DIR)
    os.environ["COPYTRACK_ALLOW_PRIVATE_NETWORKS"] = "1"  # the test web is on loopback
    os.environ["COPYTRACK_CRAWL_DISPATCH"] = "local"  # it starts no crawler worker
    settings = Settings.from_env()
    click.echo(f"starting the embedded servers in {settings.data_dir} …")
    ctx = open_context(settings)
    web = testweb.build_site(Path(settings.data_dir) / "testweb", n_masters=masters, n_pages=pages)
    running = testweb.serve(web)
    try:
        works = load_library(ctx, web.masters)
        click.echo(f"library: {works} works from {describe(testweb.CORPUS_DIR)}")
        for site, url in running.base_urls.items():
            click.echo(f"test web: {site:<14} {url}/")
        # Our own local sites: no need for the production politeness delays.
        seeds = tuple(f"{url}/" for url in running.base_urls.values())
        campaign = Campaign(name=CAMPAIGN, seeds=seeds, delay=0.02, concurrency=4)
        save_campaign(ctx, campaign, replace=True)
        click.echo(f"campaign {CAMPAIGN}: crawling and scanning …")
        run = wait_for_run(ctx, trigger_run(ctx, CAMPAIGN), scan=True, timeout=900)
        _summary(ctx, run)
        password = demo_user(ctx)
        if not serve:
            return
        import uvicorn  # only the serving part needs a web server

        from admin.app import create_app

        click.echo(
            f"\nadmin: http://127.0.0.1:{port}/  user {DEMO_USER}  password {password}"
            "\n(Ctrl-C stops the demo)"
        )
        uvicorn.run(create_app(ctx), host="127.0.0.1", port=port, log_level="warning")
    finally:
        running.stop()
        ctx.close()
        if settings.embedded_mongo or settings.embedded_redis:
            stop_servers(settings.data_dir)
