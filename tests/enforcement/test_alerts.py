"""Alerts through a real SMTP relay and a real webhook receiver on loopback: the right
findings, once each, signed, retried while the receiver is down, given up in the end."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from datetime import timedelta

import pytest
from click.testing import CliRunner

from copytrack.cli import main
from tests.enforcement.helpers import store_finding
from tests.enforcement.servers import MailBox, webhook_receiver
from tracker.context import Context
from tracker.core.times import now
from tracker.enforcement.alerts import send_due_alerts
from tracker.enforcement.deliveries import deliver_due, list_deliveries
from tracker.enforcement.subscriptions import SubscriptionError, add_subscription


@pytest.fixture
def mail_ctx(sender_context: Callable[[], Context]) -> Context:
    return sender_context()


def test_an_email_subscription_gets_each_new_finding_once(
    mail_ctx: Context, relay: MailBox
) -> None:
    add_subscription(mail_ctx, "desk", emails=["desk@press.example"], lang="zh")
    store_finding(mail_ctx, "http://pirate.test/a.html", "W-1")
    store_finding(mail_ctx, "http://pirate.test/b.html", "W-2")
    queued, attempted = send_due_alerts(mail_ctx)
    assert (queued.deliveries, queued.findings) == (1, 2)
    assert [a.state for a in attempted] == ["delivered"]
    [mail] = relay.mails
    assert mail.recipients == ["desk@press.example"]
    assert mail.sender == "rights@press.example"
    assert "http://pirate.test/a.html" in mail.text and "http://pirate.test/b.html" in mail.text
    assert "新发现" in mail.text and "desk" in str(mail.message["Subject"])

    assert send_due_alerts(mail_ctx)[0].deliveries == 0  # nothing new: nothing sent
    store_finding(mail_ctx, "http://pirate.test/c.html", "W-3")
    send_due_alerts(mail_ctx)
    assert len(relay.mails) == 2
    assert "c.html" in relay.mails[1].text and "a.html" not in relay.mails[1].text
    [log] = list_deliveries(mail_ctx, subscription="desk")[:1]
    assert log["state"] == "delivered" and log["answer"].startswith("250")


def test_a_subscription_takes_only_what_its_filters_name(mail_ctx: Context, relay: MailBox) -> None:
    add_subscription(mail_ctx, "big copies", emails=["desk@press.example"], min_chars=1000,
                     domain="pirate.test")  # fmt: skip
    store_finding(mail_ctx, "http://pirate.test/small.html", copied_chars=200)
    store_finding(mail_ctx, "http://pirate.test/large.html", copied_chars=5000)
    store_finding(mail_ctx, "http://other.test/large.html", copied_chars=5000)
    send_due_alerts(mail_ctx)
    [mail] = relay.mails
    assert "pirate.test/large.html" in mail.text
    assert "small.html" not in mail.text and "other.test" not in mail.text


def test_a_daily_digest_waits_a_day_between_two_mails(mail_ctx: Context, relay: MailBox) -> None:
    add_subscription(mail_ctx, "daily", emails=["desk@press.example"], every="day")
    start = now()
    store_finding(mail_ctx, "http://pirate.test/1.html")
    send_due_alerts(mail_ctx, start)
    store_finding(mail_ctx, "http://pirate.test/2.html")
    send_due_alerts(mail_ctx, start + timedelta(hours=5))
    assert len(relay.mails) == 1
    send_due_alerts(mail_ctx, start + timedelta(hours=24, seconds=1))
    assert len(relay.mails) == 2 and "2.html" in relay.mails[1].text


def test_a_webhook_is_signed_and_lists_the_findings(ctx: Context) -> None:
    with webhook_receiver() as receiver:
        add_subscription(ctx, "hook", webhook=receiver.url, secret="s3cret-hook")
        first = store_finding(ctx, "http://pirate.test/x.html", "W-9")
        send_due_alerts(ctx)
        [(headers, body)] = receiver.received
    timestamp = headers["X-Copytrack-Timestamp"]
    assert abs(int(timestamp) - now().timestamp()) < 3600
    expected = hmac.new(b"s3cret-hook", f"{timestamp}.".encode() + body, hashlib.sha256)
    assert headers["X-Copytrack-Signature"] == "sha256=" + expected.hexdigest()
    [finding] = json.loads(body)["findings"]
    assert finding["id"] == str(first) and finding["master_id"] == "W-9"
    assert finding["url"] == "http://pirate.test/x.html"


def test_a_webhook_down_is_retried_until_it_answers(ctx: Context) -> None:
    with webhook_receiver(status=503) as receiver:
        add_subscription(ctx, "hook", webhook=receiver.url, secret="k")
        store_finding(ctx, "http://pirate.test/x.html")
        start = now()
        _, [first] = send_due_alerts(ctx, start)
        assert first.state == "pending" and "503" in first.answer
        assert deliver_due(ctx, None, start + timedelta(seconds=10)) == []  # backing off
        receiver.status = 200
        [second] = deliver_due(ctx, None, start + timedelta(minutes=2))
        assert second.state == "delivered"
        assert len(receiver.received) == 2
        assert receiver.received[0][1] == receiver.received[1][1]  # the same alert again
    [log] = list_deliveries(ctx)
    assert [a["ok"] for a in log["attempts"]] == [False, True]


def test_a_webhook_that_never_answers_is_given_up_and_shown_failed(ctx: Context) -> None:
    with webhook_receiver(status=500) as receiver:
        add_subscription(ctx, "hook", webhook=receiver.url, secret="k")
        store_finding(ctx, "http://pirate.test/x.html")
        start = now()
        send_due_alerts(ctx, start)
        at = start
        for _ in range(40):
            at += timedelta(hours=1)
            deliver_due(ctx, None, at)
    [log] = list_deliveries(ctx)
    assert log["state"] == "failed" and "HTTP 500" in log["answer"]
    assert log["failed_at"] - start <= timedelta(hours=25)
    assert 5 < len(log["attempts"]) < 40


def test_secrets_are_never_shown_and_bad_subscriptions_say_why(ctx: Context) -> None:
    runner = CliRunner()
    added = runner.invoke(main, ["alert", "add", "hook", "--webhook", "http://127.0.0.1:9/h",
                                 "--secret", "top-secret-value", "--every", "hour"])  # fmt: skip
    assert added.exit_code == 0, added.output
    listed = runner.invoke(main, ["alert", "list"])
    assert "hook" in listed.output and "top-secret-value" not in listed.output
    both = runner.invoke(main, ["alert", "add", "x", "--email", "a@b.example",
                                "--webhook", "http://127.0.0.1:9/h", "--secret", "k"])  # fmt: skip
    assert both.exit_code == 1 and "not both" in both.output
    assert len(both.output.strip().splitlines()) == 1
    with pytest.raises(SubscriptionError, match="needs a secret"):
        add_subscription(ctx, "nosecret", webhook="http://127.0.0.1:9/h")
    with pytest.raises(SubscriptionError, match="exists"):
        add_subscription(ctx, "hook", emails=["a@b.example"])
    removed = runner.invoke(main, ["alert", "remove", "hook"])
    assert removed.exit_code == 0
    assert runner.invoke(main, ["alert", "remove", "hook"]).exit_code == 1
