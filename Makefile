# The two commands a newcomer needs:
#   make run    install into .venv (with the demo extra) and serve config/gateway.yaml
#   make test   install everything the tests need and run the whole suite:
#               lint, mypy, pytest, and the official MCP conformance suite
#               through the gateway (make conformance alone runs just that)
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CONFIG ?= config/gateway.yaml
NODE_DIR := tests/node
CONFORMANCE_DIR := tests/conformance
CONFORMANCE_MODERN_DIR := tests/conformance_modern

# flake8-async for the trio rules ruff's ASYNC set lacks (docs/style.md rules 2-3).
# ASYNC102 holds: the cleanup awaits in gateway/transports that call helpers
# which shield themselves say so with a noqa. ASYNC121 joins once the one
# finding in benchmarks/soak.py is fixed.
FLAKE8_ASYNC_ARGS := \
	--enable=ASYNC102,ASYNC103,ASYNC104,ASYNC106,ASYNC111,ASYNC112,ASYNC113,ASYNC114,ASYNC118,ASYNC119,ASYNC120,ASYNC122,ASYNC123,ASYNC125,ASYNC300,ASYNC400 \
	--startable-in-context-manager=run,_run,_run_link,call_into,serve_http1,serve_http,_run_source

SDK2_VENV := .venv-sdk2

.PHONY: run test install install-dev schema node-deps sdk2-venv haproxy redis chromium conformance-deps conformance conformance-modern conformance-client lint typecheck pytest screenshots bench bench-peers bench-quick clean

$(BIN)/trio-mcp-gateway: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	@touch $@

install: $(BIN)/trio-mcp-gateway

# The demo backends config/gateway.yaml runs (package mcp_gateway_demo, on the
# official MCP SDK): `make run` needs them, the gateway itself does not.
$(VENV)/.demo-installed: pyproject.toml $(BIN)/trio-mcp-gateway
	$(BIN)/pip install --quiet -e ".[demo]"
	@touch $@

$(VENV)/.dev-installed: pyproject.toml $(BIN)/trio-mcp-gateway
	$(BIN)/pip install --quiet -e ".[dev]"
	@touch $@

install-dev: $(VENV)/.dev-installed

$(NODE_DIR)/node_modules/.package-lock.json: $(NODE_DIR)/package-lock.json
	npm ci --prefix $(NODE_DIR) --no-audit --no-fund --loglevel=error

node-deps: $(NODE_DIR)/node_modules/.package-lock.json

# The official Python SDK 2.x as a host (it opens with 2026-07-28). It cannot
# share .venv with the 1.x test peers, so it gets a venv of its own, used by
# tests/e2e/test_sdk2_host.py.
$(SDK2_VENV)/.installed:
	$(PYTHON) -m venv $(SDK2_VENV)
	$(SDK2_VENV)/bin/pip install --quiet "mcp==2.3.0"
	@touch $@

sdk2-venv: $(SDK2_VENV)/.installed

# HAProxy (the Debian package) for the replica run (tests/e2e/test_replicas.py,
# benchmarks/replicas.py): three gateways behind it with no stickiness.
haproxy:
	@command -v haproxy >/dev/null || { apt-get update -qq && apt-get install -y -qq haproxy >/dev/null; }

# redis-server (the Debian package) for the state store's tests (tests/store/):
# the same suite runs against the embedded store and a real server.
redis:
	@command -v redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; }

# Chromium (the Debian package) for the console's browser test
# (tests/console/test_browser.py): Playwright drives it, no browser is downloaded.
chromium:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

# The conformance suite and the Node.js 22+ it needs (the npm package `node`),
# both pinned in tests/conformance and installed there, never globally.
$(CONFORMANCE_DIR)/node_modules/.package-lock.json: $(CONFORMANCE_DIR)/package-lock.json
	npm ci --prefix $(CONFORMANCE_DIR) --no-audit --no-fund --loglevel=error

conformance-deps: $(CONFORMANCE_DIR)/node_modules/.package-lock.json node-deps

# The gateway's HTTP engines (server.engine): both conformance suites run on
# each, so the default (h11) and the cross-check (hypercorn) stay equivalent.
CONFORMANCE_ENGINES ?= h11 hypercorn

# Fails unless every scenario of `conformance server --suite all` passes through
# the gateway, on every engine. CONFORMANCE_ARGS=--direct runs it against the
# backend alone (then CONFORMANCE_ENGINES=h11 avoids a second identical run).
conformance: install-dev conformance-deps
	set -e; for engine in $(CONFORMANCE_ENGINES); do \
		$(BIN)/python $(CONFORMANCE_DIR)/run.py --engine $$engine $(CONFORMANCE_ARGS); \
	done

# The 0.2.x suite (MCP 2026-07-28 and 2025-11-25) through the gateway, beside the
# 0.1.16 run above; passes when every scenario listed in
# tests/conformance_modern/expected-<revision>.txt passes.
$(CONFORMANCE_MODERN_DIR)/node_modules/.package-lock.json: $(CONFORMANCE_MODERN_DIR)/package-lock.json
	npm ci --prefix $(CONFORMANCE_MODERN_DIR) --no-audit --no-fund --loglevel=error

conformance-modern: install-dev conformance-deps $(CONFORMANCE_MODERN_DIR)/node_modules/.package-lock.json
	set -e; for engine in $(CONFORMANCE_ENGINES); do \
		$(BIN)/python $(CONFORMANCE_MODERN_DIR)/run.py --expect --revision 2026-07-28 --engine $$engine; \
		$(BIN)/python $(CONFORMANCE_MODERN_DIR)/run.py --expect --revision 2025-11-25 --engine $$engine; \
	done

# The suite's CLIENT scenarios through the gateway's backend leg: driver.py
# starts the gateway with each scenario's server as its only backend and acts
# as a host through it; passes when every scenario in
# tests/conformance_client/expected.txt passes (about 30 s, 11 scenarios).
conformance-client: install-dev conformance-deps $(CONFORMANCE_MODERN_DIR)/node_modules/.package-lock.json
	$(BIN)/python tests/conformance_client/run.py --expect

# The config's JSON Schema, generated from the config Structs: committed as
# config/gateway.schema.json and packaged beside the default config. A test
# fails when the Structs change and this was not run.
schema: install-dev
	$(BIN)/trio-mcp-gateway schema > config/gateway.schema.json
	cp config/gateway.schema.json gateway/data/gateway.schema.json

run: $(VENV)/.demo-installed
	$(BIN)/trio-mcp-gateway serve -c $(CONFIG)

lint: install-dev
	$(BIN)/ruff check gateway mcp_gateway_demo tests benchmarks
	$(BIN)/ruff format --check gateway mcp_gateway_demo tests benchmarks
	$(BIN)/flake8-async $(FLAKE8_ASYNC_ARGS) $$(git ls-files '*.py')
	$(BIN)/codespell
	$(BIN)/lint-imports
	$(BIN)/interrogate gateway mcp_gateway_demo

typecheck: install-dev
	$(BIN)/mypy

# Under coverage, child processes included (pyproject [tool.coverage]); the
# floor (fail_under) applies to the whole suite, not to a PYTEST_ARGS subset.
# PYTEST_WORKERS: pytest-xdist workers (work stealing evens out the long
# end-to-end files); 0 runs the suite in this one process. The conformance
# installs too: tests/e2e/test_skills.py runs the sep-2640 server scenarios
# of conformance 0.2.x through the gateway.
PYTEST_WORKERS ?= 2
pytest: install-dev node-deps conformance-deps $(CONFORMANCE_MODERN_DIR)/node_modules/.package-lock.json sdk2-venv haproxy redis chromium
	$(BIN)/coverage erase
	$(BIN)/coverage run -m pytest -q $(if $(filter 0,$(PYTEST_WORKERS)),-p no:xdist,-n $(PYTEST_WORKERS) --dist worksteal) $(PYTEST_ARGS)
	$(BIN)/coverage combine --quiet
	$(BIN)/coverage report $(if $(PYTEST_ARGS),--fail-under=0)

test: lint typecheck pytest conformance conformance-modern conformance-client

# The console's screenshots that the README shows (tests/artifacts/console-*.png):
# the browser test saves them there only when asked; `make test` never rewrites them.
screenshots: install-dev chromium
	MCP_GATEWAY_WRITE_SCREENSHOTS=1 $(BIN)/pytest -q tests/console/test_browser.py

# The peers (FastMCP's proxy, sparfenyuk's mcp-proxy) and py-spy, pinned, each
# in a venv of its own under benchmarks/.peers/ (ignored); not part of make test.
bench-peers: install-dev
	-$(BIN)/python -m benchmarks.peers

# The whole suite (5 min 49 s on 2 shared cores, 2026-12-03), then the scale
# rows at three sizes each (benchmarks/scale.py, SCALE_ARGS; 5 min 3 s, same
# machine and day); bench-quick is the smoke run of both.
# Byte-compiled first, as an installed wheel is (the build machine sets
# PYTHONDONTWRITEBYTECODE: without it every start compiles the gateway).
# The start-up rows with official SDK 2.x backends (idle, then pinned to one
# core beside a CPU hog), the cache, the store's cost and the single caller's
# work a call against the baseline commit (task steps and function calls,
# then instructions retired under valgrind: 2 min 26 s-3 min 21 s for 2 rounds,
# 2026-12-04), each with pass/miss; the c=1 rate against the SDK backend is
# in benchmarks.run's calls table (direct over stdio) and in
# benchmarks.single_caller's (the SDK 2.x server over Streamable HTTP, issue 31's
# baseline, beside the same server over stdio).
BASELINE ?= ce1d5b4
bench: install-dev bench-peers sdk2-venv redis
	$(BIN)/python -m compileall -q gateway
	$(BIN)/python -m benchmarks.run $(BENCH_ARGS)
	$(BIN)/python -m benchmarks.scale $(SCALE_ARGS)
	$(BIN)/python -m benchmarks.cache
	$(BIN)/python -m benchmarks.single_caller --rounds 3
	$(BIN)/python -m benchmarks.store_cost
	$(BIN)/python -m benchmarks.startup_sdk2 --backends 10 --repeats 2
	$(BIN)/python -m benchmarks.startup_sdk2 --backends 50 --repeats 1
	$(BIN)/python -m benchmarks.startup_sdk2 --backends 10 --repeats 2 --loaded
	$(BIN)/python -m benchmarks.task_steps --baseline $(BASELINE) --concurrency 1 --rounds 2 --profile
	$(BIN)/python -m benchmarks.task_steps --baseline $(BASELINE) --instructions --rounds 2

bench-quick: install-dev bench-peers sdk2-venv redis
	$(BIN)/python -m compileall -q gateway
	$(BIN)/python -m benchmarks.run --quick $(BENCH_ARGS)
	$(BIN)/python -m benchmarks.scale --quick $(SCALE_ARGS)
	$(BIN)/python -m benchmarks.cache --quick
	$(BIN)/python -m benchmarks.single_caller --quick
	$(BIN)/python -m benchmarks.store_cost --quick
	$(BIN)/python -m benchmarks.startup_sdk2 --backends 10 --repeats 1 --loaded
	$(BIN)/python -m benchmarks.task_steps --baseline $(BASELINE) --concurrency 1 --rounds 1 --seconds 1 --profile
	$(BIN)/python -m benchmarks.task_steps --baseline $(BASELINE) --instructions --rounds 1 --calls 200

clean:
	rm -rf $(VENV) $(SDK2_VENV) benchmarks/.peers $(NODE_DIR)/node_modules $(CONFORMANCE_DIR)/node_modules \
		$(CONFORMANCE_MODERN_DIR)/node_modules
