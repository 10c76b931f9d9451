"""ScanBackoff on the real Redis: items that queue scans concurrently never take the scan
queue past its bound; the crawl is paused while it is full and resumes at half."""

from __future__ import annotations

import asyncio

import pytest
import redis

from crawler import pipelines
from crawler.pipelines import SCAN_QUEUE, ScanBackoff

BOUND = 6


class Engine:
    """What ScanBackoff uses of Scrapy's engine (pause, unpause, running), noting the
    queue's depth whenever the crawl resumes."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.running = True
        self.paused = False
        self.pauses = 0
        self.resumed_at: list[int] = []

    def pause(self) -> None:
        self.paused, self.pauses = True, self.pauses + 1

    def unpause(self) -> None:
        self.paused = False
        self.resumed_at.append(self.client.llen(SCAN_QUEUE))


class Crawler:
    def __init__(self, client: redis.Redis) -> None:
        self.engine = Engine(client)


def test_concurrent_items_never_take_the_queue_past_its_bound(
    redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipelines, "BACKOFF_POLL", 0.02)
    crawler = Crawler(redis_client)
    backoff = ScanBackoff(crawler, redis_client, SCAN_QUEUE, BOUND, "test crawl")  # type: ignore[arg-type]
    depths: list[int] = []

    async def item(n: int) -> None:
        await backoff.reserve()
        try:
            await asyncio.sleep(0.001 * (n % 5))  # storing takes a while, items overlap
            depths.append(await asyncio.to_thread(redis_client.rpush, SCAN_QUEUE, n))
        finally:
            backoff.release(queued=True)

    async def worker(total: int) -> None:
        taken = 0
        while taken < total:
            await asyncio.sleep(0.01)
            if await asyncio.to_thread(redis_client.lpop, SCAN_QUEUE) is not None:
                taken += 1

    async def crawl() -> None:
        await asyncio.gather(worker(40), *(item(n) for n in range(40)))

    asyncio.run(crawl())
    assert len(depths) == 40 and max(depths) == BOUND  # filled up to the bound, never past
    engine = crawler.engine
    assert engine.pauses >= 1 and not engine.paused
    assert len(engine.resumed_at) == engine.pauses
    assert max(engine.resumed_at) <= BOUND // 2  # resumed once down to half


def test_without_a_bound_a_full_queue_pauses_nothing(redis_client: redis.Redis) -> None:
    crawler = Crawler(redis_client)
    backoff = ScanBackoff(crawler, redis_client, SCAN_QUEUE, 0, "test crawl")  # type: ignore[arg-type]
    redis_client.rpush(SCAN_QUEUE, *range(100))

    async def items() -> None:
        for _ in range(10):
            await backoff.reserve()
            backoff.release(queued=True)

    asyncio.run(items())
    assert crawler.engine.pauses == 0
