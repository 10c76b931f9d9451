"""`copytrack rescan`: pages whose scan was lost are scanned again, inline or by workers."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from copytrack.cli import main
from tests.corpus import texts
from tracker.context import Context
from tracker.masters.library import Work, add_work
from tracker.scanning.pages import PageInput, scan_page, store_page


@pytest.fixture
def copies(ctx: Context) -> list:
    """Three stored copies of a work, the first one scanned; the others' scans were lost."""
    [text] = texts("zh_news", 1)
    add_work(ctx, Work(text=text, external_id="news-0"))
    ids = [
        store_page(ctx, PageInput(url=f"http://pirate.example/{n}", text=text, campaign=c))[0]
        for n, c in enumerate(("a", "a", "b"))
    ]
    scan_page(ctx, ids[0])
    return ids


def _rescan(*args: str) -> str:
    result = CliRunner().invoke(main, ["rescan", *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_rescan_inline_scans_only_what_was_never_scanned(ctx: Context, copies: list) -> None:
    first_scan = ctx.db.pages.find_one({"_id": copies[0]})["scanned_at"]
    assert "scanned 1 pages: 1 copy a work" in _rescan("--inline", "--campaign", "a")
    assert ctx.db.findings.count_documents({}) == 2  # campaign b's page still waits
    assert "scanned 1 pages: 1 copy a work" in _rescan("--inline")
    assert ctx.db.findings.count_documents({}) == 3
    assert "scanned 0 pages" in _rescan("--inline")  # nothing left
    assert ctx.db.pages.find_one({"_id": copies[0]})["scanned_at"] == first_scan
    # --all scans every page again, and still one finding per page and work.
    assert "scanned 3 pages: 3 copy a work" in _rescan("--inline", "--all")
    assert ctx.db.pages.find_one({"_id": copies[0]})["scanned_at"] > first_scan
    assert ctx.db.findings.count_documents({}) == 3


def test_rescan_queues_the_scans_for_workers(ctx: Context, copies: list) -> None:
    assert "queued 2 scans" in _rescan()
    assert ctx.redis.llen(ctx.keys.queue("scan")) == 2
    assert "queued 3 scans" in _rescan("--all")
    assert ctx.redis.llen(ctx.keys.queue("scan")) == 5
