"""A crawl run explains itself (issue #15, item 1): counts by outcome, every URL skipped or
failed with its reason on the run's page (filtered, paginated), and a red or amber state
when a run fetched nothing or mostly failed — in the admin, its JSON and the API.

Real crawls of loopback sites (and of a host that does not resolve, through the scripted
DNS of tests/security) on the embedded servers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.admin_seed import PASSWORD, client, login
from tests.loopback import Handler, served
from tests.security.fakes import ARTICLE, scripted_crawl
from tracker.campaigns import Campaign, save_campaign, trigger_run, wait_for_run
from tracker.campaigns.outcomes import run_health
from tracker.context import Context
from tracker.users import add_user, create_token

GONE = 60  # links to pages that answer 404: more than one page of the run's list


class _MostlyGone(Handler):
    """An index linking two articles and GONE pages that are not there."""

    def do_GET(self) -> None:
        if self.path == "/":
            links = ["/a1.html", "/a2.html", *(f"/gone/{n}.html" for n in range(GONE))]
            body = "".join(f'<a href="{link}">{link}</a> ' for link in links).encode()
            self.send_body(b"<html><body>" + body + b"</body></html>", status=200)
        elif self.path in ("/a1.html", "/a2.html"):
            self.send_body(ARTICLE, status=200)
        else:
            self.send_body(b"not here", status=404)


@contextmanager
def _site() -> Iterator[str]:
    with served(_MostlyGone) as server:
        yield f"http://127.0.0.1:{server.server_port}"


@pytest.fixture
def gone_run(crawl_ctx: Context) -> tuple[Context, dict[str, Any], str]:
    """A finished run of a site whose linked pages mostly answer 404."""
    with _site() as base:
        save_campaign(
            crawl_ctx, Campaign.from_dict({"name": "gone", "seeds": [f"{base}/"], "delay": 0})
        )
        run = wait_for_run(crawl_ctx, trigger_run(crawl_ctx, "gone"), timeout=240)
    add_user(crawl_ctx, "vic", PASSWORD, "viewer")
    return crawl_ctx, run, base


def test_a_run_whose_pages_are_gone_is_amber_and_lists_every_404(
    gone_run: tuple[Context, dict[str, Any], str],
) -> None:
    ctx, run, base = gone_run
    assert run["state"] == "finished"
    assert run["failed"] == {"http_404": GONE}, run
    assert run["pages"]["fetched"] == 3
    health = run_health(run)
    assert health.level == "warning"
    assert f"{GONE} URLs failed" in health.message and "HTTP 404 Not Found" in health.message

    http = client(ctx)
    login(http, "vic")
    first = http.get(f"/runs/{run['_id']}").text
    assert "mostly failed" in first and "HTTP 404 Not Found" in first
    assert "Page 1 of 2" in first
    listed = {f"{base}/gone/{n}.html" for n in range(GONE)}
    second = http.get(f"/runs/{run['_id']}", params={"page": 2}).text
    shown = {url for url in listed if url in first or url in second}
    assert shown == listed  # every failed URL, once over both pages
    assert "Page 2 of 2" in http.get(f"/runs/{run['_id']}", params={"page": 99}).text  # clamped

    skipped_only = http.get(f"/runs/{run['_id']}", params={"outcome": "skipped"}).text
    assert not any(url in skipped_only for url in listed)
    assert "with these filters" in skipped_only
    by_reason = http.get(f"/runs/{run['_id']}", params={"reason": "http_404", "page": 2}).text
    assert "Page 2 of 2" in by_reason and f"{base}/gone/" in by_reason

    # The campaign page and the runs list link the run and show its state in colour.
    campaign_page = http.get("/campaigns/gone").text
    assert f'href="/runs/{run["_id"]}"' in campaign_page and "health-warning" in campaign_page

    progress = http.get(f"/runs/{run['_id']}/progress").json()
    assert progress["done"] is True and progress["health"]["level"] == "warning"
    assert progress["counts"]["failed"] == {"http_404": GONE}
    assert http.get("/runs/0123456789abcdef01234567").status_code == 404
    assert http.get("/runs/not-a-run/progress").status_code == 404


def test_a_host_that_does_not_resolve_makes_a_red_run_that_says_so(ctx: Context) -> None:
    # The seed's name resolves nowhere (the scripted DNS knows no name): the run used to be
    # a green "finished" with "1 failed" and no reason.
    lenient = dataclasses.replace(
        ctx, settings=dataclasses.replace(ctx.settings, allow_private_networks=True)
    )
    seed = "http://nowhere.test:8080/news/"
    save_campaign(lenient, Campaign.from_dict({"name": "nowhere", "seeds": [seed], "delay": 0}))
    run = scripted_crawl(ctx, "nowhere", {}, allow_private=True)
    assert run["state"] == "finished" and run["failed"] == {"dns": 1}, run
    health = run_health(run)
    assert health.level == "error"
    assert health.message == "fetched nothing: 1 × the host name does not resolve (DNS)"

    add_user(ctx, "ada", PASSWORD, "admin")
    http = client(ctx)
    login(http, "ada")
    page = http.get(f"/runs/{run['_id']}").text
    assert seed in page and "the host name does not resolve (DNS)" in page
    assert "health-error" in page
    token = create_token(ctx, "ada", "monitoring")
    api = client(ctx).get(
        "/api/v1/campaigns/nowhere/runs", headers={"Authorization": f"Bearer {token}"}
    )
    (latest,) = api.json()
    assert latest["health"] == "error" and latest["failed"] == {"dns": 1}
    assert "does not resolve" in latest["health_message"]
