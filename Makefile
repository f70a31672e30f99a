# RealICU Web: `make run` serves the platform, `make test` runs the test suite.
# Both set up everything they need on a fresh machine.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# The test suite runs on PostgreSQL and Redis (local defaults; override freely).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15
# The tests clear their cache at start: keep it apart from the running app's.
TEST_CACHE_URL ?= filecache://$(CURDIR)/var/test-cache

.PHONY: run test services lint bench clean

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

run: $(STAMP)
	$(PY) manage.py bootstrap
	$(PY) manage.py serve

services:
	bash scripts/ensure_services.sh

test: $(STAMP) services
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) \
		CACHE_URL=$(TEST_CACHE_URL) $(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP) services
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) benchmarks/import_bench.py

clean:
	rm -rf $(VENV) var
