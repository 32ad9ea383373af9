# The README's contract: `make run`, `make test`, `make demo`, `make setup` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 6379
DATA ?= ./data

.PHONY: setup run test lint unit demo bench redis-server postgres clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "headwater needs Python >= 3.11 (found: $$($(PYTHON) --version))"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev,demo]'
	@# Byte-compile now: with PYTHONDONTWRITEBYTECODE set, every start would compile again.
	$(BIN)/python -m compileall -q src examples >/dev/null
	@touch $(STAMP)

run: setup
	@$(BIN)/python -m compileall -q src >/dev/null
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

# The Rocket Rides tests also run on PostgreSQL when one answers: Debian's, started here with a
# password for the postgres role (tests read HEADWATER_TEST_PG_URL). Best effort: without it
# those tests skip and say why.
PG_URL := postgresql://postgres:headwater@127.0.0.1:5432/postgres
postgres:
	@-command -v pg_ctlcluster >/dev/null || { \
		echo "installing Debian's postgresql for the pipeline tests"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql >/dev/null; }
	@-service postgresql start >/dev/null 2>&1 || true
	@-su postgres -c "psql -qc \"ALTER USER postgres PASSWORD 'headwater'\"" >/dev/null 2>&1 || true

lint: setup
	$(BIN)/ruff check src tests benchmarks tools examples
	$(BIN)/ruff format --check src tests benchmarks tools examples
	$(BIN)/mypy --strict --follow-imports=silent --ignore-missing-imports examples/rocket_rides
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: setup
	$(BIN)/pytest -q tests/unit

test: setup redis-server postgres lint
	HEADWATER_TEST_PG_URL=$(PG_URL) $(BIN)/pytest -q

# Flags pass through: make demo DEMO_ARGS="--rides 2000 --kill-server"
demo: setup
	$(BIN)/python examples/rocket_rides/demo.py $(DEMO_ARGS)

# Headwater against Debian's redis-server; appends its table to benchmarks/RESULTS.md.
# Flags pass through: make bench BENCH_ARGS="--quick --no-record", BENCH_ARGS="--slow".
bench: setup redis-server
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
