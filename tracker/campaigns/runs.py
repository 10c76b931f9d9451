"""The run state machine: one run records one crawl of a campaign (MongoDB ``runs``).

    (queued ─►) starting ─► running ─► scanning ─► finished
        └───────────┴──────────┴─────────────────────────────────► failed
        └───────────┴──────────┴──────────┴──────────────────────► cancelled (`stop`)

A run starts with the campaign's lock (`start_run`); each crawl process joins it, renews
the lock and the run's heartbeat, adds its counts, and on exit moves it to ``scanning``.
The run is ``finished`` once every page it stored has been scanned (by Celery workers, or
inline by ``wait_for_run``); ``refresh_run`` checks that, and fails runs whose crawl
process vanished: no heartbeat, or (at once) every process of the run ran on this machine
and is gone, as after a ``kill -9``; a queued run only once it has waited ``QUEUE_WAIT``.
A run after a failed one resumes it: the pages the failed run fetched (``resume_since``)
are not fetched again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from bson import ObjectId
from pymongo import DESCENDING, ReturnDocument
from pymongo.errors import PyMongoError

from ..context import Context, reconnected
from ..core.failures import storage_failed
from ..runtime.processes import pid_space, process_running
from ..runtime.servers import ServerStartError
from ..scanning.pages import needs_scan, scan_mark, scan_page
from .definition import CampaignError
from .lock import LOCK_TTL, CampaignBusy, lock_holder, release_lock, renew_lock, take_lock
from .store import get_campaign

HEARTBEAT_EVERY = timedelta(seconds=15)  # lock renewal and run heartbeat by the crawl process
HEARTBEAT_STALE = timedelta(seconds=90)  # a crawl silent this long has died
# A queued run has no process to heartbeat: it holds the campaign this long (crawlers busy
# with long crawls, or none running yet), then fails, lest a lost task lock it for ever.
QUEUE_WAIT = timedelta(hours=24)
ACTIVE_STATES = ("queued", "starting", "running")
DONE_STATES = ("finished", "failed", "cancelled")
log = logging.getLogger(__name__)
_REASON = re.compile(r"[^a-z0-9_-]+")
_COUNTER_GROUPS = ("pages", "skipped", "failed")
# How long `wait_for_run` rides out servers that fail (as long as a crawl retries storing
# a page, and some), and how often it tries them again meanwhile.
WAIT_FOR_SERVERS = 180.0
WAIT_FOR_SERVERS_POLL = 2.0


def start_run(ctx: Context, name: str, trigger: str = "manual", queued: bool = False) -> ObjectId:
    """Take the campaign's lock and record a run in state ``starting`` (``queued`` when a
    crawler worker is to crawl it); returns its id.

    Raises CampaignBusy if the campaign is running. Runs left active by a crawl that died
    (its lock expired, or its processes are gone) are marked failed here. After a failed
    run, the new one resumes it (``resumes``, ``resume_since``).
    """
    get_campaign(ctx, name)
    run_id = ObjectId()
    # Outlasts QUEUE_WAIT, after which refresh_run fails a run still queued.
    ttl = QUEUE_WAIT + LOCK_TTL if queued else LOCK_TTL
    if not take_lock(ctx, name, run_id, ttl):
        holder = lock_holder(ctx, name)
        # A crawl killed outright holds its lock until it expires; refresh_run fails its
        # run, and releases the lock, as soon as its processes are known to be gone.
        if holder is not None and ObjectId.is_valid(holder):
            with contextlib.suppress(CampaignError):  # its run is being recorded
                refresh_run(ctx, ObjectId(holder))
        if not take_lock(ctx, name, run_id, ttl):
            raise CampaignBusy(name, lock_holder(ctx, name))
    now = datetime.now(UTC)
    ctx.db.runs.update_many(
        {"campaign": name, "state": {"$in": list(ACTIVE_STATES)}},
        {"$set": {"state": "failed", "finished_at": now,
                  "error": "abandoned: its crawl stopped without finishing"}},
    )  # fmt: skip
    previous = ctx.db.runs.find_one({"campaign": name}, sort=[("started_at", DESCENDING)])
    resume: dict[str, Any] = {}
    if previous is not None and previous["state"] == "failed":
        # What the failed run fetched, and the runs it resumed in turn, is not fetched again.
        since = previous.get("resume_since") or previous["started_at"]
        resume = {"resumes": previous["_id"], "resume_since": since}
    ctx.db.runs.insert_one(
        {
            "_id": run_id,
            "campaign": name,
            "trigger": trigger,
            "state": "queued" if queued else "starting",
            "started_at": now,
            "heartbeat_at": now,
            "active_crawlers": 0,
            "crawl_processes": [],
            "pages": {"fetched": 0, "changed": 0, "unchanged": 0},
            "skipped": {},
            "failed": {},
            "scans_enqueued": 0,
            **resume,
        }
    )
    return run_id


def crawl_process_record(pid: int) -> dict[str, Any]:
    """How a run records one of its crawl processes."""
    return {"where": pid_space(), "pid": pid}


def crawl_died(run: Mapping[str, Any]) -> bool:
    """True when every crawl process of the run ran here and none runs any more.

    A process counts as running only with the run's id on its command line: a pid reused
    by another process (after a reboot, say) does not keep a dead run alive.
    """
    processes = run.get("crawl_processes") or []
    here, marker = pid_space(), str(run["_id"])
    return bool(processes) and all(
        p["where"] == here and not process_running(p["pid"], marker) for p in processes
    )


def abort_run(ctx: Context, name: str, run_id: ObjectId, error: str) -> None:
    """Fail the run and free its campaign (and Redis of its frontier)."""
    ctx.db.runs.update_one(
        {"_id": run_id},
        {"$set": {"state": "failed", "finished_at": datetime.now(UTC), "error": error}},
    )
    release_lock(ctx, name, run_id)
    drop_frontier(ctx, run_id)


def drop_frontier(ctx: Context, run_id: ObjectId) -> None:
    """Delete an ended run's shared frontier (requests left, seen filter): nothing reads it
    again, as the next run resumes from the pages stored, under a frontier of its own."""
    keys = list(ctx.redis.scan_iter(match=f"{ctx.keys.frontier(run_id)}:*", count=1000))
    if keys:
        ctx.redis.delete(*keys)


def join_run(ctx: Context, run_id: ObjectId) -> dict[str, Any]:
    """Register this crawl process with a starting or running run; returns the run."""
    run = ctx.db.runs.find_one_and_update(
        {"_id": run_id, "state": {"$in": list(ACTIVE_STATES)}},
        {"$inc": {"active_crawlers": 1},
         "$set": {"state": "running", "heartbeat_at": datetime.now(UTC)},
         "$addToSet": {"crawl_processes": crawl_process_record(os.getpid())}},
        return_document=ReturnDocument.AFTER,
    )  # fmt: skip
    if run is None:
        raise CampaignError(f"run {run_id} does not exist or is no longer running")
    return run


def run_cancelled(ctx: Context, run_id: ObjectId) -> bool:
    """Whether someone stopped the run (`tracker.campaigns.stop.stop_run`)."""
    return ctx.db.runs.count_documents({"_id": run_id, "state": "cancelled"}, limit=1) > 0


def heartbeat(ctx: Context, name: str, run_id: ObjectId) -> bool:
    """Renew the campaign lock and the run's heartbeat; False if the run lost its lock."""
    held = renew_lock(ctx, name, run_id)
    ctx.db.runs.update_one({"_id": run_id}, {"$set": {"heartbeat_at": datetime.now(UTC)}})
    return held


def reason_key(reason: str) -> str:
    """A skip or failure reason as a MongoDB field name (no dots, no $)."""
    return _REASON.sub("_", reason.lower()).strip("_") or "other"


def record_progress(
    ctx: Context, run_id: ObjectId, counts: Mapping[str, int], crawler: str
) -> None:
    """Add a crawl process's counts to its run.

    Keys are ``pages.fetched|changed|unchanged``, ``skipped.REASON``, ``failed.REASON`` or
    ``scans_enqueued``; ``crawler`` (host-pid) gets the pages it fetched, so a distributed
    run shows who did what.
    """
    inc: dict[str, int] = {}
    for key, n in counts.items():
        group, _, reason = key.partition(".")
        if group in _COUNTER_GROUPS and reason:
            inc[f"{group}.{reason_key(reason)}"] = inc.get(f"{group}.{reason_key(reason)}", 0) + n
        elif key == "scans_enqueued":
            inc[key] = n
        else:
            raise ValueError(f"unknown run counter {key!r}")
    fetched = counts.get("pages.fetched", 0)
    if fetched:
        inc[f"crawlers.{reason_key(crawler)}"] = fetched
    if inc:
        ctx.db.runs.update_one({"_id": run_id}, {"$inc": inc})


def finish_crawl(ctx: Context, run_id: ObjectId, error: str | None = None) -> bool:
    """Unregister this crawl process; the last one moves the run on and drops the lock.

    Returns True if this process was the run's last crawler.
    """
    if error:  # a run stopped meanwhile stays cancelled, without the crawl's complaint
        ctx.db.runs.update_one(
            {"_id": run_id, "state": {"$in": list(ACTIVE_STATES)}}, {"$set": {"error": error}}
        )
    update: dict[str, Any] = {
        "$inc": {"active_crawlers": -1},
        "$pull": {"crawl_processes": crawl_process_record(os.getpid())},
    }
    run = ctx.db.runs.find_one_and_update(
        {"_id": run_id}, update, return_document=ReturnDocument.AFTER
    )
    if run is None or run["active_crawlers"] > 0 or run["state"] not in ACTIVE_STATES:
        return False
    now = datetime.now(UTC)
    state = "failed" if run.get("error") else "scanning"
    ctx.db.runs.update_one(
        {"_id": run_id},
        {"$set": {"state": state, "crawl_finished_at": now,
                  **({"finished_at": now} if state == "failed" else {})}},
    )  # fmt: skip
    release_lock(ctx, run["campaign"], run_id)
    refresh_run(ctx, run_id)
    return True


def pending_scans(ctx: Context, run_id: ObjectId) -> list[ObjectId]:
    """Pages stored by the run whose current text has not been scanned yet: found through
    their own index, not by reading all the run's pages (a `--wait` polls it)."""
    return [page["_id"] for page in ctx.db.pages.find({"scan_due": run_id}, {"_id": 1})]


def claim_unscanned(ctx: Context, url: str, run_id: ObjectId) -> ObjectId | None:
    """Make a stored page whose text was never scanned the run's; returns its id to scan.

    For pages a crawl serves from the store instead of fetching them: the run that stored
    one may have died before its scan was queued or done. Claimed, the page is scanned
    and counted with this run (``pending_scans``). None when the page is scanned already.
    """
    page = ctx.db.pages.find_one({"url": url}, {"content_sha256": 1, "scanned_as": 1})
    if page is None or not needs_scan(page, scan_mark(ctx)):
        return None
    ctx.db.pages.update_one({"_id": page["_id"]}, {"$set": {"run_id": run_id, "scan_due": run_id}})
    return page["_id"]


def refresh_run(ctx: Context, run_id: ObjectId) -> dict[str, Any]:
    """Move a run on when it is due: ``scanning`` → ``finished`` once its pages are scanned
    (counting its findings), an active run whose crawl died → ``failed``."""
    run = ctx.db.runs.find_one({"_id": run_id})
    if run is None:
        raise CampaignError(f"no run {run_id}")
    now = datetime.now(UTC)
    if error := _stopped(run, now):
        abort_run(ctx, run["campaign"], run_id, error)
    elif run["state"] == "scanning" and not pending_scans(ctx, run_id):
        touched = ctx.db.findings.count_documents({"run_id": run_id})
        new = ctx.db.findings.count_documents(
            {"run_id": run_id, "first_seen": {"$gte": run["started_at"]}}
        )
        ctx.db.runs.update_one(
            {"_id": run_id, "state": "scanning"},
            {"$set": {"state": "finished", "finished_at": now,
                      "findings": {"new": new, "updated": touched - new}}},
        )  # fmt: skip
    else:
        return run
    return ctx.db.runs.find_one({"_id": run_id}) or run


def _stopped(run: Mapping[str, Any], now: datetime) -> str | None:
    """Why an active run will never finish (its error), or None if it still may."""
    if run["state"] == "queued":
        # No crawl process yet: neither silence nor dead processes say anything.
        if now - run["started_at"] <= QUEUE_WAIT:
            return None
        hours = QUEUE_WAIT.total_seconds() / 3600
        return (f"no crawler worker took it from the crawl queue within {hours:g} h "
                "(is `copytrack worker --queues crawl` running?)")  # fmt: skip
    silent = now - run["heartbeat_at"] > HEARTBEAT_STALE
    if run["state"] in ACTIVE_STATES and (silent or crawl_died(run)):
        return f"interrupted: the crawl process stopped without finishing; see {run.get('log')}"
    return None


def refresh_runs(ctx: Context) -> None:
    """Refresh every run that is not done yet (the scheduler's housekeeping)."""
    for run in ctx.db.runs.find({"state": {"$nin": list(DONE_STATES)}}, {"_id": 1}):
        refresh_run(ctx, run["_id"])


def wait_for_run(
    ctx: Context,
    run_id: ObjectId,
    scan: bool = True,
    poll: float = 0.25,
    timeout: float | None = None,
    progress: Callable[[Mapping[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Block until the run is finished or failed; returns the run.

    With ``scan``, pages the run stored are scanned here as they arrive, so no worker is
    needed; where workers run too, whoever comes second finds the page already scanned.
    ``progress`` gets the run at every poll (a progress bar's hook). Raises TimeoutError
    after ``timeout`` seconds. A poll is two small indexed queries: a quarter of a second
    between them keeps the end of a run from waiting (a second was 4% of a 25 s crawl).
    A server that fails (a full disk, a restart) is waited for, as the crawl waits, for up
    to WAIT_FOR_SERVERS seconds, then its error is raised.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    failing_since: float | None = None
    while True:
        try:
            if scan:
                for page_id in pending_scans(ctx, run_id):
                    try:
                        scan_page(ctx, page_id)
                    except LookupError:
                        continue  # deleted meanwhile: nothing to scan
            run = refresh_run(ctx, run_id)
        except (PyMongoError, redis.RedisError) as err:
            failing_since = failing_since or time.monotonic()
            if time.monotonic() - failing_since > WAIT_FOR_SERVERS:
                raise
            log.warning("run %s: the servers fail (%s); trying again", run_id, err)
            time.sleep(WAIT_FOR_SERVERS_POLL)
            with contextlib.suppress(ServerStartError, PyMongoError, redis.RedisError):
                # A server that died, or whose storage failed, is started again, or followed.
                ctx = reconnected(ctx, restart_failed=storage_failed(err))
            continue
        failing_since = None
        if progress is not None:
            progress(run)
        if run["state"] in DONE_STATES:
            return run
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} still {run['state']} after {timeout:g} s")
        time.sleep(poll)


def run_history(ctx: Context, name: str, limit: int = 10) -> list[dict[str, Any]]:
    """The campaign's latest runs, newest first."""
    runs = ctx.db.runs.find({"campaign": name}).sort("started_at", DESCENDING).limit(limit)
    return list(runs)


def get_run(ctx: Context, run_id: ObjectId | str) -> dict[str, Any]:
    try:
        oid = ObjectId(run_id)
    except Exception:  # bson raises InvalidId or TypeError
        raise CampaignError(f"{run_id!r} is not a run id") from None
    run = ctx.db.runs.find_one({"_id": oid})
    if run is None:
        raise CampaignError(f"no run {run_id}")
    return run
