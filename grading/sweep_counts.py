"""Running totals of what the reconciliation sweep repaired, shared by every process through the cache.

The sweep runs in a Celery worker; the metrics endpoint runs in web. Counters kept in a worker's memory would
die with it and never reach web, so each sweep adds its report to one cache key per action (Redis ``INCR`` in
production; the embedded file cache otherwise), and ``/metrics`` reads them. A cache flush resets the totals,
which Prometheus treats as a counter reset.
"""

from __future__ import annotations

from dataclasses import asdict, fields

from django.core.cache import cache

from grading.services.reconcile import ReconcileReport

_KEY = "metrics:sweep:{}"
ACTIONS = tuple(field.name for field in fields(ReconcileReport))


def sweep_counts_add(report: ReconcileReport) -> None:
    """Add one sweep's report to the running totals (never raises: metrics must not fail the sweep)."""
    for action, amount in asdict(report).items():
        if not amount:
            continue
        key = _KEY.format(action)
        try:
            cache.add(key, 0, timeout=None)
            cache.incr(key, amount)
        except Exception:  # noqa: S112 -- an unreachable cache loses a count, never the repair
            continue


def sweep_counts() -> dict[str, int]:
    """Return {action: total} since the cache was last flushed."""
    stored = cache.get_many([_KEY.format(action) for action in ACTIONS])
    return {action: int(stored.get(_KEY.format(action)) or 0) for action in ACTIONS}
