"""Planning the solo condition on the "Who benefits" page: how many workers and solo tasks per worker give an
agent's boost interval a target width, by simulation from the study's fitted variance components (or assumed
ones before any fit). Runs as a background job; the page shows the latest stored plan.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from console.dashboard.exceptions import JobRefused
from console.dashboard.services import _user_or_none
from console.task_names import RUN_ANALYSIS
from studies.models import BackgroundJob, Study
from studies.task_sending import send_task_on_commit

# Spreads like the seed paper's on the 0-100 scale (points²): used until the study has a synergy fit.
ASSUMED_COMPONENTS = {"theta_var": 64.0, "kappa_var": 64.0, "theta_kappa_cov": 38.4, "task_solo_var": 36.0,
                      "task_agent_extra_var": 9.0, "residual_var": 100.0}
WORKERS = (25, 50, 100, 200, 400)
REPLICATES = 10
MAX_CPU_SECONDS = 90.0
WIDTH_LIMITS = (0.5, 50.0)


def synergy_plan_inputs(study: Study, fit: dict[str, Any] | None) -> dict[str, Any]:
    """Return the planning inputs: the fit's variance components and agents when there is a fit, else assumed."""
    components = dict((fit or {}).get("variance_components") or {})
    fitted = all(components.get(k) is not None for k in ASSUMED_COMPONENTS)
    agents = len((fit or {}).get("boosts") or {}) or study.agents.filter(is_active=True).count() or 1
    tasks_per_worker = max(study.tasks_per_session, 2)
    return {
        "components": {k: float(components[k]) for k in ASSUMED_COMPONENTS} if fitted else dict(ASSUMED_COMPONENTS),
        "source": "the study's synergy fit" if fitted else "assumed spreads (no synergy fit yet)",
        "n_agents": agents, "tasks_per_worker": tasks_per_worker,
        "n_tasks": max(study.tasks.filter(is_active=True).count(), tasks_per_worker),
        "workers": list(WORKERS), "solo_per_worker": list(range(1, min(tasks_per_worker - 1, 3) + 1)),
    }


def synergy_plan_request(*, study: Study, actor: Any, fit: dict[str, Any] | None, width: Any) -> BackgroundJob:
    """Create and enqueue a planning job for the target boost-interval width (points)."""
    try:
        target = float(width)
    except (TypeError, ValueError):
        raise JobRefused("Target width: enter a number of points.") from None
    low, high = WIDTH_LIMITS
    if not low <= target <= high:
        raise JobRefused(f"Target width: must be between {low:g} and {high:g} points.")
    params = {**synergy_plan_inputs(study, fit), "width": target, "replicates": REPLICATES,
              "max_seconds": MAX_CPU_SECONDS}
    with transaction.atomic():
        job = BackgroundJob.objects.create(kind="synergy_plan", study=study, requested_by=_user_or_none(actor),
                                           params=params)
        send_task_on_commit(RUN_ANALYSIS, [job.pk])
    return job


def synergy_plan_context(study: Study) -> dict[str, Any]:
    """Return the newest plan (done) and whether a newer one is running or failed."""
    jobs = BackgroundJob.objects.filter(study=study, kind="synergy_plan").order_by("-created_at")
    latest = jobs.first()
    done = jobs.filter(status=BackgroundJob.Status.DONE).first()
    running = latest if latest and latest.status in (BackgroundJob.Status.QUEUED, BackgroundJob.Status.RUNNING) \
        else None
    failed = latest if latest and latest.status == BackgroundJob.Status.FAILED else None
    return {"result": done.result if done else None, "running": running, "failed": failed}
