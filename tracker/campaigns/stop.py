"""Stopping a run: recorded ``cancelled`` with who stopped it and when, its crawl told to end.

The run is marked first, so whatever its crawl processes do next (report their counts,
finish) leaves it cancelled: `join_run` and `finish_crawl` only move active runs on. The
campaign's lock is released at once, so the campaign can run again; the crawl processes
of the run on this machine get SIGTERM and end after the requests under way. A crawl on
another machine (a crawler worker) stops at its next heartbeat, which finds its run no
longer holding the lock.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

from pymongo import ReturnDocument

from ..context import Context
from ..core.times import now
from ..runtime.processes import pid_space, process_running
from .definition import CampaignError
from .lock import release_lock
from .runs import ACTIVE_STATES, drop_frontier
from .store import get_campaign

#: Runs that can be stopped: still crawling, or waiting for their pages' scans.
STOPPABLE_STATES = (*ACTIVE_STATES, "scanning")


class NotRunning(CampaignError):
    """The campaign has no run to stop."""


def stop_run(ctx: Context, name: str, by: str) -> dict[str, Any]:
    """Cancel campaign ``name``'s current run on behalf of ``by``; returns the run as
    recorded. Raises CampaignError for an unknown campaign, NotRunning when no run of it
    is under way."""
    get_campaign(ctx, name)
    at = now()
    run = ctx.db.runs.find_one_and_update(
        {"campaign": name, "state": {"$in": list(STOPPABLE_STATES)}},
        {"$set": {"state": "cancelled", "finished_at": at, "cancelled": {"by": by, "at": at}}},
        sort=[("started_at", -1)],
        return_document=ReturnDocument.AFTER,
    )
    if run is None:
        raise NotRunning(f"campaign {name!r} has no run under way to stop")
    release_lock(ctx, name, run["_id"])
    drop_frontier(ctx, run["_id"])
    signal_crawls(run)
    return run


def signal_crawls(run: dict[str, Any]) -> list[int]:
    """SIGTERM to the run's crawl processes on this machine (those with the run's id on
    their command line: a reused pid is left alone); returns their pids."""
    here, marker = pid_space(), str(run["_id"])
    signalled = []
    for process in run.get("crawl_processes") or []:
        if process["where"] == here and process_running(process["pid"], marker):
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(process["pid"], signal.SIGTERM)
                signalled.append(process["pid"])
    return signalled
