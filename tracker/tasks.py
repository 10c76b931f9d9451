"""Celery tasks: thin wrappers over tracker's plain functions, on the process's Context.

Each task returns a small JSON-able summary. Connection errors (a server restarting, a
failover) are retried with exponential backoff; any other error fails the task, since
running it again would fail the same way. Tasks may run more than once (see
tracker.celery_app), which the functions they call tolerate.

Time limits. Every task but the crawl has a soft and a hard time limit (`TIME_LIMITS`),
far above its measured durations and below the visibility timeout's default (an hour), so
that a task never runs on while Redis hands it to a second worker. At the soft limit the
task is interrupted; a pool process that does not stop by the hard limit is killed (the
worker goes on with a new one). Either way the task fails with its reason, logged, kept
in the task's result where one is kept, and for a scan recorded on its page
(``scan_failed``; the page is no longer due, so no worker queues it again and again, and
`copytrack rescan` scans it). A crawl lasts as long as its campaign's crawl, whose run
records how it ended.
"""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import asdict
from datetime import timedelta
from importlib import metadata
from typing import Any

from bson import ObjectId
from bson.errors import InvalidId
from celery import Task, bootsteps
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from celery.result import AsyncResult
from celery.signals import worker_ready, worker_shutting_down

from . import campaigns
from .celery_app import CRAWL_TASK, app, sweep_interval
from .context import Context, follow_servers, open_context, process_context
from .core.config import Settings
from .core.failures import CONNECTION_ERRORS
from .enforcement import alerts
from .evidence import timestamps
from .index import IndexVersionMismatch
from .index.snapshot import claim_compaction, compact_queued
from .masters import generation, library
from .monitoring import heartbeats
from .monitoring.loops import compiled_loops, fallback_problem, summary
from .runtime.servers import ServerStartError
from .scanning import pages

log = logging.getLogger(__name__)


class FollowingTask(Task):
    """A task that, when a connection failed, finds the servers again before its retry."""

    def on_retry(self, exc: Exception, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        if isinstance(exc, CONNECTION_ERRORS):
            follow_servers()


#: (soft, hard) seconds per task. Measured in a worker (benchmarks/results/tasks.md): a scan
#: p99 0.14 s, the largest page (a 1.5 M-character book) 1.3 s, and at 10^6 works a lookup
#: costs 1.1x what it does at 10^5 (scale.md): 300 s is some hundred times the worst. An
#: ingest: p99 0.2 s, but it waits for the disk up to DURABLE_WAIT_SECONDS (60). A reindex
#: task: 1.4 s at 300 works, 170 s at 100,000 (scale.md); larger libraries are rebuilt with
#: `copytrack reindex`, in the command's own process and without a limit. Each hard limit
#: stays below the visibility timeout's default, an hour.
TIME_LIMITS = {
    "tracker.scan_page": (300, 360),
    "tracker.ingest_work": (300, 360),
    "tracker.reindex": (3000, 3300),
    # A sweep stops at the first request that fails (REQUEST_TIMEOUT, 10 s); 200 tokens
    # from a slow authority (a second each) are well within.
    "tracker.stamp_captures": (900, 960),
    # 50 deliveries, each at most a relay's or a receiver's timeouts (30 s, 15 s).
    "tracker.send_alerts": (1500, 1560),
    # A compaction of the snapshot index: ~4 s at 10,000 works, O(postings) (scale.md).
    "tracker.compact_index": (3000, 3300),
}


def time_limit_reason(exc: BaseException, limits: tuple[int, int]) -> str:
    """Why a task that hit its time limit failed, in words."""
    if isinstance(exc, SoftTimeLimitExceeded):
        return f"stopped at its soft time limit of {limits[0]} s"
    return f"killed at its hard time limit of {limits[1]} s"


def _limits(name: str) -> dict[str, Any]:
    soft, hard = TIME_LIMITS[name]
    return {"name": name, "soft_time_limit": soft, "time_limit": hard}


class ScanTask(FollowingTask):
    """A scan that hit its time limit records why on its page.

    Celery calls ``on_failure`` in the pool process for the soft limit, and in the worker's
    own process for the hard one (the pool process is gone): a context of its own, then.
    """

    def on_failure(self, exc: Exception, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        if not isinstance(exc, SoftTimeLimitExceeded | TimeLimitExceeded):
            return
        reason = time_limit_reason(exc, TIME_LIMITS[self.name])
        log.error("scan of page %s %s", args[0], reason, extra={"page_id": str(args[0])})
        ctx = open_context()
        try:
            pages.record_scan_failure(ctx, ObjectId(args[0]), reason)
        finally:
            ctx.close()


_RETRY: dict[str, Any] = {
    "base": FollowingTask,
    "autoretry_for": CONNECTION_ERRORS,
    "retry_backoff": 2,  # 2, 4, 8 … s (with jitter): rides out a restart or a failover
    # A retry waits out its countdown in a worker, unacknowledged: a countdown longer than
    # the visibility timeout would have it handed out twice.
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": 8,
}


@app.task(**{**_RETRY, "base": ScanTask}, **_limits("tracker.scan_page"))
def scan_page(page_id: str, force: bool = False) -> dict[str, Any]:
    """Match a stored page against the library and record its findings.

    ``force``: even if its text was scanned with these parameters already.
    """
    ctx, oid = process_context(), ObjectId(page_id)
    try:
        result = pages.scan_page(ctx, oid, force=force)
    except generation.IndexNotReady as err:
        # Retrying cannot help until someone rebuilds the index; the page stays unscanned,
        # and `copytrack rescan` queues it again then.
        log.error("scan of page %s refused: %s", page_id, err)
        return {"page_id": page_id, "scanned": False, "refused": str(err)}
    except LookupError:
        # KeyError and IndexError are LookupErrors too: only a missing page is expected.
        if ctx.db.pages.count_documents({"_id": oid}, limit=1):
            raise
        # Deleted after it was queued: nothing left to scan, and retrying cannot help.
        log.warning("page %s no longer exists; scan skipped", page_id)
        return {"page_id": page_id, "scanned": False, "missing": True}
    summary: dict[str, Any] = {
        "page_id": page_id,
        "scanned": result.scanned,
        "matches": result.matches,
    }
    if result.record is not None:
        summary.update(asdict(result.record))
    return summary


@app.task(**_RETRY, **_limits("tracker.ingest_work"))
def ingest_work(work: dict[str, Any]) -> list[dict[str, Any]]:
    """Register a work given as the fields of `tracker.masters.library.Work` (``asdict(work)``);
    refused (`IndexNotReady`) while the index is not the library's."""
    ctx = process_context()
    generation.require(ctx)
    # Reported as added: stored only once the index has its postings on disk.
    results = library.add_work(ctx, library.Work(**work), index_on_disk=True)
    return [
        {"external_id": r.external_id, "master_id": r.master_id, "status": r.status}
        for r in results
    ]


@app.task(**_RETRY, **_limits("tracker.reindex"))
def reindex() -> dict[str, Any]:
    """Rebuild the Redis index from the library in MongoDB."""
    # Not process_context(): that refuses an index built with other parameters, which is
    # exactly what a reindex is for.
    ctx = open_context(check_index=False)
    try:
        count = generation.rebuild(ctx, library.reindex)
        stats = ctx.index.stats()
    finally:
        ctx.close()
    return {"masters": count, "postings": stats.postings}


@app.task(**_RETRY, **_limits("tracker.compact_index"))
def compact_index() -> dict[str, Any]:
    """Merge the snapshot index's delta into its snapshot, if it is due and no other process
    compacts it (queued by `CompactionSweep`)."""
    return {"compacted": compact_queued(process_context().index)}


@app.task(**_RETRY, **_limits("tracker.stamp_captures"))
def stamp_captures() -> dict[str, Any]:
    """Time-stamp the captures that are due (`tracker.evidence.timestamps`), then let the
    next sweep start."""
    ctx = process_context()
    try:
        return asdict(timestamps.stamp_due_captures(ctx))
    finally:
        timestamps.release_sweep(ctx)


@app.task(**_RETRY, **_limits("tracker.send_alerts"))
def send_alerts() -> dict[str, Any]:
    """Queue the subscriptions' due alerts and attempt the deliveries whose time has come
    (`tracker.enforcement.alerts.send_due_alerts`); `copytrack scheduler` runs the same."""
    queued, attempted = alerts.send_due_alerts(process_context())
    states = [a.state for a in attempted]
    return {**asdict(queued), **{state: states.count(state) for state in set(states)}}


@app.task(name=CRAWL_TASK, bind=True, **_RETRY)
def crawl_run(self: Task, name: str, run_id: str) -> dict[str, Any]:
    """Crawl a queued run of campaign ``name``, its crawl process a child of this one; the
    task lasts as long as the crawl (`tracker.campaigns.crawl_queued_run`)."""
    ctx, worker = process_context(), self.request.hostname or ""
    return campaigns.crawl_queued_run(ctx, name, ObjectId(run_id), worker=worker)


@worker_ready.connect
def _name_compiled_loops(sender: Any, **_: Any) -> None:
    """A worker says at start which loops are compiled: a warning when one is not, as its
    scans then run the numpy fallbacks."""
    loops = compiled_loops()
    log.log(logging.WARNING if fallback_problem(loops) else logging.INFO, "%s", summary(loops))


@worker_shutting_down.connect
def _stop_crawls(sender: str, **_: Any) -> None:
    """A worker told to stop passes it on to its crawls (`campaigns.stop_crawls`)."""
    for pid in campaigns.stop_crawls():
        log.warning("worker %s stopping: asked crawl process %d to stop", sender, pid)


def enqueue_scan(
    page_id: ObjectId | str, force: bool = False, keep_result: bool = False
) -> AsyncResult:
    """Queue a scan of a stored page (on the ``scan`` queue, by its route).

    ``keep_result``: the worker stores the scan's summary for this AsyncResult's ``get``.
    The crawl reads the page's state, never the summary; without it, a queued scan costs
    no subscription to the result (a Redis round trip) and leaves no result key in Redis
    for the day results are kept (a key per crawled page).
    """
    return scan_page.apply_async((str(page_id),), {"force": force}, ignore_result=not keep_result)


class UnknownDeliveryRecord(RuntimeError):
    """kombu records its deliveries in a shape `delivered_scans` does not know."""


def delivered_scans(ctx: Context) -> set[ObjectId]:
    """Pages whose scan a worker holds and has not acknowledged; kombu brings them back if
    their worker died.

    Read from kombu's unacked hash, which is not a public interface of kombu (a JSON
    [message, exchange, routing key] each; the message's body is Celery's [args, kwargs,
    embed], base64-encoded): another shape raises `UnknownDeliveryRecord`, naming it
    (tests/test_tasks.py checks the shape on the installed kombu)."""
    pages_held = set()
    for entry in ctx.redis.hvals(ctx.keys.unacked):
        try:
            message = json.loads(entry)[0]
            if message.get("headers", {}).get("task") == scan_page.name:
                args = json.loads(base64.b64decode(message["body"]))[0]
                pages_held.add(ObjectId(args[0]))
        except (ValueError, LookupError, TypeError, AttributeError, InvalidId) as err:
            raise UnknownDeliveryRecord(
                f"kombu {metadata.version('kombu')} records a delivery in a shape that "
                f"tracker.tasks.delivered_scans does not read ({err!r} in {entry[:200]!r}): "
                "lost scans cannot be told from held ones until it is updated"
            ) from err
    return pages_held


def requeue_lost_scans(ctx: Context) -> list[ObjectId]:
    """Queue again the scans that were lost, and return their pages: pages overdue for a
    scan by more than the visibility timeout (`tracker.scanning.pages.overdue_scans`) while no scan
    waits in the queue and no worker holds theirs. A broker killed between handing a task
    to a worker and recording the delivery loses it (kombu pops, then records), and so
    does a process killed between storing a page and queueing its scan.

    Of the workers calling it, one looks each sweep interval (the others find its mark)."""
    settings = ctx.settings
    if not ctx.redis.set(ctx.keys.scan_sweep, 1, nx=True, ex=sweep_interval(settings)):
        return []
    if ctx.redis.llen(ctx.keys.queue("scan")):
        return []  # the overdue pages may be waiting there
    overdue = pages.overdue_scans(ctx, timedelta(seconds=settings.visibility_timeout))
    held = delivered_scans(ctx) if overdue else set()
    lost = [page_id for page_id in overdue if page_id not in held]
    for page_id in lost:
        enqueue_scan(page_id)
    if lost:
        log.warning(
            "queued again the scans of %d pages due for more than %d s and not queued "
            "(lost with a killed server or process)",
            len(lost), settings.visibility_timeout,
        )  # fmt: skip
    return lost


class _Sweep(bootsteps.StartStopStep):
    """A look a worker consuming ``queue`` takes every ``interval`` seconds (`look`), on a
    context of its own (its pool processes, forked from it, keep theirs)."""

    requires = ("celery.worker.components:Timer",)
    queue = ""
    what = ""  # what it looks for, for the log

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.timer_entry: Any = None
        self.ctx: Context | None = None

    def interval(self, settings: Settings) -> float:
        return sweep_interval(settings)

    def start(self, parent: Any) -> None:
        if self.queue in parent.app.amqp.queues.consume_from:
            interval = self.interval(Settings.from_env())
            self.timer_entry = parent.timer.call_repeatedly(interval, self.sweep)

    def look(self, ctx: Context) -> None:
        raise NotImplementedError

    def sweep(self) -> None:
        # On the worker's event loop: milliseconds while the servers answer.
        try:
            self.ctx = self.ctx or open_context()
            self.look(self.ctx)
        except (*CONNECTION_ERRORS, ServerStartError, IndexVersionMismatch) as err:
            # (An index of other parameters: scans are refused too, until a reindex.)
            log.warning("looking for %s: %s; trying again in a while", self.what, err)
            if self.ctx is not None:  # the next sweep connects where the servers are then
                self.ctx.close()
                self.ctx = None
        except UnknownDeliveryRecord as err:
            log.error("looking for %s: %s", self.what, err)

    def stop(self, parent: Any) -> None:
        if self.timer_entry is not None:
            self.timer_entry.cancel()
        if self.ctx is not None:
            self.ctx.close()
            self.ctx = None


class LostScanSweep(_Sweep):
    """A worker consuming the scan queue calls `requeue_lost_scans` every sweep interval
    (a SET and an LLEN; MongoDB only when the queue is empty)."""

    queue, what = "scan", "lost scans"

    def look(self, ctx: Context) -> None:
        requeue_lost_scans(ctx)


#: Seconds between two looks for captures to time-stamp: a capture is stamped this soon
#: after it is stored (each look is one indexed read, and a SET while some are due).
TIMESTAMP_SWEEP_SECONDS = 5.0


class TimestampSweep(_Sweep):
    """A worker consuming the maintenance queue queues `stamp_captures` when captures are
    due and no sweep is under way (`tracker.evidence.timestamps.claim_sweep`)."""

    queue, what = "maintenance", "captures to time-stamp"

    def interval(self, settings: Settings) -> float:
        return TIMESTAMP_SWEEP_SECONDS

    def look(self, ctx: Context) -> None:
        if timestamps.claim_sweep(ctx):
            stamp_captures.apply_async(ignore_result=True)


#: Seconds between two looks at the snapshot index's delta (two small reads), and how long a
#: queued compaction keeps others from being queued.
COMPACTION_SWEEP_SECONDS = 10.0
COMPACTION_QUEUED_SECONDS = 600.0


class CompactionSweep(_Sweep):
    """A worker consuming the maintenance queue queues `compact_index` when the snapshot
    index's delta passed its share (`tracker.index.snapshot.claim_compaction`)."""

    queue, what = "maintenance", "a due compaction of the index"

    def interval(self, settings: Settings) -> float:
        return COMPACTION_SWEEP_SECONDS

    def look(self, ctx: Context) -> None:
        if claim_compaction(ctx.index, COMPACTION_QUEUED_SECONDS):
            compact_index.apply_async(ignore_result=True)


class Heartbeat(_Sweep):
    """Every worker renews the heartbeat of the queues it consumes
    (`tracker.monitoring.heartbeats`), so the admin can say when a run or a scan waits for a
    worker that is not there."""

    what = "its heartbeat"

    def interval(self, settings: Settings) -> float:
        return heartbeats.HEARTBEAT_SECONDS

    def start(self, parent: Any) -> None:
        self.queues = sorted(parent.app.amqp.queues.consume_from)
        self.hostname = parent.hostname
        self.sweep()  # at once: the admin need not wait an interval to see the worker
        self.timer_entry = parent.timer.call_repeatedly(self.interval(Settings()), self.sweep)

    def look(self, ctx: Context) -> None:
        heartbeats.beat(ctx, self.queues, self.hostname)


app.steps["worker"].add(Heartbeat)
app.steps["worker"].add(LostScanSweep)
app.steps["worker"].add(TimestampSweep)
app.steps["worker"].add(CompactionSweep)
