"""The reconciliation sweep and the outbox: no enqueue failure after a commit can lose work."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from kombu.exceptions import OperationalError

from grading.models import GradingFollowUp, JudgeRun, LLMUsage, Rubric
from grading.services.reconcile import grading_reconcile
from rating.models import Observation
from studies.models import Episode, Participant
from studies.services.episodes import episode_submit
from tests.factories.grading import make_rubric
from tests.factories.scenarios import submitted_episode
from tests.grading.test_fluency import TRANSCRIPT
from tests.llm_server import ErrorReply

pytestmark = pytest.mark.django_db


@pytest.fixture
def broker_down(monkeypatch):
    """Every publish fails the way kombu fails when the broker is unreachable."""

    def refuse(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr("studyapp.celery.app.send_task", refuse)
    monkeypatch.setattr("rating.tasks.refresh_posterior.apply_async", refuse)


def _age_follow_ups(seconds: float = 120) -> None:
    GradingFollowUp.objects.update(created_at=timezone.now() - timedelta(seconds=seconds))


def test_a_grade_whose_follow_up_messages_are_lost_is_observed_by_the_sweep(
        llm_server, broker_down, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    with django_capture_on_commit_callbacks(execute=True):
        from grading.services.pipeline import episode_grade

        outcome = episode_grade(episode_id=episode.pk)
    assert outcome.status == "graded"
    assert not Observation.objects.exists()
    assert set(GradingFollowUp.objects.filter(done_at__isnull=True).values_list("kind", flat=True)) == {
        "observation", "fluency"}
    # Too young: the message may still be on its way.
    assert grading_reconcile().observations_recorded == 0
    _age_follow_ups()
    report = grading_reconcile()
    assert report.observations_recorded == 1 and report.send_errors == 1  # the coding waits for the broker
    episode.refresh_from_db()
    observation = Observation.objects.get(episode=episode)
    assert observation.active and observation.y == episode.score == episode.auto_score == 80
    # Running the sweep again records nothing twice.
    grading_reconcile()
    assert Observation.objects.count() == 1
    assert GradingFollowUp.objects.filter(kind="fluency", done_at__isnull=True).exists()


def test_a_graded_episode_missing_its_observation_is_owed_one_when_graded_again(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    from grading.services.pipeline import episode_grade

    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    with django_capture_on_commit_callbacks(execute=True):
        episode_grade(episode_id=episode.pk)
    GradingFollowUp.objects.all().delete()  # as if graded before the outbox existed, its message lost
    sent_tasks.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert episode_grade(episode_id=episode.pk).status == "unchanged"
    assert ("rating.tasks.record_observation", [episode.pk]) in sent_tasks
    assert GradingFollowUp.objects.filter(episode=episode, kind="observation", done_at__isnull=True).exists()


def test_a_submission_made_while_the_broker_is_down_is_saved_and_sent_by_the_sweep(
        broker_down, monkeypatch, django_capture_on_commit_callbacks):
    episode = submitted_episode(status=Episode.Status.IN_PROGRESS, prior_experience="few", ready_at=timezone.now(),
                                logs={"session.txt": TRANSCRIPT})
    with django_capture_on_commit_callbacks(execute=True):
        episode_submit(episode=episode, actor=episode.participant.user)  # no exception reaches the request
    assert Episode.objects.get(pk=episode.pk).status == Episode.Status.SUBMITTED
    report = grading_reconcile()
    assert report.grading_sent == 0  # touched just now
    Episode.objects.filter(pk=episode.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    assert grading_reconcile().send_errors == 1  # the broker is still down: nothing marked as sent
    sent: list[tuple[str, list]] = []
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda name, args=None, **kw: sent.append((name, args)))
    assert grading_reconcile().grading_sent == 1
    assert sent == [("grading.tasks.grade_episode", [episode.pk])]


def test_a_lost_retraction_is_completed_by_the_sweep(llm_server, sent_tasks, django_capture_on_commit_callbacks):
    from grading.services.pipeline import episode_grade
    from rating.services.ledger import observation_record

    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    with django_capture_on_commit_callbacks(execute=True):
        episode_grade(episode_id=episode.pk)
        observation_record(episode_id=episode.pk)
    Participant.objects.filter(pk=episode.participant_id).update(status=Participant.Status.WITHDRAWN)
    assert grading_reconcile().retractions == 1
    assert not Observation.objects.get(episode=episode).active


def test_every_paid_reply_is_recorded_and_a_runs_totals_add_up_its_attempts(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    from grading.services.pipeline import episode_grade

    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    # Attempt 1: anthropic answers with unusable JSON until the repairs run out (3 paid replies), then is retried.
    llm_server.enqueue("anthropic", "not json", "still not json", "nope")
    with django_capture_on_commit_callbacks(execute=True):
        episode_grade(episode_id=episode.pk, final_attempt=False)
    run = JudgeRun.objects.get(episode=episode, provider="anthropic")
    first_tokens = run.input_tokens
    assert first_tokens > 0
    JudgeRun.objects.filter(pk=run.pk).update(status=JudgeRun.Status.QUEUED)
    with django_capture_on_commit_callbacks(execute=True):
        assert episode_grade(episode_id=episode.pk).status == "graded"
    run.refresh_from_db()
    anthropic_replies = len(llm_server.requests_for("anthropic"))
    assert anthropic_replies == 4
    assert LLMUsage.objects.filter(provider="anthropic", purpose="judge").count() == anthropic_replies
    assert run.input_tokens > first_tokens  # the sum of both attempts, not the last one


def test_a_retry_after_from_the_provider_is_the_floor_of_the_tasks_countdown(
        llm_server, sent_tasks, settings):
    from grading.exceptions import RetryLater
    from grading.services.pipeline import episode_grade
    from grading.tasks import _countdown

    settings.GRADING = {**settings.GRADING, "MAX_RETRIES": 0}
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.enqueue("anthropic", ErrorReply(429, "slow down", retry_after=40))
    with pytest.raises(RetryLater) as caught:
        episode_grade(episode_id=episode.pk, final_attempt=False)
    assert caught.value.countdown == 40
    assert all(40 <= _countdown(0, caught.value.countdown) <= 50 for _ in range(50))
