"""mypy (run by `make test`) checks every product package by name: a type error in any of
them fails it, in a module that already exists as in one added to a new sub-package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.test_layers import ROOT, copy_tree

MYPY = Path(sys.executable).with_name("mypy")
# The cache `make test`'s own mypy run leaves: the copy rechecks only what changed (7 s
# instead of 30 s from nothing); without it the check starts cold and finds the same.
PROJECT_CACHE = ROOT / ".mypy_cache"

#: (module, code appended to it) — each a mistake mypy must name.
PLANTED = {
    "fingerprinter/initials.py": "\n\ndef _late() -> int:\n    return 'a'\n",
    "tracker/masters/library.py": "\n\ndef _late(n: int) -> str:\n    return n + 1\n",
    "admin/web.py": "\n\ndef _late() -> None:\n    len(3)\n",
    # A module of a sub-package that does not exist yet: found through its package.
    "tracker/newly_moved/plumbing.py": "def _late() -> str:\n    return None\n",
}


def test_a_type_error_in_any_product_package_fails_mypy(tmp_path: Path) -> None:
    tree = copy_tree(tmp_path)
    (tree / "tracker" / "newly_moved").mkdir()
    (tree / "tracker" / "newly_moved" / "__init__.py").write_text("")
    for module, code in PLANTED.items():
        with (tree / module).open("a") as source:
            source.write(code)
    if PROJECT_CACHE.is_dir():
        shutil.copytree(PROJECT_CACHE, tmp_path / "cache")
    result = subprocess.run(
        [str(MYPY), "--cache-dir", str(tmp_path / "cache")],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert {line.split(":")[0] for line in errors} == set(PLANTED), result.stdout
