# The README's two commands: `make demo` and `make test`. Each creates or refreshes
# .venv by itself; the install step re-runs only when pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SYSTEM_STAMP := $(VENV)/.system-deps

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "copytrack needs Python >= 3.11 (found $$($(PYTHON) --version)); set PYTHON=python3.11" >&2; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

# Debian packages for browser and compose tests; re-checked when the script changes.
$(SYSTEM_STAMP): scripts/system-deps.sh $(STAMP)
	@scripts/system-deps.sh
	@touch $(SYSTEM_STAMP)

demo: $(STAMP)
	$(BIN)/copytrack demo

test: $(STAMP) $(SYSTEM_STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_fingerprint
	$(BIN)/python -m benchmarks.bench_index
	$(BIN)/python -m benchmarks.bench_extraction

clean:
	rm -rf $(VENV) .copytrack .pytest_cache
