"""The Celery app of copytrack: one app, ``tracker``, with Redis as broker and result backend.

Queues, routed by task name (`ROUTES`): ``ingest`` (register works), ``scan`` (match a
stored page against the library), ``crawl`` (crawl a campaign run, with
``COPYTRACK_CRAWL_DISPATCH=queue``; and tasks named ``crawler.*``), ``maintenance``
(reindex and housekeeping; also where a task without a route lands).

Finding the broker. Importing this module connects to nothing and starts nothing. The
broker and result backend are set when Celery first reads its configuration: a worker
starting, the first task sent, or any attribute of a task object read (that finalizes the
app, which reads the configuration):

- a caller that already holds `Endpoints` calls `configure(app, endpoints)` before that
  (the ``copytrack`` commands, tests);
- otherwise the ``on_configure`` hook below resolves them from the COPYTRACK_* variables
  through `ensure_servers`: the configured ``COPYTRACK_REDIS_URL``, or else the embedded
  Valkey of the data dir, started if it is not running. So the plain
  ``celery -A tracker.tasks worker`` works as is, in production and on a laptop.

Tasks. This module names no task module: `tracker.tasks` imports the app and registers its
tasks on it, so a worker is started on `tracker.tasks` (``copytrack worker`` imports it),
and a sender needs only the task names (`ROUTES`, `CRAWL_TASK`).

Delivery. A task is acknowledged only after it finished (``acks_late``). If its pool
process dies, the worker puts it back on the queue (``reject_on_worker_lost``); if the
whole worker dies, Redis hands it to another worker once ``COPYTRACK_VISIBILITY_TIMEOUT``
seconds have passed since it was delivered. Either way a task can run twice, and a task
running longer than that timeout is handed out a second time while it still runs: every
task must be idempotent (scans upsert findings keyed by (page, master), re-adding a known
text changes nothing) and the timeout must stay above the longest task. Crawl tasks are
the exception: one lasts its whole crawl, and a second delivery finds the run taken and
returns (`tracker.campaigns.crawl_queued_run`).

Prefetch. Each pool process holds at most one task (``worker_prefetch_multiplier=1`` with
``acks_late``: a running task counts until it is acknowledged), and the prefork pool's
default "fair" scheduling hands a task only to an idle pool process. So a long crawl
occupies one pool process and delays no task behind it: a crawler worker runs up to its
``--concurrency`` crawls at once and leaves the rest in Redis for other crawlers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from celery import Celery
from celery.signals import setup_logging

from .core.config import Settings
from .core.keys import RedisKeys
from .core.logs import configure_logging
from .runtime.servers import Endpoints, ServerStartError, ensure_servers

log = logging.getLogger(__name__)

#: Every queue a copytrack worker consumes by default.
QUEUES = ("ingest", "scan", "crawl", "maintenance")

#: The task crawling a queued campaign run (tracker.tasks.crawl_run), sent by name.
CRAWL_TASK = "tracker.crawl_run"

#: task name (or glob) -> queue.
ROUTES = {
    "tracker.ingest_work": {"queue": "ingest"},
    "tracker.scan_page": {"queue": "scan"},
    CRAWL_TASK: {"queue": "crawl"},
    "crawler.*": {"queue": "crawl"},
    "tracker.reindex": {"queue": "maintenance"},
}

# Results are summaries for whoever waits on them, not a record (MongoDB is): an hour keeps
# the result keys of a big crawl from piling up in Redis.
RESULT_EXPIRES = 3600

app = Celery("tracker")
app.conf.update(
    task_routes=ROUTES,
    task_default_queue="maintenance",
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    # One task reserved per pool process: a task prefetched behind a long one would wait
    # there rather than go to an idle worker, and would wait out the visibility timeout
    # if this worker died.
    worker_prefetch_multiplier=1,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    result_expires=RESULT_EXPIRES,
    broker_connection_retry_on_startup=True,
)


def sweep_interval(settings: Settings) -> int:
    """Seconds between two looks for tasks to deliver again: a tenth of the visibility
    timeout brings a lost task back within about 1.1 × the timeout."""
    return max(1, min(60, settings.visibility_timeout // 10))


def transport_options(settings: Settings) -> dict[str, Any]:
    """Redis transport options: the installation's key prefix, and redelivery of a dead
    worker's tasks after the visibility timeout."""
    return {
        "global_keyprefix": RedisKeys(settings.redis_prefix).celery,
        "visibility_timeout": settings.visibility_timeout,
        # kombu sweeps for expired unacknowledged tasks every interval × throttle seconds
        # (10 × 10 by default, far too rarely for a short timeout); the sweep is one ZRANGE,
        # cheap even once a second.
        "unacked_restore_interval": sweep_interval(settings),
        "unacked_restore_throttle": 1,
        # The sweep's lock expires after 300 s by default: a lock held when Redis was killed
        # comes back with its AOF and stops every sweep for that long. A sweep takes
        # milliseconds, and two at once cannot restore a task twice (each is a transaction).
        "unacked_mutex_expire": 10,
    }


def follow_valkey(urls: list[str]) -> Iterator[str]:
    """kombu's failover strategy for the embedded Valkey: after each failed connection
    attempt, where Valkey runs now (`ensure_servers` starts it again if it died, on its
    port if that is free), so a worker whose broker died carries on by itself."""
    yield urls[0]  # taken by kombu when it sets the connection up
    while True:
        try:
            yield ensure_servers(Settings.from_env(), replace_unanswering=False).redis_url
        except ServerStartError as err:
            log.error("cannot start the embedded Valkey: %s", err)
            yield urls[0]


def configure(celery_app: Celery, endpoints: Endpoints, settings: Settings | None = None) -> None:
    """Point the app at the endpoints' Redis; call it before the app first connects."""
    settings = settings or Settings.from_env()
    broker: dict[str, Any] = {"broker_url": endpoints.redis_url}
    if settings.embedded_redis:
        # kombu asks the failover strategy only for a broker with alternates: the same URL
        # twice makes every failed connection attempt ask `follow_valkey`.
        broker = {
            "broker_url": f"{endpoints.redis_url};{endpoints.redis_url}",
            "broker_failover_strategy": follow_valkey,
        }
    celery_app.conf.update(
        **broker,
        result_backend=endpoints.redis_url,
        result_backend_transport_options={
            "global_keyprefix": RedisKeys(settings.redis_prefix).celery
        },
        broker_transport_options=transport_options(settings),
    )


def sender_app(name: str, redis_url: str, settings: Settings) -> Celery:
    """A Celery app of its own on ``redis_url``, for sending tasks and control commands
    (pings) to this installation's workers, whatever broker the process's app is bound to."""
    sender = Celery(name, broker=redis_url, set_as_current=False)
    sender.conf.update(task_routes=ROUTES, broker_transport_options=transport_options(settings))
    return sender


@app.on_configure.connect
def _resolve_broker(sender: Celery, **_: Any) -> None:
    """Find the broker when the configuration is first read, unless `configure` ran."""
    # Membership does not finalize the pending configuration (reading a value would).
    if "broker_url" in sender.conf:
        return
    settings = Settings.from_env()
    configure(sender, ensure_servers(settings), settings)


@setup_logging.connect
def _setup_logging(loglevel: str | int | None = None, **_: Any) -> None:
    """copytrack's log format in workers too (a receiver here stops Celery's own set-up)."""
    settings = Settings.from_env()
    configure_logging(loglevel or settings.log_level, settings.log_format)
