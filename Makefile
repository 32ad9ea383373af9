# The README's contract: `make run`, `make test`, `make demo`, `make setup` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 6379
DATA ?= ./data

.PHONY: setup run test lint unit demo bench redis-server clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "headwater needs Python >= 3.11 (found: $$($(PYTHON) --version))"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

run: setup
	$(BIN)/headwater server --port $(PORT) --dir $(DATA)

# Differential tests and benchmarks need Debian's redis-server and redis-tools.
redis-server:
	@command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null || { \
		echo "installing Debian's redis-server for differential tests"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server redis-tools >/dev/null; }
	@# The packaged service would hold port 6379; tests start their own servers.
	@-pgrep -x redis-server >/dev/null && { service redis-server stop >/dev/null 2>&1 || true; } ; true

lint: setup
	$(BIN)/ruff check src tests benchmarks tools
	$(BIN)/ruff format --check src tests benchmarks tools
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: setup
	$(BIN)/pytest -q tests/unit

test: setup redis-server lint
	$(BIN)/pytest -q

demo: setup
	@echo "The Rocket Rides pipeline arrives with issue #7; nothing to demo yet." && exit 1

bench: setup redis-server
	$(BIN)/python benchmarks/bench_core.py
	$(BIN)/python benchmarks/bench_streams.py
	$(BIN)/python benchmarks/bench_groups.py
	$(BIN)/python benchmarks/bench_idmp.py
	$(BIN)/python benchmarks/bench_durability.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
