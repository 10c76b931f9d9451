"""An update killed midway, or Valkey killed under it: the work shows as NOT INDEXED in
`library list` and as a warning of `status`/health, matches neither its old text nor
wrongly, and adding it again finishes it exactly (the index holds the new text's postings,
counted once) and says it did."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from copytrack.cli import main
from tests.corpus import texts
from tests.faults.helpers import add_statuses, copytrack, data_dir_env, kill_server
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import inspect, open_ready
from tracker.masters.library import Work, add_work, fingerprint_values
from tracker.matching.matcher import match_text
from tracker.monitoring.health import index_health
from tracker.runtime.servers import VALKEY, ensure_servers

OLD, NEW, OTHER = texts("zh_news", 3)


def _killed_midway(ctx: Context, master_id: int) -> None:
    """What an update leaves when killed after its first steps (`library._updated`): the
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


@pytest.mark.slow
def test_valkey_killed_during_an_update_leaves_the_old_text_unmatched(
    own: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 of Valkey in the middle of an update of existing works, once the first work
    is marked unindexed and before its old postings are removed: the work shows NOT INDEXED
    and matches nothing, its old text included; the next `library add` finishes it and
    says so."""
    env = data_dir_env(own.data_dir)
    old_file, new_file = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    for path, stories in ((old_file, (OLD, OTHER)), (new_file, (NEW, OTHER))):
        lines = [json.dumps({"id": f"s{n}", "text": t}, ensure_ascii=False) for n, t in
                 enumerate(stories)]  # fmt: skip
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert copytrack(["library", "add", str(old_file)], env).returncode == 0
    ctx = open_ready(own)
    remove = ctx.index.remove

    def killed_first(master_id: int, fingerprints: object) -> int:
        kill_server(own, VALKEY)
        return remove(master_id, fingerprints)

    monkeypatch.setattr(ctx.index, "remove", killed_first)
    try:
        with pytest.raises(redis.ConnectionError):
            add_work(ctx, Work(text=NEW, external_id="s0"))
    finally:
        ctx.close()
    ensure_servers(own)  # Valkey back, with the old postings it never removed

    listed = copytrack(["library", "list"], env)
    assert [
        line.split("\t")[1] for line in listed.stdout.splitlines() if "NOT INDEXED" in line
    ] == ["s0"]
    for text in (OLD, NEW):
        suspect = tmp_path / "suspect.txt"
        suspect.write_text(text, encoding="utf-8")
        found = copytrack(["check", str(suspect)], env)
        assert found.returncode == 0 and found.stdout.startswith("no match"), found.stdout

    again = copytrack(["library", "add", str(new_file)], env)
    assert again.returncode == 0, again.stderr
    assert add_statuses(again.stdout) == {"s0": "updated", "s1": "unchanged"}
    assert "NOT INDEXED" not in copytrack(["library", "list"], env).stdout
    suspect.write_text(OLD, encoding="utf-8")
    assert copytrack(["check", str(suspect)], env).stdout.startswith("no match")
    suspect.write_text(NEW, encoding="utf-8")
    assert copytrack(["check", str(suspect)], env).stdout.startswith("s0")
    ctx = open_ready(own)
    try:
        state = inspect(ctx)
        assert state.problem is None and state.index_postings == state.library_postings
    finally:
        ctx.close()
