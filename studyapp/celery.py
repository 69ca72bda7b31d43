"""The Celery application: queues for default work, grading and rating."""

from __future__ import annotations

import os

from celery import Celery
from kombu import Queue

from studyapp.worker_heartbeat import heartbeat_step

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studyapp.settings")

app = Celery("studyapp")
# The default app in every thread (not only the importing one), so `celery.current_app` -- which the apps use to
# send tasks by name without importing this package -- is this app in gunicorn's request threads too.
app.set_default()
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [Queue(name) for name in ("default", "grading", "rating")]
# A heartbeat file while the worker consumes, checked by `python -m studyapp.worker_health` (compose healthcheck).
app.steps["consumer"].add(heartbeat_step())
# The beat schedule is CELERY_BEAT_SCHEDULE in settings, beside the queues' routes.
app.autodiscover_tasks()
# Task modules that live below an app package rather than at its top.
app.autodiscover_tasks(["console.dashboard"])
