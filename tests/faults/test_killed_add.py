"""`library add` killed (SIGKILL) midway, while one batch's documents are inserted and the
next one's postings written: every work it printed as added is stored and found, and adding
the same file again finishes the job."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.faults.helpers import (
    add_statuses,
    adding,
    copytrack,
    data_dir_env,
    novel_stretches,
    works_file,
)

pytestmark = pytest.mark.slow

#: Six `library add` batches of 500 works (`--batch 500`).
WORKS = novel_stretches(3000)


def test_a_killed_library_add_keeps_what_it_printed(tmp_path: Path) -> None:
    works = works_file(tmp_path, WORKS)
    env = data_dir_env(tmp_path / "data")
    try:
        with adding(works, env, 500, tmp_path) as (run, first):
            os.kill(run.pid, signal.SIGKILL)
            printed = add_statuses(first + run.stdout.read())
            run.wait(timeout=60)
        assert 0 < len(printed) < len(WORKS) and set(printed.values()) == {"added"}

        again = copytrack(["library", "add", str(works)], env, timeout=600, cwd=tmp_path)
        assert again.returncode == 0, again.stderr
        second = add_statuses(again.stdout)
        assert len(second) == len(WORKS)
        assert {second[work_id] for work_id in printed} == {"unchanged"}
        listed = copytrack(["library", "list"], env, cwd=tmp_path)
        assert listed.returncode == 0 and "NOT INDEXED" not in listed.stdout
        assert len(listed.stdout.splitlines()) == len(WORKS)

        last_printed = max(printed, key=lambda work_id: int(work_id[1:]))
        suspect = tmp_path / "suspect.txt"
        suspect.write_text("转载：\n" + WORKS[int(last_printed[1:])], encoding="utf-8")
        found = copytrack(["check", str(suspect)], env, cwd=tmp_path)
        works_found = [
            line.split(" — ")[0] for line in found.stdout.splitlines() if line[:1] != " "
        ]
        assert last_printed in works_found, found.stdout + found.stderr
    finally:
        copytrack(["down"], env)
