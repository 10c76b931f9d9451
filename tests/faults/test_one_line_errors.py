"""Failures end in one line that names the input or the server and what to do, with a
non-zero exit, and the rest still goes in: bad files and lines in a
library folder, a FIFO among them, a folder that cannot be read, a database or Redis that
does not answer, a read-only data dir."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.corpus import texts
from tests.faults.helpers import (
    copytrack,
    data_dir_env,
    one_error_per_place,
    one_line_failure,
    servers_of,
)
from tests.processes import clean_env
from tracker.runtime.servers import free_port

pytestmark = pytest.mark.slow

GOOD = texts("zh_news", 4)


def _library(root: Path) -> Path:
    """A folder of good works with one of each kind of bad input among them."""
    library = root / "library"
    (library / "sub").mkdir(parents=True)
    (library / "good.txt").write_text(GOOD[0], encoding="utf-8")
    (library / "sub" / "gbk.txt").write_bytes(GOOD[1].encode("gbk"))
    lines = [
        json.dumps({"id": "a", "text": GOOD[2]}, ensure_ascii=False),
        json.dumps({"id": "a", "text": GOOD[3]}, ensure_ascii=False),  # one id, two texts
        json.dumps({"id": "short", "text": "太短"}, ensure_ascii=False),
        '{"id": "broken", "text": ',  # cut off
    ]
    (library / "works.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (library / "image.txt").write_bytes(bytes(range(256)) * 64)  # binary, named .txt
    os.mkfifo(library / "sub" / "pipe.txt")  # reading it would wait forever
    return library


def test_bad_inputs_each_get_one_line_with_their_place_and_the_rest_goes_in(
    tmp_path: Path,
) -> None:
    library = _library(tmp_path)
    env = data_dir_env(tmp_path / "data")
    done = copytrack(["library", "add", str(library)], env, timeout=120, cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    expected = {
        "works.jsonl:2": "another text",
        "works.jsonl:3": "too short",
        "works.jsonl:4": "invalid JSON",
        "image.txt": "",
        "pipe.txt": "not a regular file",
    }
    one_error_per_place(done.stderr, expected)
    added = [line.split("\t") for line in done.stdout.splitlines() if line.startswith("added")]
    assert sorted(fields[1] for fields in added) == ["a", "gbk", "good"]
    listed = copytrack(["library", "list"], env, cwd=tmp_path)
    assert all(name in listed.stdout for name in ("gbk", "good"))
    copytrack(["down"], env)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any folder, whatever its mode")
def test_a_folder_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    library = tmp_path / "library"
    (library / "locked").mkdir(parents=True)
    (library / "good.txt").write_text(GOOD[0], encoding="utf-8")
    (library / "locked" / "hidden.txt").write_text(GOOD[1], encoding="utf-8")
    (library / "locked").chmod(0)
    env = data_dir_env(tmp_path / "data")
    try:
        done = copytrack(["library", "add", str(library)], env, cwd=tmp_path)
    finally:
        (library / "locked").chmod(0o755)
        copytrack(["down"], env)
    assert done.returncode == 1 and "added\tgood" in done.stdout
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert "locked" in line and "cannot read the folder" in line


@pytest.mark.parametrize(
    ("variable", "url"),
    [
        ("COPYTRACK_MONGO_URL", "mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=2000"),
        ("COPYTRACK_REDIS_URL", "redis://127.0.0.1:{port}/0"),
    ],
)
def test_a_server_that_does_not_answer_is_named_in_one_line(
    tmp_path: Path, variable: str, url: str
) -> None:
    env = clean_env(
        COPYTRACK_DATA_DIR=str(tmp_path / "data"), **{variable: url.format(port=free_port())}
    )
    (tmp_path / "work.txt").write_text(GOOD[0], encoding="utf-8")
    for args in (["library", "add", "work.txt"], ["check", "work.txt"]):
        failed = copytrack(args, env, cwd=tmp_path)
        one_line_failure(failed, variable)
    copytrack(["down"], env)


def test_a_read_only_data_dir_is_named_in_one_line(read_only_disk: Path, tmp_path: Path) -> None:
    (tmp_path / "work.txt").write_text(GOOD[0], encoding="utf-8")
    failed = copytrack(["library", "add", "work.txt"], data_dir_env(read_only_disk), cwd=tmp_path)
    one_line_failure(failed, str(read_only_disk), "COPYTRACK_DATA_DIR")
    assert servers_of(read_only_disk) == []
