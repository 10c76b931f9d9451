"""`copytrack demo`: the whole story on the embedded default, in a couple of minutes.

A library from the corpus (the shared one beside the repository, else the bundled
public-domain one in testbed/corpus) → the local test web full of pirated copies → a crawl
campaign over it → findings → the admin, with a demo user and a one-time password.
The test web comes from testbed/, which the production image does not ship: it is
imported when the demo runs, not when the command line starts.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import click
from tqdm import tqdm

from tracker.accounts.users import add_user, get_user, set_password
from tracker.campaigns import Campaign, save_campaign, trigger_run, wait_for_run
from tracker.campaigns.outcomes import expect_failures, run_health
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import open_ready
from tracker.masters.library import Work, add_work
from tracker.runtime.servers import stop_servers

from .ops import QUEUES, start_child, stop_child
from .testbed import testbed_missing

DEMO_DATA_DIR = ".copytrack-demo"
DEMO_USER = "demo"
CAMPAIGN = "demo-pirate-sites"
#: Why the demo's crawl meets failures, as its run records it (admin.vocabulary has it too).
AS_BUILT = "links to pages the test web does not have, and its deliberate server errors"


def load_library(ctx: Context, masters: list[dict[str, Any]]) -> int:
    """Register the test web's masters; returns how many are in the library."""
    for master in masters:
        work = Work(
            text=master["text"],
            external_id=master["id"],
            title=master.get("title"),
            lang=master.get("lang"),
            kind=master.get("kind"),
        )
        add_work(ctx, work)
    return len(masters)


def demo_user(ctx: Context) -> str:
    """Create (or reset) the demo admin user; returns its new one-time password."""
    password = secrets.token_urlsafe(12)
    if get_user(ctx, DEMO_USER):
        set_password(ctx, DEMO_USER, password)
    else:
        add_user(ctx, DEMO_USER, password, "admin")
    return password


def _check_port(port: int) -> None:
    """Fail now, not after the crawl, when the admin's port is taken (another admin or
    demo would answer the URL and password this demo prints)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as err:
            raise click.ClickException(
                f"port {port} on 127.0.0.1 is taken ({err.strerror}): stop what serves it, "
                f"or give the demo another port: make demo PORT={port + 1} "
                f"(copytrack demo --port {port + 1})"
            ) from None


class _RunBar:
    """One progress line while the demo's run crawls and scans."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.bar = tqdm(desc="crawling and scanning", unit=" pages", file=sys.stderr)

    def __call__(self, run: Mapping[str, Any]) -> None:
        fetched = (run.get("pages") or {}).get("fetched", 0)
        self.bar.update(fetched - self.bar.n)
        found = self.ctx.db.findings.count_documents({"run_id": run["_id"]})
        self.bar.set_postfix_str(f"{found} findings, {run['state']}")

    def close(self) -> None:
        self.bar.close()


def as_built(ctx: Context, run_id: Any, web: Any, base_urls: Mapping[str, str]) -> Counter[str]:
    """The run's failures, by reason, that the test web gives by design: a URL of one of
    its sites answered with the status that site serves for the path (404 for a page it
    does not have: the copied articles keep their sources' links; 500 for its broken
    page). Any other failure (a timeout, a refused connection) stays a failure."""
    expected: Counter[str] = Counter()
    for problem in ctx.db.run_problems.find(
        {"run_id": run_id, "outcome": "failed"}, {"url": 1, "reason": 1}
    ):
        for site, base in base_urls.items():
            if problem["url"].startswith(f"{base}/"):
                resource = web.sites[site].get(unquote(urlsplit(problem["url"]).path))
                if problem["reason"] == f"http_{resource.status if resource else 404}":
                    expected[problem["reason"]] += 1
    return expected


def _summary(ctx: Context, run: Mapping[str, Any], seconds: float, admin_url: str | None) -> None:
    """The run in a few lines: pages, findings by work (most copied first), the run's
    health and where to see the details."""
    by_work: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for finding in ctx.db.findings.find(
        {}, {"master_title": 1, "master_external_id": 1, "url": 1, "master_coverage": 1}
    ):
        by_work[finding.get("master_title") or finding["master_external_id"]].append(finding)
    pages = len({f["url"] for found in by_work.values() for f in found})
    click.echo(
        f"\ncrawled {run.get('pages', {}).get('fetched', 0)} pages in {seconds:.0f} s: "
        f"{sum(map(len, by_work.values()))} findings on {pages} pages, "
        f"copying {len(by_work)} of the library's works"
    )
    ranked = sorted(by_work.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    for title, found in ranked[:10]:
        best = max(f.get("master_coverage") or 0 for f in found)
        click.echo(f"  {len(found):>3} × {title}  (up to {best:.0%} of it copied)")
    if len(ranked) > 10:
        click.echo(f"  … and {len(ranked) - 10} more works: see the admin's findings")
    health = run_health(run)
    details = f" — details: {admin_url}runs/{run['_id']}" if admin_url else ""
    click.echo(f"run: {health.message}{details}")


def _worker_env(settings: Settings) -> dict[str, str]:
    """The environment of the demo's worker: the demo's installation, quiet like the demo."""
    env = {**os.environ, **settings.to_env()}
    if "COPYTRACK_LOG_LEVEL" not in os.environ:  # not a line per scanned page
        env["COPYTRACK_LOG_LEVEL"] = "WARNING"
    return env


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
    if serve:
        _check_port(port)
    settings = replace(
        Settings.from_env({"COPYTRACK_DATA_DIR": DEMO_DATA_DIR, **os.environ}),
        allow_private_networks=True,  # the test web is on loopback
        crawl_dispatch="local",  # it starts no crawler worker
    )
    if "COPYTRACK_LOG_LEVEL" not in os.environ:  # a bar and a summary, not a line per page
        logging.getLogger().setLevel(logging.WARNING)
    click.echo(f"starting the embedded servers in {settings.data_dir} …")
    ctx = open_ready(settings)
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
        click.echo(f"campaign {CAMPAIGN}: crawling the test web and scanning its pages")
        started, bar = time.monotonic(), _RunBar(ctx)
        try:
            run_id = trigger_run(ctx, CAMPAIGN)
            run = wait_for_run(ctx, run_id, scan=True, timeout=900, progress=bar)
        finally:
            bar.close()
        expected = as_built(ctx, run_id, web, running.base_urls)
        run = expect_failures(ctx, run_id, expected, AS_BUILT) or run
        admin_url = f"http://127.0.0.1:{port}/"
        _summary(ctx, run, time.monotonic() - started, admin_url if serve else None)
        password = demo_user(ctx)
        if not serve:
            return
        from admin.app import create_app
        from crawler.fetch import fetch_page

        from .admin import serve_admin

        # The admin's "Run now" and the scans its uploads queue need a worker.
        worker = start_child("worker", ["worker", "--queues", ",".join(QUEUES)],
                              _worker_env(settings))  # fmt: skip
        try:
            app = create_app(ctx, fetch_page=partial(fetch_page, allow_private=True))
            announce = (f"\nadmin: {admin_url}  user {DEMO_USER}  password {password}\n"
                        "(Ctrl-C stops the demo)")  # fmt: skip
            serve_admin(app, settings, "127.0.0.1", port, announce, "warning")
        finally:
            stop_child(worker)
    finally:
        running.stop()
        ctx.close()
        if settings.embedded_mongo or settings.embedded_redis:
            stop_servers(settings.data_dir)
