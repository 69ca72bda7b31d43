"""The Celery application: queues for default work, grading and rating."""

from __future__ import annotations

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studyapp.settings")

app = Celery("studyapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in ("default", "grading", "rating")]
# Periodic jobs: later features add entries here; beat runs with the worker in `make run`.
app.conf.beat_schedule = {
    "rating-refresh-sweep": {
        "task": "rating.tasks.refresh_all_posteriors",
        "schedule": 15 * 60.0,
    },
    # Episodes waiting for a judge key or budget resume once it is there.
    "grading-pending-sweep": {
        "task": "grading.tasks.grade_pending",
        "schedule": 15 * 60.0,
    },
    "expert-routing-sweep": {
        "task": "grading.tasks.route_expert_reviews",
        "schedule": 10 * 60.0,
    },
    # Open tasks whose worker went silent for the study's limit are released for others.
    "abandoned-episodes-sweep": {
        "task": "studyapp.tasks.expire_abandoned_episodes",
        "schedule": 15 * 60.0,
    },
}
app.autodiscover_tasks()
# Task modules that live below an app package rather than at its top.
app.autodiscover_tasks(["studyapp.dashboard"])
