"""The Celery application: queues for default work, grading and rating."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

from celery import Celery
from kombu import Queue

logger = logging.getLogger(__name__)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studyapp.settings")

app = Celery("studyapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in ("default", "grading", "rating")]
# The beat schedule is CELERY_BEAT_SCHEDULE in settings, beside the queues' routes.
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
