# The README's contract: `make run`, `make test`, `make demo`, `make setup` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# compile jobs (one per core)
JOBS := $(shell nproc 2>/dev/null || echo 2)
STAMP := $(VENV)/.installed
PORT ?= 6379
# the web console and /metrics (on 127.0.0.1 only: admin-bind)
ADMIN_PORT ?= 9121
DATA ?= ./data

.PHONY: browser setup run cluster redis-py-cluster test lint lint-sources system-deps unit demo bench docs redis-server redis-suite postgres clean

# `make setup` also compiles the hot modules with mypyc (src/headwater/_build.py lists them;
# the .so files land next to their .py in src/). HEADWATER_PURE=1 skips that, and a failed
# compile (no C compiler, no Python headers) falls back to the pure package, which works the
# same, only slower. The stamp names the build; a hot .py newer than it recompiles. The same
# build makes the nine C modules: headwater._luabridge (the calls between Python and Lua),
# headwater.structures._zsearch (a sorted set's bisections), headwater.rdb._crc64 (Redis's
# CRC-64 over whole RDB files), headwater.resp._encode (effects into the AOF's buffer),
# headwater.persistence._blobs (a snapshot's fields split), headwater.stream._pack (a stream
# node's entries packed), headwater.rdb._listpack (RDB listpacks, stream nodes and LZF
# decoded in one call), headwater.resp._split (a replica's stream split into commands) and
# headwater.spark._pages (a Spark executor's XRANGE pages split into Arrow buffers).
BUILD_KIND_WANTED := $(if $(filter 1,$(HEADWATER_PURE)),pure,compiled)
BUILD_STAMP := $(VENV)/.build-$(BUILD_KIND_WANTED)
HOT_SOURCES := $(shell sed -n 's/^    "headwater\.\([a-z_.]*\)",$$/\1/p' src/headwater/_build.py \
	| tr . / | sed 's|^|src/headwater/|; s|$$|.py|')

setup: $(BUILD_STAMP)

$(BUILD_STAMP): $(STAMP) setup.py src/headwater/_build.py $(HOT_SOURCES) src/headwater/_luabridge.c \
		src/headwater/structures/_zsearch.c src/headwater/rdb/_crc64.c \
		src/headwater/resp/_encode.c src/headwater/persistence/_blobs.c \
		src/headwater/stream/_pack.c src/headwater/rdb/_listpack.c src/headwater/resp/_split.c \
		src/headwater/spark/_pages.c
	@# Old extension modules go first: a skipped or failed compile leaves none to shadow the source.
	@rm -f $(VENV)/.build-pure $(VENV)/.build-compiled src/headwater_hot__mypyc*.so
	@find src/headwater -name '*.so' -delete
	@mkdir -p build
	@if [ "$(BUILD_KIND_WANTED)" = pure ]; then \
		echo "HEADWATER_PURE=1: pure Python build, no compiled modules"; echo pure > $@; \
	elif $(BIN)/python -m pip install --quiet --disable-pip-version-check 'setuptools>=77' && \
		{ HEADWATER_COMPILE=1 $(BIN)/python setup.py build_ext --inplace -j$(JOBS) >build/mypyc.log 2>&1 || \
		  { echo "incremental compile failed: compiling everything again"; \
		    rm -rf build .mypy_cache; mkdir -p build; \
		    HEADWATER_COMPILE=1 $(BIN)/python setup.py build_ext --inplace -j$(JOBS) >build/mypyc.log 2>&1; }; }; then \
		find src -name '*.so' -exec touch {} +; \
		echo "compiled the hot modules with mypyc (HEADWATER_PURE=1 make setup: pure build)"; \
		echo compiled > $@; \
	else \
		rm -f src/headwater_hot__mypyc*.so; find src/headwater -name '*.so' -delete; \
		echo "mypyc compile failed (build/mypyc.log): using the pure Python package," \
			"which works the same, only slower"; \
		echo pure > $@; \
	fi

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
	$(BIN)/headwater server --port $(PORT) --dir $(DATA) --admin-port $(ADMIN_PORT)

# A Redis Cluster of Headwater nodes on this machine: 6 nodes (3 primaries, 3 replicas) on
# ports 7000-7005, data in ./cluster; Ctrl-C stops them. Flags pass through:
# make cluster CLUSTER_ARGS="--nodes 9 --replicas 2"
cluster: setup
	$(BIN)/headwater local-cluster $(CLUSTER_ARGS)

# Differential tests and benchmarks need Debian's redis-server and redis-tools; the failover
# tests, its redis-sentinel; Redis's own Tcl suite, tclsh.
redis-server:
	@command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null && \
		command -v redis-sentinel >/dev/null && command -v tclsh >/dev/null && \
		command -v curl >/dev/null || { \
		echo "installing Debian's redis-server, redis-tools, redis-sentinel, tcl and curl (the docs' examples) for the tests"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
			redis-server redis-tools redis-sentinel tcl curl >/dev/null; }
	@# The packaged services would hold ports 6379 and 26379; tests start their own.
	@-pgrep -x redis-server >/dev/null && { service redis-server stop >/dev/null 2>&1 || true; } ; true
	@-pgrep -x redis-sentinel >/dev/null && { service redis-sentinel stop >/dev/null 2>&1 || true; } ; true

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

lint: setup lint-sources

# The checks of `make lint`, which need the installed tools but not the compiled build:
# `make test` runs them beside the compile (their own mypy cache: mypyc's build uses
# .mypy_cache at the same time).
LINT_MYPY := MYPY_CACHE_DIR=build/mypy-lint-cache $(BIN)/mypy
lint-sources: $(STAMP)
	$(BIN)/ruff check src tests benchmarks tools examples
	$(BIN)/ruff format --check src tests benchmarks tools examples
	$(LINT_MYPY) --strict --follow-imports=silent --ignore-missing-imports examples/rocket_rides
	$(LINT_MYPY)
	$(BIN)/lint-imports

# Debian's Chromium, for the web console's browser tests (tests/e2e/test_console_browser_e2e.py)
browser:
	@command -v chromium >/dev/null || { \
		echo "installing Debian's chromium for the console's browser tests"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# Debian's packages the tests use, one apt-get after the other (dpkg's lock).
system-deps:
	@$(MAKE) --no-print-directory -j1 redis-server postgres browser

unit: setup
	$(BIN)/pytest -q tests/unit

# The whole suite on the build `make setup` made (compiled unless it fell back), then the unit
# and model tests and PURE_TIER on the pure source: a copy of src/ without the .so files.
# Two pytest workers (TEST_WORKERS=0: one process); the Spark tests share one worker, and so
# their one SparkSession (tests/spark/conftest.py groups them).
PURE_SRC := build/pure-src
# The pure build's tier beyond unit and model tests (what users without a compiler run):
# the differential tests of streams, groups, the XREAD caps and the replication stream (bytes
# against redis-server), the replication stream's and the active-active e2e tests; the servers
# they start run the pure copy too (tests/e2e/test_build_e2e.py checks it). The rest of the
# suite runs on the compiled build only (CI's 20 minutes: test_replication_e2e.py, 65 s on the
# pure build, left this tier on 7 Dec; the replication stream's tests keep the pure link).
PURE_TIER := tests/e2e/test_build_e2e.py tests/differential/test_streams.py \
	tests/differential/test_groups.py tests/differential/test_xread_caps.py \
	tests/differential/test_replication_stream.py \
	tests/e2e/test_replication_stream_e2e.py tests/e2e/test_activeactive_e2e.py \
	tests/e2e/test_activeactive_transfer_tcp.py tests/e2e/test_idmp_e2e.py
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)
# The compile, the lint and the system packages at once (the compile's mypy phase and apt's
# downloads leave a core free), then the tests. apt runs beside make, never under a -j make:
# debconf talks on file descriptor 3, which a parallel make's jobserver pipe may hold (CI saw
# make lose its children and hang); its output is shown once it is done.
test: $(STAMP)
	@mkdir -p build; \
	$(MAKE) --no-print-directory system-deps >build/system-deps.log 2>&1 </dev/null & deps=$$!; \
	$(MAKE) --no-print-directory -j2 setup lint-sources; built=$$?; \
	wait $$deps; got=$$?; cat build/system-deps.log; \
	[ $$got = 0 ] || echo "make system-deps failed (build/system-deps.log)"; \
	[ $$built = 0 ] && [ $$got = 0 ]
	HEADWATER_EXPECT_BUILD=$$(cat $(BUILD_STAMP)) HEADWATER_TEST_PG_URL=$(PG_URL) $(BIN)/pytest -q $(XDIST) \
		--durations=25
	@rm -rf $(PURE_SRC) && mkdir -p $(PURE_SRC)
	@cp -R src/headwater $(PURE_SRC)/ && find $(PURE_SRC) -name '*.so' -delete
	PYTHONPATH=$(PURE_SRC) HEADWATER_EXPECT_BUILD=pure HEADWATER_HYPOTHESIS_PROFILE=pure $(BIN)/pytest -q -p no:cacheprovider \
		$(XDIST) tests/unit tests/model $(PURE_TIER)

# Redis's own test suite (7.4.1, external mode) on every unit against this build; writes
# tests/REDIS-SUITE.md. REDIS_TESTS names the suite's directory (Redis's tests/ and runtest
# at 7.4.1 and run-external.sh); `make test` runs the units of tests/redis_suite/ci-units.txt.
# Flags pass through: make redis-suite SUITE_ARGS="unit/multi --no-table".
redis-suite: setup redis-server
	$(BIN)/python tools/redis_suite.py $(SUITE_ARGS)

# redis-py's own cluster tests against a 6-node Headwater cluster and a 6-node redis-server
# cluster (ports 16379-16384); writes tests/REDIS-PY-CLUSTER.md (about two minutes).
redis-py-cluster: setup redis-server
	$(BIN)/python tools/redis_py_cluster_suite.py

# Flags pass through: make demo DEMO_ARGS="--rides 2000 --kill-server"
demo: setup
	$(BIN)/python examples/rocket_rides/demo.py $(DEMO_ARGS)

# Headwater against Debian's redis-server; puts its table at the top of benchmarks/RESULTS.md.
# Flags pass through: make bench BENCH_ARGS="--quick --no-record", BENCH_ARGS="--slow".
bench: setup redis-server
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

# The user documentation (mkdocs.yml: MkDocs + Material) into build/site; a warning fails it.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) build dist src/*.egg-info src/*.so
	find src -name '*.so' -delete
	rm -rf .pytest_cache .mypy_cache .ruff_cache
