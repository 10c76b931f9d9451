"""The CPU-time cap on decoding and extraction: a page that keeps an extraction worker
busy for too long is given up and stored with its raw bytes and the reason, without text;
the worker goes on with the next page."""

from __future__ import annotations

import hashlib
import multiprocessing
import signal
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import pytest
from bson import ObjectId

from crawler.digest import digest
from crawler.items import FetchedPage
from crawler.storing import store_fetched
from extractor.cpucap import CpuTimeExceeded, cpu_cap
from tracker.celery_app import app, configure
from tracker.context import Context, process_context

URL = "http://pirate.example/novel/1.html"
PARAGRAPH = "<p>第{n}段：他走进山谷，看见一座古老的寺庙，钟声在晚风里回荡，久久不散。</p>"
# Decoding and extracting it takes a few tenths of a second: far over the caps below.
BIG_PAGE = (
    "<html><head><title>长篇</title></head><body><article>"
    + "".join(PARAGRAPH.format(n=n) for n in range(4000))
    + "</article></body></html>"
).encode()
TINY_CAP = 0.02


def busy_swallowing_errors() -> None:
    """A runaway loop that, like readability, swallows every Exception it meets."""
    while True:
        try:
            sum(range(10_000))
        except Exception:  # the point: the cap must get through this
            continue


def test_a_runaway_block_is_interrupted_through_except_exception() -> None:
    before = signal.getsignal(signal.SIGPROF)
    started = time.process_time()
    with pytest.raises(CpuTimeExceeded, match=r"over 0\.2 s of CPU time"), cpu_cap(0.2):
        busy_swallowing_errors()
    assert time.process_time() - started >= 0.1  # it ran until stopped (timer granularity)
    # Nothing left behind: no timer running, the previous handler back.
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGPROF) is before


def test_a_block_within_its_time_is_left_alone() -> None:
    with cpu_cap(30):
        total = sum(range(1000))
    assert total == 499_500
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    with cpu_cap(0):  # no cap
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


def test_digest_gives_up_a_page_over_its_cpu_time() -> None:
    found = digest(BIG_PAGE, "text/html; charset=utf-8", URL, cpu_seconds=TINY_CAP)
    assert found.skip == "too_slow" and found.text == ""
    assert found.detail == f"decoding and extraction took over {TINY_CAP:g} s of CPU time"
    # Without the cap (or with a generous one) the same page has its text.
    assert "第3999段" in digest(BIG_PAGE, "text/html; charset=utf-8", URL, cpu_seconds=60).text


def test_the_cap_works_in_the_crawls_extraction_worker_processes() -> None:
    # Where the pipeline runs digest: forkserver workers, each running its tasks in its
    # main thread (signals reach no other).
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(1, mp_context=context) as pool:
        capped = pool.submit(digest, BIG_PAGE, "text/html", URL, TINY_CAP)
        assert capped.result(timeout=60).skip == "too_slow"
        # The worker goes on with the next page, uncapped by the last one's timer.
        assert "第3999段" in pool.submit(digest, BIG_PAGE, "text/html", URL, 60).result().text


@pytest.fixture
def worker_ctx(crawl_ctx: Context) -> Iterator[Context]:
    """The context an extraction worker opens for itself, on this test's servers (and the
    Celery app pointed at them first, as `configure` requires)."""
    configure(app, crawl_ctx.endpoints, crawl_ctx.settings)
    process_context.cache_clear()
    yield process_context()
    process_context().close()
    process_context.cache_clear()


def test_a_page_too_slow_to_extract_is_stored_as_evidence_without_text(
    worker_ctx: Context,
) -> None:
    item = FetchedPage(URL, URL, 200, {"Content-Type": "text/html; charset=utf-8"}, BIG_PAGE)
    run_id = ObjectId()

    counts = store_fetched(item, "novels", run_id, TINY_CAP)
    # Counted under its reason; its (empty) text is scanned like any new page's.
    assert counts == ["pages.fetched", "skipped.too_slow", "scans_enqueued"]
    page = worker_ctx.db.pages.find_one({"url": URL})
    assert page["skip_reason"].startswith("too_slow: decoding and extraction took over")
    assert page["text"] == "" and page["run_id"] == run_id
    assert zlib.decompress(page["raw_zlib"]) == BIG_PAGE  # the evidence is kept
    assert page["raw_sha256"] == hashlib.sha256(BIG_PAGE).hexdigest()

    # Fetched again with a cap it fits in: extracted and scanned, the reason gone.
    counts = store_fetched(item, "novels", run_id, 60)
    assert counts == ["pages.fetched", "scans_enqueued", "pages.changed"]
    page = worker_ctx.db.pages.find_one({"url": URL})
    assert "第3999段" in page["text"] and "skip_reason" not in page


def test_an_expiry_swallowed_once_comes_again() -> None:
    """Raised inside code that drops it (a ``__del__``, a catch-all), the cap fires again
    after as much CPU time: a runaway page cannot outlive it by luck."""
    swallowed = 0
    deadline = time.monotonic() + 10
    with pytest.raises(CpuTimeExceeded), cpu_cap(TINY_CAP):
        while time.monotonic() < deadline:
            try:
                sum(range(10_000))
            except CpuTimeExceeded:
                if swallowed:
                    raise
                swallowed += 1
    assert swallowed == 1
