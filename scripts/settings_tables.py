"""Write the tables of settings generated from tracker/core/config.py into the README and
docs/deploy.md (`make docs`); tests/test_config.py checks that both hold them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tracker.core.config import deploy_table, markdown_table  # noqa: E402

#: A table of settings: its head row, then every row up to the first line that is not one.
_TABLE = re.compile(r"^\| variable \| default[^\n]*\n(?:\|[^\n]*\n)*", re.M)


def fleet_environment() -> dict[str, str]:
    """The settings docker-compose.yml passes to every service (its `x-copytrack-env`)."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return {name: str(value) for name, value in compose["x-copytrack-env"].items()}


def _rewrite(path: Path, table: str) -> bool:
    text = path.read_text()
    new, count = _TABLE.subn(table + "\n", text, count=1)
    if count != 1:
        sys.exit(f"{path.relative_to(ROOT)}: no table of settings (| variable | default …) found")
    path.write_text(new)
    return new != text


def main() -> None:
    for path, table in (
        (ROOT / "README.md", markdown_table()),
        (ROOT / "docs" / "deploy.md", deploy_table(fleet_environment())),
    ):
        changed = _rewrite(path, table)
        print(f"{path.relative_to(ROOT)}: {'rewritten' if changed else 'up to date'}")


if __name__ == "__main__":
    main()
