"""The admin's enforcement pages on real servers: a bulk notice e-mailed from the admin to
the abuse contact a local RDAP registry names (through a local relay), the finding's
timeline, subscriptions whose secret never comes back, the delivery log, the funnel and
its export, a delisting export; a viewer may read but not send."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.admin_seed import PASSWORD, client, login
from tests.enforcement.helpers import store_finding
from tests.enforcement.servers import MailBox, rdap_registry
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.enforcement.alerts import send_due_alerts
from tracker.findings import set_status

REGISTRAR_ABUSE = "abuse@registrar.test"


@pytest.fixture
def registry(tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    with rdap_registry(domains={"pirate.test": REGISTRAR_ABUSE},
                       networks={"127.0.0.5": "noc@hosting.test"}) as server:  # fmt: skip
        monkeypatch.setenv("COPYTRACK_RDAP_BOOTSTRAP_URL", server.bootstrap_url)
        yield server


@pytest.fixture
def admin_ctx(registry: Any, sender_context: Callable[[], Context]) -> Context:
    ctx = sender_context()
    add_user(ctx, "rui", PASSWORD, "reviewer")
    add_user(ctx, "vic", PASSWORD, "viewer")
    return ctx


def funnel_panel(http: Any) -> list[str]:
    """The dashboard funnel's first row: domain, found, confirmed, notified, removed."""
    panel = http.get("/").text.split('id="funnel"')[1].split("</tbody>")[0]
    return re.findall(r"<td[^>]*>(?:<a [^>]*>)?([^<]*)", panel.split("<tbody>")[1])[:5]


def confirmed(ctx: Context, url: str, work: str) -> Any:
    finding_id = store_finding(ctx, url, work, ip="127.0.0.5", master_coverage=0.8,
                               suspect_coverage=0.6, hits=12)  # fmt: skip
    set_status(ctx, finding_id, "confirmed", "rui")
    return finding_id


def test_a_reviewer_emails_a_domain_notice_and_the_timeline_shows_it(
    admin_ctx: Context, relay: MailBox
) -> None:
    ctx = admin_ctx
    first = confirmed(ctx, "http://pirate.test/a.html", "W-1")
    confirmed(ctx, "http://pirate.test/b.html", "W-2")
    http = client(ctx)
    csrf = login(http, "rui")
    assert funnel_panel(http) == ["pirate.test", "2", "2", "0", "0"]
    form = http.get("/enforcement/notice", params={"domain": "pirate.test", "lang": "en"})
    assert form.status_code == 200
    assert f'value="{REGISTRAR_ABUSE}" checked' in form.text  # proposed from RDAP
    assert "noc@hosting.test" in form.text and "http://pirate.test/b.html" in form.text
    ids = [str(i) for i in ctx.db.findings.distinct("_id", {"domain": "pirate.test"})]
    sent = http.post("/enforcement/notice", data={
        "csrf_token": csrf, "lang": "en", "subject": "Notice", "ids": ids,
        "body": form.text.split('name="body" rows="24" required>')[1].split("</textarea>")[0],
        "to": [REGISTRAR_ABUSE], "more": "legal@pirate.test", "back": f"/findings/{first}",
    }, follow_redirects=False)  # fmt: skip
    assert sent.status_code == 303 and sent.headers["location"] == f"/findings/{first}"
    [mail] = relay.mails
    assert sorted(mail.recipients) == [REGISTRAR_ABUSE, "legal@pirate.test"]
    assert "http://pirate.test/a.html" in mail.text and "http://pirate.test/b.html" in mail.text
    page = http.get(f"/findings/{first}").text
    timeline = page.split('id="enforcement-timeline"')[1].split("</section>")[0]
    assert "Found" in timeline and "Notice sent" in timeline and "250" in timeline
    assert REGISTRAR_ABUSE in timeline and "Notice e-mailed to" in page

    # The funnel counts both as notified (the dashboard's panel at once, not a minute
    # later); its CSV says so; a delisting export lists them.
    assert funnel_panel(http) == ["pirate.test", "2", "2", "2", "0"]
    assert "pirate.test" in http.get("/enforcement").text
    rows = list(
        csv.DictReader(io.StringIO(http.get("/enforcement/funnel.csv").text.lstrip("\ufeff")))
    )
    assert [
        (r["domain"], r["found"], r["confirmed"], r["notified"], r["removed"]) for r in rows
    ] == [("pirate.test", "2", "2", "2", "0")]
    google = http.get("/enforcement/delisting.csv", params={"engine": "google",
                                                           "domain": "pirate.test"})  # fmt: skip
    listed = csv.DictReader(io.StringIO(google.text.lstrip("\ufeff")))
    assert sorted(r["infringing_url"] for r in listed) == [
        "http://pirate.test/a.html", "http://pirate.test/b.html",
    ]  # fmt: skip
    assert "Delisting requested" in http.get(f"/findings/{first}").text


def test_subscriptions_keep_their_secret_and_the_log_shows_deliveries(
    admin_ctx: Context, relay: MailBox
) -> None:
    ctx = admin_ctx
    http = client(ctx)
    csrf = login(http, "rui")
    add = {"csrf_token": csrf, "name": "hook", "webhook": "http://127.0.0.1:9/h",
           "secret": "hush-hush-secret", "when": ["new", "confirmed"]}  # fmt: skip
    assert http.post("/subscriptions", data=add, follow_redirects=False).status_code == 303
    mail = {"csrf_token": csrf, "name": "desk", "emails": "desk@press.example", "when": ["new"]}
    http.post("/subscriptions", data=mail)
    bad = http.post("/subscriptions", data={**mail, "name": "x", "emails": "nobody"})
    assert "is not an e-mail address" in bad.text
    listing = http.get("/subscriptions").text
    assert "hook" in listing and "desk@press.example" in listing
    assert "hush-hush-secret" not in listing and "(secret set)" in listing

    store_finding(ctx, "http://pirate.test/new.html")
    send_due_alerts(ctx)
    log = http.get("/deliveries").text
    assert "desk@press.example" in log and "Delivered" in log and "250" in log
    assert "hush-hush-secret" not in log and "cannot be reached" in log

    hook = ctx.db.subscriptions.find_one({"name": "hook"})
    form = http.get(f"/subscriptions/{hook['_id']}/edit").text
    assert "http://127.0.0.1:9/h" in form and "hush-hush-secret" not in form
    edit = {"csrf_token": csrf, "name": "hook", "webhook": "http://127.0.0.1:9/other",
            "secret": "", "when": ["confirmed"], "every": "day"}  # fmt: skip
    http.post(f"/subscriptions/{hook['_id']}/edit", data=edit)
    changed = ctx.db.subscriptions.find_one({"_id": hook["_id"]})
    assert (changed["webhook"], changed["when"], changed["every"]) == (
        "http://127.0.0.1:9/other", ["confirmed"], "day",
    )  # fmt: skip
    assert changed["secret"] == "hush-hush-secret"  # kept: the form left it empty
    taken = http.post(f"/subscriptions/{hook['_id']}/edit", data={**edit, "name": "desk"})
    assert "exists already" in taken.text
    gone = http.post(f"/subscriptions/{hook['_id']}/delete", data={"csrf_token": csrf})
    assert gone.status_code == 200 and ctx.db.subscriptions.find_one({"name": "hook"}) is None


def test_a_viewer_reads_but_cannot_send_subscribe_or_export(
    admin_ctx: Context, relay: MailBox
) -> None:
    ctx = admin_ctx
    confirmed(ctx, "http://pirate.test/a.html", "W-1")
    http = client(ctx)
    csrf = login(http, "vic")
    assert http.get("/enforcement").status_code == 200
    assert http.get("/subscriptions").status_code == 200
    assert 'id="add-subscription"' not in http.get("/subscriptions").text
    assert http.get("/enforcement/notice", params={"domain": "pirate.test"}).status_code == 403
    refused = http.post("/enforcement/notice", data={
        "csrf_token": csrf, "lang": "en", "subject": "s", "body": "b", "to": [REGISTRAR_ABUSE],
    })  # fmt: skip
    assert refused.status_code == 403 and relay.mails == []
    add = {"csrf_token": csrf, "name": "desk", "emails": "desk@press.example"}
    assert http.post("/subscriptions", data=add).status_code == 403
    delisting = http.get("/enforcement/delisting.csv", params={"domain": "pirate.test"})
    assert delisting.status_code == 403 and ctx.db.delistings.count_documents({}) == 0
