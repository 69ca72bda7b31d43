"""Suite-wide fixtures: service requirements, a real Celery worker process, the fake LLM server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parent.parent
REQUIRE_SERVICES = os.environ.get("REQUIRE_SERVICES") == "1"


def _reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or default_port), timeout=3):
            return True
    except OSError:
        return False


def pytest_configure(config: pytest.Config) -> None:
    """With REQUIRE_SERVICES=1, a missing or unreachable PostgreSQL/Redis fails the run outright."""
    if not REQUIRE_SERVICES:
        return
    problems = []
    db, redis_url = os.environ.get("DATABASE_URL", ""), os.environ.get("REDIS_URL", "")
    if not db.startswith("postgres"):
        problems.append("DATABASE_URL must point at PostgreSQL")
    elif not _reachable(db, 5432):
        problems.append(f"PostgreSQL is not reachable at {db}")
    if not redis_url.startswith("redis"):
        problems.append("REDIS_URL must point at Redis")
    elif not _reachable(redis_url, 6379):
        problems.append(f"Redis is not reachable at {redis_url}")
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if broker and not _reachable(broker, 5672 if broker.startswith("amqp") else 6379):
        problems.append(f"the Celery broker is not reachable at {broker}")
    if problems:
        raise pytest.UsageError("REQUIRE_SERVICES=1 but: " + "; ".join(problems))


def uses_postgres() -> bool:
    from django.db import connection

    return connection.vendor == "postgresql"


def uses_redis() -> bool:
    return bool(os.environ.get("REDIS_URL"))


requires_postgres = pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres") and not REQUIRE_SERVICES,
    reason="needs PostgreSQL: set DATABASE_URL (CI sets it and REQUIRE_SERVICES=1, so it never skips there)",
)
requires_redis = pytest.mark.skipif(
    not os.environ.get("REDIS_URL") and not REQUIRE_SERVICES,
    reason="needs Redis: set REDIS_URL (CI sets it and REQUIRE_SERVICES=1, so it never skips there)",
)


@pytest.fixture(autouse=True)
def _broker_not_skipped() -> Iterator[None]:
    """A send that failed in one test must not make the next test's sends skip the broker, nor a Redis call that
    timed out make the next test's cache and publish calls fail fast (studyapp.redis_breaker)."""
    from studies.task_sending import broker_skip_reset
    from studyapp import redis_breaker

    broker_skip_reset()
    redis_breaker.reset()
    yield
    broker_skip_reset()
    redis_breaker.reset()


@pytest.fixture(autouse=True)
def _private_media(request, tmp_path) -> None:
    """Keep every test's uploaded files in its own temporary folder (when Django is loaded at all)."""
    if not request.config.pluginmanager.hasplugin("django"):
        return
    settings = request.getfixturevalue("settings")
    storage = dict(settings.STORAGES)
    if storage["default"]["BACKEND"].endswith("FileSystemStorage"):
        storage["default"] = {**storage["default"], "OPTIONS": {**storage["default"]["OPTIONS"],
                                                                "location": str(tmp_path / "media")}}
        settings.STORAGES = storage
    settings.MEDIA_ROOT = tmp_path / "media"


def worker_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a worker subprocess that shares this test run's database and broker."""
    from django.conf import settings
    from django.db import connection

    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "studyapp.settings"
    env["DJANGO_TESTING"] = "1"
    db = connection.settings_dict
    if connection.vendor == "postgresql":
        user = db.get("USER") or "postgres"
        password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
        env["DATABASE_URL"] = (
            f"postgres://{user}{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
        )
    else:
        env.pop("DATABASE_URL", None)
        env["SQLITE_PATH"] = str(db["NAME"])
    env["VAR_DIR"] = str(settings.VAR_DIR)
    env.update(extra or {})
    return env


class WorkerProcess:
    """A real `celery worker` subprocess; `stop()` terminates it and returns its log."""

    def __init__(self, queues: str, env: dict[str, str], concurrency: int = 1, pool: str = "solo",
                 args: tuple[str, ...] = ()) -> None:
        self.log_path = ROOT / "var" / f"test-worker-{uuid.uuid4().hex[:8]}.log"
        self.log = open(self.log_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "studyapp", "worker", "-Q", queues, "-P", pool,
             "-c", str(concurrency), "--without-heartbeat", "--without-gossip", "--without-mingle",
             "-n", f"test-{uuid.uuid4().hex[:6]}@%h", "--loglevel", "INFO", *args],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        text = self.log_path.read_text(errors="replace")
        self.log_path.unlink(missing_ok=True)
        return text


@pytest.fixture
def celery_worker_process(transactional_db) -> Iterator:
    """Start a real Celery worker (all queues) on this run's broker and test database."""
    from studyapp.celery import app

    app.control.purge()  # stale messages from an earlier run must not reach this worker
    started: list[WorkerProcess] = []

    def start(queues: str = "default,grading,rating", extra_env: dict[str, str] | None = None,
              concurrency: int = 1, pool: str = "solo") -> WorkerProcess:
        worker = WorkerProcess(queues, worker_environment(extra_env), concurrency=concurrency, pool=pool)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.25, message: str = "condition") -> None:
    """Poll until predicate() is truthy, failing the test with `message` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {message}")
