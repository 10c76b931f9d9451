"""The shared frontier's Redis client (``REDIS_PARAMS["redis_cls"]`` of scrapy-redis): it
follows the servers to where they are now, as the crawl's storage does.

scrapy-redis keeps the URL it was given when the crawl started. An embedded Valkey that
died may come back on another port (its own was taken meanwhile), and the crawl would then
wait on a port where nothing answers: no page stored, the process alive. On a connection
error this client asks `tracker.context.follow_servers` where the servers are (it starts
an embedded one that is down, and waits while another process does) and carries on there.
A configured server that stays away still fails the command, as before.
"""

from __future__ import annotations

from typing import Any

import redis

from tracker.context import follow_servers, process_context

_GONE = (redis.ConnectionError, redis.TimeoutError)


class FollowingRedis(redis.Redis):
    """A Redis client that reconnects to the installation's Redis where it is now."""

    _url: str
    _options: dict[str, Any]

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> FollowingRedis:
        client = cls(connection_pool=redis.ConnectionPool.from_url(url, **kwargs))
        client._url, client._options = url, kwargs
        return client

    def execute_command(self, *args: Any, **options: Any) -> Any:
        try:
            return super().execute_command(*args, **options)
        except _GONE:
            url = _redis_now()
            if url == self._url:
                raise
            self.connection_pool.disconnect()
            self.connection_pool = redis.ConnectionPool.from_url(url, **self._options)
            self._url = url
            return super().execute_command(*args, **options)


def _redis_now() -> str:
    follow_servers()
    return process_context().endpoints.redis_url
