"""Scheduled runs: a campaign's cron schedule (UTC) starts its runs, once per fire time."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from bson import ObjectId
from croniter import croniter

from ..context import Context
from .dispatch import trigger_run
from .lock import CampaignBusy

log = logging.getLogger(__name__)


def due_at(schedule: str, now: datetime) -> datetime:
    """The latest time at or before ``now`` when the cron schedule fires (UTC)."""
    # croniter's get_prev is strictly before its start: start a second later.
    return croniter(schedule, now + timedelta(seconds=1)).get_prev(datetime)


def run_due_campaigns(ctx: Context, now: datetime | None = None) -> list[ObjectId]:
    """Start every enabled campaign whose schedule fired since it last did; one tick.

    A fire time is claimed atomically on the campaign document, so schedulers running
    side by side start it once; missed fire times (scheduler down) yield one catch-up
    run. A campaign still running from its last fire is skipped. Returns the started runs.
    """
    now = now or datetime.now(UTC)
    started = []
    for doc in ctx.db.campaigns.find({"enabled": True, "schedule": {"$ne": None}}):
        fire = due_at(doc["schedule"], now)
        last = doc.get("last_scheduled_at")
        if fire <= (last or doc["created_at"]):
            continue
        claimed = ctx.db.campaigns.find_one_and_update(
            {"_id": doc["_id"], "last_scheduled_at": last}, {"$set": {"last_scheduled_at": fire}}
        )
        if claimed is None:
            continue  # another scheduler took this fire time
        try:
            started.append(trigger_run(ctx, doc["name"], trigger="schedule"))
        except CampaignBusy as busy:
            log.warning("scheduled run of %s skipped: %s", doc["name"], busy)
    return started
