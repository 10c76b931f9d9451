"""An update killed midway: the work shows as NOT INDEXED in `library list` and as a
warning of `status`/health, matches neither its old text nor wrongly, and adding it again
finishes it exactly (the index holds the new text's postings, counted once)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from click.testing import CliRunner

from copytrack.cli import main
from tests.corpus import texts
from tracker.context import Context
from tracker.generation import inspect
from tracker.health import index_health
from tracker.library import Work, add_work, fingerprint_values
from tracker.matcher import match_text

OLD, NEW, OTHER = texts("zh_news", 3)


def _killed_midway(ctx: Context, master_id: int) -> None:
    """What an update leaves when killed after its first steps (`library._update`): the
    work marked indexing, the old text's postings discounted and removed, the new text
    not written yet."""
    old = ctx.db.masters.find_one_and_update(
        {"_id": master_id}, {"$set": {"state": "indexing"}}, {"text": 1}
    )
    values = fingerprint_values(ctx, old["text"])
    ctx.db.index_state.update_one({"_id": "index"}, {"$inc": {"postings": -len(values)}})
    ctx.index.remove(master_id, values.values)


def test_an_interrupted_update_shows_and_adding_again_finishes_it(ctx: Context) -> None:
    (first,) = add_work(ctx, Work(text=OLD, external_id="story"))
    add_work(ctx, Work(text=OTHER, external_id="other"))
    _killed_midway(ctx, first.master_id)

    listed = CliRunner().invoke(main, ["library", "list"]).output.splitlines()
    assert [line for line in listed if "NOT INDEXED" in line] == [
        line for line in listed if line.split("\t")[1] == "story"
    ]
    assert index_health(ctx)["unindexed_works"] == 0  # it may still be running
    ctx.db.masters.update_one(
        {"_id": first.master_id}, {"$set": {"updated_at": datetime.now(UTC) - timedelta(hours=1)}}
    )
    health = index_health(ctx)
    assert health["unindexed_works"] == 1 and "add them again" in health["warning"]
    assert match_text(ctx, OLD) == []  # no stale postings of the old text

    (again,) = add_work(ctx, Work(text=NEW, external_id="story"))
    assert (again.status, again.master_id) == ("updated", first.master_id)
    state = inspect(ctx)
    assert state.problem is None and state.warning is None
    assert state.index_postings == state.library_postings
    assert [m.master.external_id for m in match_text(ctx, NEW)] == ["story"]
    assert index_health(ctx)["unindexed_works"] == 0
    listed = CliRunner().invoke(main, ["library", "list"]).output
    assert "NOT INDEXED" not in listed
