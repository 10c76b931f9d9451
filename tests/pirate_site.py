"""The crawl tests' campaign on the pirate-news site of the test web (copies of the library,
a redirect, a 404 and a 500; nothing slow), and what a user reads of it."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from copytrack.cli import main
from testbed.testweb import RunningWeb, TestWeb
from tracker.campaigns import Campaign, save_campaign
from tracker.context import Context

SITE = "pirate-news"
RUN_TIMEOUT = 60  # seconds a run of it takes at most


def save_site_campaign(
    ctx: Context, web: TestWeb, running: RunningWeb, name: str, **extra: Any
) -> None:
    """Campaign ``name`` seeded with the site's home page, sitemap and feed."""
    info = web.truth["sites"][SITE]
    seeds = [running.url(SITE, path) for path in ("/", info["sitemap"], info["feed"])]
    save_campaign(ctx, Campaign.from_dict({"name": name, "seeds": seeds, **extra}))


def reachable_articles(web: TestWeb, running: RunningWeb) -> set[str]:
    """URLs of the site's reachable articles: what a complete crawl stores."""
    return {running.url(SITE, a["path"]) for a in web.articles(reachable=True) if a["site"] == SITE}


def campaign_show(name: str) -> str:
    """What `copytrack campaign show NAME` prints."""
    result = CliRunner().invoke(main, ["campaign", "show", name], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output
