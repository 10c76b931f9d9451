"""`library rm` racing the scans of the work's copies: no finding is left of a work that is
neither in the library nor in the archive. The removal marks the work and takes it out of
the index before it deletes its findings, and a scan keeps no finding of a work so marked
or gone."""

from __future__ import annotations

import threading

import pytest

from tests.adding import add_texts
from tests.corpus import texts
from tests.faults.helpers import pirate_copies, store_pages
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import open_ready
from tracker.masters.library import ARCHIVE, Work, add_work
from tracker.scanning import pages
from tracker.scanning.library_edits import delete_works
from tracker.scanning.pages import scan_page

WORKS = texts("zh_news", 2)


def _orphans(ctx: Context) -> list[dict]:
    """Findings whose work is neither in the library nor archived."""
    known = {m["_id"] for m in ctx.db.masters.find({}, {"_id": 1})}
    known |= {m["_id"] for m in ctx.db[ARCHIVE].find({}, {"_id": 1})}
    return [f for f in ctx.db.findings.find({}, {"master_id": 1}) if f["master_id"] not in known]


def test_a_work_removed_between_the_match_and_the_finding_leaves_none(
    ctx: Context, tracker_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    add_texts(ctx, WORKS, "w")
    [page] = store_pages(ctx, ["\n".join(pirate_copies(WORKS, 1))], "pirate")
    remover = open_ready(Settings.from_env(tracker_env))
    record_findings = pages.record_findings
    removed: list[str] = []

    def remove_then_record(*args, **kwargs):  # `library rm w0` while the page is scanned
        removed.extend(r.external_id for r in delete_works(remover, "w0", by="cli"))
        return record_findings(*args, **kwargs)

    monkeypatch.setattr(pages, "record_findings", remove_then_record)
    try:
        scanned = scan_page(ctx, page)
    finally:
        remover.close()
    assert removed == ["w0"] and scanned.matches == 2  # both matched, then w0 went
    assert _orphans(ctx) == []
    [kept] = ctx.db.findings.find({"page_id": page})
    assert kept["master_external_id"] == "w1"


@pytest.mark.slow
def test_removals_and_re_adds_under_forced_scans_leave_no_orphan(
    ctx: Context, tracker_env: dict[str, str]
) -> None:
    """25 removals and re-adds of a work while its copies are scanned again and again."""
    add_texts(ctx, WORKS, "w")
    copies = store_pages(ctx, pirate_copies(WORKS[:1], 6), "pirate")
    done = threading.Event()
    errors: list[BaseException] = []

    def scan_again_and_again() -> None:
        scanner = open_ready(Settings.from_env(tracker_env))
        try:
            while not done.is_set():
                for page_id in copies:
                    scan_page(scanner, page_id, force=True)
        except BaseException as err:  # reported below
            errors.append(err)
        finally:
            scanner.close()

    scanners = [threading.Thread(target=scan_again_and_again) for _ in range(2)]
    for thread in scanners:
        thread.start()
    try:
        for _ in range(25):
            delete_works(ctx, "w0", by="cli")
            add_work(ctx, Work(text=WORKS[0], external_id="w0"))
    finally:
        done.set()
        for thread in scanners:
            thread.join()
    assert errors == []
    assert _orphans(ctx) == []
