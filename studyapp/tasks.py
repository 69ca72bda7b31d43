"""Celery tasks of the study domain."""

from __future__ import annotations

from celery import shared_task
from django.db import connection

from studyapp import task_names


@shared_task(name=task_names.SYSTEM_CHECK)
def system_check() -> dict[str, object]:
    """Report what the worker sees, so operators and tests can prove a full broker + database round trip."""
    from studyapp.models import Study

    return {"db_vendor": connection.vendor, "db_name": str(connection.settings_dict["NAME"]),
            "studies": Study.objects.count()}


@shared_task(name=task_names.REFRESH_DESIGN_POSTERIOR, acks_late=True)
def refresh_design_posterior(study_id: int) -> int | None:
    """Cache the calibrated agent posterior adaptive pairing reads; return the observation count."""
    from studyapp.services.design import design_posterior_refresh

    value = design_posterior_refresh(study_id=study_id)
    return None if value is None else value["n_observations"]


@shared_task(name=task_names.EXPIRE_ABANDONED_EPISODES)
def expire_abandoned_episodes() -> int:
    """Release tasks abandoned by their workers (periodic; idempotent)."""
    from studyapp.services.episodes import episodes_expire_abandoned

    return episodes_expire_abandoned()
