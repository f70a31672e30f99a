# RealICU Web: `make run` serves the platform, `make test` runs the test suite.
# Both set up everything they need on a fresh machine.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run

# The test suite runs on PostgreSQL and Redis (local defaults; override freely).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15
# The tests clear their cache at start: keep it apart from the running app's.
TEST_CACHE_URL ?= filecache://$(CURDIR)/var/test-cache
# Two processes (pytest-xdist), a test file to one of them: much of the suite
# waits on workers, servers and browsers, so two share the two cores well.
# Each has its own database, broker database and cache (tests/parallel.py).
PYTEST_ARGS ?= -n 2 --dist loadfile --durations=25

.PHONY: run test services lint bench clean bytecode

# llama-cpp-python (test-only, requirements-dev.txt) compiles llama.cpp from its
# source package, 5-20 minutes on two cores: its wheel is built once into
# WHEELS and every later install on the machine takes it from there. It is built
# for AVX2, not for the building CPU (-march=native): a native build on a CPU
# reporting AVX-512 and AMX crashed with a general protection fault in
# libggml-cpu on its first completion in this VM. --no-binary and --no-cache-dir
# keep pip from reusing a wheel built with other flags; the folder's name says
# which flags its wheel has.
WHEELS ?= $(HOME)/.cache/realicu-wheels/avx2
LLAMA_CPP_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
	-DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
	-DGGML_AMX_BF16=OFF

# `make run` installs only what running needs (requirements.txt); the test
# tools and the local LLM server (requirements-dev.txt) come with `make test`.
# --no-compile: pip's byte-compiling of every installed file (torch's thousands)
# was half of the install here (72 s -> 33 s); Python compiles the modules it
# imports on first use instead.
#
# Then the byte-code of what the platform imports is written once, here
# (compileall writes it even where PYTHONDONTWRITEBYTECODE=1 keeps Python from
# writing it on import, as on this machine): without it every process compiles
# its ~920 modules from source at start, 0.8 s of CPU of a command such as
# build_release (2.08 -> 1.58 ms of CPU a window on the demo's Gold release).
# Left out: torch and its sympy (the packaged embedding model runs on numpy),
# and the test tools. The project's own modules are compiled by `bytecode`.
BYTECODE_SKIP := '/(torch|torchgen|functorch|sympy|llama_cpp|moto|playwright|hypothesis|schemathesis|numba|llvmlite)/'
PROJECT_PACKAGES := accounts agents annotation client datause evaluation exports jobs \
	loopback oracle realicu_web surveillance windows benchmarks manage.py

$(RUN_STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet --no-compile -r requirements.txt
	$(PY) -m compileall -q -j 0 -x $(BYTECODE_SKIP) $(VENV)/lib/python3*/site-packages \
		> /dev/null || echo "Some installed modules could not be byte-compiled; Python compiles them if imported."
	touch $(RUN_STAMP)

bytecode: $(RUN_STAMP)
	$(PY) -m compileall -q -j 0 $(PROJECT_PACKAGES) > /dev/null || \
		echo "Some modules could not be byte-compiled; Python compiles them if imported."

$(STAMP): $(RUN_STAMP) requirements-dev.txt
	mkdir -p $(WHEELS)
	ls $(WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(VENV)/bin/pip wheel --quiet --no-deps \
			--no-binary llama-cpp-python --no-cache-dir --wheel-dir $(WHEELS) \
			llama-cpp-python==$(LLAMA_CPP_VERSION)
	$(VENV)/bin/pip install --quiet --find-links $(WHEELS) -r requirements-dev.txt
	touch $(STAMP)

run: $(RUN_STAMP) bytecode
	$(PY) manage.py bootstrap
	$(PY) manage.py serve

services:
	bash scripts/ensure_services.sh

# ruff (ruff.toml, 88 columns): the lint rules, then the formatting, checked
# before the tests run; `ruff format .` and `ruff check --fix .` repair most.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: $(STAMP) services lint
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) \
		CACHE_URL=$(TEST_CACHE_URL) $(PY) -m pytest $(PYTEST_ARGS)

# scale_bench's size in `make bench` (the full size, 10,000 stays and 50 million
# events, is the script's default: `make bench SCALE_BENCH_ARGS=`).
SCALE_BENCH_ARGS ?= --stays 200 --events 1000000

bench: $(STAMP) services bytecode
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) benchmarks/import_bench.py
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) benchmarks/campaign_pages_bench.py
	$(PY) benchmarks/embedded_pipeline_bench.py
	$(PY) benchmarks/embedded_soak.py --hours 1
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) benchmarks/page_weight_bench.py
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) benchmarks/release_bench.py --only gold
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) benchmarks/agents_bench.py
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) benchmarks/icu_evo_bench.py
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) benchmarks/surveillance_bench.py
	$(PY) benchmarks/client_context_bench.py
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) benchmarks/window_page_bench.py
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) benchmarks/scoring_cold_bench.py
	$(PY) benchmarks/ppi_coverage_bench.py
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) \
		$(PY) benchmarks/oracle_throughput.py
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) benchmarks/scale_bench.py \
		$(SCALE_BENCH_ARGS)

clean:
	rm -rf $(VENV) var
