"""Celery entry points of the staff dashboard: ids in, one service call each."""

from __future__ import annotations

from console import task_names
from console.dashboard import services
from studies.instrumented_task import instrumented_task


@instrumented_task(name=task_names.RUN_ANALYSIS)
def run_analysis(job_id: int) -> str | None:
    """Compute a stored analysis (stability, surveys, collaboration) and report progress into its job."""
    job = services.analysis_job_run(job_id=job_id)
    return job.status if job else None


@instrumented_task(name=task_names.RUN_EXPORT)
def run_export(job_id: int) -> str | None:
    """Build a study export ZIP for its job."""
    job = services.export_job_run(job_id=job_id)
    return job.status if job else None


@instrumented_task(name=task_names.RUN_PAYOUTS)
def run_payouts(job_id: int) -> str | None:
    """Build a payout CSV for its job."""
    job = services.payouts_job_run(job_id=job_id)
    return job.status if job else None


@instrumented_task(name=task_names.RUN_POWER)
def run_power(job_id: int) -> str | None:
    """Compute a stopping-rule estimate or a study plan for its job."""
    from console.dashboard import power

    job = power.power_job_run(job_id=job_id)
    return job.status if job else None
