"""The Celery application: queues for default work, grading and rating."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery, signals
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


@signals.celeryd_init.connect
def _worker_broker_timeouts(conf: Any = None, **_: Any) -> None:
    """The worker's consumer connection is long-lived and never on a request's path: it keeps the stock-like
    timeouts (2 s connect, 5 s read) instead of the request path's REDIS_REQUEST_TIMEOUT_SECONDS, so a slow
    moment of the broker does not make the worker reconnect, and plain connections instead of fail-fast ones
    (a refused reconnect during a broker restart is retried by the consumer on its own schedule)."""
    options = dict((conf or app.conf).broker_transport_options or {})
    if "socket_timeout" in options:
        options.update(socket_connect_timeout=WORKER_BROKER_CONNECT_TIMEOUT, socket_timeout=WORKER_BROKER_TIMEOUT,
                       fail_fast=False)
        (conf or app.conf).broker_transport_options = options


WORKER_BROKER_CONNECT_TIMEOUT, WORKER_BROKER_TIMEOUT = 2.0, 5.0
# The beat schedule is CELERY_BEAT_SCHEDULE in settings, beside the queues' routes.
app.autodiscover_tasks()
# Task modules that live below an app package rather than at its top.
app.autodiscover_tasks(["console.dashboard"])
