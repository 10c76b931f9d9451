"""Notices to the right address: RDAP through bootstrap files on a local registry, the
recipients copytrack proposes, and notices e-mailed through a local relay and recorded."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.enforcement.helpers import store_finding
from tests.enforcement.servers import MailBox, rdap_registry
from tracker.context import Context
from tracker.core.config import Settings
from tracker.enforcement.recipients import HOSTING, REGISTRAR, SITE, propose_recipients
from tracker.enforcement.sending import NoticeNotSent, build_domain_notice, send_notice
from tracker.findings import build_notice, set_status
from tracker.findings.workflow import WorkflowError
from tracker.masters.generation import open_ready

SITE_PAGE = b'<html><body>copied text <a href="mailto:webmaster@pirate.test">contact</a></body>'


@pytest.fixture
def registry(tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator:
    with rdap_registry(
        domains={"pirate.test": "abuse@registrar.test"},
        networks={"127.0.0.5": "noc@hosting.test"},
    ) as server:
        monkeypatch.setenv("COPYTRACK_RDAP_BOOTSTRAP_URL", server.bootstrap_url)
        yield server


@pytest.fixture
def notice_ctx(registry, sender_context: Callable[[], Context]) -> Context:  # type: ignore[no-untyped-def]
    return sender_context()


def confirmed(ctx: Context, url: str, work: str = "W-1", **extra) -> object:  # type: ignore[no-untyped-def]
    finding_id = store_finding(ctx, url, work, ip="127.0.0.5", raw=SITE_PAGE, **extra)
    set_status(ctx, finding_id, "confirmed", "reviewer")
    return finding_id


def test_the_registrar_the_hosting_network_and_the_site_are_proposed(
    notice_ctx: Context, registry
) -> None:  # type: ignore[no-untyped-def]
    finding_id = confirmed(notice_ctx, "http://www.pirate.test/a.html")
    finding = notice_ctx.db.findings.find_one({"_id": finding_id})
    proposed, _ = propose_recipients(notice_ctx, [finding])
    assert [(r.email, r.source) for r in proposed] == [
        ("abuse@registrar.test", REGISTRAR),
        ("noc@hosting.test", HOSTING),
        ("webmaster@pirate.test", SITE),
    ]
    kept = notice_ctx.db.findings.find_one({"_id": finding_id})["rdap"]
    assert [(a["kind"], a["query"], a["abuse"]) for a in kept] == [
        ("domain", "pirate.test", ["abuse@registrar.test"]),
        ("ip", "127.0.0.5", ["noc@hosting.test"]),
    ]
    asked = len(registry.asked)
    propose_recipients(notice_ctx, [finding])
    assert len(registry.asked) == asked  # the bootstrap files and the answers are cached


def test_a_registry_that_cannot_be_reached_is_named_not_raised(
    tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COPYTRACK_RDAP_BOOTSTRAP_URL", "http://127.0.0.1:9/bootstrap/")
    ctx = open_ready(Settings.from_env())
    finding_id = store_finding(ctx, "http://pirate.test/a.html", ip="127.0.0.5", raw=SITE_PAGE)
    proposed, answers = propose_recipients(ctx, [ctx.db.findings.find_one({"_id": finding_id})])
    assert [r.email for r in proposed] == ["webmaster@pirate.test"]
    assert all("cannot be reached" in a.error for a in answers)
    ctx.close()


def test_a_bulk_notice_lists_every_confirmed_url_and_starts_the_deadlines(
    notice_ctx: Context, relay: MailBox
) -> None:
    first = confirmed(notice_ctx, "http://pirate.test/a.html", "W-1")
    second = confirmed(notice_ctx, "http://pirate.test/b.html", "W-2")
    store_finding(notice_ctx, "http://pirate.test/unconfirmed.html", "W-3")
    notice = build_domain_notice(notice_ctx, "pirate.test", "zh")
    assert notice.finding_ids == [first, second]
    sent = send_notice(
        notice_ctx, notice.finding_ids, lang="zh", subject=notice.subject, body=notice.body,
        recipients=["abuse@registrar.test"], by="reviewer",
    )  # fmt: skip
    [mail] = relay.mails
    assert mail.recipients == ["abuse@registrar.test"]
    assert mail.message["Message-ID"] == sent.message_id
    assert mail.message["Reply-To"] == "rights@press.example"
    assert "pirate.test/a.html" in mail.text and "pirate.test/b.html" in mail.text
    assert "unconfirmed" not in mail.text
    for finding_id in (first, second):
        finding = notice_ctx.db.findings.find_one({"_id": finding_id})
        assert finding["status"] == "notice_sent" and finding["notice_deadline"] > sent.at
        [record] = notice_ctx.db.notices.find({"finding_id": finding_id})
        assert record["delivery"]["message_id"] == sent.message_id
        assert record["delivery"]["answer"].startswith("250")


def test_a_refused_recipient_shows_and_a_refused_notice_is_not_marked_sent(
    notice_ctx: Context, relay: MailBox
) -> None:
    relay.refuse.update({"gone@pirate.test", "old@pirate.test"})
    finding_id = confirmed(notice_ctx, "http://pirate.test/a.html")
    notice = build_notice(notice_ctx, finding_id, "en")
    args = {"lang": "en", "subject": notice.subject, "body": notice.body, "by": "reviewer"}
    with pytest.raises(NoticeNotSent, match="refused every recipient"):
        send_notice(notice_ctx, [finding_id], recipients=["gone@pirate.test"], **args)
    finding = notice_ctx.db.findings.find_one({"_id": finding_id})
    assert finding["status"] == "confirmed"
    assert "550" in finding["notice_failures"][0]["error"]
    sent = send_notice(notice_ctx, [finding_id],
                       recipients=["old@pirate.test", "noc@hosting.test"], **args)  # fmt: skip
    assert sent.refused == {"old@pirate.test": "550 5.1.1 no such mailbox here"}
    [record] = notice_ctx.db.notices.find({"finding_id": finding_id})
    assert record["recipient"] == "noc@hosting.test"
    assert "old@pirate.test" in record["delivery"]["refused"]


def test_a_notice_needs_confirmed_findings_and_real_addresses(notice_ctx: Context) -> None:
    new = store_finding(notice_ctx, "http://pirate.test/new.html")
    with pytest.raises(WorkflowError, match="confirmed"):
        send_notice(notice_ctx, [new], lang="en", subject="s", body="b",
                    recipients=["a@b.example"], by="r")  # fmt: skip
    with pytest.raises(WorkflowError, match="not an e-mail address"):
        send_notice(notice_ctx, [new], lang="en", subject="s", body="b",
                    recipients=["nobody"], by="r")  # fmt: skip
    with pytest.raises(WorkflowError, match="no confirmed finding"):
        build_domain_notice(notice_ctx, "pirate.test", "en")
