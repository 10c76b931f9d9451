"""Alerts: the events each subscription asks for, gathered and queued as deliveries.

Events: findings first seen, confirmed by a reviewer, past their notice's deadline, still
there after it, and crawl runs that failed — since the subscription was made, narrowed by
its filters. A subscription ``now`` gets them at the next look (every scheduler tick),
``hour`` and ``day`` at most once an hour or a day, as one digest. Each finding (and run)
is marked with the subscription and event it was alerted for, so no finding is alerted
twice for one event to one subscription.

Alerts go only to the publisher's own subscribers; nothing here writes to a third party.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId

from ..context import Context
from ..core.store import changed
from ..core.times import now as utc_now
from ..findings.deadlines import stage_query
from ..findings.status import CONFIRMED as CONFIRMED_STATUS
from ..findings.status import NOT_COPIES
from .deliveries import Attempted, deliver_due, queue_delivery
from .smtp import Relay, SmtpError, relay_from_settings
from .subscriptions import CONFIRMED, EVENT_LABELS, FREQUENCIES, NEW, RUN_FAILED

__all__ = [
    "ALERTED",
    "AlertRun",
    "payload_of",
    "queue_alerts_for",
    "queue_due_alerts",
    "send_due_alerts",
]

#: Set on findings and runs: the keys ``<subscription id>:<event>`` they were alerted for.
ALERTED = "alerted"
#: Findings one delivery lists at most; more wait for the next one.
DELIVERY_FINDINGS = 200
_FIELDS = {
    "url": 1, "master_id": 1, "master_external_id": 1, "master_title": 1, "domain": 1,
    "score": 1, "copied_chars": 1, "status": 1, "first_seen": 1, "campaign": 1,
}  # fmt: skip

SUBJECTS = {
    "en": "copytrack: {count} alert(s) for {name}",
    "zh": "copytrack：「{name}」有 {count} 条提醒",
}
EVENT_TITLES_ZH = {
    "new": "新发现",
    "confirmed": "已确认的发现",
    "overdue": "已过删除期限的通知",
    "still_there": "期限后仍在的复制",
    "run_failed": "失败的抓取",
}


@dataclass(frozen=True)
class AlertRun:
    """Deliveries queued by one look, and the findings and runs they name."""

    deliveries: int
    findings: int
    runs: int


def _key(subscription: dict[str, Any], event: str) -> str:
    return f"{subscription['_id']}:{event}"


def _filters(subscription: dict[str, Any]) -> dict[str, Any]:
    query: dict[str, Any] = {"status": {"$nin": list(NOT_COPIES)}}
    if subscription.get("campaign"):
        query["campaign"] = subscription["campaign"]
    if subscription.get("works"):
        query["master_external_id"] = {"$in": subscription["works"]}
    if subscription.get("domain"):
        query["domain"] = subscription["domain"]
    if subscription.get("min_score") is not None:
        query["score"] = {"$gte": subscription["min_score"]}
    if subscription.get("min_chars") is not None:
        query["copied_chars"] = {"$gte": subscription["min_chars"]}
    return query


def _event_query(event: str, since: datetime, at: datetime) -> dict[str, Any]:
    if event == NEW:
        return {"first_seen": {"$gte": since}}
    if event == CONFIRMED:
        return {"history": {"$elemMatch": {"status": CONFIRMED_STATUS, "at": {"$gte": since}}}}
    return stage_query(event, at)  # overdue, still_there: where the notice stands now


def _findings(
    ctx: Context, subscription: dict[str, Any], event: str, at: datetime, room: int
) -> list[dict[str, Any]]:
    # An event's own status condition (a notice's stage) replaces the filters' one.
    query = {
        **_filters(subscription),
        **_event_query(event, subscription["created_at"], at),
        ALERTED: {"$ne": _key(subscription, event)},
    }
    return list(ctx.db.findings.find(query, _FIELDS).sort("first_seen", 1).limit(room))


def _failed_runs(ctx: Context, subscription: dict[str, Any]) -> list[dict[str, Any]]:
    query: dict[str, Any] = {
        "state": "failed",
        "finished_at": {"$gte": subscription["created_at"]},
        ALERTED: {"$ne": _key(subscription, RUN_FAILED)},
    }
    if subscription.get("campaign"):
        query["campaign"] = subscription["campaign"]
    fields = {"campaign": 1, "started_at": 1, "finished_at": 1, "error": 1}
    return list(ctx.db.runs.find(query, fields).limit(DELIVERY_FINDINGS))


def _finding_out(finding: dict[str, Any], event: str) -> dict[str, Any]:
    return {
        "id": str(finding["_id"]),
        "event": event,
        "url": finding["url"],
        "master_id": finding.get("master_external_id"),
        "master_title": finding.get("master_title"),
        "domain": finding.get("domain"),
        "score": finding.get("score"),
        "copied_chars": finding.get("copied_chars"),
        "status": finding.get("status"),
        "campaign": finding.get("campaign"),
    }


def _text(
    subscription: dict[str, Any], items: list[dict[str, Any]], runs: list[dict[str, Any]]
) -> str:
    zh = subscription.get("lang") == "zh"
    lines = []
    for event in EVENT_LABELS:
        listed = [i for i in items if i["event"] == event]
        if event == RUN_FAILED:
            listed = [{"url": r["campaign"], "error": r.get("error") or ""} for r in runs]
        if not listed:
            continue
        title = EVENT_TITLES_ZH[event] if zh else EVENT_LABELS[event]
        lines += [f"{title} ({len(listed)})", ""]
        for item in listed:
            if event == RUN_FAILED:
                lines.append(f"  - {item['url']}: {item['error']}")
                continue
            score = f"{item['score']:.0%}" if isinstance(item.get("score"), float) else "-"
            chars = item.get("copied_chars") or 0
            lines.append(
                f"  - {item['url']}\n    {item.get('master_title') or item['master_id']} "
                f"({item['master_id']})  {score}  "
                + (f"复制 {chars} 字" if zh else f"{chars} characters copied")
            )
        lines.append("")
    footer = (
        "此邮件由 copytrack 按订阅「{name}」发送；在管理后台的“订阅”页面可修改或退订。"
        if zh
        else 'Sent by copytrack for the subscription "{name}"; change or remove it on the '
        "admin's Subscriptions page."
    )
    return "\n".join(lines) + footer.format(name=subscription["name"]) + "\n"


def _due(subscription: dict[str, Any], at: datetime) -> bool:
    last = subscription.get("last_batch_at")
    period = timedelta(seconds=FREQUENCIES.get(subscription.get("every", "now"), 0))
    return last is None or at - last >= period


def queue_alerts_for(
    ctx: Context, subscription: dict[str, Any], at: datetime
) -> dict[str, Any] | None:
    """Gather the subscription's events not alerted yet and queue one delivery of them;
    the delivery, or None when there is nothing to tell."""
    items: list[dict[str, Any]] = []
    marked: dict[str, list[ObjectId]] = {}
    for event in subscription["when"]:
        if event == RUN_FAILED:
            continue
        room = DELIVERY_FINDINGS - len(items)
        if room <= 0:
            break
        found = _findings(ctx, subscription, event, at, room)
        items += [_finding_out(f, event) for f in found]
        marked[event] = [f["_id"] for f in found]
    runs = _failed_runs(ctx, subscription) if RUN_FAILED in subscription["when"] else []
    if not items and not runs:
        return None
    events = {e: len(ids) for e, ids in marked.items() if ids}
    if runs:
        events[RUN_FAILED] = len(runs)
    payload = {
        "subscription": subscription["name"],
        "sent_at": at.isoformat(),
        "events": events,
        "findings": items,
        "runs": [
            {"id": str(r["_id"]), "campaign": r["campaign"], "error": r.get("error") or ""}
            for r in runs
        ],
    }
    lang = "zh" if subscription.get("lang") == "zh" else "en"
    delivery = queue_delivery(
        ctx,
        subscription,
        subject=SUBJECTS[lang].format(count=len(items) + len(runs), name=subscription["name"]),
        text=_text(subscription, items, runs),
        payload=payload,
        finding_ids=list(dict.fromkeys(i for ids in marked.values() for i in ids)),
        run_ids=[r["_id"] for r in runs],
        events=events,
        at=at,
    )
    for event, ids in marked.items():
        if ids:
            ctx.db.findings.update_many(
                {"_id": {"$in": ids}}, changed({"$addToSet": {ALERTED: _key(subscription, event)}})
            )
    if runs:
        ctx.db.runs.update_many(
            {"_id": {"$in": [r["_id"] for r in runs]}},
            {"$addToSet": {ALERTED: _key(subscription, RUN_FAILED)}},
        )
    ctx.db.subscriptions.update_one({"_id": subscription["_id"]}, {"$set": {"last_batch_at": at}})
    return delivery


def queue_due_alerts(ctx: Context, at: datetime | None = None) -> AlertRun:
    """Queue a delivery for every subscription that is due and has something to tell."""
    at = at or utc_now()
    deliveries = findings = runs = 0
    for subscription in ctx.db.subscriptions.find():
        if not _due(subscription, at):
            continue
        delivery = queue_alerts_for(ctx, subscription, at)
        if delivery is not None:
            deliveries += 1
            findings += len(delivery["finding_ids"])
            runs += len(delivery["run_ids"])
    return AlertRun(deliveries, findings, runs)


def payload_of(delivery: dict[str, Any]) -> dict[str, Any]:
    """The JSON body a delivery carries (what a webhook receives)."""
    return json.loads(delivery["body"])


def relay_or_none(ctx: Context) -> Relay | None:
    """The configured mail relay, or None (e-mail deliveries then fail with the reason)."""
    try:
        return relay_from_settings(ctx.settings)
    except SmtpError:
        return None


def send_due_alerts(ctx: Context, at: datetime | None = None) -> tuple[AlertRun, list[Attempted]]:
    """One look: queue the subscriptions' due alerts, then attempt every delivery whose
    time has come (new ones and retries)."""
    at = at or utc_now()
    queued = queue_due_alerts(ctx, at)
    return queued, deliver_due(ctx, relay_or_none(ctx), at)
