"""The overview's and leaderboard's figures from the shared cache, recomputed at most every few seconds.

During a launch the overview is read far more often than a coordinator can act on it, and every worker click
changes some count on it. Invalidating on each worker write would need a hook in every journey service (and
the study domain may not call up into the console), so the figures live for a short TTL instead: a coordinator
refreshing the page, or three of them, costs one computation per ``DASHBOARD_CACHE_SECONDS`` whatever the
rate, and the page says how old its figures are. A staff action on the overview forgets the study's entry, so
its effect shows on the very next page. The leaderboard's key also names the latest snapshot, so a posterior
refresh shows at once, and so does the newest stability job (its id and status): a job just requested, or just
finished, shows on the very next page like every other background job -- with its progress bar, which reloads
the page when the job is done -- instead of hiding behind the window.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from console.dashboard import counts, selectors
from rating import selectors as rating_selectors
from studies.models import BackgroundJob, Study


def _seconds() -> int:
    return int(getattr(settings, "DASHBOARD_CACHE_SECONDS", 10))


def _overview_key(study: Study) -> str:
    return f"dashboard:overview:{study.pk}"


def overview(study: Study, *, monitor_page: int = 1) -> dict[str, Any]:
    """Return ``selectors.overview`` as computed at most ``DASHBOARD_CACHE_SECONDS`` ago, with ``computed_at`` and
    the study's shared ``counts`` (``counts.study_counts``) computed at the same moment, so the page's verdicts
    and tables never mix figures of two moments."""
    key = _overview_key(study)
    data = cache.get(key) if _seconds() > 0 else None
    if data is None:
        data = {**selectors.overview(study), "counts": counts.study_counts(study), "computed_at": timezone.now(),
                "cache_seconds": _seconds()}
        if _seconds() > 0:
            cache.set(key, data, _seconds())
    if monitor_page != 1:
        # Later pages of the monitor are read fresh (three small queries) rather than cached page by page.
        data = {**data, "monitor": selectors.monitor(study, page=monitor_page)}
    return data


def overview_forget(study: Study) -> None:
    """Drop the study's cached overview (after a staff action, so its effect shows at once)."""
    cache.delete(_overview_key(study))


def leaderboard(study: Study, page: int | str | None = None, *, cluster: str = "observation") -> dict[str, Any]:
    """Return ``selectors.leaderboard`` for the latest snapshot, recomputed at most every
    ``DASHBOARD_CACHE_SECONDS`` (a new snapshot changes the key, so it shows at once)."""
    if _seconds() <= 0:
        return selectors.leaderboard(study, page, cluster=cluster)
    snapshot = rating_selectors.latest_snapshot(study)
    key = (f"dashboard:leaderboard:{study.pk}:{snapshot.pk if snapshot else 0}:{cluster}:{str(page or 1)[:12]}:"
           f"{_stability_stamp(study)}")
    data = cache.get(key)
    if data is None:
        data = selectors.leaderboard(study, page, cluster=cluster)
        cache.set(key, data, _seconds())
    return data


def _stability_stamp(study: Study) -> str:
    """Name the study's newest stability job and its status (one indexed query), so the cached leaderboard is
    never older than the job's state."""
    job = BackgroundJob.objects.filter(study=study, kind="stability").order_by("-created_at").values(
        "pk", "status").first()
    return f"j{job['pk']}.{job['status']}" if job else "j0"
