"""Celery tasks of the study domain."""

from __future__ import annotations

from django.db import connection

from studies import task_names
from studies.instrumented_task import instrumented_task


@instrumented_task(name=task_names.SYSTEM_CHECK)
def system_check() -> dict[str, object]:
    """Report what the worker sees, so operators and tests can prove a full broker + database round trip."""
    from studies.models import Study

    return {"db_vendor": connection.vendor, "db_name": str(connection.settings_dict["NAME"]),
            "studies": Study.objects.count()}


@instrumented_task(name=task_names.EXPIRE_ABANDONED_EPISODES)
def expire_abandoned_episodes() -> int:
    """Release tasks abandoned by their workers (periodic; idempotent)."""
    from studies.services.episodes import episodes_expire_abandoned

    return episodes_expire_abandoned()
