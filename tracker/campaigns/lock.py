"""The campaign lock in Redis: a campaign never runs twice at once.

``SET NX PX`` takes it for a run; the crawl process renews it while it works (with the
run's heartbeat) and the run's end drops it; only the run holding it renews or drops it.
"""

from __future__ import annotations

from datetime import timedelta

from bson import ObjectId

from ..context import Context

LOCK_TTL = timedelta(minutes=2)

_COMPARE_AND_PEXPIRE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""
_COMPARE_AND_DELETE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class CampaignBusy(RuntimeError):
    """The campaign is already running; ``run_id`` is that run (None if unknown)."""

    def __init__(self, name: str, run_id: str | None) -> None:
        super().__init__(f"campaign {name!r} is already running (run {run_id or 'unknown'})")
        self.run_id = run_id


def take_lock(ctx: Context, name: str, run_id: ObjectId, ttl: timedelta) -> bool:
    """Take the campaign's lock for the run, for ``ttl``; False if another run holds it."""
    px = int(ttl.total_seconds() * 1000)
    return bool(ctx.redis.set(ctx.keys.campaign_lock(name), str(run_id), nx=True, px=px))


def lock_holder(ctx: Context, name: str) -> str | None:
    """The id of the run holding the campaign's lock, None when it is free."""
    holder = ctx.redis.get(ctx.keys.campaign_lock(name))
    return holder.decode() if isinstance(holder, bytes) else holder


def renew_lock(ctx: Context, name: str, run_id: ObjectId) -> bool:
    """Extend the run's hold on the campaign by LOCK_TTL; False if it lost the lock."""
    ttl = int(LOCK_TTL.total_seconds() * 1000)
    key = ctx.keys.campaign_lock(name)
    return bool(ctx.redis.eval(_COMPARE_AND_PEXPIRE, 1, key, str(run_id), ttl))


def release_lock(ctx: Context, name: str, run_id: ObjectId) -> None:
    """Drop the campaign's lock if this run still holds it."""
    ctx.redis.eval(_COMPARE_AND_DELETE, 1, ctx.keys.campaign_lock(name), str(run_id))
