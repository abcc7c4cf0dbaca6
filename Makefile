# The two commands: `make run` and `make test`. Each installs what it needs into .venv from
# uv.lock (uv itself is pinned and installed into .uv with the system's python3 and pip).
PYTHON ?= python3
UV_VERSION := 0.13.8
UV := .uv/bin/uv
export UV_PYTHON_DOWNLOADS := never
export UV_PYTHON := $(PYTHON)

.PHONY: install run cli test lint openapi reference docs docs-serve bench bench-full bench-load bench-extraction bench-pages bench-ten-million

$(UV):
	$(PYTHON) -m venv .uv
	.uv/bin/pip install --quiet uv==$(UV_VERSION)

.venv/.synced: $(UV) pyproject.toml uv.lock
	$(UV) sync --frozen
	touch $@

# Bytecode is compiled when installed: with PYTHONDONTWRITEBYTECODE set (as on these machines)
# Python never caches it, and every `ingest` process would compile SQLAlchemy, httpx, pydantic
# and the app again (1.4 s of a worker's 2.2 s start). uv compiles the dependencies
# ([tool.uv] compile-bytecode); compileall the app's own modules, skipping those up to date.
install: .venv/.synced
	.venv/bin/python -m compileall -q app

# `ingest` is installed into .venv, not on the PATH: the first line says how to reach the
# operators' commands (jobs, stats, submit) from another terminal while this one serves.
run: install
	@echo 'CLI: .venv/bin/ingest --help (or: source .venv/bin/activate; or: make cli ARGS="jobs list")'
	.venv/bin/ingest serve

# Any `ingest` command without activating .venv: `make cli ARGS="jobs list"`.
ARGS ?= --help

cli: install
	.venv/bin/ingest $(ARGS)

# Two test runners (pytest-xdist): most tests wait on processes and sockets, not the CPU.
# `make test TEST_RUNNERS=0` runs them all in this one process.
TEST_RUNNERS ?= 2

test: install
	.venv/bin/pytest -n $(TEST_RUNNERS) --dist loadgroup $(PYTEST_ARGS)

lint: install
	.venv/bin/ruff check app tests bench
	.venv/bin/ruff format --check app tests bench
	.venv/bin/mypy

openapi: install
	.venv/bin/ingest openapi --output openapi.yaml

# The docs site's reference pages and .env.example, written from the code.
reference: install
	.venv/bin/ingest reference --output docs/reference --env-example .env.example

# The docs site in site/, built strictly: a dead link, a missing anchor or a page left out of
# the nav fails the build.
docs: install
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs serve --dev-addr 127.0.0.1:8001

# The short run (under 3 minutes here); `make bench BENCH_ARGS="..."` runs any other. arq, a
# peer on Redis, runs beside them where `redis-server` is installed.
comma := ,
PEERS := $(if $(shell command -v redis-server),$(comma)arq,)
BENCH_ARGS ?= --backend both --jobs 2000 --rounds 2 --processes 1 --latency-seconds 0 \
	--baseline httpx,bare$(PEERS) --scenarios slow
# Every scenario of docs/benchmarks.md in one interleaved run (17 minutes on the busy machine here).
BENCH_FULL_ARGS ?= --backend both --jobs 3000 --rounds 3 --processes 1,2 --latency-seconds 10 \
	--baseline httpx,bare --scenarios all

bench: install
	.venv/bin/python -m bench.drain $(BENCH_ARGS)

bench-full: install
	.venv/bin/python -m bench.drain $(BENCH_FULL_ARGS)

# 100,000 jobs through POST /jobs/batch while a worker drains them (`make bench-load
# LOAD_ARGS="--backend postgresql"` for the other backend).
LOAD_ARGS ?= --backend sqlite --jobs 100000 --batch 1000 --workers 1

bench-load: install
	.venv/bin/python -m bench.load $(LOAD_ARGS)

# Main-text extraction against trafilatura's evaluation set (../shared/extraction-eval): every
# page, `make bench-extraction EXTRACTION_ARGS="--pages 200 --worst 10"` for a quick look.
EXTRACTION_ARGS ?= --candidates ingest,trafilatura

bench-extraction: install
	.venv/bin/python -m bench.extraction $(EXTRACTION_ARGS)

# One worker draining the eval set's pages against the extractor alone on every core (issue
# 23: the drain at 85 % of that ceiling or more).
PAGES_ARGS ?= --backend both --jobs 2000 --rounds 3

bench-pages: install
	.venv/bin/python -m bench.pages $(PAGES_ARGS)

# Ten million jobs on PostgreSQL (issue 26): the claim, the dead list's pages, stats, and
# retention deleting a million while claims run (about 45 minutes here, 15 GB of disk while
# it runs; `make bench-ten-million TEN_MILLION_ARGS="--jobs 100000 --prune 10000"` for a look).
TEN_MILLION_ARGS ?= --jobs 10000000 --cycles 2

bench-ten-million: install
	.venv/bin/python -m bench.ten_million $(TEN_MILLION_ARGS)
