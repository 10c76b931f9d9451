"""A full disk under the embedded servers, on a small tmpfs data dir:
one line naming the data dir and its free space, nothing printed as added is lost, no
server is left running that nobody recorded, and `status` sees the failure."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.faults.helpers import (
    add_statuses,
    adding,
    copytrack,
    data_dir_env,
    fill_disk,
    novel_stretches,
    one_line_failure,
    servers_of,
    works_file,
)

pytestmark = pytest.mark.slow


#: Enough works for four `library add` batches of 1,000 works (`--batch 1000`).
WORKS = novel_stretches(3500)


def _works_file(tmp_path: Path, count: int = len(WORKS)) -> Path:
    return works_file(tmp_path, WORKS[:count])


# Both index layouts: the snapshot's file is written into the data dir too.
@pytest.mark.parametrize("snapshot", ["false", "true"])
def test_a_disk_filling_up_midway_loses_nothing_printed_and_leaves_no_server(
    small_disk: Path, tmp_path: Path, snapshot: str
) -> None:
    works = _works_file(tmp_path)
    env = {**data_dir_env(small_disk), "COPYTRACK_INDEX_SNAPSHOT": snapshot}
    with adding(works, env, 1000, tmp_path) as (run, first):
        filler = fill_disk(small_disk)  # the disk fills up after the first batch went in
        # Read through the pipe's own buffer (communicate() would skip what readline read).
        stdout, stderr = run.stdout.read(), run.stderr.read()
        run.wait(timeout=300)
    failed = subprocess.CompletedProcess(run.args, run.returncode, first + stdout, stderr)
    line = one_line_failure(failed, str(small_disk), "free")
    assert failed.returncode == 2, line
    assert servers_of(small_disk) == []  # the command stopped the servers it started

    printed = add_statuses(failed.stdout)
    assert 0 < len(printed) < len(WORKS) and set(printed.values()) == {"added"}

    filler.unlink()  # room again: the next run restarts the servers and finishes the job
    again = copytrack(["library", "add", str(works)], env, timeout=600, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    second = add_statuses(again.stdout)
    assert len(second) == len(WORKS)
    # Everything printed as added was on disk: the second run found it there.
    assert {second[work_id] for work_id in printed} == {"unchanged"}
    # The rest went in now, or had reached the disk before the failure was noticed (a
    # batch is stored while the one before waits for the disk): saved, not yet reported.
    assert {second[work_id] for work_id in second.keys() - printed.keys()} <= {"added", "unchanged"}
    listed = copytrack(["library", "list"], env, cwd=tmp_path)
    assert listed.returncode == 0 and "NOT INDEXED" not in listed.stdout


def test_a_full_disk_before_the_servers_start_leaves_none_running(
    small_disk: Path, tmp_path: Path
) -> None:
    env = data_dir_env(small_disk)
    filler = fill_disk(small_disk)
    works = _works_file(tmp_path, 50)
    failed = copytrack(["library", "add", str(works)], env, cwd=tmp_path)
    one_line_failure(failed, str(small_disk), "free")
    assert servers_of(small_disk) == []
    filler.unlink()
    assert copytrack(["library", "add", str(works)], env, cwd=tmp_path).returncode == 0


def test_status_reports_a_database_that_cannot_write(small_disk: Path, tmp_path: Path) -> None:
    env = data_dir_env(small_disk)
    works = _works_file(tmp_path, 50)
    assert copytrack(["library", "add", str(works)], env, cwd=tmp_path).returncode == 0
    fill_disk(small_disk)  # the servers keep running, and answer reads
    status = copytrack(["status"], env, cwd=tmp_path)
    assert status.returncode != 0
    problems = status.stdout.split("problems", 1)[1]
    assert "mongo" in problems or "redis" in problems, status.stdout
