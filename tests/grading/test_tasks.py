"""The Celery entry points: retries with backoff, terminal failures with reasons, idempotent reruns."""

from __future__ import annotations

import pytest

from grading import tasks
from grading.models import JudgeRun, Rubric
from grading.services import pipeline
from studies.models import Episode, SoloRun
from tests.factories import AgentFactory, StudyFactory, TaskFactory
from tests.factories.grading import make_rubric
from tests.factories.scenarios import submitted_episode
from tests.llm_server import ErrorReply

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("task", [tasks.grade_episode, tasks.grade_solo_run, tasks.generate_rubric, tasks.code_log])
def test_tasks_acknowledge_late_and_requeue_when_the_worker_dies(task):
    assert task.acks_late and task.reject_on_worker_lost
    assert task.name.startswith("grading.tasks.")


def test_backoff_grows_with_each_retry_and_is_jittered(settings):
    settings.GRADING = {**settings.GRADING, "TASK_RETRY_DELAY": 10}
    delays = [tasks._countdown(n) for n in range(4) for _ in range(20)]
    assert all(10 * 2**(i // 20) / 4 <= d <= 10 * 2**(i // 20) for i, d in enumerate(delays))
    assert len(set(delays)) > 10


def test_grade_episode_grades_and_returns_the_outcome(llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    with django_capture_on_commit_callbacks(execute=True):
        result = tasks.grade_episode.apply(args=[episode.pk]).get()
    assert result["status"] == "graded" and result["score"] == 80
    assert ("grading.tasks.record_observation", [episode.pk]) in sent_tasks


def test_a_duplicate_delivery_produces_one_score(llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    with django_capture_on_commit_callbacks(execute=True):
        tasks.grade_episode.apply(args=[episode.pk])
        second = tasks.grade_episode.apply(args=[episode.pk]).get()
    assert second["status"] == "unchanged"
    assert JudgeRun.objects.count() == 2 and Rubric.objects.count() == 1
    assert sent_tasks.count(("grading.tasks.record_observation", [episode.pk])) == 1


def test_provider_errors_are_retried_by_the_task_then_wait_for_the_provider_with_the_reason(llm_server, sent_tasks):
    episode = submitted_episode(study=StudyFactory(judges=[{"provider": "openai", "model": "gpt-4.1"}]))
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.default_responder = lambda body: ErrorReply(503, "overloaded")
    result = tasks.grade_episode.apply(args=[episode.pk]).get()
    episode.refresh_from_db()
    # An outage is not the submission's failure: it waits for the provider (tests/grading/test_outages.py).
    assert result["status"] == "waiting"
    assert episode.status == Episode.Status.SUBMITTED
    assert "HTTP 503: overloaded" in episode.grading_note
    # (TASK_RETRIES 2 + 1) task attempts, each with 1 + MAX_RETRIES (2) HTTP attempts.
    assert len(llm_server.requests) == 9
    run = JudgeRun.objects.get()
    assert run.status == "waiting" and run.attempts == 3


def test_a_429_then_success_inside_the_task(llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.enqueue("anthropic", ErrorReply(429, retry_after=0))
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.grade_episode.apply(args=[episode.pk]).get()["status"] == "graded"
    assert len(llm_server.requests_for("anthropic")) == 2


def test_an_unexpected_crash_marks_the_episode_failed_with_the_reason(monkeypatch, llm_server):
    episode = submitted_episode()

    def crash(**kwargs):
        raise ValueError("disk on fire")

    monkeypatch.setattr(pipeline, "episode_grade", crash)
    result = tasks.grade_episode.apply(args=[episode.pk])
    assert result.failed()
    episode.refresh_from_db()
    assert episode.status == Episode.Status.FAILED
    assert episode.grading_note == "Internal error while grading: ValueError: disk on fire"


def test_episodes_that_are_not_submitted_or_missing_are_left_alone(llm_server):
    episode = submitted_episode()
    Episode.objects.filter(pk=episode.pk).update(status=Episode.Status.IN_PROGRESS)
    assert tasks.grade_episode.apply(args=[episode.pk]).get()["status"] == "not_gradable"
    assert tasks.grade_episode.apply(args=[999999]).get() == {"status": "missing"}
    assert Episode.objects.get(pk=episode.pk).status == Episode.Status.IN_PROGRESS


def test_generate_rubric_task_creates_a_version(llm_server):
    task = TaskFactory()
    result = tasks.generate_rubric.apply(args=[task.pk]).get()
    assert result["status"] == "generated" and task.rubrics.get().pk == result["rubric"]


def test_generate_rubric_task_reports_waiting_without_keys(no_llm_keys):
    result = tasks.generate_rubric.apply(args=[TaskFactory().pk]).get()
    assert result["status"] == "waiting" and "OPENAI_API_KEY" in result["note"]


def test_code_log_task_codes_the_log(llm_server):
    from tests.grading.test_fluency import TRANSCRIPT

    episode = submitted_episode(logs={"log.txt": TRANSCRIPT})
    result = tasks.code_log.apply(args=[episode.pk]).get()
    assert result["status"] == "succeeded" and result["behaviours"] == 3


def test_grade_solo_run_task(llm_server, sent_tasks):
    task = TaskFactory()
    make_rubric(task, per_category=2, origin=Rubric.Origin.EXPERT)
    run = SoloRun.objects.create(study=StudyFactory(), task=task, agent=AgentFactory())
    result = tasks.grade_solo_run.apply(args=[run.pk]).get()
    run.refresh_from_db()
    assert result["status"] == "graded" and run.score == 80


def test_the_sweep_resends_unsent_and_abandoned_submissions_but_not_live_or_waiting_ones(sent_tasks):
    from datetime import timedelta

    from django.utils import timezone

    unsent = submitted_episode()  # its message never reached the broker
    stuck = submitted_episode(status=Episode.Status.GRADING)  # its worker died; no live lease
    waiting = submitted_episode()
    Episode.objects.filter(pk=waiting.pk).update(grading_note="No API key is configured for openai.")
    held = submitted_episode(status=Episode.Status.GRADING)  # a worker holds a live lease on a judge call
    rubric = make_rubric(held.task, per_category=2, origin=Rubric.Origin.EXPERT)
    JudgeRun.objects.create(episode=held, rubric=rubric, provider="openai", model="gpt-4.1",
                            prompt_version="v", status=JudgeRun.Status.RUNNING,
                            lease_expires_at=timezone.now() + timedelta(seconds=60))
    long_ago = timezone.now() - timedelta(minutes=5)
    Episode.objects.filter(pk__in=[unsent.pk, stuck.pk, waiting.pk, held.pk]).update(updated_at=long_ago)
    submitted_episode(status=Episode.Status.GRADING)  # touched just now: its message is on its way
    submitted_episode(status=Episode.Status.GRADED)
    result = tasks.reconcile.apply().get()
    assert result["grading_sent"] == 2 and result["send_errors"] == 0
    assert sorted(pk for _name, (pk,) in sent_tasks) == sorted([unsent.pk, stuck.pk])
    # Sent work is touched, so the next sweep does not send it again while the message waits in a queue.
    sent_tasks.clear()
    assert tasks.reconcile.apply().get()["grading_sent"] == 0 and sent_tasks == []
