"""Whether a worker consumes a queue: a key each live worker renews every few seconds.

A broadcast ping (`tracker.monitoring.health`) waits a second for the answers; the admin asks at
every poll of a waiting run or scan, so it reads these keys instead (one EXISTS). A worker
renews the key of every queue it consumes each ``HEARTBEAT_SECONDS``; the key expires
``HEARTBEAT_TTL`` seconds later, so a worker gone is noticed within that long.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..context import Context

#: Seconds between two renewals of a worker's heartbeat.
HEARTBEAT_SECONDS = 5.0
#: Seconds a heartbeat counts for: a few renewals missed and the queue has no worker.
HEARTBEAT_TTL = 20


def beat(ctx: Context, queues: Iterable[str], worker: str) -> None:
    """Say that ``worker`` consumes ``queues`` (for the next HEARTBEAT_TTL seconds)."""
    with ctx.redis.pipeline(transaction=False) as pipe:
        for queue in queues:
            pipe.set(ctx.keys.worker_heartbeat(queue), worker, ex=HEARTBEAT_TTL)
        pipe.execute()


def has_worker(ctx: Context, queue: str) -> bool:
    """Whether a live worker consumes ``queue`` (one answered within HEARTBEAT_TTL)."""
    return bool(ctx.redis.exists(ctx.keys.worker_heartbeat(queue)))
