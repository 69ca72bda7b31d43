"""A Redis connection for the request path that fails at once while its server does not answer.

The socket timeouts (settings: ``REDIS_REQUEST_TIMEOUT_SECONDS``) bound one call. A hung server — accepting
connections, answering nothing (stopped, swapping, a wedged proxy) — would still cost that bound on every
call, and a page makes several (the staff overview: session menu, dashboard cache, throttles). So after one
call to a server times out or is refused, further calls to the same server from this process fail at once for
``TRIP_SECONDS``; then one call tries again. The cache is configured to ignore such errors (a miss), so a
request pays at most one timeout per trip window instead of one per call. No retries inside redis-py either:
a retry of a timed-out call only doubles the wait.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

TRIP_SECONDS = 5.0

_lock = threading.Lock()
_open_until: dict[tuple[str, int, int], float] = {}


def _key(connection: redis.connection.Connection) -> tuple[str, int, int]:
    return (str(connection.host), int(connection.port), int(connection.db or 0))


def tripped(host: str, port: int, db: int = 0) -> bool:
    """True while calls to this server fail fast (for tests and health output)."""
    with _lock:
        return _open_until.get((host, port, db), 0.0) > time.monotonic()


def reset() -> None:
    """Forget every trip (tests)."""
    with _lock:
        _open_until.clear()


class FailFastConnection(redis.connection.Connection):
    """`redis.Connection` with no retries that trips after a timeout or refusal (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["retry"] = Retry(NoBackoff(), 0)
        super().__init__(*args, **kwargs)

    def _check(self) -> None:
        with _lock:
            until = _open_until.get(_key(self), 0.0)
        if until > time.monotonic():
            raise redis.exceptions.ConnectionError(
                f"Redis at {self.host}:{self.port} did not answer recently; skipped for up to {TRIP_SECONDS:g} s")

    def _trip(self) -> None:
        with _lock:
            _open_until[_key(self)] = time.monotonic() + TRIP_SECONDS

    def connect(self, *args: Any, **kwargs: Any) -> None:
        self._check()
        try:
            super().connect(*args, **kwargs)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            self._trip()
            raise

    def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        self._check()
        try:
            super().send_packed_command(*args, **kwargs)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            self._trip()
            raise

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            self._trip()
            raise
