# Two commands: `make run` (embedded stack + demo) and `make test` (whole suite).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
CHROMIUM ?= /usr/bin/chromium

.PHONY: run test install install-dev lock lockcheck chromium nginx r-lme4 lint check migrate demo worker clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version' 
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Dependencies come from the hashed lock files (exact versions, tested in CI); the project itself is then
# installed editable without dependencies. A changed lock reinstalls.
$(VENV)/.runtime: requirements/lock.txt pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --require-hashes -r requirements/lock.txt
	$(BIN)/pip install -q --no-deps -e .
	@touch $@

$(VENV)/.dev: requirements/dev.txt pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q --require-hashes -r requirements/dev.txt
	$(BIN)/pip install -q --no-deps -e .
	@touch $@ $(VENV)/.runtime

install: $(VENV)/.runtime
install-dev: $(VENV)/.dev

# Regenerate the locks after changing dependencies in pyproject.toml (keeps existing pins where they still fit;
# `make lock LOCK_ARGS=--upgrade` moves everything to the newest allowed versions). Python 3.11 on x86-64 Linux.
LOCK_FLAGS := --quiet --generate-hashes --python-version 3.11 --python-platform x86_64-unknown-linux-gnu \
	--custom-compile-command 'make lock' $(LOCK_ARGS)
lock: install-dev
	$(BIN)/uv pip compile pyproject.toml $(LOCK_FLAGS) -o requirements/lock.txt
	$(BIN)/uv pip compile pyproject.toml --extra dev $(LOCK_FLAGS) -o requirements/dev.txt
	$(PYTHON) requirements/check_lock.py --write

# Fails when pyproject.toml's requirements changed without `make lock` (standard library only, no venv needed).
lockcheck:
	$(PYTHON) requirements/check_lock.py

# Browser tests drive Debian's chromium; install it when missing and we are allowed to (root + apt-get).
chromium:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "Installing Debian chromium for the browser tests…"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "chromium is not installed and cannot be installed here: browser tests will be skipped."; fi

# The proxy tests serve collectstatic's output through deploy/nginx.conf with Debian's nginx; same rule.
nginx:
	@if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "Installing Debian nginx for the proxy tests…"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null; \
	else echo "nginx is not installed and cannot be installed here: proxy tests will be skipped."; fi

# The synergy model's tests compare with lme4 through Rscript; install Debian's r-cran-lme4 when missing and allowed.
r-lme4:
	@if command -v Rscript >/dev/null 2>&1 && Rscript -e 'library(lme4)' >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "Installing Debian r-cran-lme4 for the synergy model's reference tests…"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq r-cran-lme4 >/dev/null; \
	else echo "lme4 is not installed and cannot be installed here: the lme4 reference tests will be skipped."; fi

migrate: install
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py demo --if-empty --base-url http://$(HOST):$(PORT)

# Web, Celery worker and beat in the foreground; Ctrl-C stops all of them.
# The worker runs under studyapp.supervise, which restarts it whenever it exits (docs/grading-reliability.md).
# Its output passes through awk, which prints the demo accounts and links once the worker is ready, below its
# ~60-line banner; awk ignores Ctrl-C so the worker's warm shutdown can still write its last lines.
ACCESS = $(BIN)/python manage.py demo --access --base-url http://$(HOST):$(PORT)
# The trap clears itself before stopping the supervisor, so it runs once (a trap that signals its own process
# group fires again on every signal it sends) and waits for the worker's warm shutdown to finish.
run: demo
	$(BIN)/python manage.py collectstatic --noinput -v 0
	@echo "Starting web on http://$(HOST):$(PORT) and a Celery worker with beat. Ctrl-C stops everything."
	@worker=; stop() { trap - INT TERM EXIT; if [ -n "$$worker" ]; then kill -TERM "$$worker" 2>/dev/null; \
		wait "$$worker" 2>/dev/null; fi; echo "Stopped."; }; trap 'stop; exit 0' INT TERM; trap stop EXIT; \
	$(BIN)/python -m studyapp.supervise -- $(BIN)/celery -A studyapp worker -B -Q default,grading,rating -c 2 \
		--loglevel INFO --schedule var/celerybeat-schedule > >(trap '' INT TERM; awk -v access="$(ACCESS)" \
		'{ print; fflush() } !shown && / ready\.$$/ { shown = 1; system(access) }') 2>&1 & worker=$$!; \
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

# ruff, the import contracts of pyproject's [tool.importlinter] (layers), then mypy.
lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-logo --cache-dir var/cache/import-linter
	$(BIN)/mypy

check: lockcheck install-dev
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/python manage.py check

test: install-dev chromium nginx r-lme4 check lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf var/celery var/celery-test var/cache var/staticfiles .pytest_cache
