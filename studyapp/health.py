"""Liveness (``/healthz``) and readiness (``/readyz``) of the web process, answered before any other middleware.

``/healthz`` says only that the process answers: it touches no database, cache or broker, so an orchestrator
restarts web only when web itself is stuck, never because PostgreSQL is briefly away. ``/readyz`` checks what a
request needs -- the database, the cache, the Celery broker, the private file storage and the collected static
files -- each in its own
thread under one deadline (``READYZ_TIMEOUT_SECONDS``, 2 s by default), and answers 503 naming every check that
failed or did not answer in time. Both come first in the middleware list, so neither a host check nor the
HTTPS redirect stands between them and a probe on 127.0.0.1; they carry no secret (check names and exception
class names only, never a message that could hold a host name or a credential).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

from django.http import HttpRequest, HttpResponse, JsonResponse

LIVENESS_PATH = "/healthz"
READINESS_PATH = "/readyz"


def _database() -> None:
    from django.db import connections

    connection = connections["default"]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connection.close()  # the check runs in a thread of its own: leave no connection behind


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

    with current_app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=_timeout())


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


CHECKS: dict[str, Callable[[], None]] = {"database": _database, "cache": _cache, "broker": _broker,
                                         "storage": _storage, "static": _static}


def _timeout() -> float:
    return float(os.environ.get("READYZ_TIMEOUT_SECONDS", "2"))


def readiness() -> tuple[bool, dict[str, dict]]:
    """Run every check at once; return (all passed, {check: {"ok", "seconds" | "error"}})."""
    deadline = time.monotonic() + _timeout()
    results: dict[str, dict] = {}
    executor = ThreadPoolExecutor(max_workers=len(CHECKS), thread_name_prefix="readyz")
    try:
        started = time.monotonic()
        futures = {name: executor.submit(check) for name, check in CHECKS.items()}
        for name, future in futures.items():
            try:
                future.result(timeout=max(0.0, deadline - time.monotonic()))
                results[name] = {"ok": True, "seconds": round(time.monotonic() - started, 3)}
            except FutureTimeout:
                results[name] = {"ok": False, "error": f"no answer within {_timeout():g} s"}
            except Exception as exc:
                results[name] = {"ok": False, "error": type(exc).__name__}
    finally:
        executor.shutdown(wait=False, cancel_futures=True)  # a hung check must not hold the answer
    return all(result["ok"] for result in results.values()), results


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
