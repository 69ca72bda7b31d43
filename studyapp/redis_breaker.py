"""A Redis connection for the request path that fails at once while its server does not answer.

The socket timeouts (settings: ``REDIS_REQUEST_TIMEOUT_SECONDS``) bound one call. A hung server — accepting
connections, answering nothing (stopped, swapping, a wedged proxy) — would still cost that bound on every
call, and a page makes several (the staff overview: session menu, dashboard cache, throttles). So after one
call to a server times out or is refused, further calls to the same server (host and port: a hung server is
hung for every database number) from this process fail at once for ``TRIP_SECONDS``; then one call tries
again. The cache is configured to ignore such errors (a miss), and the broker publish of a web process uses
the same connections (``studyapp.redis_transport``, transport option ``fail_fast``), so a request pays at most
one timeout per trip window for cache and broker together instead of one per call and per publish attempt. No
retries inside redis-py either: a retry of a timed-out call only doubles the wait.
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
_open_until: dict[tuple[str, int], float] = {}


def _key(connection: Any) -> tuple[str, int]:
    return (str(getattr(connection, "host", "")), int(getattr(connection, "port", 0) or 0))


def tripped(host: str, port: int) -> bool:
    """True while calls to this server fail fast (for tests and health output)."""
    with _lock:
        return _open_until.get((host, port), 0.0) > time.monotonic()


def reset() -> None:
    """Forget every trip (tests)."""
    with _lock:
        _open_until.clear()


class FailFast:
    """Mixin for a redis-py connection class: no retries, and a trip after a timeout or refusal (see the module)."""

    host: str
    port: int

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

    def _failed(self, exc: BaseException) -> None:
        # One failure passes up through several of these methods (connect's health-check ping is a command whose
        # reply is read): it trips once.
        if not getattr(exc, "_redis_breaker_tripped", False):
            exc._redis_breaker_tripped = True  # type: ignore[attr-defined]
            self._trip()

    def connect(self, *args: Any, **kwargs: Any) -> None:
        self._check()
        try:
            super().connect(*args, **kwargs)  # type: ignore[misc]
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            self._failed(exc)
            raise

    def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        self._check()
        try:
            super().send_packed_command(*args, **kwargs)  # type: ignore[misc]
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            self._failed(exc)
            raise

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().read_response(*args, **kwargs)  # type: ignore[misc]
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
            self._failed(exc)
            raise


class FailFastConnection(FailFast, redis.connection.Connection):
    """`redis.Connection` that fails fast (the cache, a web process's broker publish)."""


class FailFastSSLConnection(FailFast, redis.connection.SSLConnection):
    """`redis.SSLConnection` that fails fast (a web process's publish to a ``rediss://`` broker)."""
