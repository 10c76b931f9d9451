"""A clone on its own runs the demo: the files git tracks, with no ``../shared`` beside them.

The developers' machines have the shared corpus next to the repository; a user's clone does
not. This copies exactly what ``git ls-files`` lists into an empty folder and runs the demo's
crawl there, so a file the demo needs but git does not track (or a path that reaches into
``../shared``) fails here rather than on a user's machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _tracked_files() -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: nothing tells which files a clone would have")
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    return [name for name in listed.decode().split("\0") if name]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tracked files copied into ``<tmp>/alone/copytrack`` (nothing beside them)."""
    root = tmp_path_factory.mktemp("alone") / "copytrack"
    for name in _tracked_files():
        source = REPO / name
        if source.is_file():  # a tracked file deleted in the work tree is not in a clone
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return root


def _run(clone: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(clone),  # the clone's packages, not the installed work tree
        "COPYTRACK_DATA_DIR": str(tmp_path / "data"),
    }
    return subprocess.run(
        [sys.executable, "-m", "copytrack.cli", *args],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )


def test_the_demo_runs_from_a_clone_alone_on_the_bundled_corpus(
    clone: Path, tmp_path: Path
) -> None:
    done = _run(clone, tmp_path, "demo", "--no-serve", "--masters", "8", "--pages", "16")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bundled public-domain corpus" in done.stdout
    found = re.search(r"crawled \d+ pages in \d+ s: (\d+) findings on (\d+) pages", done.stdout)
    assert found, done.stdout
    assert int(found.group(1)) > 0, done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_eval_without_a_corpus_is_one_line_naming_what_to_pass(
    clone: Path, tmp_path: Path, make: str
) -> None:
    corpus = tmp_path / "corpus"
    if make == "empty":
        corpus.mkdir()
    done = _run(clone, tmp_path, "eval", "--corpus", str(corpus))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(corpus) in lines[0] and "--corpus" in lines[0]
