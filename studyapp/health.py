"""Liveness (``/healthz``) and readiness (``/readyz``) of the web process, answered before any other middleware.

``/healthz`` says only that the process answers: it touches no database, cache or broker, so an orchestrator
restarts web only when web itself is stuck, never because PostgreSQL is briefly away. ``/readyz`` checks what a
request needs -- the database, the cache, the Celery broker, the private file storage and the collected
static files -- at once under one
deadline (``READYZ_TIMEOUT_SECONDS``, 2 s by default), and answers 503 naming every check that failed or did
not answer in time. Both come first in the middleware list, so neither a host check nor the HTTPS redirect
stands between them and a probe on 127.0.0.1; they carry no secret (check names and exception class names
only, never a message that could hold a host name or a credential).

``/readyz`` answers anyone, so a flood of probes must cost the services nothing more than one probe does:

- its answer is kept for ``READYZ_CACHE_SECONDS`` (5 s by default) and shared by every caller in that time;
  callers arriving while the checks run wait for that run instead of starting another;
- each check runs in a thread of its own that lives as long as the process (one per check, started on first
  use), keeping its database and broker connection open between runs; a connection is closed and opened
  again only after it failed;
- a check that hangs is reported at the deadline and is not started again while it still hangs, so a hung
  service never adds a thread or a connection per probe: the check's thread takes the next run once it returns.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

LIVENESS_PATH = "/healthz"
READINESS_PATH = "/readyz"
THREAD_PREFIX = "readyz-"


class _Reused:
    """The connections the check threads keep between runs (each touched by its own check's thread only)."""

    broker: Any = None
    broker_url: str | None = None


def _database() -> None:
    from django.db import connection  # this thread's own connection, kept open between runs

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:
        connection.close()  # open a fresh one on the next run
        raise


def _cache() -> None:
    from django.core.cache import cache

    # django-redis is configured to swallow errors (a dead Redis reads as a miss), so write and read back.
    key, value = f"readyz:{uuid.uuid4().hex}", uuid.uuid4().hex
    cache.set(key, value, timeout=10)
    if cache.get(key) != value:
        raise ConnectionError("the cache did not return what was written")
    cache.delete(key)


def _broker() -> None:
    from celery import current_app

    url = current_app.conf.broker_url
    if _Reused.broker is not None and _Reused.broker_url != url:
        _drop_broker()
    if _Reused.broker is None:
        _Reused.broker, _Reused.broker_url = current_app.connection_for_write(), url
    connection = _Reused.broker
    try:
        connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=_timeout())
        ping = getattr(getattr(connection.default_channel, "client", None), "ping", None)
        if callable(ping):
            ping()  # Redis: the kept connection still answers (a restart since is found here)
    except Exception:
        _drop_broker()
        raise


def _drop_broker() -> None:
    if _Reused.broker is not None:
        with contextlib.suppress(Exception):
            _Reused.broker.release()
    _Reused.broker = _Reused.broker_url = None


def _storage() -> None:
    from django.core.files.storage import default_storage

    location = getattr(default_storage, "location", None)
    if isinstance(location, str) and not getattr(default_storage, "bucket_name", None):
        # The folder is created on the first upload: it, or the folder it will be created in, must be writable.
        folder = Path(location)
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError("the private file folder cannot be written")
    default_storage.exists(".readyz")  # S3: a HEAD request, which fails on a wrong bucket or credentials


def _static() -> None:
    """The collected static files: with the hashed-name storage every page looks its files up in the manifest
    ``collectstatic`` writes, so without it every page is a 500 while the services are all up."""
    from django.contrib.staticfiles.storage import staticfiles_storage

    manifest = getattr(staticfiles_storage, "manifest_name", None)
    if manifest and not staticfiles_storage.exists(manifest):
        raise FileNotFoundError("collectstatic has not been run")


def _close_database() -> None:
    from django.db import connection

    connection.close()


CHECKS: dict[str, Callable[[], None]] = {"database": _database, "cache": _cache, "broker": _broker,
                                         "storage": _storage, "static": _static}
# What a check thread closes when it is stopped (tests, a forked child).
_CLOSERS: dict[str, Callable[[], None]] = {"database": _close_database, "broker": _drop_broker}


def _timeout() -> float:
    return float(os.environ.get("READYZ_TIMEOUT_SECONDS", "2"))


def _cache_seconds() -> float:
    return float(os.environ.get("READYZ_CACHE_SECONDS", "5"))


class _CheckThread:
    """The one thread that runs a check, for the life of the process; a run is refused while one is going."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.jobs: queue.SimpleQueue[Future | None] = queue.SimpleQueue()
        self.running: Future | None = None
        self.thread = threading.Thread(target=self._serve, name=THREAD_PREFIX + name, daemon=True)
        self.thread.start()

    def submit(self) -> Future | None:
        """A future for a fresh run, or None while the previous run has not returned (it hangs)."""
        if self.running is not None and not self.running.done():
            return None
        self.running = Future()
        self.jobs.put(self.running)
        return self.running

    def stop(self) -> None:
        self.jobs.put(None)

    def _serve(self) -> None:
        while (job := self.jobs.get()) is not None:
            try:
                CHECKS[self.name]()
            except BaseException as exc:  # noqa: BLE001 - reported to the caller, the thread goes on
                job.set_exception(exc)
            else:
                job.set_result(None)
        if closer := _CLOSERS.get(self.name):
            with contextlib.suppress(Exception):
                closer()


class _Readiness:
    """The check threads of this process and the last answer, shared by every caller for a few seconds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # one run at a time
        self.threads: dict[str, _CheckThread] = {}
        self.pid = os.getpid()
        self.last: tuple[float, bool, dict[str, dict]] | None = None

    def thread(self, name: str) -> _CheckThread:
        if self.pid != os.getpid():  # a forked child inherits the objects, not the threads
            self.threads, self.pid, self.last = {}, os.getpid(), None
        if name not in self.threads:
            self.threads[name] = _CheckThread(name)
        return self.threads[name]

    def fresh(self) -> tuple[bool, dict[str, dict]] | None:
        last = self.last
        if last is not None and self.pid == os.getpid() and time.monotonic() - last[0] < _cache_seconds():
            return last[1], last[2]
        return None

    def stop(self) -> None:
        """End every check thread once its run returns (it closes its connections); the next probe starts anew."""
        with self.lock:
            for check_thread in self.threads.values():
                check_thread.stop()
            for check_thread in self.threads.values():
                check_thread.thread.join(timeout=_timeout())
            self.threads, self.last = {}, None


_READINESS = _Readiness()


def readiness() -> tuple[bool, dict[str, dict]]:
    """Every check's result, at most READYZ_CACHE_SECONDS old: (all passed, {check: {"ok", "seconds" | "error"}})."""
    if (cached := _READINESS.fresh()) is not None:
        return cached
    with _READINESS.lock:  # held at most one deadline: a run never waits on a check past it
        if (cached := _READINESS.fresh()) is not None:
            return cached  # the run this caller waited for
        ready, results = _run_checks()
        _READINESS.last = (time.monotonic(), ready, results)
        return ready, results


def _run_checks() -> tuple[bool, dict[str, dict]]:
    deadline = time.monotonic() + _timeout()
    started = time.monotonic()
    futures = {name: _READINESS.thread(name).submit() for name in CHECKS}
    results: dict[str, dict] = {}
    for name, future in futures.items():
        if future is None:
            results[name] = {"ok": False, "error": "still no answer from an earlier check"}
            continue
        try:
            future.result(timeout=max(0.0, deadline - time.monotonic()))
            results[name] = {"ok": True, "seconds": round(time.monotonic() - started, 3)}
        except FutureTimeout:
            results[name] = {"ok": False, "error": f"no answer within {_timeout():g} s"}
        except Exception as exc:
            results[name] = {"ok": False, "error": type(exc).__name__}
    return all(result["ok"] for result in results.values()), results


def stop_checks() -> None:
    """Stop the check threads and forget the kept answer (tests; the threads start again on the next probe)."""
    _READINESS.stop()


class HealthCheckMiddleware:
    """Answer the two probe paths before anything else runs."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info.rstrip("/")
        if path == LIVENESS_PATH and request.method in ("GET", "HEAD"):
            return JsonResponse({"status": "alive"})
        if path == READINESS_PATH and request.method in ("GET", "HEAD"):
            ready, checks = readiness()
            failed = [name for name, result in checks.items() if not result["ok"]]
            return JsonResponse({"status": "ready" if ready else "unready", "failed": failed, "checks": checks},
                                status=200 if ready else 503)
        return self.get_response(request)
