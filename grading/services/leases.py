"""Keep a claim's lease alive while a slow provider call is in flight.

A claim (judge run RUNNING, rubric GENERATING) carries `lease_expires_at`; a worker that dies stops renewing
it, so the claim lapses within one lease and the redelivered message or the reconciliation sweep takes the
work over. The renewal runs in a daemon thread with its own database connection.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import TracebackType

from django.db import connection

logger = logging.getLogger(__name__)


class LeaseKeeper:
    """Call `renew` every `interval` seconds until the block ends (use as a context manager)."""

    def __init__(self, renew: Callable[[], object], interval: float) -> None:
        self._renew = renew
        self._interval = max(interval, 0.5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="lease-keeper", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=self._interval + 5)

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self._interval):
                try:
                    self._renew()
                except Exception:  # a database hiccup must not kill the call; the next tick tries again
                    logger.warning("could not renew a grading lease", exc_info=True)
        finally:
            connection.close()
