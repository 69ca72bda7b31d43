"""The Celery application: queues for default work, grading and rating."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from celery import Celery
from kombu import Queue

from experts import task_names as experts_task_names
from grading import task_names as grading_task_names
from rating import task_names as rating_task_names
from studyapp import task_names as studyapp_task_names

logger = logging.getLogger(__name__)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studyapp.settings")

app = Celery("studyapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in ("default", "grading", "rating")]
# Periodic jobs: later features add entries here; beat runs with the worker in `make run`.
app.conf.beat_schedule = {
    "rating-refresh-sweep": {
        "task": rating_task_names.REFRESH_ALL_POSTERIORS,
        "schedule": float(os.environ.get("GRADING_SWEEP_SECONDS", "60")),
    },
    # Reconciliation: finish whatever a lost message, a dead worker or a broker outage left undone
    # (grades whose lease lapsed, unsent grading messages, observations and log codings a grade owes).
    "grading-reconcile-sweep": {
        "task": grading_task_names.RECONCILE,
        "schedule": float(os.environ.get("GRADING_SWEEP_SECONDS", "60")),
    },
    "expert-routing-sweep": {
        "task": experts_task_names.ROUTE_EXPERT_REVIEWS,
        "schedule": 10 * 60.0,
    },
    # Open tasks whose worker went silent for the study's limit are released for others.
    "abandoned-episodes-sweep": {
        "task": studyapp_task_names.EXPIRE_ABANDONED_EPISODES,
        "schedule": 15 * 60.0,
    },
}
app.autodiscover_tasks()
# Task modules that live below an app package rather than at its top.
app.autodiscover_tasks(["studyapp.dashboard"])


def send_task_on_commit(name: str, args: Sequence[Any], **options: Any) -> None:
    """Send a task by name once the current transaction commits; a broker error is logged, never raised.

    The database is the source of truth: whatever this message would have started, the reconciliation
    sweep finds from the rows and does, so a broker outage delays work instead of failing the request.
    """
    from django.db import transaction

    def send() -> None:
        try:
            app.send_task(name, args=list(args), **options)
        except Exception:
            logger.warning("could not enqueue %s%s; the reconciliation sweep will pick it up", name, tuple(args),
                           exc_info=True)

    transaction.on_commit(send)
