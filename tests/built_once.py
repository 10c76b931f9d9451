"""What a test run builds once for all its workers (pytest-xdist): the first worker that
needs it builds it into the run's shared temporary folder, under a lock; the others wait
for it and use the same. A module-scoped fixture alone is built again in every worker that
draws one of the module's tests."""

from __future__ import annotations

import fcntl
import pickle
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")
_DONE = ".built"


def built_once(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str,
    build: Callable[[Path], None],
) -> Path:  # fmt: skip
    """The folder ``name`` of this run, filled by ``build`` (given the empty folder) once."""
    run = tmp_path_factory.getbasetemp()
    # A worker's temporary folder lies in the run's; without workers, the run's is its own.
    folder = (run if worker_id == "master" else run.parent) / name
    with _exclusive(folder.with_name(f"{name}.lock")):
        if not (folder / _DONE).exists():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed midway
            folder.mkdir()
            build(folder)
            (folder / _DONE).touch()
    return folder


def made_once(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, make: Callable[[], T]
) -> T:
    """The object ``make`` returns, made once a run and shared as a pickle."""

    def build(folder: Path) -> None:
        (folder / "object.pickle").write_bytes(pickle.dumps(make()))

    folder = built_once(tmp_path_factory, worker_id, name, build)
    made: T = pickle.loads((folder / "object.pickle").read_bytes())
    return made


@contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the handle closes
        yield
