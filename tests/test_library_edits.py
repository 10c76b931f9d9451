"""Editing and deleting works on real servers, and what becomes of their findings."""

from __future__ import annotations

import pytest

from tests.adding import add_all
from tests.copies import ZH, found_on
from tracker.core.config import Settings
from tracker.findings import set_status
from tracker.masters.generation import open_ready
from tracker.masters.library import ARCHIVE, Work
from tracker.masters.master_cache import masters_kept
from tracker.matching.matcher import match_text
from tracker.scanning.library_edits import delete_work, edit_work, findings_fate


@pytest.fixture
def copied(ctx):
    """Work w0 copied on three pages; w1 on one."""
    add_all(
        ctx,
        [
            Work(text=text, external_id=f"w{i}", title=f"作品{i}", author="记者")
            for i, text in enumerate(ZH[:2])
        ],
    )
    found = [found_on(ctx, f"https://copy.example/{n}", 0) for n in range(3)]
    found.append(found_on(ctx, "https://copy.example/other", 1))
    master_id = ctx.db.masters.find_one({"external_id": "w0"})["_id"]
    return ctx, master_id, found


def test_a_new_title_shows_on_the_findings(copied):
    ctx, master_id, found = copied
    result = edit_work(ctx, master_id, title="  新标题 ", author="")
    assert result.text is None and result.rescanned == 0
    master = ctx.db.masters.find_one({"_id": master_id})
    assert master["title"] == "新标题" and master["author"] is None
    assert ctx.db.findings.find_one({"_id": found[0]})["master_title"] == "新标题"
    assert ctx.db.findings.find_one({"_id": found[3]})["master_title"] == "作品1"


def test_a_new_text_is_matched_and_the_findings_are_scanned_again(copied):
    ctx, master_id, found = copied
    old_spans = ctx.db.findings.find_one({"_id": found[0]})["spans"]
    # The publisher's corrected text: the last third replaced by another article.
    corrected = ZH[0][: len(ZH[0]) * 2 // 3] + ZH[4]
    result = edit_work(ctx, master_id, text=corrected)
    assert result.text.status == "updated" and result.rescanned == 3 and result.still_copied == 3
    assert [m.master.external_id for m in match_text(ctx, ZH[4])] == ["w0"]
    refreshed = ctx.db.findings.find_one({"_id": found[0]})
    assert refreshed["status"] == "new" and refreshed["spans"] != old_spans
    assert refreshed["spans"][-1][1] <= len(ZH[0]) * 2 // 3 + 2  # passages of the new text
    # A text no page copies any more: the findings are closed, saying why.
    result = edit_work(ctx, master_id, text=ZH[5])
    assert result.rescanned == 3 and result.still_copied == 0
    closed = ctx.db.findings.find_one({"_id": found[1]})
    assert closed["status"] == "removed" and "no longer copies" in closed["history"][-1]["note"]
    assert edit_work(ctx, master_id, text=ZH[5]).text.status == "unchanged"
    with pytest.raises(ValueError, match="too short"):
        edit_work(ctx, master_id, text="太短")
    with pytest.raises(LookupError):
        edit_work(ctx, 999_999, title="x")


def test_a_process_matching_sees_the_edits_another_process_makes(copied, tracker_env):
    ctx, master_id, _ = copied
    worker = open_ready(Settings.from_env(tracker_env))  # a worker keeping masters it met
    try:
        suspect = ZH[0][: len(ZH[0]) // 2]
        before = match_text(worker, suspect)
        assert [m.master.title for m in before] == ["作品0"] and len(masters_kept(worker)) == 1
        # The admin (another process) renames the work and puts another text first.
        edit_work(ctx, master_id, title="更正后", text=ZH[5] + ZH[0])
        after = match_text(worker, suspect)
        assert [m.master.title for m in after] == ["更正后"]
        shift = len(ZH[5])
        assert [s.master_start for s in after[0].spans] == [
            s.master_start + shift for s in before[0].spans
        ]
    finally:
        worker.close()


def test_deleting_a_work_keeps_the_findings_reviewers_decided_on(copied):
    ctx, master_id, found = copied
    set_status(ctx, found[0], "confirmed", "rui")
    set_status(ctx, found[1], "dismissed", "rui", reason="quotation")
    assert findings_fate(ctx, master_id) == {"deleted": 1, "kept": 2}
    result = delete_work(ctx, master_id, "ada")
    assert (result.external_id, result.findings_deleted, result.findings_kept) == ("w0", 1, 2)
    assert match_text(ctx, ZH[0]) == []  # out of the index
    assert ctx.db.findings.find_one({"_id": found[2]}) is None
    kept = ctx.db.findings.find_one({"_id": found[0]})
    assert kept["status"] == "confirmed" and kept["work_deleted"]["by"] == "ada"
    archived = ctx.db[ARCHIVE].find_one({"_id": master_id})
    assert archived["text"] == ZH[0] and archived["deleted_by"] == "ada"
    assert ctx.db.findings.find_one({"_id": found[3]})["status"] == "new"  # another work's
    other = ctx.db.masters.find_one({"external_id": "w1"})["_id"]
    delete_work(ctx, other, "ada")
    assert ctx.db[ARCHIVE].find_one({"_id": other}) is None  # no finding needs it
