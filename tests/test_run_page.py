"""A crawl run explains itself: counts by outcome, every URL skipped or
failed with its reason on the run's page (filtered, paginated), and a red or amber state
when a run fetched nothing or mostly failed — in the admin, its JSON and the API.

Real crawls of loopback sites (and of a host that does not resolve, through the scripted
DNS of tests/security) on the embedded servers.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from copytrack.cli import main
from tests.admin_seed import PASSWORD, client, login
from tests.loopback import Handler, served
from tests.processes import process_state, wait_until, worker_process
from tests.security.fakes import ARTICLE, scripted_crawl
from tracker.accounts.users import add_user, create_token
from tracker.campaigns import (
    Campaign,
    get_run,
    save_campaign,
    stop_run,
    trigger_run,
    wait_for_run,
)
from tracker.campaigns.outcomes import run_health
from tracker.context import Context

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


# --------------------------------------------------------------------------- stopping a run

SLOW_PAGES = 60  # pages of the slow site, each answered after SLOW_SECONDS
SLOW_SECONDS = 0.3


class _Slow(Handler):
    """An index of SLOW_PAGES articles, each slow to come: a run lasts long enough to stop."""

    def do_GET(self) -> None:
        if self.path == "/":
            links = "".join(f'<a href="/a{n}.html">{n}</a> ' for n in range(SLOW_PAGES))
            self.send_body(f"<html><body>{links}</body></html>".encode())
        else:
            time.sleep(SLOW_SECONDS)
            self.send_body(ARTICLE)


@contextmanager
def _running(ctx: Context, name: str) -> Iterator[Any]:
    """A run of campaign ``name`` over the slow site, crawling; yields its id."""
    with served(_Slow) as server:
        seed = f"http://127.0.0.1:{server.server_port}/"
        save_campaign(ctx, Campaign.from_dict({"name": name, "seeds": [seed], "delay": 0.1}))
        run_id = trigger_run(ctx, name)
        wait_until(lambda: get_run(ctx, run_id)["state"] == "running", 60, "crawl start")
        yield run_id


def _stopped(ctx: Context, run_id: Any) -> dict[str, Any]:
    """The run once its crawl has ended (stopped runs end after the requests under way)."""
    pid = get_run(ctx, run_id)["pid"]
    wait_until(lambda: process_state(pid) in ("Z", None), 60, f"end of crawl pid {pid}")
    return get_run(ctx, run_id)


def test_an_admin_stops_a_run_from_its_page_and_the_run_says_who_and_when(
    crawl_ctx: Context,
) -> None:
    ctx = crawl_ctx
    add_user(ctx, "ada", PASSWORD, "admin")
    add_user(ctx, "rex", PASSWORD, "reviewer")
    with _running(ctx, "slow") as run_id:
        reviewer = client(ctx)
        rex_csrf = login(reviewer, "rex")
        page = reviewer.get(f"/runs/{run_id}").text
        assert 'id="stop-run"' not in page  # stopping, like starting, is an admin's
        refused = reviewer.post("/campaigns/slow/stop", data={"csrf_token": rex_csrf})
        assert refused.status_code == 403
        assert get_run(ctx, run_id)["state"] == "running"

        admin = client(ctx)
        csrf = login(admin, "ada")
        assert 'id="stop-run"' in admin.get("/campaigns/slow").text
        assert 'id="stop-run"' in admin.get(f"/runs/{run_id}").text
        assert admin.post("/campaigns/slow/stop", data={}).status_code == 403  # no CSRF token
        stopped = admin.post("/campaigns/slow/stop", data={"csrf_token": csrf})
        assert stopped.url.path == f"/runs/{run_id}"
        run = _stopped(ctx, run_id)
    assert run["state"] == "cancelled" and run["cancelled"]["by"] == "ada"
    assert run["pages"]["fetched"] < SLOW_PAGES
    page = stopped.text
    assert f"Run {run_id} of slow stopped." in page
    when = run["cancelled"]["at"].strftime("%Y-%m-%d %H:%M")
    assert f"by ada at {when} UTC" in page
    assert 'id="stop-run"' not in page  # nothing left to stop
    assert f"stopped by ada at {when} UTC" in run_health(run).message
    # Stopping again says there is nothing to stop, on the campaign's page.
    again = admin.post("/campaigns/slow/stop", data={"csrf_token": csrf})
    assert "No run of slow is under way." in again.text
    assert get_run(ctx, run_id)["cancelled"] == run["cancelled"]


def test_campaign_stop_on_the_command_line_cancels_the_run(crawl_ctx: Context) -> None:
    ctx = crawl_ctx
    with _running(ctx, "slow-cli") as run_id:
        runner = CliRunner()
        done = runner.invoke(main, ["campaign", "stop", "slow-cli", "--by", "ops"])
        assert done.exit_code == 0, done.output
        run = _stopped(ctx, run_id)
    assert f"stopped run {run_id} of slow-cli: cancelled by ops at " in done.output
    assert run["state"] == "cancelled" and run["cancelled"]["by"] == "ops"
    show = runner.invoke(main, ["campaign", "show", "slow-cli"]).output
    assert "cancelled" in show and "stopped by ops at " in show
    # Nothing under way: one line, exit status 1.
    idle = runner.invoke(main, ["campaign", "stop", "slow-cli"])
    assert idle.exit_code == 1
    assert idle.output.strip() == "Error: campaign 'slow-cli' has no run under way to stop"
    unknown = runner.invoke(main, ["campaign", "stop", "nosuch"])
    assert unknown.exit_code == 1 and "nosuch" in unknown.output


def test_a_run_waiting_for_a_worker_that_is_not_running_says_so(
    crawl_ctx: Context, tmp_path: Path
) -> None:
    ctx = crawl_ctx
    add_user(ctx, "vic", PASSWORD, "viewer")
    http = client(ctx)
    login(http, "vic")
    notice = "No worker is running: the pages of this run wait to be scanned."
    with _running(ctx, "unscanned") as run_id:
        assert notice in http.get(f"/runs/{run_id}").text
        assert notice in http.get("/campaigns/unscanned").text
        assert http.get(f"/runs/{run_id}/progress").json()["waiting"].startswith(notice)
        log = tmp_path / "worker.log"
        with worker_process(ctx, log, queues="scan"):
            # The worker's heartbeat reaches the admin within seconds of its start.
            wait_until(
                lambda: http.get(f"/runs/{run_id}/progress").json()["waiting"] is None,
                60,
                "the worker's heartbeat",
                log,
            )
            assert notice not in http.get(f"/runs/{run_id}").text
        stop_run(ctx, "unscanned", "vic")
        _stopped(ctx, run_id)
