"""Health of an installation: servers, queues, workers, crawls and the last scan, in one
dict.

`health(ctx)` is what `copytrack status` and the admin's ``/api/v1/health`` report;
`server_health(ctx)` and `index_health(ctx)`, its server and index probes alone, answer the
load balancers' ``/healthz``. A server probe writes and reads back a small record: a
server that answers pings but cannot store anything (a full disk) is down for copytrack.
The index probe is the generation check scans make (`tracker.masters.generation`), with a sample
of works' postings looked up (`tracker.matching.index_audit`). Every probe is
bounded by ``timeout`` seconds, so a server that is down or hung makes the report say so
instead of making the caller hang; `health` takes about ``timeout`` (the worker ping waits
that long for replies) plus the servers' round trips.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pymongo
import redis
from kombu.exceptions import OperationalError
from pymongo.errors import PyMongoError

from ..campaigns import ACTIVE_STATES, HEARTBEAT_STALE
from ..celery_app import QUEUES, sender_app
from ..context import Context
from ..core.failures import first_line, free_space, out_of_room
from ..core.times import iso
from ..index import IndexVersionMismatch
from ..masters.generation import IndexNotReady
from ..masters.generation import inspect as inspect_index
from ..masters.library import INDEXING
from ..matching.index_audit import audit_sample
from ..scanning.pages import count_overdue_scans
from .loops import compiled_loops, fallback_problem

DEFAULT_TIMEOUT = 1.0
# Seconds a process's index probe trusts its last sample of works looked up: load
# balancers probe `/healthz` every few seconds.
HEALTH_AUDIT_EVERY = 10.0
# A work left unindexed this long is not being added right now: an add or update died.
STUCK_MINUTES = 10
#: Visibility timeouts after which a page still due for a scan is reported overdue.
OVERDUE_TIMEOUTS = 2
#: Runs that have not ended: crawling, or waiting for their scans.
OPEN_STATES = [*ACTIVE_STATES, "scanning"]
MAX_CRAWLS = 100  # listed at most
#: Where the probes write: a MongoDB collection (one document per host) and Redis keys
#: (one per process, expiring).
PROBE_COLLECTION = "health_probes"


def health(ctx: Context, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Probe the installation of ``ctx``; returns a JSON-able report.

    Keys: ``ok`` (both servers answer and the index is the library's), ``checked_at``,
    ``servers`` (per server ``ok`` and ``latency_ms``, or ``error``), ``index`` (see
    `index_health`; None while a server does not answer), ``queues`` (tasks waiting per
    queue), ``in_progress`` (delivered, not yet acknowledged), ``workers`` (names of the
    Celery workers that answered a ping), ``crawls`` (the runs not yet ended, oldest
    first: campaign, run id, state, start, worker, pages fetched, seconds since the crawl's
    last heartbeat), ``last_scan_at`` (ISO time of the latest page scan), ``scans_overdue``
    (pages stored over two visibility timeouts ago, not scanned since), ``compiled_loops``
    (whether each compiled loop loads in this process: one that does not runs its slower
    numpy fallback, a problem that leaves ``ok`` as it is) and ``problems`` (one sentence
    each, empty when all is well). A figure that could not be read is None, with the reason
    in ``problems``.
    """
    servers = server_health(ctx, timeout)
    report = _report(servers)
    problems: list[str] = report["problems"]
    if slow := fallback_problem(report["compiled_loops"]):
        problems.append(slow)
    for name, server in servers.items():
        if not server["ok"]:
            problems.append(f"{name} does not answer: {server['error']}")
    if all(server["ok"] for server in servers.values()):
        report["index"] = index = index_health(ctx, timeout)
        report["ok"] = report["ok"] and index["ok"]
        problems += [f"index: {index[key]}" for key in ("error", "warning") if index.get(key)]

    if servers["redis"]["ok"]:
        try:
            report["queues"], report["in_progress"] = _queue_depths(ctx, timeout)
        except redis.RedisError as err:
            problems.append(f"queue depths unavailable: {_describe(err)}")
        try:
            report["workers"] = _ping_workers(ctx, timeout)
        except (OperationalError, redis.RedisError, OSError) as err:
            problems.append(f"worker ping failed: {_describe(err)}")
        else:
            if not report["workers"]:
                problems.append(f"no worker answered a ping within {timeout:g} s")

    if servers["mongo"]["ok"]:
        try:
            report["last_scan_at"] = _last_scan(ctx, timeout)
        except PyMongoError as err:
            problems.append(f"last scan time unavailable: {_describe(err)}")
        try:
            report["scans_overdue"] = overdue = _overdue_scans(ctx, timeout)
        except PyMongoError as err:
            problems.append(f"overdue scans unavailable: {_describe(err)}")
        else:
            if overdue:
                problems.append(_overdue_problem(overdue, ctx.settings.visibility_timeout))
        try:
            report["crawls"] = _crawls(ctx, timeout)
        except PyMongoError as err:
            problems.append(f"crawls unavailable: {_describe(err)}")
        else:
            problems += [_silent(crawl) for crawl in report["crawls"] if _is_silent(crawl)]
    return report


def server_health(ctx: Context, timeout: float = DEFAULT_TIMEOUT) -> dict[str, dict[str, Any]]:
    """Whether MongoDB and Redis answer: per server ``ok`` and ``latency_ms``, or ``error``.

    The quick part of `health` (no worker ping), for probes that run every few seconds.
    """
    return {
        "mongo": _timed(lambda: _probe_mongo(ctx, timeout)),
        "redis": _timed(lambda: _probe_redis(ctx, timeout)),
    }


def index_health(ctx: Context, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Whether the index in Redis is the library's, built with this release's fingerprint
    parameters and layout: ``ok``, the ``postings`` it holds and the ``library_postings``
    the library put in, and ``error`` (scans are refused: why, and what to do) or
    ``warning`` (something to tidy) when there is one."""
    try:
        with pymongo.timeout(timeout):
            # An upgrade that changes the parameters or the layout: every scan would stop.
            # (An empty index takes them, as it does from any command.)
            ctx.index.ensure_version(ctx.params.version)
            state = inspect_index(ctx)
            if state.problem is None:
                # The counts agree: are the postings there? (A loss found is recorded.)
                with contextlib.suppress(IndexNotReady):
                    audit_sample(ctx, every=HEALTH_AUDIT_EVERY)
                state = inspect_index(ctx)
            # Equality on the one state a work is left in midway, which the state index
            # finds; "not indexed" read the whole library in the embedded MongoDB (9.4 s
            # at 100,000 works: past the timeout, a false alarm).
            unindexed = ctx.db.masters.count_documents(
                {
                    "state": INDEXING,
                    "updated_at": {"$lt": datetime.now(UTC) - timedelta(minutes=STUCK_MINUTES)},
                }
            )
    except (PyMongoError, redis.RedisError, OSError) as err:
        return {"ok": False, "error": f"cannot be checked: {_describe(err)}"}
    except IndexVersionMismatch as err:
        return {"ok": False, "error": str(err)}
    report: dict[str, Any] = {
        "ok": state.problem is None,
        "postings": state.index_postings,
        "library_postings": state.library_postings,
        "unindexed_works": unindexed,
    }
    if state.problem:
        report["error"] = state.problem
    warnings = [state.warning] if state.warning else []
    if unindexed:
        warnings.append(
            f"{unindexed} work(s) not indexed for over {STUCK_MINUTES} minutes (an add or "
            "update was interrupted; `copytrack library list` marks them NOT INDEXED): add "
            "them again, or run `copytrack reindex`"
        )
    if warnings:
        report["warning"] = "; ".join(warnings)
    return report


def unprobed(problem: str) -> dict[str, Any]:
    """The report of an installation whose servers cannot even be probed (not started)."""
    report = _report({name: {"ok": False, "error": problem} for name in ("mongo", "redis")})
    report["problems"].append(problem)
    return report


def _report(servers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A report on these servers with every other figure unknown (None) and no problems."""
    return {
        "ok": all(server["ok"] for server in servers.values()),
        "checked_at": datetime.now(UTC).isoformat(),
        "servers": servers,
        "index": None,
        "queues": None,
        "in_progress": None,
        "workers": None,
        "crawls": None,
        "last_scan_at": None,
        "scans_overdue": None,
        "compiled_loops": compiled_loops(),
        "problems": [],
    }


def _describe(err: BaseException) -> str:
    """The error in one line: its kind and reason, without the driver's dump."""
    return f"{type(err).__name__}: {first_line(err)}"


def _timed(probe: Callable[[], object]) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        probe()
    except (PyMongoError, redis.RedisError, OSError) as err:
        return {"ok": False, "error": _describe(err)}
    return {"ok": True, "latency_ms": round((time.perf_counter() - start) * 1000, 2)}


def _require_room(ctx: Context) -> None:
    """Embedded servers keep their data in the data dir: with its disk full they answer,
    and even take the probe's small write, but fail the next real one."""
    if ctx.endpoints.embedded and out_of_room(ctx.settings.data_dir):
        raise OSError(
            f"the disk of {ctx.settings.data_dir} is full ({free_space(ctx.settings.data_dir)}):"
            " free space there"
        )


def _probe_mongo(ctx: Context, timeout: float) -> None:
    _require_room(ctx)
    # The context's client waits 10 s for a server; a client-side timeout bounds the
    # server selection and the commands alike, and keeps the client's connection pool.
    with pymongo.timeout(timeout):
        probes = ctx.db[PROBE_COLLECTION]
        probes.update_one(
            {"_id": socket.gethostname()}, {"$set": {"at": datetime.now(UTC)}}, upsert=True
        )
        if probes.find_one({"_id": socket.gethostname()}) is None:
            raise OSError("a record just written cannot be read back")


def _short_redis(ctx: Context, timeout: float) -> redis.Redis:
    """A client with short timeouts: the context's own one may wait indefinitely."""
    return redis.Redis.from_url(
        ctx.endpoints.redis_url, socket_timeout=timeout, socket_connect_timeout=timeout
    )


def _probe_redis(ctx: Context, timeout: float) -> None:
    _require_room(ctx)
    client = _short_redis(ctx, timeout)
    try:
        key, stamp = ctx.keys.health_probe(socket.gethostname(), os.getpid()), str(time.time())
        # Refused (MISCONF) once the server cannot write its append-only file.
        client.set(key, stamp, ex=60)
        if client.get(key) != stamp.encode():
            raise OSError("a key just written cannot be read back")
    finally:
        client.close()


def _queue_depths(ctx: Context, timeout: float) -> tuple[dict[str, int], int]:
    client = _short_redis(ctx, timeout)
    try:
        pipe = client.pipeline(transaction=False)
        # copytrack's tasks carry no priority, so each queue is one Redis list.
        for queue in QUEUES:
            pipe.llen(ctx.keys.queue(queue))
        pipe.hlen(ctx.keys.unacked)
        *depths, unacked = pipe.execute()
    finally:
        client.close()
    return dict(zip(QUEUES, depths, strict=True)), unacked


def _ping_workers(ctx: Context, timeout: float) -> list[str]:
    """Names of the workers that answer a broadcast ping within ``timeout`` seconds."""
    # An app of its own: the process's Celery app may be bound to another broker (or to
    # none yet), and the ping must reach the workers of this context's Redis.
    probe = sender_app("copytrack-health", ctx.endpoints.redis_url, ctx.settings)
    try:
        replies = probe.control.ping(timeout=timeout)
    finally:
        probe.close()
    return sorted(name for reply in replies or () for name in reply)


#: How far back the last scan is looked for, a window at a time, each 8 times the one
#: before (the last ends 30 years back): a range of the scan-time index, whose pages the
#: embedded MongoDB reads alone, where "any scan" read every page (3.6 s at 20,000 pages,
#: past the timeout: health said the last scan time was unavailable).
LAST_SCAN_WINDOWS = tuple(timedelta(minutes=10) * 8**k for k in range(9))


def _last_scan(ctx: Context, timeout: float) -> str | None:
    now = datetime.now(UTC)
    with pymongo.timeout(timeout):
        for window in LAST_SCAN_WINDOWS:
            latest = ctx.db.pages.find_one(
                {"scanned_at": {"$gte": now - window}}, {"scanned_at": 1},
                sort=[("scanned_at", -1)],
            )  # fmt: skip
            if latest is not None:
                return iso(latest["scanned_at"])
    return None


def _overdue_scans(ctx: Context, timeout: float) -> int:
    """Pages stored more than two visibility timeouts ago and not scanned since: by then a
    worker on the scan queue has scanned them, or queued a lost scan again."""
    with pymongo.timeout(timeout):
        overdue = timedelta(seconds=OVERDUE_TIMEOUTS * ctx.settings.visibility_timeout)
        return count_overdue_scans(ctx, overdue)


def _overdue_problem(pages: int, visibility_timeout: int) -> str:
    hours = OVERDUE_TIMEOUTS * visibility_timeout / 3600
    return (
        f"{pages} page(s) stored over {hours:g} h ago still wait for their scan: is a "
        "worker consuming the scan queue running (`copytrack worker`), and keeping up "
        "(see the queue depths)?"
    )


def _crawls(ctx: Context, timeout: float) -> list[dict[str, Any]]:
    now = datetime.now(UTC)
    fields = {"campaign": 1, "state": 1, "started_at": 1, "heartbeat_at": 1, "worker": 1,
              "pages.fetched": 1}  # fmt: skip
    with pymongo.timeout(timeout):
        found = ctx.db.runs.find({"state": {"$in": OPEN_STATES}}, fields)
        runs = list(found.sort("started_at", pymongo.ASCENDING).limit(MAX_CRAWLS))
    return [
        {
            "campaign": run["campaign"],
            "run_id": str(run["_id"]),
            "state": run["state"],
            "started_at": iso(run["started_at"]),
            "worker": run.get("worker"),
            "pages_fetched": run.get("pages", {}).get("fetched", 0),
            "heartbeat_age_s": round((now - run["heartbeat_at"]).total_seconds()),
        }
        for run in runs
    ]


def _is_silent(crawl: dict[str, Any]) -> bool:
    """A crawl that stopped renewing its heartbeat: its process died (or hangs)."""
    return (
        crawl["state"] == "running" and crawl["heartbeat_age_s"] > HEARTBEAT_STALE.total_seconds()
    )


def _silent(crawl: dict[str, Any]) -> str:
    return (
        f"crawl of campaign {crawl['campaign']} (run {crawl['run_id']}) has sent no heartbeat"
        f" for {crawl['heartbeat_age_s']} s: its process is gone or hung"
        f" (`copytrack campaign show {crawl['campaign']}` fails such a run)"
    )
