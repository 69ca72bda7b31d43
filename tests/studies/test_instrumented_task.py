"""Every Celery task is declared one way (`studies.instrumented_task`), keeps its options, and is timed."""

from __future__ import annotations

from pathlib import Path

import pytest
from celery import current_app
from django.db import OperationalError

from studies.instrumented_task import TASK_DURATION, InstrumentedTask, instrumented_task
from tests.conftest import ROOT

PACKAGES = ("studies", "rating", "pairing", "surveys", "grading", "experts", "journey", "console", "studyapp")


def _project_tasks():
    current_app.loader.import_default_modules()
    return {name: task for name, task in current_app.tasks.items() if not name.startswith("celery.")}


def test_every_task_is_an_instrumented_task_with_late_acknowledgement_from_settings():
    tasks = _project_tasks()
    assert len(tasks) >= 20
    for name, task in tasks.items():
        assert isinstance(task, InstrumentedTask), name
        assert task.acks_late and task.reject_on_worker_lost, name
    # Declared through the decorator only: no task module passes Celery options by hand again.
    for package in PACKAGES:
        for path in Path(ROOT, package).rglob("*.py"):
            if path.name == "instrumented_task.py":
                continue
            text = path.read_text()
            assert "shared_task(" not in text and "acks_late=" not in text, path


def test_each_task_keeps_the_retries_and_time_limits_it_had():
    from grading.tasks import ATTEMPT

    tasks = _project_tasks()
    grade = tasks["grading.tasks.grade_episode"]
    assert (grade.soft_time_limit, grade.time_limit, grade.max_retries) == (ATTEMPT, ATTEMPT + 60, None)
    assert (tasks["grading.tasks.code_log"].soft_time_limit, tasks["grading.tasks.code_log"].time_limit) == (600, 900)
    assert (tasks["grading.tasks.parse_log"].soft_time_limit, tasks["grading.tasks.parse_log"].time_limit) == (
        300, 360)
    assert (tasks["grading.tasks.reconcile"].soft_time_limit, tasks["grading.tasks.reconcile"].time_limit) == (
        240, 300)
    for name in ("grading.tasks.record_observation", "rating.tasks.refresh_posterior",
                 "rating.tasks.record_observation"):
        task = tasks[name]
        assert task.autoretry_for == (OperationalError,) and task.max_retries == 8, name
        assert (task.retry_backoff, task.retry_backoff_max, task.retry_jitter) == (2, 120, True), name
    # Tasks that never set limits keep the global ones (settings), as before.
    from django.conf import settings

    assert tasks["studies.tasks.system_check"].time_limit == settings.CELERY_TASK_TIME_LIMIT


def _count(task: str, outcome: str) -> float:
    for metric in TASK_DURATION.collect():
        for sample in metric.samples:
            if sample.name.endswith("_count") and sample.labels == {"task": task, "outcome": outcome}:
                return sample.value
    return 0.0


@pytest.mark.django_db
def test_each_run_is_timed_by_task_and_outcome(monkeypatch):
    from rating import tasks as rating_tasks
    from studies import tasks as studies_tasks

    name = "studies.tasks.system_check"
    before = _count(name, "success")
    assert studies_tasks.system_check.apply().get()["db_vendor"]
    assert _count(name, "success") == before + 1

    def broken(**kwargs):
        raise ValueError("no such study")

    monkeypatch.setattr(rating_tasks.ledger, "study_rerecord", broken)
    failed_before = _count("rating.tasks.rerecord_study", "failure")
    assert rating_tasks.rerecord_study.apply(args=[1]).failed()
    assert _count("rating.tasks.rerecord_study", "failure") == failed_before + 1


def test_the_options_settings_own_cannot_be_set_per_task():
    with pytest.raises(TypeError, match="acks_late"):
        instrumented_task(name="tests.never_registered", acks_late=True)
