"""Structured logs: a real worker with COPYTRACK_LOG_FORMAT=json writes one JSON object per
line, and a page's scan carries the page, campaign and run ids as fields."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from bson import ObjectId

from tests.corpus import texts
from tests.processes import wait_until, worker_process
from tracker import tasks
from tracker.celery_app import app, configure
from tracker.context import Context
from tracker.core.logs import configure_logging
from tracker.masters.library import Work, add_work
from tracker.scanning.pages import PageInput, store_page


def test_a_json_worker_log_follows_a_page_by_its_ids(ctx: Context, tmp_path: Path) -> None:
    configure(app, ctx.endpoints, ctx.settings)
    [text] = texts("en_news", 1)
    add_work(ctx, Work(text=text, external_id="news-0"))
    run_id = ObjectId()
    page = PageInput(url="http://pirate.example/a", text=text, campaign="pirates", run_id=run_id)
    page_id, _ = store_page(ctx, page)
    tasks.enqueue_scan(page_id)

    log = tmp_path / "worker.log"
    with worker_process(ctx, log, extra_env={"COPYTRACK_LOG_FORMAT": "json"}):
        wait_until(
            lambda: ctx.db.pages.find_one({"_id": page_id, "scanned_at": {"$ne": None}}),
            60,
            "scan",
            log,
        )
        # The task's own "succeeded" line follows the scan.
        wait_until(lambda: "succeeded" in log.read_text(errors="replace"), 10, "task log", log)

    # Celery prints its banner to stdout; every log record is a JSON line.
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    assert {"time", "level", "logger", "message"} <= events[0].keys()
    [scan] = [e for e in events if e.get("page_id") == str(page_id)]
    assert scan["message"] == "page scanned: 1 matching works"
    assert (scan["campaign"], scan["run_id"], scan["url"]) == (
        "pirates",
        str(run_id),
        "http://pirate.example/a",
    )
    assert scan["findings"] == 1 and scan["level"] == "INFO"
    # Celery's own records use the same format (its logging set-up is copytrack's).
    assert any(e["logger"].startswith("celery") and "succeeded" in e["message"] for e in events)


@pytest.mark.parametrize("level", ["INFO", logging.INFO, "DEBUG"])
def test_chatty_libraries_log_warnings_only_whatever_the_level_type(level: str | int) -> None:
    # The CLI gives the level by name, Celery's worker by number.
    root = logging.getLogger()
    saved = root.level, list(root.handlers)
    try:
        configure_logging(level, "text")
        assert logging.getLogger("weasyprint").level == logging.WARNING
        assert logging.getLogger("fontTools").level == logging.WARNING
        expected = logging.getLevelName(level) if isinstance(level, str) else level
        assert root.level == expected
    finally:
        root.setLevel(saved[0])
        root.handlers[:] = saved[1]
