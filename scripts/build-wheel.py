"""Build copytrack's wheel with its compiled loops, as the image's builder stage does.

    python scripts/build-wheel.py OUTDIR

Run it from the source tree, in a Python that has requirements/build.lock installed (and a
C compiler). pyproject.toml marks the extensions optional, so that a plain ``pip install``
where there is no compiler still works (on the numpy fallbacks); here a loop that did not
compile fails the build instead of going into the image.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path


def compiled_modules() -> list[str]:
    """The extension modules pyproject.toml declares."""
    pyproject = tomllib.loads(Path("pyproject.toml").read_text())
    return [ext["name"] for ext in pyproject["tool"]["setuptools"]["ext-modules"]]


def build(out: Path) -> Path:
    """Build the wheel into ``out``; exits naming the loops it lacks, if any."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), "."],
        check=True,
    )  # fmt: skip
    [wheel] = out.glob("copytrack-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    missing = [
        module
        for module in compiled_modules()
        if not any(
            n.startswith(module.replace(".", "/") + ".") and n.endswith(".so") for n in names
        )
    ]
    if missing:
        sys.exit(
            f"{wheel.name} lacks the compiled loops {', '.join(missing)}: is a C compiler "
            "installed? (the build output above says why each failed)"
        )
    return wheel


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/build-wheel.py OUTDIR")
    print(build(Path(sys.argv[1])))
