# Two commands: `make run` (embedded stack + demo) and `make test` (whole suite).
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
CHROMIUM ?= /usr/bin/chromium

.PHONY: run test install install-dev chromium lint check migrate demo worker clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version' 
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	@touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@ $(VENV)/.runtime

install: $(VENV)/.runtime
install-dev: $(VENV)/.dev

# Browser tests drive Debian's chromium; install it when missing and we are allowed to (root + apt-get).
chromium:
	@if [ -x "$(CHROMIUM)" ]; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "Installing Debian chromium for the browser tests…"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "chromium is not installed and cannot be installed here: browser tests will be skipped."; fi

migrate: install
	$(BIN)/python manage.py migrate --noinput

demo: migrate
	$(BIN)/python manage.py demo --if-empty --base-url http://$(HOST):$(PORT)

# Web, Celery worker and beat in the foreground; Ctrl-C stops all of them.
# The trap clears itself before stopping the worker, so it runs once (a trap that signals its own process
# group fires again on every signal it sends) and waits for the worker's warm shutdown to finish.
run: demo
	$(BIN)/python manage.py collectstatic --noinput -v 0
	@echo "Starting web on http://$(HOST):$(PORT) and a Celery worker with beat. Ctrl-C stops everything."
	@worker=; stop() { trap - INT TERM EXIT; if [ -n "$$worker" ]; then kill -TERM "$$worker" 2>/dev/null; \
		wait "$$worker" 2>/dev/null; fi; echo "Stopped."; }; trap 'stop; exit 0' INT TERM; trap stop EXIT; \
	$(BIN)/celery -A studyapp worker -B -Q default,grading,rating -c 2 --loglevel INFO \
		--schedule var/celerybeat-schedule & worker=$$!; \
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

lint: install-dev
	$(BIN)/ruff check .

check: install-dev
	$(BIN)/python manage.py makemigrations --check --dry-run
	$(BIN)/python manage.py check

test: install-dev chromium check lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

clean:
	rm -rf var/celery var/celery-test var/cache var/staticfiles .pytest_cache
