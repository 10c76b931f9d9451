"""From finding to takedown, end to end on real servers: the local test web crawled (its
sites under .test names that the crawl's scripted DNS points at loopback), an alert e-mail
through a local SMTP relay and a signed webhook to a local receiver, a reviewer's bulk
notice for a domain addressed to the abuse contact a local RDAP registry names, a
delisting export of the confirmed URLs, its re-check through a local search provider, and
the finding's timeline showing each step."""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from click.testing import CliRunner

from copytrack.cli import main
from testbed.testweb import RunningWeb, TestWeb, build_site, serve
from tests.enforcement.servers import MailBox, rdap_registry, webhook_receiver
from tests.loopback import Handler, served
from tests.security.fakes import scripted_crawl
from tracker.campaigns import Campaign, save_campaign
from tracker.context import Context
from tracker.core.times import now
from tracker.discovery.providers import SearxngProvider
from tracker.enforcement.alerts import send_due_alerts
from tracker.enforcement.delisting import export_delisting, recheck_delistings
from tracker.enforcement.recipients import REGISTRAR
from tracker.enforcement.sending import prepare_notice, send_notice
from tracker.enforcement.subscriptions import add_subscription
from tracker.enforcement.timeline import finding_timeline, funnel
from tracker.findings import bulk_set_status

pytestmark = pytest.mark.slow  # a real crawl

SECRET = "e2e-webhook-secret"
REGISTRAR_ABUSE = "abuse@registrar.test"
HOSTING_ABUSE = "noc@hosting.test"
DOMAIN = "pirate-news.test"


@pytest.fixture(scope="module")
def web() -> TestWeb:
    return build_site(n_masters=8, n_pages=16, n_real_pages=0, slow_seconds=0.2)


@pytest.fixture(scope="module")
def running(web: TestWeb) -> Iterator[RunningWeb]:
    with serve(web) as sites:
        yield sites


@pytest.fixture
def registry(tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    names = {f"{site}.test": REGISTRAR_ABUSE for site in ("pirate-news", "novel-mirror",
                                                          "mixed-blog", "clean-site")}  # fmt: skip
    with rdap_registry(domains=names, networks={"127.0.0.1": HOSTING_ABUSE}) as server:
        monkeypatch.setenv("COPYTRACK_RDAP_BOOTSTRAP_URL", server.bootstrap_url)
        yield server


class SearchHandler(Handler):
    """A SearXNG JSON API still listing ``server.listed`` URLs."""

    def do_GET(self) -> None:
        query = parse_qs(urlsplit(self.path).query)["q"][0]
        results = [{"url": u, "title": "copy"} for u in self.server.listed if u == query]
        self.send_body(json.dumps({"results": results}).encode(), "application/json")


def crawl(ctx: Context, web: TestWeb, running: RunningWeb) -> None:
    """Every site of the test web crawled under its .test name (resolved to loopback)."""
    hosts = {site: f"{site}.test" for site in web.sites}
    seeds = [base.replace("127.0.0.1", hosts[site]) + "/"
             for site, base in running.base_urls.items()]  # fmt: skip
    save_campaign(ctx, Campaign.from_dict({"name": "testweb", "seeds": seeds, "delay": 0,
                                           "concurrency": 8}), replace=True)  # fmt: skip
    run = scripted_crawl(ctx, "testweb", {h: [["127.0.0.1"]] for h in hosts.values()},
                         allow_private=True)  # fmt: skip
    assert run["state"] == "finished", run


def test_a_copy_found_is_alerted_noticed_delisted_and_traced(
    web: TestWeb, running: RunningWeb, registry: Any, relay: MailBox,
    sender_context: Callable[[], Context], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("COPYTRACK_ALLOW_PRIVATE_NETWORKS", "1")  # the test web is loopback
    ctx = sender_context()
    web.write(tmp_path)
    added = CliRunner().invoke(main, ["library", "add", str(tmp_path / "masters.jsonl"),
                                      "--no-progress"])  # fmt: skip
    assert added.exit_code == 0, added.output
    with webhook_receiver() as receiver:
        add_subscription(ctx, "desk", emails=["desk@press.example"])
        add_subscription(ctx, "hook", webhook=receiver.url, secret=SECRET)
        crawl(ctx, web, running)
        findings = list(ctx.db.findings.find({"status": "new"}))
        assert findings, "the crawl found no copy"
        _, attempted = send_due_alerts(ctx)
        assert [a.state for a in attempted] == ["delivered", "delivered"]
        [(headers, body)] = receiver.received

    # The alert e-mail lists every copy found, once.
    [alert] = relay.mails
    assert alert.recipients == ["desk@press.example"]
    assert all(f["url"] in alert.text for f in findings)
    expected = {(str(f["_id"]), f["url"], f["master_external_id"]) for f in findings}
    # The webhook is signed over "<timestamp>.<body>" and lists the same findings.
    timestamp = headers["X-Copytrack-Timestamp"]
    mac = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    assert headers["X-Copytrack-Signature"] == "sha256=" + mac.hexdigest()
    assert abs(int(timestamp) - now().timestamp()) < 600
    listed = json.loads(body)["findings"]
    assert {(f["id"], f["url"], f["master_id"]) for f in listed} == expected
    # The URLs carry the .test names: the crawl went through the scripted DNS.
    ours = [f for f in findings if f["domain"] == DOMAIN]
    assert len(ours) >= 2, sorted(f["url"] for f in findings)

    # A reviewer confirms the domain's copies and sends one notice listing them all, to
    # the registrar's abuse contact that RDAP names.
    ids = [f["_id"] for f in ours]
    assert bulk_set_status(ctx, ids, "confirmed", "rui").changed == len(ids)
    prepared = prepare_notice(ctx, lang="zh", domain=DOMAIN)
    assert (REGISTRAR_ABUSE, REGISTRAR) in {(r.email, r.source) for r in prepared.proposed}
    assert HOSTING_ABUSE in {r.email for r in prepared.proposed}  # the address at capture
    sent = send_notice(ctx, prepared.finding_ids, lang="zh", subject=prepared.subject,
                       body=prepared.body, recipients=[REGISTRAR_ABUSE], by="rui")  # fmt: skip
    notice = relay.mails[-1]
    assert notice.recipients == [REGISTRAR_ABUSE]
    assert notice.message["Message-ID"] == sent.message_id
    assert all(f["url"] in notice.text for f in ours)
    assert not [f for f in findings if f["domain"] != DOMAIN and f["url"] in notice.text]

    # The delisting export lists exactly the confirmed URLs; one is gone from the engine
    # a week later, the other still listed.
    google = export_delisting(ctx, "google", domain=DOMAIN, by="rui")
    exported = [row["infringing_url"] for row in csv.DictReader(io.StringIO(google.csv))]
    assert sorted(exported) == sorted(f["url"] for f in ours)
    # Two article pages (a chapter joined from several pages lives at "<first>#pages").
    still, gone = [f for f in ours if "#" not in f["url"]][:2]
    with served(SearchHandler, listed={still["url"]}) as search:
        provider = SearxngProvider(f"http://127.0.0.1:{search.server_address[1]}")
        checks = recheck_delistings(ctx, provider, now() + timedelta(days=8))
    assert {(c.url, c.state) for c in checks} >= {
        (still["url"], "still_listed"), (gone["url"], "delisted"),
    }  # fmt: skip

    # The finding's timeline shows each step, in order, with who and what was answered.
    steps = finding_timeline(ctx, gone["_id"])
    kinds = [s.kind for s in steps]
    assert kinds[0] == "found"
    for kind in ("alerted", "reviewed", "notice_sent", "delisting_requested",
                 "delisting_checked"):  # fmt: skip
        assert kind in kinds, kinds
    assert kinds.index("alerted") < kinds.index("reviewed") < kinds.index("notice_sent")
    assert kinds.index("notice_sent") < kinds.index("delisting_requested")
    alerts = [s for s in steps if s.kind == "alerted"]
    assert {(s.by, s.outcome) for s in alerts} == {("desk", "delivered"), ("hook", "delivered")}
    [noticed] = [s for s in steps if s.kind == "notice_sent"]
    assert noticed.to == [REGISTRAR_ABUSE] and noticed.answer.startswith("250")
    assert noticed.detail == sent.message_id and noticed.by == "rui"
    assert steps[-1].kind == "delisting_checked" and steps[-1].outcome == "delisted"

    # The funnel: the domain's copies found, all confirmed and notified, none removed yet.
    [row] = [r for r in funnel(ctx, "domain") if r.key == DOMAIN]
    assert (row.found, row.confirmed, row.notified, row.removed) == (len(ours),) * 3 + (0,)
