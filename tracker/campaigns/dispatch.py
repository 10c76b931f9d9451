"""Where a run crawls: its crawl process, started here or by a crawler worker.

``trigger_run`` records the run and starts ``python -m crawler`` in its own process
(Twisted's reactor cannot restart, and a crash stays contained): right there with
``COPYTRACK_CRAWL_DISPATCH=local``; with ``queue`` the run waits ``queued`` for a crawler
worker, whose ``tracker.crawl_run`` task starts the process and waits for it
(``crawl_queued_run``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bson import ObjectId
from kombu.exceptions import OperationalError

from ..celery_app import CRAWL_TASK, app
from ..context import Context
from ..runtime.processes import descendants, process_running
from .runs import (
    ACTIVE_STATES,
    QUEUE_WAIT,
    abort_run,
    crawl_died,
    crawl_process_record,
    refresh_run,
    start_run,
)

#: The crawl process (`crawler/__main__.py`, then `crawler/run.py`), with this interpreter.
CRAWL_COMMAND = [sys.executable, "-m", "crawler"]
_CRAWL_MARKER = " ".join(CRAWL_COMMAND[1:])  # in a crawl process's command line


def crawl_log_path(ctx: Context, run_id: ObjectId | str) -> Path:
    return ctx.settings.data_dir / "logs" / f"crawl-{run_id}.log"


def launch_crawl(ctx: Context, name: str, run_id: ObjectId) -> subprocess.Popen[bytes]:
    """Start the crawl process of a run, detached, logging to DATA/logs/crawl-RUN.log."""
    log_path = crawl_log_path(ctx, run_id)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # The child works on exactly this context's installation: its settings, configured
    # servers by their URLs, embedded ones through the data dir, where it finds them again
    # when they move to other ports.
    env = {**os.environ, **ctx.settings.to_env()}
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            [*CRAWL_COMMAND, "--campaign", name, "--run-id", str(run_id)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # Its own session: the crawl outlives `campaign run` without --wait and the
            # scheduler, and a Ctrl-C in their terminal does not cut it short.
            start_new_session=True,
        )
    ctx.db.runs.update_one(
        {"_id": run_id},
        {"$set": {"pid": proc.pid, "log": str(log_path)},
         # Recorded here too, not only by join_run: the process may die before it joins.
         "$addToSet": {"crawl_processes": crawl_process_record(proc.pid)}},
    )  # fmt: skip
    return proc


def trigger_run(ctx: Context, name: str, trigger: str = "manual") -> ObjectId:
    """Start a run of the campaign; returns the run id.

    ``COPYTRACK_CRAWL_DISPATCH=local``: its crawl process starts here. ``queue``: the run
    is recorded ``queued`` and a crawler worker crawls it (`crawl_queued_run`). Raises
    CampaignBusy (with the running run's id) if the campaign is already running, OSError
    if the crawl can neither start nor be queued (the run is then failed).
    """
    queued = ctx.settings.crawl_dispatch == "queue"
    run_id = start_run(ctx, name, trigger, queued=queued)
    try:
        if queued:
            _queue_crawl(name, run_id)
        else:
            launch_crawl(ctx, name, run_id)
    except OSError as err:
        abort_run(ctx, name, run_id, f"cannot start the crawl: {err}")
        raise
    return run_id


def _queue_crawl(name: str, run_id: ObjectId) -> None:
    # By name: tracker.tasks imports this module. Its route sends it to the crawl queue.
    try:
        app.send_task(CRAWL_TASK, args=[name, str(run_id)])
    except OperationalError as err:  # kombu's form of a broker connection error
        raise ConnectionError(f"cannot queue the crawl task: {err}") from err


def crawl_queued_run(ctx: Context, name: str, run_id: ObjectId, worker: str = "") -> dict[str, Any]:
    """Crawl a queued run: start its crawl process here and wait for it to end.

    The body of the ``tracker.crawl_run`` task; ``worker`` (the Celery worker's name) is
    recorded on the run. Only the delivery that moves the run from ``queued`` to
    ``starting`` crawls: a task delivered again (its worker died, or the crawl outlasted
    the visibility timeout) finds the run started, finished or failed and returns; a run
    that crashed is resumed by the campaign's next run, as in ``local`` dispatch. A crawl
    process that cannot start, or ends without moving the run on, fails the run and
    frees the campaign. Returns ``run_id``, ``crawled`` and the run's ``state``.
    """
    now = datetime.now(UTC)
    claimed = ctx.db.runs.find_one_and_update(
        {"_id": run_id, "state": "queued", "started_at": {"$gt": now - QUEUE_WAIT}},
        # The heartbeat counts from now: the time spent in the queue was no silence.
        {"$set": {"state": "starting", "heartbeat_at": now, "worker": worker}},
    )
    if claimed is not None:
        try:
            proc = launch_crawl(ctx, name, run_id)
        except OSError as err:
            abort_run(ctx, name, run_id, f"cannot start the crawl process: {err}")
        else:
            code = proc.wait()
            run = ctx.db.runs.find_one({"_id": run_id}) or {}
            # Still active with no process of it left: it died before reporting to the run.
            if run.get("state") in ACTIVE_STATES and crawl_died(run):
                how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
                error = f"the crawl process {how} without finishing the run; see {run['log']}"
                abort_run(ctx, name, run_id, error)
    run = refresh_run(ctx, run_id)
    return {"run_id": str(run_id), "crawled": claimed is not None, "state": run["state"]}


def stop_crawls() -> list[int]:
    """Ask the crawl processes this process started, itself or through its children (a
    Celery worker's pool processes), to stop; returns their pids.

    For a crawler worker told to stop (a deploy, ``docker compose stop``): its crawls run
    in sessions of their own, out of the signal's reach. SIGTERM lets each one finish the
    requests under way, record its counts and fail its run as interrupted, which the
    campaign's next run resumes, well within the worker's grace period. Needs procfs
    (Linux); elsewhere they are killed with the worker.
    """
    stopped = []
    for pid in descendants(os.getpid()):
        if process_running(pid, _CRAWL_MARKER):
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(pid, signal.SIGTERM)
                stopped.append(pid)
    return stopped
