"""An index that is not the library's: wiped, another build, short of postings.
Scans against it would find nothing and close real findings: they are refused
with one line, `copytrack reindex` then `copytrack rescan` recover, and a copy seen again
reopens a finding copytrack itself had closed."""

from __future__ import annotations

import random
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import redis

from tests.adding import add_all
from tests.corpus import texts
from tests.faults.helpers import (
    SCAN_WORKER,
    copytrack,
    embedded_env,
    findings_of,
    one_line_failure,
    pirate_copies,
    send_scans,
    store_pages,
)
from tests.processes import process_group, wait_until
from tracker.context import Context
from tracker.core.config import Settings
from tracker.findings import set_status
from tracker.index import MIN_LEVEL, SHARDS, RedisIndex
from tracker.masters import generation
from tracker.masters.generation import open_ready
from tracker.masters.library import Work, add_work, fingerprint_values, reindex
from tracker.monitoring.health import index_health
from tracker.scanning.pages import PageInput, scan_page, store_page

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _statuses(ctx: Context) -> dict[tuple[object, int], str]:
    return {(f["page_id"], f["master_id"]): f["status"] for f in ctx.db.findings.find()}


def test_a_wiped_index_closes_nothing_and_reindex_then_rescan_recover(
    own: Settings, tmp_path: Path
) -> None:
    works = texts("zh_news", 3)
    env = embedded_env(own)
    ctx = open_ready(own)
    log = tmp_path / "worker.log"
    try:
        add_all(ctx, [Work(text=text, external_id=f"news-{n}") for n, text in enumerate(works)])
        copies = pirate_copies(works, 1)
        pages = store_pages(ctx, copies + texts("zh_news", 12)[10:], "pirate")
        for page_id in pages:
            scan_page(ctx, page_id)
        [confirmed] = [f["_id"] for f in ctx.db.findings.find({"page_id": pages[0]})]
        set_status(ctx, confirmed, "confirmed", "reviewer")
        before = _statuses(ctx)
        assert len(before) == 3
        suspect = tmp_path / "suspect.txt"
        suspect.write_text(copies[1])

        ctx.redis.flushall()  # Redis lost everything: the index and the queues

        one_line_failure(copytrack(["rescan", "--all", "--inline"], env), "empty", "reindex")
        one_line_failure(copytrack(["check", str(suspect)], env), "empty", "reindex")
        status = copytrack(["status"], env)
        assert status.returncode == 1 and "index: the index is empty" in status.stdout
        assert not index_health(ctx)["ok"]
        # A worker refuses the scan too, and leaves the page for `copytrack rescan`.
        [late] = store_pages(ctx, pirate_copies(works[:1], 1, seed=9), "late")
        send_scans(ctx.endpoints.redis_url, [late])
        with process_group(SCAN_WORKER, env, log):
            wait_until(lambda: "refused" in log.read_text(errors="replace"), 60, "refusal", log)
        assert ctx.db.pages.find_one({"_id": late}).get("scanned_at") is None
        assert _statuses(ctx) == before  # nothing closed

        rebuilt = copytrack(["reindex"], env)
        assert rebuilt.returncode == 0, rebuilt.stderr
        assert "run `copytrack rescan`" in rebuilt.stdout
        # Every page was scanned with the lost index's generation: all are scanned again.
        rescan = copytrack(["rescan", "--inline"], env)
        assert rescan.returncode == 0, rescan.stderr
        assert "scanned 6 pages: 4 copy a work" in rescan.stdout
        after = _statuses(ctx)
        assert {key: after[key] for key in before} == before
        assert len(after) == 4 and set(after.values()) == {"new", "confirmed"}
        findings_of(ctx)  # and none twice
    finally:
        ctx.close()


def test_an_index_of_another_build_or_short_of_postings_is_refused(ctx: Context) -> None:
    works = texts("zh_news", 2)
    masters = [add_work(ctx, Work(text=t, external_id=f"news-{n}"))[0].master_id
               for n, t in enumerate(works)]  # fmt: skip
    [page] = store_pages(ctx, pirate_copies(works[:1], 1), "pirate")
    built = generation.current(ctx)
    assert ctx.index.generation()[0] == built

    ctx.index.set_generation("0" * 32)  # another installation's index, or an old copy
    with pytest.raises(generation.IndexNotReady, match="another copy of the index"):
        scan_page(ctx, page)
    with pytest.raises(generation.IndexNotReady, match="reindex"):
        open_ready(ctx.settings).close()
    ctx.index.set_generation(built)

    # Postings the library put in are gone (a Redis crash lost its last writes).
    ctx.index.remove(masters[1], fingerprint_values(ctx, works[1]).values)
    with pytest.raises(generation.IndexNotReady, match="lost recent writes"):
        scan_page(ctx, page)
    assert "lost recent writes" in index_health(ctx)["error"]
    assert ctx.db.findings.count_documents({}) == 0

    generation.rebuild(ctx, reindex)
    assert scan_page(ctx, page).matches == 1
    assert findings_of(ctx) == {(page, masters[0])}

    # More postings than the library counted (an interrupted add): matching stays right.
    ctx.index.add(masters[1] + 1000, *fingerprint_values(ctx, works[1]))
    health = index_health(ctx)
    assert health["ok"] and "more than the library counted" in health["warning"]
    assert scan_page(ctx, page, force=True).matches == 1


def test_a_copy_seen_again_reopens_only_what_copytrack_closed(ctx: Context) -> None:
    works = texts("zh_news", 2)
    other = texts("zh_news", 12)[10:]
    add_all(ctx, [Work(text=text, external_id=f"news-{n}") for n, text in enumerate(works)])
    urls = ["http://a.example/1", "http://b.example/2", "http://c.example/3"]
    copying = [works[0], works[1], works[0]]

    def publish(contents: list[str]) -> list[str]:
        """The three pages now show contents; scans them; returns their findings' statuses."""
        for url, text in zip(urls, contents, strict=True):
            page_id, _ = store_page(ctx, PageInput(url=url, text=text))
            scan_page(ctx, page_id)
        return [ctx.db.findings.find_one({"url": url})["status"] for url in urls]

    assert publish(copying) == ["new", "new", "new"]
    ids = [ctx.db.findings.find_one({"url": url})["_id"] for url in urls]
    set_status(ctx, ids[0], "confirmed", "reviewer")
    set_status(ctx, ids[1], "dismissed", "reviewer")
    for status in ("confirmed", "notice_sent", "removed"):  # the takedown worked
        set_status(ctx, ids[2], status, "reviewer")

    # The copies vanish: copytrack closes the open finding, keeps the reviewers' ones.
    assert publish([other[0], other[1], other[0]]) == ["removed", "dismissed", "removed"]
    # They are back: the finding copytrack closed reopens as it was; the others stay.
    assert publish(copying) == ["confirmed", "dismissed", "removed"]
    history = ctx.db.findings.find_one({"_id": ids[0]})["history"]
    assert [(h["status"], h["by"]) for h in history] == [
        ("new", "copytrack"),
        ("confirmed", "reviewer"),
        ("removed", "copytrack"),
        ("confirmed", "copytrack"),
    ]
    assert "again" in history[-1]["note"]


def _three_copied_works(ctx: Context) -> tuple[list[str], list[str], dict]:
    """Three works added, a page copying each stored and scanned: the works, the copies
    and the findings' statuses."""
    works = texts("zh_news", 3)
    add_all(ctx, [Work(text=text, external_id=f"news-{n}") for n, text in enumerate(works)])
    copies = pirate_copies(works, 1)
    for page_id in store_pages(ctx, copies, "pirate"):
        scan_page(ctx, page_id)
    return works, copies, _statuses(ctx)


def _index_blocks(ctx: Context) -> list[bytes]:
    """The index's blocks (``{prefix}:{SS}:NNNNNNNNNN``): the postings, without the meta and
    shard hashes that count them."""
    return sorted(ctx.redis.scan_iter(match=f"{ctx.keys.index}:{{*}}:*", count=1000))


def test_blocks_lost_with_their_counters_kept_close_nothing(own: Settings, tmp_path: Path) -> None:
    """Index blocks gone while the meta and shard hashes (the counters) stay, as after an
    eviction or a bad restore: the counts agree, the postings are not there. Works' postings
    looked up from their texts show it: `status`, `check` and `rescan` refuse, nothing is
    closed, and `reindex` then `rescan` recover."""
    own = replace(own, index_snapshot=False)  # the blocks layout's own recovery
    env = embedded_env(own)
    ctx = open_ready(own)
    try:
        _, copies, before = _three_copied_works(ctx)
        assert len(before) == 3 and set(before.values()) == {"new"}
        suspect = tmp_path / "suspect.txt"
        suspect.write_text(copies[1])

        blocks = _index_blocks(ctx)
        ctx.redis.delete(*blocks[: len(blocks) * 3 // 10])  # 30% of the blocks
        status = copytrack(["status"], env)
        assert status.returncode == 1 and "the index lacks" in status.stdout, status.stdout
        one_line_failure(copytrack(["rescan", "--all", "--inline"], env), "lacks", "reindex")
        ctx.redis.delete(*blocks)  # all of them: every copy would look gone
        one_line_failure(copytrack(["check", str(suspect)], env), "lacks", "reindex")
        one_line_failure(copytrack(["rescan", "--all", "--inline"], env), "lacks", "reindex")
        assert not index_health(ctx)["ok"]
        assert _statuses(ctx) == before  # nothing closed

        assert copytrack(["reindex"], env).returncode == 0
        rescan = copytrack(["rescan", "--all", "--inline"], env)
        assert rescan.returncode == 0 and "scanned 3 pages: 3 copy a work" in rescan.stdout
        assert _statuses(ctx) == before and index_health(ctx)["ok"]
    finally:
        ctx.close()


def test_a_scan_closes_a_finding_only_once_its_work_is_looked_up(blocks_ctx: Context) -> None:
    """The blocks vanish after a process last took its sample: its scan that would close
    the findings looks their works up first, refuses, and records the loss for every
    process. (A process that keeps no index blocks: one that does still has them.)"""
    ctx = blocks_ctx
    works = texts("zh_news", 2)
    add_all(ctx, [Work(text=text, external_id=f"news-{n}") for n, text in enumerate(works)])
    pages = store_pages(ctx, pirate_copies(works, 1), "pirate")
    scanner = open_ready(replace(ctx.settings, index_cache_mb=0))
    try:
        for page_id in pages:
            scan_page(scanner, page_id)  # the first scan took this process's sample
        ctx.redis.delete(*_index_blocks(ctx))

        with pytest.raises(generation.IndexNotReady, match="lacks"):
            scan_page(scanner, pages[0], force=True)
        assert set(_statuses(ctx).values()) == {"new"}
        assert "lacks" in generation.inspect(ctx).problem  # recorded: every process refuses
        with pytest.raises(generation.IndexNotReady, match="lacks"):
            open_ready(ctx.settings).close()
        generation.rebuild(ctx, reindex)
        assert generation.inspect(ctx).problem is None
        assert scan_page(scanner, pages[1], force=True).matches == 1
    finally:
        scanner.close()


def test_one_block_lost_of_a_work_no_sample_meets_is_found(own: Settings, tmp_path: Path) -> None:
    """A single block deleted, holding postings of one work only: the shards' counts of
    blocks, kept with the blocks, show it whatever the sampled lookups meet
    (the commands' message is the counts', not a work's). `status`, `check` and `rescan`
    refuse; nothing is closed; `reindex` recovers."""
    own = replace(own, index_snapshot=False)  # the blocks layout's own recovery
    env = embedded_env(own)
    ctx = open_ready(own)
    try:
        works, copies, before = _three_copied_works(ctx)
        suspect = tmp_path / "suspect.txt"
        suspect.write_text(copies[2])
        assert ctx.index.miscounted_shards() == []

        # One of work news-2's blocks (found by its text) holding no posting of the others.
        blocks = set(_index_blocks(ctx))
        others = _blocks_read(ctx, works[:2])
        [lost, *_] = sorted((_blocks_read(ctx, works[2:]) & blocks) - others)
        ctx.redis.delete(lost)
        counted = ctx.index.miscounted_shards()
        assert len(counted) == 1 and counted[0].blocks_found == counted[0].blocks - 1

        status = copytrack(["status"], env)
        assert status.returncode == 1 and "lacks 1 of the" in status.stdout, status.stdout
        one_line_failure(copytrack(["check", str(suspect)], env), "lacks 1 of", "reindex")
        one_line_failure(copytrack(["rescan", "--all", "--inline"], env), "lacks", "reindex")
        assert _statuses(ctx) == before  # nothing closed
        assert "lacks 1 of" in generation.inspect(ctx).problem  # recorded for every process

        assert copytrack(["reindex"], env).returncode == 0
        assert ctx.index.miscounted_shards() == [] and index_health(ctx)["ok"]
        rescan = copytrack(["rescan", "--all", "--inline"], env)
        assert rescan.returncode == 0 and "scanned 3 pages: 3 copy a work" in rescan.stdout
        assert _statuses(ctx) == before
    finally:
        ctx.close()


def _blocks_read(ctx: Context, works: list[str]) -> set[bytes]:
    """Names of the blocks a lookup of these works' fingerprints reads."""
    index = ctx.index
    names: set[bytes] = set()
    for text in works:
        x = index._mixed(fingerprint_values(ctx, text).values)
        shard, block, _ = index._route(x)
        names |= {row.tobytes() for row in index._block_names(shard, block)}
    return names


def test_counting_blocks_while_writers_add_and_split_raises_no_false_alarm(
    redis_client: redis.Redis,
) -> None:
    """Adds, removals and splits of blocks run while the blocks are counted: a shard
    written to between two slices of its count is counted again or left unchecked, never
    reported; once they stop, one block deleted is."""
    index = RedisIndex(redis_client, "test:counted", fingerprint_bits=54)
    index.clear()
    rng = random.Random(5)
    masters = [(m, [rng.getrandbits(54) for _ in range(200)]) for m in range(1, 2601)]
    stop = threading.Event()

    def write() -> None:
        writer = RedisIndex(redis_client, "test:counted", fingerprint_bits=54)
        for start in range(0, len(masters), 20):
            writer.add_many(masters[start : start + 20])  # splits blocks as the shards grow
            writer.remove(*masters[start])
            if stop.is_set():
                break

    thread = threading.Thread(target=write)
    thread.start()
    try:
        counts = 0
        while thread.is_alive():
            assert index.miscounted_shards() == []
            counts += 1
    finally:
        stop.set()
        thread.join()
    assert counts > 5
    assert index.stats().keys > SHARDS * 2**MIN_LEVEL  # blocks split while counted
    assert index.miscounted_shards() == []
    redis_client.delete(next(redis_client.scan_iter(match="test:counted:{03}:*")))
    [lost] = index.miscounted_shards()
    assert (lost.shard, lost.blocks_found) == (3, lost.blocks - 1)
    index.clear()
