"""Celery tasks of the study domain."""

from __future__ import annotations

from celery import shared_task
from django.db import connection


@shared_task(name="studyapp.tasks.system_check")
def system_check() -> dict[str, object]:
    """Report what the worker sees, so operators and tests can prove a full broker + database round trip."""
    from studyapp.models import Study

    return {"db_vendor": connection.vendor, "db_name": str(connection.settings_dict["NAME"]),
            "studies": Study.objects.count()}


@shared_task(name="studyapp.tasks.expire_abandoned_episodes")
def expire_abandoned_episodes() -> int:
    """Release tasks abandoned by their workers (periodic; idempotent)."""
    from studyapp.services.episodes import episodes_expire_abandoned

    return episodes_expire_abandoned()
