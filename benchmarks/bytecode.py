"""The project's modules compiled to bytecode before a benchmark times its commands.

`pip install` leaves a package compiled, and Python caches what it compiles on a first run;
a checkout run with PYTHONDONTWRITEBYTECODE set (as on this machine, and in many container
images) would compile every module each command imports, in every command: ~0.1 s of each
start, which a benchmark would time as copytrack's.
"""

from __future__ import annotations

import compileall
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _packages() -> list[str]:
    """The packages pyproject.toml installs (its ``packages.find`` patterns)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [
        pattern.rstrip("*")
        for pattern in config["tool"]["setuptools"]["packages"]["find"]["include"]
    ]


def compile_project() -> None:
    """Write the bytecode of every project module whose cached copy is missing or stale
    (a few hundredths of a second when none is)."""
    for package in _packages():
        if not compileall.compile_dir(ROOT / package, quiet=1):
            raise SystemExit(f"benchmarks: {ROOT / package} does not compile: fix it first")
