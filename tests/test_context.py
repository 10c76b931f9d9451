"""The connections a Context opens (tracker.context)."""

from __future__ import annotations

import time

from tracker.context import Context
from tracker.masters.durability import DURABLE_WAIT_SECONDS, wait_durable

# Busy for 5.5 s: longer than redis-py's default reply timeout (5 s).
_SLOW_ANSWER = """
local started = redis.call('TIME')
local elapsed = 0
while elapsed < 5.5 do
  local now = redis.call('TIME')
  elapsed = (now[1] - started[1]) + (now[2] - started[2]) / 1e6
end
return 'done'
"""


def test_a_server_slower_than_five_seconds_gets_its_answer_waited_for(ctx: Context) -> None:
    """A Redis busy for seconds (a disk slow to fsync the append-only file while a large
    library is added) is waited for, up to the durability barrier's wait and more, not
    reported as a server that does not answer."""
    started = time.monotonic()
    assert ctx.redis.eval(_SLOW_ANSWER, 0) == b"done"
    assert time.monotonic() - started >= 5.5
    assert ctx.redis.connection_pool.connection_kwargs["socket_timeout"] > DURABLE_WAIT_SECONDS
    wait_durable(ctx)  # and the barrier returns once the server is free again
