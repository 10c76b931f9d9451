# The README's two commands: `make demo` and `make test`. Each creates or refreshes
# .venv by itself: the venv is built anew from requirements/dev.lock (every package pinned
# with its hashes) when the lock changed, and copytrack installed again into it when
# pyproject.toml or a compiled loop (fingerprinter/*.pyx, *.pxd, tracker/index/*.pyx) changed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOCK := requirements/dev.lock
INSTALLER_LOCK := requirements/installer.lock
LOCKED_STAMP := $(VENV)/.locked
STAMP := $(VENV)/.installed
RUNTIME_STAMP := $(VENV)/.system-runtime
TEST_STAMP := $(VENV)/.system-test

.PHONY: demo test test-fast test-security lint lock bench messages docs clean

# A new venv holding exactly the lock's packages (an upgraded or dropped package leaves
# nothing behind). The venv's own pip installs only uv, pinned with its hashes; uv installs
# the lock, its packages in parallel (the whole venv in 31 s here, 66 s with pip alone).
$(LOCKED_STAMP): $(LOCK) $(INSTALLER_LOCK)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "copytrack needs Python >= 3.11 (found $$($(PYTHON) --version)); set PYTHON=python3.11" >&2; exit 1; }
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --require-hashes -r $(INSTALLER_LOCK)
	$(BIN)/uv pip install -q --python $(BIN)/python --compile-bytecode --require-hashes -r $(LOCK)
	@touch $@

# copytrack itself, editable, with the dev and embedded extras' packages from the lock; its
# compiled loops are built with the lock's Cython and setuptools.
$(STAMP): $(LOCKED_STAMP) pyproject.toml $(wildcard fingerprinter/*.pyx fingerprinter/*.pxd tracker/index/*.pyx)
	$(BIN)/uv pip install -q --python $(BIN)/python --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# Refresh the locks from pyproject.toml's ranges (and requirements/image.in): the newest
# releases that fit, each pinned with its hashes. The next `make test` rebuilds the venv
# and runs the suite on them. image.lock (the production image: no dev or embedded extra),
# build.lock (the image's wheel build) and installer.lock (uv) keep dev.lock's versions.
PIP_COMPILE = $(BIN)/pip-compile --quiet --upgrade --generate-hashes --strip-extras \
	--no-emit-options --unsafe-package copytrack --no-allow-unsafe
lock: $(STAMP)
	$(PIP_COMPILE) --all-build-deps --extra dev -o $(LOCK) pyproject.toml
	$(PIP_COMPILE) -c $(LOCK) -o requirements/image.lock pyproject.toml requirements/image.in
	$(PIP_COMPILE) -c $(LOCK) --all-build-deps --only-build-deps -o requirements/build.lock \
	  pyproject.toml
	$(PIP_COMPILE) -c $(LOCK) -o $(INSTALLER_LOCK) requirements/installer.in

# Debian packages (PDF rendering; browser and compose tests); re-checked when the script
# changes.
$(RUNTIME_STAMP): scripts/system-deps.sh $(STAMP)
	@scripts/system-deps.sh runtime
	@touch $@

$(TEST_STAMP): scripts/system-deps.sh $(STAMP)
	@scripts/system-deps.sh test
	@touch $@

# The admin's port: `make demo PORT=8001` when 8000 is taken.
PORT ?= 8000

demo: $(STAMP) $(RUNTIME_STAMP)
	$(BIN)/copytrack demo --port $(PORT)

# Tests run in TEST_WORKERS processes (pytest-xdist), each with its own embedded servers: much
# of a test's time is spent waiting on servers, crawls and browsers, not on a core, so six
# on two cores keep both busier than four (pytest 11:29 against 12:19 here). They draw one
# test at a time (--dist loadgroup: each test a unit of its own), the slow ones first
# (tests/conftest.py).
TEST_WORKERS ?= 6
# The tests' temporary folders, their servers' data among them, go to memory (/dev/shm)
# where it has 4 GB free: a commit's fsync costs 1-2 ms on a disk and nothing there, and
# every test's MongoDB fsyncs at each commit. Elsewhere they stay in TMPDIR.
TEST_TMPDIR ?= $(shell df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 && $$4 > 4194304 {print "/dev/shm"}')
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set: a run starts hundreds of
# Python processes (commands, crawls, their workers), and each would compile copytrack's
# modules again (~0.4 CPU s a process), as each worker would rewrite every test module.
TEST_ENV = $(if $(TEST_TMPDIR),TMPDIR=$(TEST_TMPDIR)) PYTHONDONTWRITEBYTECODE=
# mypy checks the product packages' annotations first ([tool.mypy] in pyproject.toml). The
# slowest tests are listed at the end, so that one growing slower shows in every run.
test: $(STAMP) $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(TEST_ENV) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=15

# A quick loop while working: everything but the tests marked slow (make test runs all).
test-fast: $(STAMP) $(TEST_STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup -m "not slow"

# The regression tests of the attacks in docs/security.md, alone (make test runs them too).
test-security: $(STAMP) $(TEST_STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -q -m security tests/security

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/ruff format --check .

# The admin's catalogs after its text changed: new messages arrive empty in each language's
# messages.po, to be translated (tests/test_i18n.py fails until they are).
messages: $(STAMP)
	$(BIN)/pybabel extract -F babel.cfg -k N_ -o admin/locale/messages.pot --no-location \
	  -k pgettext:1c,2 --sort-output --project copytrack .
	$(BIN)/pybabel update -i admin/locale/messages.pot -d admin/locale --ignore-obsolete \
	  --no-fuzzy-matching --width 100

# The tables of settings in the README and docs/deploy.md, from tracker/core/config.py.
docs: $(STAMP)
	$(BIN)/python scripts/settings_tables.py

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_fingerprint
	$(BIN)/python -m benchmarks.bench_index
	$(BIN)/python -m benchmarks.bench_extraction
	$(BIN)/python -m benchmarks.bench_recrawl

clean:
	rm -rf $(VENV) .copytrack .pytest_cache .mypy_cache
