"""Provider rate limits: at most `limit` requests started in any `window` seconds, per provider.

With Redis the window is shared by every worker process: a sliding-window log in one sorted set per provider,
checked and appended by one Lua script on Redis's own clock, so processes on different hosts agree and no two
can both take the last slot. Without Redis (the embedded profile, one machine) the same window is kept per
process. If Redis stops answering, calls fall back to the per-process window (logged, at most once a minute)
rather than failing grading; the shared window resumes by itself when Redis is back.

No Django imports: `grading.llm` uses a limiter through `acquire`, and `grading.providers` picks one.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from typing import Any, Protocol

logger = logging.getLogger(__name__)

KEY_PREFIX = "grading:ratelimit:"

# KEYS[1] the provider's window; ARGV limit, window (µs), a unique member. Returns {0, now} when the request may
# go now (and records it at `now`, µs on Redis's clock), else {the µs until the oldest request leaves it, now}.
_SLIDING_WINDOW = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000000 + tonumber(now_parts[2])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000) + 1000)
  return {0, now}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {math.max(1, tonumber(oldest[2]) + window - now), now}
"""


class RateLimiter(Protocol):
    def acquire(self, key: str, limit: int, window: float) -> float:
        """Record a request and return 0 if it may start now, else the seconds to wait before asking again."""


class LocalWindow:
    """A sliding-window log kept in this process (threads share it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._log: dict[str, deque[float]] = {}
        # The latest grants, in seconds on this process's monotonic clock: what the limiter decided, apart from
        # when the requests then happen to reach the provider.
        self.grants: deque[float] = deque(maxlen=1000)

    def acquire(self, key: str, limit: int, window: float) -> float:
        now = time.monotonic()
        with self._lock:
            log = self._log.setdefault(key, deque())
            while log and log[0] <= now - window:
                log.popleft()
            if len(log) < limit:
                log.append(now)
                self.grants.append(now)
                return 0.0
            return max(0.001, log[0] + window - now)

    def clear(self, key: str) -> None:
        with self._lock:
            self._log.pop(key, None)


class RedisWindow:
    """The sliding window shared through Redis; falls back to a per-process window while Redis is down."""

    def __init__(self, url: str, prefix: str = KEY_PREFIX) -> None:
        self.url = url
        self.prefix = prefix
        self._client: Any = None
        self._script: Any = None
        self._fallback = LocalWindow()
        self._warned_at = float("-inf")
        # The latest grants this process received, in seconds on Redis's clock (one clock for every process):
        # what the limiter decided, for audits and tests, apart from when requests happen to arrive.
        self.grants: deque[float] = deque(maxlen=1000)

    def __reduce__(self) -> tuple[Any, ...]:  # sent to other processes by URL, never with a live connection
        return (type(self), (self.url, self.prefix))

    def _connect(self) -> Any:
        if self._client is None:
            import redis  # imported here so the embedded profile never needs it

            # Bounded like every other Redis call (a hung server must not stall a grading call for long); a
            # timeout falls back to the per-process window below.
            self._client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5, socket_timeout=0.5)
            self._script = self._client.register_script(_SLIDING_WINDOW)
        return self._script

    def acquire(self, key: str, limit: int, window: float) -> float:
        import redis

        try:
            wait_us, now_us = self._connect()(keys=[self.prefix + key],
                                              args=[limit, int(window * 1e6), uuid.uuid4().hex])
        except redis.RedisError as exc:
            now = time.monotonic()
            if now - self._warned_at >= 60:
                self._warned_at = now
                logger.warning("rate limit for %s: Redis is unreachable (%s); using the per-process limit until it "
                               "is back", key, exc)
            return self._fallback.acquire(key, limit, window)
        if int(wait_us) == 0:
            self.grants.append(int(now_us) / 1e6)
        return int(wait_us) / 1e6

    def clear(self, key: str) -> None:
        self._connect()
        self._client.delete(self.prefix + key)
