# idem_assets: two commands on a fresh machine — `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
export IDEM_LANDING_DIR ?= $(CURDIR)/data/landing
export IDEM_LAKE_DIR ?= $(CURDIR)/data/lake
HOST ?= 127.0.0.1
PORT ?= 3000
NOTIFY_PORT ?= 8765
NOTIFY_DB ?= data/state/notify.db
# Local development token of the reference notification service (not a secret);
# set IDEM_NOTIFY_TOKEN yourself to use another.
export IDEM_NOTIFY_TOKEN ?= local-dev-token
export IDEM_NOTIFY_URL ?= http://127.0.0.1:$(NOTIFY_PORT)
# Instance profile: sqlite (embedded, the default) or postgres (deploy/postgres/dagster.yaml,
# connection from DAGSTER_PG_*; the checkpoint store goes to the same database).
IDEM_INSTANCE ?= sqlite
INSTANCE_YAML_sqlite := $(CURDIR)/deploy/sqlite/dagster.yaml
INSTANCE_YAML_postgres := $(CURDIR)/deploy/postgres/dagster.yaml
INSTANCE_YAML := $(INSTANCE_YAML_$(IDEM_INSTANCE))
ifeq ($(IDEM_INSTANCE),postgres)
export DAGSTER_PG_PORT ?= 5432
# libpq reads the password from PGPASSWORD, so it never appears in IDEM_STATE_URL.
export PGPASSWORD ?= $(DAGSTER_PG_PASSWORD)
export IDEM_STATE_URL ?= postgresql://$(DAGSTER_PG_USERNAME)@$(DAGSTER_PG_HOST):$(DAGSTER_PG_PORT)/$(DAGSTER_PG_DB)
endif
export IDEM_STATE_URL ?= sqlite:///$(CURDIR)/data/state/checkpoint.db
SAMPLE_DAYS ?= 14
# The last two weeks, so the UI's partition pickers (which open on recent days) show them.
SAMPLE_START ?= $(shell date -u -d '$(SAMPLE_DAYS) days ago' +%F)
SAMPLE_SEED ?= 7
# The TPC-H domain (idem_assets/defs/tpch): tpchgen-cli's scale factor and the days laid out
# from 1992-01-01 (TPC-H's own dates).
TPCH_SCALE ?= 0.01
TPCH_DAYS ?= 31
# Example data (the sample shop and TPC-H) is written only into the default landing dir:
# with IDEM_LANDING_DIR pointing at your own files, nothing is written there.
SAMPLE_DATA ?= $(if $(filter file,$(origin IDEM_LANDING_DIR)),yes,no)

# Debian's own Chromium drives the browser tests (never a downloaded browser).
CHROMIUM ?= /usr/bin/chromium

# The shipped example's partitions start where its sample data starts (its declarations read
# IDEM_SAMPLE_FIRST_DAY), and TPC-H's end where its TPCH_DAYS end (IDEM_TPCH_LAST_DAY, unless
# set): a shell prefix for the recipes that load the code location.
SAMPLE_FIRST_DAY = if [ "$(SAMPLE_DATA)" = yes ] && days=$$($(PY) -m idem_assets.sample days); then \
		export IDEM_SAMPLE_FIRST_DAY=$${days%%...*}; \
		echo "sample days laid out: $$days (\`idem-landing days\` prints them)"; fi; \
	export IDEM_TPCH_LAST_DAY=$${IDEM_TPCH_LAST_DAY:-$$(date -u -d "1992-01-01 + $$(( $(TPCH_DAYS) - 1 )) days" +%F)};

.PHONY: install run demo test test-compat lock bench figures sample-data tpch-data dagster-home lint clean browser reliability

# The locked set (requirements/lock.txt): the versions the suite last passed with, within
# pyproject.toml's ranges. `make lock` resolves it again; `make test-compat` tries both ends.
$(VENV)/.installed: pyproject.toml requirements/lock.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c requirements/lock.txt -e ".[dev]"
	touch $@

install: $(VENV)/.installed

# Installed once through apt (as root in CI, else through sudo); silent when present.
$(CHROMIUM):
	@echo "installing Debian chromium for the browser tests"
	@if [ "$$(id -u)" -eq 0 ]; then sudo=; else sudo=sudo; fi; \
	$$sudo apt-get update -qq && \
	DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends \
		chromium >/dev/null

browser: $(CHROMIUM)

## Link the instance profile chosen by IDEM_INSTANCE into DAGSTER_HOME.
dagster-home:
	@if [ -z "$(INSTANCE_YAML)" ]; then \
		echo "IDEM_INSTANCE must be sqlite or postgres, not '$(IDEM_INSTANCE)'" >&2; exit 2; fi
	@if [ "$(IDEM_INSTANCE)" = postgres ]; then missing=; \
		for name in DAGSTER_PG_HOST DAGSTER_PG_DB DAGSTER_PG_USERNAME DAGSTER_PG_PASSWORD; do \
			[ -n "$${!name}" ] || missing="$$missing $$name"; done; \
		if [ -n "$$missing" ]; then \
			echo "IDEM_INSTANCE=postgres needs$$missing (see docs/deployment.md)" >&2; exit 2; fi; fi
	@mkdir -p $(DAGSTER_HOME)
	@ln -sf $(INSTANCE_YAML) $(DAGSTER_HOME)/dagster.yaml

## Written once into an empty landing dir; asked for by date (`make sample-data
## SAMPLE_START=2024-03-01`), written beside what is there.
sample-data: install
	@if [ "$(SAMPLE_DATA)" != yes ]; then \
		echo "landing dir $(IDEM_LANDING_DIR) is yours: no sample data written"; \
	elif [ -z "$$(ls -A $(IDEM_LANDING_DIR) 2>/dev/null)" ] || [ "$(origin SAMPLE_START)" != file ]; then \
		$(PY) -m idem_assets.sample generate --out $(IDEM_LANDING_DIR) \
			--start $(SAMPLE_START) --days $(SAMPLE_DAYS) --seed $(SAMPLE_SEED) >/dev/null \
		&& echo "sample data: $(SAMPLE_DAYS) days from $(SAMPLE_START) in $(IDEM_LANDING_DIR)"; \
	else echo "landing data present in $(IDEM_LANDING_DIR)"; fi

## TPC-H orders, lineitem and customer from tpchgen-cli, laid out under $(IDEM_LANDING_DIR)/tpch
## once. After sample-data, whose "landing dir is empty" test must not see tpch/ first.
tpch-data: install sample-data
	@if [ "$(SAMPLE_DATA)" != yes ]; then :; \
	elif [ ! -e $(IDEM_LANDING_DIR)/tpch ]; then \
		$(PY) -m idem_assets.sample tpch --out $(IDEM_LANDING_DIR) \
			--scale $(TPCH_SCALE) --days $(TPCH_DAYS) >/dev/null \
		&& echo "TPC-H data: $(TPCH_DAYS) days from 1992-01-01 at scale $(TPCH_SCALE) in $(IDEM_LANDING_DIR)/tpch"; \
	else echo "TPC-H landing data present in $(IDEM_LANDING_DIR)/tpch"; fi

## Start the Dagster UI on http://$(HOST):$(PORT) with the whole code location loaded,
## and the reference notification service beside it on $(IDEM_NOTIFY_URL). One Ctrl-C (or a
## SIGTERM to make) stops the webserver, the daemon, their code servers and runs, and the
## notification service (idem_assets/serve.py).
run: install dagster-home sample-data tpch-data
	@mkdir -p data/state $(dir $(NOTIFY_DB))
	@$(SAMPLE_FIRST_DAY) \
	$(VENV)/bin/idem-assets pools --apply >/dev/null \
		&& echo "lake pools set: each table admits its declared writers (backfill.writers)" \
		|| echo "could not set the lake pools' limits (idem-assets pools --apply)"; \
	$(VENV)/bin/dagster sensor start lake_automation -w workspace.yaml >/dev/null 2>&1 \
		&& echo "lake_automation sensor on: downstream assets follow their upstream" \
		|| echo "could not start the lake_automation sensor (start it in the UI)"; \
	exec $(PY) -m idem_assets.serve --host $(HOST) --port $(PORT) \
		--notify-port $(NOTIFY_PORT) --notify-db $(NOTIFY_DB)

## Headless: materialize two weeks of every asset twice and print rows/versions/fingerprints/checks.
demo: install dagster-home sample-data tpch-data
	@$(SAMPLE_FIRST_DAY) $(PY) -m idem_assets.demo --days $(SAMPLE_DAYS)

## Create/install everything and run the whole test suite, on two workers (a test file
## each, the longest files first: see LONGEST_FIRST in idem_assets_tests/conftest.py;
## TEST_WORKERS=0 runs it in one process), then print what each suite cost.
TEST_WORKERS ?= 2
TEST_REPORT := $(CURDIR)/test-artifacts/junit.xml
test: install browser
	@mkdir -p $(dir $(TEST_REPORT))
	@$(VENV)/bin/pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder) \
		--junitxml=$(TEST_REPORT) $(PYTEST_ARGS); tests=$$?; \
	$(PY) -m idem_assets_tests.durations $(TEST_REPORT) || true; exit $$tests

## The compatibility suite against the wheel, in two fresh virtualenvs: the newest releases
## the index serves within pyproject.toml's ranges and the oldest allowed (uv's lowest-direct);
## prints the versions each ran (idem_assets_tests/compat/__main__.py). COMPAT_ARGS=--sets oldest.
test-compat: install
	@$(PY) -m idem_assets_tests.compat $(COMPAT_ARGS)

## Resolve the dev environment again within the ranges (newest fitting releases) into
## requirements/lock.txt; run `make test` before committing it.
lock: install
	@rm -rf build/lock && $(PY) -m uv venv --quiet --python $(PY) build/lock
	@$(PY) -m uv pip install --quiet --python build/lock/bin/python ".[dev]"
	@{ sed -n '1,/^# Refresh/p' requirements/lock.txt; \
		$(PY) -m uv pip freeze --python build/lock/bin/python --exclude-editable | grep -v '^idem.assets'; \
	} > requirements/lock.txt.new && mv requirements/lock.txt.new requirements/lock.txt
	@echo "requirements/lock.txt resolved again: make test, then commit it"

## Crash, concurrency, bad-input and security suites, then their report table
## (rows in test-artifacts/reliability/make-results.jsonl; see docs/reliability.md).
RELIABILITY_RESULTS := $(CURDIR)/test-artifacts/reliability/make-results.jsonl
reliability: install
	@mkdir -p $(dir $(RELIABILITY_RESULTS)) && rm -f $(RELIABILITY_RESULTS)
	@IDEM_RELIABILITY_RESULTS=$(RELIABILITY_RESULTS) \
	IDEM_SOAK_OPERATIONS=$${IDEM_SOAK_OPERATIONS:-300} IDEM_SOAK_SEED=$${IDEM_SOAK_SEED:-$$(date +%s)} \
	$(VENV)/bin/pytest \
		idem_assets_tests/reliability $(PYTEST_ARGS); tests=$$?; \
	$(PY) -m idem_assets_tests.reliability.report $(RELIABILITY_RESULTS); report=$$?; \
	if [ $$tests -ne 0 ]; then exit $$tests; fi; exit $$report

## Benchmarks side by side with the peers; writes benchmarks/RESULTS.md and plots.
## BENCH_ARGS=--quick for a small run.
bench: install
	$(PY) -m benchmarks.run $(BENCH_ARGS)

## The README's figures, measured as a reader runs them, with the load beside each
## (benchmarks/cases/readme_figures.py); FIGURES_ARGS="--busy 2" for the busy end.
figures: install
	$(PY) -m benchmarks.cases.readme_figures $(FIGURES_ARGS)

## The public API's types as a type checker sees them: at least TYPED_SHARE known.
TYPED_SHARE ?= 0.90
lint: install
	$(VENV)/bin/ruff check idem_assets idem_assets_tests benchmarks
	$(VENV)/bin/ruff format --check idem_assets idem_assets_tests benchmarks
	PYTHONPATH=$(CURDIR) $(VENV)/bin/basedpyright --pythonpath $(PY) --verifytypes idem_assets \
		--ignoreexternal --outputjson | PYTHONPATH=$(CURDIR) $(PY) -m idem_assets_tests.typed_share $(TYPED_SHARE)

clean:
	rm -rf data .dagster_home
