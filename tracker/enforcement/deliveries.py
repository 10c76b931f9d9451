"""The delivery log: every alert copytrack sends — to whom, what, when, each attempt and
what the other side answered — and the retries of those that did not go through.

A delivery is queued with its content fixed (the webhook's JSON body, the e-mail's subject
and text), then attempted: one that fails is tried again after a backoff (1 min, 2, 4 …,
at most an hour apart) until it goes through or ``GIVE_UP`` has passed since it was
queued; then it is ``failed``, and the log shows it so.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId

from ..context import Context
from ..core.times import now as utc_now
from ..findings.notices import notice_sender
from .smtp import Relay, SmtpError, build_message, send_mail
from .webhooks import WebhookError, post

__all__ = [
    "DELIVERED",
    "FAILED",
    "PENDING",
    "Attempted",
    "deliver_due",
    "deliveries_page",
    "list_deliveries",
    "queue_delivery",
]

PENDING, DELIVERED, FAILED = "pending", "delivered", "failed"
STATE_LABELS = {PENDING: "Waiting to be retried", DELIVERED: "Delivered", FAILED: "Failed"}
EMAIL, WEBHOOK = "email", "webhook"
FIRST_RETRY = timedelta(minutes=1)
LONGEST_WAIT = timedelta(hours=1)
#: A delivery not through this long after it was queued is given up.
GIVE_UP = timedelta(hours=24)
#: Deliveries attempted in one go (one scheduler tick).
ATTEMPT_BATCH = 50


@dataclass(frozen=True)
class Attempted:
    """One attempt: the delivery, whether it went through, and the answer or the error."""

    delivery_id: ObjectId
    state: str
    answer: str


def queue_delivery(
    ctx: Context,
    subscription: dict[str, Any],
    *,
    subject: str,
    text: str,
    payload: dict[str, Any],
    finding_ids: list[ObjectId],
    run_ids: list[ObjectId],
    events: dict[str, int],
    at: datetime,
) -> dict[str, Any]:
    """Record a delivery to make (attempted by ``deliver_due``); returns it."""
    channel = WEBHOOK if subscription.get("webhook") else EMAIL
    doc: dict[str, Any] = {
        "subscription_id": subscription["_id"],
        "subscription": subscription["name"],
        "channel": channel,
        "to": [subscription["webhook"]] if channel == WEBHOOK else subscription["emails"],
        "lang": subscription.get("lang", "en"),
        "subject": subject,
        "text": text,
        "body": json.dumps(payload, ensure_ascii=False, sort_keys=True, default=str),
        "finding_ids": finding_ids,
        "run_ids": run_ids,
        "events": events,
        "state": PENDING,
        "attempts": [],
        "created_at": at,
        "next_attempt_at": at,
    }
    doc["_id"] = ctx.db.deliveries.insert_one(doc).inserted_id
    return doc


def _wait(attempts: int) -> timedelta:
    return min(FIRST_RETRY * 2 ** max(attempts - 1, 0), LONGEST_WAIT)


#: Sends one delivery (given its subscription, with the secret), returning the answer.
Transport = Callable[[dict[str, Any], dict[str, Any]], str]


def _email_transport(ctx: Context, relay: Relay | None) -> Transport:
    def send(delivery: dict[str, Any], subscription: dict[str, Any]) -> str:
        if relay is None:
            raise SmtpError("no mail relay: set COPYTRACK_SMTP_URL (docs/operations.md)")
        sender = notice_sender(ctx)
        if not sender["email"]:
            raise SmtpError("no sender: an administrator sets the e-mail in Settings first")
        message = build_message(
            sender["email"], delivery["to"], delivery["subject"], delivery["text"],
            sender_name=sender["organization"],
        )  # fmt: skip
        sent = send_mail(relay, message)
        refused = "; ".join(f"{a}: {r}" for a, r in sent.refused.items())
        return sent.answer + (f" (refused {refused})" if refused else "")

    return send


def _webhook_send(delivery: dict[str, Any], subscription: dict[str, Any]) -> str:
    body = delivery["body"].encode("utf-8")
    timestamp = int(utc_now().timestamp())
    return post(delivery["to"][0], subscription["secret"], body, timestamp, str(delivery["_id"]))


def attempt(ctx: Context, delivery: dict[str, Any], relay: Relay | None, at: datetime) -> Attempted:
    """Try one delivery now and record the attempt: delivered, to be retried, or failed."""
    subscription = ctx.db.subscriptions.find_one({"_id": delivery["subscription_id"]})
    try:
        if subscription is None:
            raise WebhookError("the subscription was removed before it could be delivered")
        send = _webhook_send if delivery["channel"] == WEBHOOK else _email_transport(ctx, relay)
        answer, ok = send(delivery, subscription), True
    except (SmtpError, WebhookError) as err:
        answer, ok = str(err), False
    tries = len(delivery.get("attempts", [])) + 1
    record = {"at": at, "ok": ok, "answer": answer[:500]}
    update: dict[str, Any] = {"$push": {"attempts": record}, "$set": {"answer": answer[:500]}}
    if ok:
        state = DELIVERED
        update["$set"].update(state=DELIVERED, delivered_at=at)
        update["$unset"] = {"next_attempt_at": ""}
    elif subscription is None or at + _wait(tries) > delivery["created_at"] + GIVE_UP:
        state = FAILED
        update["$set"].update(state=FAILED, failed_at=at)
        update["$unset"] = {"next_attempt_at": ""}
    else:
        state = PENDING
        update["$set"]["next_attempt_at"] = at + _wait(tries)
    ctx.db.deliveries.update_one({"_id": delivery["_id"], "state": PENDING}, update)
    return Attempted(delivery["_id"], state, answer)


def deliver_due(
    ctx: Context, relay: Relay | None, at: datetime | None = None, limit: int = ATTEMPT_BATCH
) -> list[Attempted]:
    """Attempt the deliveries whose time has come (new ones and retries), oldest first."""
    at = at or utc_now()
    due = ctx.db.deliveries.find({"next_attempt_at": {"$lte": at}, "state": PENDING})
    return [attempt(ctx, d, relay, at) for d in due.sort("next_attempt_at", 1).limit(limit)]


def list_deliveries(
    ctx: Context, limit: int = 100, subscription: str | None = None
) -> list[dict[str, Any]]:
    """The delivery log, newest first (of one subscription when named)."""
    query = {"subscription": subscription} if subscription else {}
    return list(ctx.db.deliveries.find(query).sort("created_at", -1).limit(limit))


def deliveries_page(
    ctx: Context, page: int, per_page: int, subscription: str | None = None,
    state: str | None = None,
) -> tuple[int, list[dict[str, Any]]]:  # fmt: skip
    """One page of the delivery log, newest first, and how many deliveries it has in all
    (of one subscription and in one state when given)."""
    query: dict[str, Any] = {}
    if subscription:
        query["subscription"] = subscription
    if state:
        query["state"] = state
    found = ctx.db.deliveries.find(query).sort("created_at", -1)
    items = list(found.skip((page - 1) * per_page).limit(per_page))
    return ctx.db.deliveries.count_documents(query), items


def deliveries_of(ctx: Context, finding_id: ObjectId) -> list[dict[str, Any]]:
    """The alerts that named a finding, oldest first."""
    return list(ctx.db.deliveries.find({"finding_ids": finding_id}).sort("created_at", 1))
