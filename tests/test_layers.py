"""The package layers hold at run time: import-linter's contracts (pyproject.toml) pass on
the tree, and fail as soon as a lower layer imports an upper one — even inside a function,
where an import is made only when the code runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("copytrack", "admin", "crawler", "testbed", "tracker", "extractor", "fingerprinter")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True
    )


def copy_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "repo"
    tree.mkdir()
    shutil.copy(ROOT / "pyproject.toml", tree)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("*.pyc"))
    return tree


def test_the_layers_hold() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "upward"),
    [
        ("tracker/masters/library.py", "import admin.app"),  # the domain reaching the web layer
        ("tracker/matching/matcher.py", "from crawler import fetch"),  # …or the crawler
        ("extractor/decoding.py", "import tracker.core.config"),  # a leaf reaching the domain
        ("admin/web.py", "import crawler.settings"),  # siblings of one layer
        # inside tracker: the wiring reaching the domain, plumbing reaching the wiring,
        # the embedded runtime reaching the domain, one domain layer reaching a higher one
        ("tracker/context.py", "from tracker.masters import generation"),
        ("tracker/core/store.py", "from tracker.context import Context"),
        ("tracker/runtime/servers.py", "from tracker.masters import library"),
        ("tracker/masters/library.py", "from tracker.scanning import pages"),
        ("tracker/masters/library.py", "import tracker.accounts.users"),  # independent
    ],
)
def test_an_upward_import_inside_a_function_breaks_the_contract(
    tmp_path: Path, module: str, upward: str
) -> None:
    tree = copy_tree(tmp_path)
    with (tree / module).open("a") as source:
        source.write(f"\n\ndef _late() -> None:\n    {upward}  # noqa\n")
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert module.replace("/", ".").removesuffix(".py") in result.stdout


def test_a_type_only_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    """A cycle through an import made only for the type checker is a cycle too: the
    wiring may not name the domain even there."""
    tree = copy_tree(tmp_path)
    context = tree / "tracker" / "context.py"
    context.write_text(
        context.read_text().replace(
            "from __future__ import annotations\n",
            "from __future__ import annotations\n\nfrom typing import TYPE_CHECKING\n\n"
            "if TYPE_CHECKING:\n    from .masters.master_cache import MasterCache  # noqa\n",
            1,
        )
    )
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "tracker.context -> tracker.masters.master_cache" in result.stdout


def test_every_child_of_tracker_has_its_layer(tmp_path: Path) -> None:
    """A new flat module of tracker/ is placed in a layer before it is accepted."""
    tree = copy_tree(tmp_path)
    (tree / "tracker" / "stray.py").write_text('"""Somewhere."""\n')
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "tracker.stray" in result.stdout
