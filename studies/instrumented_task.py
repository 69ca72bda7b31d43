"""The one way a Celery task is declared: `@instrumented_task(name=…)`, with retries, time limits and a timer.

Every app's `tasks.py` declares its tasks through this decorator instead of passing Celery options by hand,
so the options that are the same everywhere live once, in settings: late acknowledgement and
`reject_on_worker_lost` (``CELERY_TASK_ACKS_LATE``, ``CELERY_TASK_REJECT_ON_WORKER_LOST``) and the default time
limits (``CELERY_TASK_TIME_LIMIT`` / ``CELERY_TASK_SOFT_TIME_LIMIT``). What differs per task is said by name:

- ``retry=DATABASE_RETRY`` retries the task on a database hiccup with backoff (a `RetryPolicy`);
- ``limits=TimeLimits(soft=…, hard=…)`` replaces the default time limits;
- ``bind=True`` and ``max_retries=None`` for tasks that schedule their own retries (grading).

Each run is timed into ``collabskill_task_duration_seconds{task, outcome}`` (outcome: success, retry,
failure). Under gunicorn and Celery on one host, point both at the same ``PROMETHEUS_MULTIPROC_DIR`` and
``/metrics`` adds the workers' timings up; otherwise they stay in the worker process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery import Task, shared_task
from celery.exceptions import Retry
from django.db import OperationalError
from prometheus_client import Histogram

TASK_DURATION = Histogram(
    "collabskill_task_duration_seconds", "Time one Celery task run took, by task and outcome.",
    ["task", "outcome"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0),
)


@dataclass(frozen=True)
class RetryPolicy:
    """Retry the task on these exceptions, with exponential backoff and jitter, at most `max_retries` times."""

    on: tuple[type[BaseException], ...]
    max_retries: int
    backoff: int = 2
    backoff_max: int = 120

    def options(self) -> dict[str, Any]:
        return {"autoretry_for": self.on, "retry_backoff": self.backoff, "retry_backoff_max": self.backoff_max,
                "retry_jitter": True, "max_retries": self.max_retries}


@dataclass(frozen=True)
class TimeLimits:
    """Soft limit (the task is told, and may clean up) and hard limit (the pool process is killed), seconds."""

    soft: float
    hard: float

    def options(self) -> dict[str, Any]:
        return {"soft_time_limit": self.soft, "time_limit": self.hard}


# Deadlocks, serialisation failures, "database is locked" and dropped connections are all worth a retry.
DATABASE_RETRY = RetryPolicy(on=(OperationalError,), max_retries=8)


class InstrumentedTask(Task):
    """Times every run (the worker calls `__call__` once a task overrides it), keeping the task's own signature."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        outcome = "failure"
        try:
            result = super().__call__(*args, **kwargs)
        except Retry:
            outcome = "retry"
            raise
        else:
            outcome = "success"
            return result
        finally:
            TASK_DURATION.labels(self.name, outcome).observe(time.perf_counter() - began)


def instrumented_task(*, name: str, retry: RetryPolicy | None = None, limits: TimeLimits | None = None,
                      bind: bool = False, **options: Any) -> Callable[[Callable[..., Any]], Any]:
    """Declare a Celery task under `name` (see the module); `options` are Celery's, for the rare task that needs
    one more (e.g. ``max_retries=None`` for a task that passes its own bound to ``self.retry``)."""
    conflicting = {"acks_late", "reject_on_worker_lost"} & set(options)
    if conflicting:
        raise TypeError(f"{sorted(conflicting)} are set once in settings for every task; do not set them per task")
    celery_options: dict[str, Any] = {"name": name, "bind": bind, **options}
    if retry is not None:
        celery_options.update(retry.options())
    if limits is not None:
        celery_options.update(limits.options())

    return shared_task(base=InstrumentedTask, **celery_options)
