"""Health of an installation: servers, queues, workers and the last scan, in one dict.

`health(ctx)` is what the admin's ``/healthz`` and `copytrack status` report. Every probe
is bounded by ``timeout`` seconds, so a server that is down or hung makes the report say
so instead of making the caller hang; the whole call takes about ``timeout`` (the worker
ping waits that long for replies) plus the servers' round trips.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pymongo
import redis
from kombu.exceptions import OperationalError
from pymongo.errors import PyMongoError

from .celery_app import QUEUES, app, configure
from .context import Context

#: kombu's Redis hash of tasks delivered to a worker and not yet acknowledged.
UNACKED_KEY = "unacked"
DEFAULT_TIMEOUT = 1.0


def health(ctx: Context, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Probe the installation of ``ctx``; returns a JSON-able report.

    Keys: ``ok`` (both servers answer), ``checked_at``, ``servers`` (per server ``ok`` and
    ``latency_ms``, or ``error``), ``queues`` (tasks waiting per queue), ``in_progress``
    (delivered, not yet acknowledged), ``workers`` (names of the Celery workers that
    answered a ping), ``last_scan_at`` (ISO time of the latest page scan) and
    ``problems`` (one sentence each, empty when all is well). A figure that could not be
    read is None, with the reason in ``problems``.
    """
    problems: list[str] = []
    servers = {
        "mongo": _timed(lambda: _ping_mongo(ctx, timeout)),
        "redis": _timed(lambda: _ping_redis(ctx, timeout)),
    }
    for name, server in servers.items():
        if not server["ok"]:
            problems.append(f"{name} does not answer: {server['error']}")

    queues: dict[str, int] | None = None
    in_progress: int | None = None
    workers: list[str] | None = None
    if servers["redis"]["ok"]:
        try:
            queues, in_progress = _queue_depths(ctx, timeout)
        except redis.RedisError as err:
            problems.append(f"queue depths unavailable: {_describe(err)}")
        try:
            workers = _ping_workers(ctx, timeout)
        except (OperationalError, redis.RedisError, OSError) as err:
            problems.append(f"worker ping failed: {_describe(err)}")
        else:
            if not workers:
                problems.append(f"no worker answered a ping within {timeout:g} s")

    last_scan: str | None = None
    if servers["mongo"]["ok"]:
        try:
            last_scan = _last_scan(ctx, timeout)
        except PyMongoError as err:
            problems.append(f"last scan time unavailable: {_describe(err)}")

    return {
        "ok": all(server["ok"] for server in servers.values()),
        "checked_at": datetime.now(UTC).isoformat(),
        "servers": servers,
        "queues": queues,
        "in_progress": in_progress,
        "workers": workers,
        "last_scan_at": last_scan,
        "problems": problems,
    }


def _describe(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"


def _timed(probe: Callable[[], object]) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        probe()
    except (PyMongoError, redis.RedisError, OSError) as err:
        return {"ok": False, "error": _describe(err)}
    return {"ok": True, "latency_ms": round((time.perf_counter() - start) * 1000, 2)}


def _ping_mongo(ctx: Context, timeout: float) -> None:
    # The context's client waits 10 s for a server; a client-side timeout bounds the
    # server selection and the command alike, and keeps the client's connection pool.
    with pymongo.timeout(timeout):
        ctx.db.command("ping")


def _short_redis(ctx: Context, timeout: float) -> redis.Redis:
    """A client with short timeouts: the context's own one may wait indefinitely."""
    return redis.Redis.from_url(
        ctx.endpoints.redis_url, socket_timeout=timeout, socket_connect_timeout=timeout
    )


def _ping_redis(ctx: Context, timeout: float) -> None:
    client = _short_redis(ctx, timeout)
    try:
        client.ping()
    finally:
        client.close()


def _queue_depths(ctx: Context, timeout: float) -> tuple[dict[str, int], int]:
    client = _short_redis(ctx, timeout)
    try:
        pipe = client.pipeline(transaction=False)
        # copytrack's tasks carry no priority, so each queue is one Redis list.
        for queue in QUEUES:
            pipe.llen(queue)
        pipe.hlen(UNACKED_KEY)
        *depths, unacked = pipe.execute()
    finally:
        client.close()
    return dict(zip(QUEUES, depths, strict=True)), unacked


def _ping_workers(ctx: Context, timeout: float) -> list[str]:
    """Names of the workers that answer a broadcast ping within ``timeout`` seconds."""
    # The ping goes out through the process's Celery app (its producer pool), so the app
    # must use this context's broker; configure it unless the process already did.
    if "broker_url" not in app.conf:
        configure(app, ctx.endpoints, ctx.settings)
    replies = app.control.ping(timeout=timeout)
    return sorted(name for reply in replies for name in reply)


def _last_scan(ctx: Context, timeout: float) -> str | None:
    with pymongo.timeout(timeout):
        latest = ctx.db.pages.find_one(
            {"scanned_at": {"$ne": None}}, {"scanned_at": 1}, sort=[("scanned_at", -1)]
        )
    if latest is None:
        return None
    # pymongo hands back naive datetimes that are UTC.
    return latest["scanned_at"].replace(tzinfo=UTC).isoformat()
