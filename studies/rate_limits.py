"""Fixed-window request counters in the shared cache, counted atomically.

A read-modify-write history (DRF's ``SimpleRateThrottle`` reads a list, appends and writes it back) loses
counts when requests from one address arrive at once: 60 concurrent sign-ups against 30 a minute made 52
accounts. Here each request is one atomic ``INCR`` of the current window's key (``add`` creates it first), so
the limit holds however many arrive together. When the cache cannot count (Redis down: django-redis then
answers ``None``), the request is let through and a warning logged: a limit that fails must not take sign-up
or password reset down with it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.core.cache import cache

logger = logging.getLogger(__name__)

_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600,
          "d": 86400, "day": 86400}


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after: int  # seconds until the window ends (0 when allowed)


def parse_rate(rate: str) -> tuple[int, int]:
    """``"30/min"`` → (30, 60); the DRF notation the settings already use."""
    count, _, unit = rate.partition("/")
    if unit not in _UNITS:
        raise ValueError(f"Unknown rate unit in {rate!r}; use s, min, hour or day.")
    return int(count), _UNITS[unit]


def rate_limit_hit(scope: str, ident: str, *, limit: int, window: int, now: float | None = None) -> Verdict:
    """Count one request of ``ident`` in ``scope``; refused once more than ``limit`` fell in this window."""
    now = time.time() if now is None else now
    bucket = int(now // window)
    key = f"ratelimit:{scope}:{ident}:{bucket}"
    try:
        cache.add(key, 0, timeout=window + 1)
        count = cache.incr(key)
    except ValueError:  # the key expired between add and incr: this is the window's first request
        count = 1
    except Exception:  # noqa: BLE001 - a cache backend that raises instead of ignoring
        count = None
    if count is None:
        logger.warning("Rate limit %s not counted: the cache is unavailable", scope)
        return Verdict(True, 0)
    if count <= limit:
        return Verdict(True, 0)
    return Verdict(False, max(1, int((bucket + 1) * window - now)))
