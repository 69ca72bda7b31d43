"""Celery entry points of the staff dashboard: ids in, one service call each."""

from __future__ import annotations

from celery import shared_task

from console import task_names
from console.dashboard import services


@shared_task(name=task_names.RUN_ANALYSIS, acks_late=True)
def run_analysis(job_id: int) -> str | None:
    """Compute a stored analysis (stability, surveys, collaboration) and report progress into its job."""
    job = services.analysis_job_run(job_id=job_id)
    return job.status if job else None


@shared_task(name=task_names.RUN_EXPORT, acks_late=True)
def run_export(job_id: int) -> str | None:
    """Build a study export ZIP for its job."""
    job = services.export_job_run(job_id=job_id)
    return job.status if job else None


@shared_task(name=task_names.RUN_PAYOUTS, acks_late=True)
def run_payouts(job_id: int) -> str | None:
    """Build a payout CSV for its job."""
    job = services.payouts_job_run(job_id=job_id)
    return job.status if job else None


@shared_task(name=task_names.RUN_POWER, acks_late=True)
def run_power(job_id: int) -> str | None:
    """Compute a stopping-rule estimate or a study plan for its job."""
    from console.dashboard import power

    job = power.power_job_run(job_id=job_id)
    return job.status if job else None
