"""The fault suite's small disk: a tmpfs mounted as a data dir (root only)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.helpers import copytrack, data_dir_env, servers_of


def _mount(tmp_path: Path, options: str) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("a small or read-only disk is a tmpfs mount, and mounting needs root")
    mount = tmp_path / "data"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        copytrack(["down"], data_dir_env(mount))
        for pid in servers_of(mount):  # a stray server would keep the mount busy
            os.kill(pid, 9)
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MB data dir, to be filled up by the test."""
    yield from _mount(tmp_path, "size=64m")


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[Path]:
    """A data dir on a file system mounted read-only."""
    yield from _mount(tmp_path, "size=8m,ro")
