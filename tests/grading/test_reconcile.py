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
    # The observation needs no paid call: the first sweep records it, however young its row. The coding's own
    # message may still be on its way, so it is not re-sent yet.
    report = grading_reconcile()
    assert report.observations_recorded == 1 and report.codings_sent == 0 and report.send_errors == 0
    _age_follow_ups()
    report = grading_reconcile()
    assert report.send_errors == 1  # the coding waits for the broker
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
    assert ("grading.tasks.record_observation", [episode.pk]) in sent_tasks
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
    from grading.services.follow_ups import observation_record_and_close
    from grading.services.pipeline import episode_grade

    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    with django_capture_on_commit_callbacks(execute=True):
        episode_grade(episode_id=episode.pk)
        observation_record_and_close(episode_id=episode.pk)  # the observation message's work
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


def _graded_with_open_follow_ups(django_capture_on_commit_callbacks) -> Episode:
    from grading.services.pipeline import episode_grade

    episode = submitted_episode(logs={"session.txt": TRANSCRIPT})
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    with django_capture_on_commit_callbacks(execute=True):
        assert episode_grade(episode_id=episode.pk).status == "graded"
    return episode


def test_the_message_path_closes_the_follow_ups_it_serves(llm_server, sent_tasks,
                                                           django_capture_on_commit_callbacks):
    from grading import tasks

    episode = _graded_with_open_follow_ups(django_capture_on_commit_callbacks)
    assert ("grading.tasks.record_observation", [episode.pk]) in sent_tasks
    assert ("grading.tasks.code_log", [episode.pk]) in sent_tasks
    assert GradingFollowUp.objects.filter(episode=episode, done_at__isnull=True).count() == 2
    tasks.record_observation.apply(args=[episode.pk]).get()
    assert Observation.objects.get(episode=episode).active
    assert tasks.code_log.apply(args=[episode.pk]).get()["status"] == "succeeded"
    # Closed by the work itself, before any sweep ran.
    assert not GradingFollowUp.objects.filter(episode=episode, done_at__isnull=True).exists()
    assert grading_reconcile().follow_ups_closed == 0


def test_a_backlog_of_sweeps_resends_a_coding_once_counting_from_the_last_send(
        sent_tasks, llm_server, settings, django_capture_on_commit_callbacks):
    settings.GRADING = {**settings.GRADING, "FOLLOW_UP_GRACE_SECONDS": 30.0, "FOLLOW_UP_MAX_ATTEMPTS": 5}
    episode = _graded_with_open_follow_ups(django_capture_on_commit_callbacks)
    _age_follow_ups(seconds=3600)  # created an hour ago (a long outage): the grade's own message is long lost
    sent_tasks.clear()
    for _ in range(5):  # sweeps queued during the outage run back to back
        grading_reconcile()
    assert sent_tasks.count(("grading.tasks.code_log", [episode.pk])) == 1
    row = GradingFollowUp.objects.get(episode=episode, kind="fluency")
    assert row.attempts == 1 and row.done_at is None and row.last_sent_at is not None
    # The next send waits grace · 2^attempts (60 s) from that send, not from the row's creation.
    GradingFollowUp.objects.filter(pk=row.pk).update(last_sent_at=timezone.now() - timedelta(seconds=59))
    grading_reconcile()
    assert sent_tasks.count(("grading.tasks.code_log", [episode.pk])) == 1
    GradingFollowUp.objects.filter(pk=row.pk).update(last_sent_at=timezone.now() - timedelta(seconds=61))
    grading_reconcile()
    assert sent_tasks.count(("grading.tasks.code_log", [episode.pk])) == 2


def test_a_coding_in_flight_is_neither_resent_nor_given_up(sent_tasks, llm_server, settings,
                                                           django_capture_on_commit_callbacks):
    settings.GRADING = {**settings.GRADING, "FOLLOW_UP_GRACE_SECONDS": 30.0, "FOLLOW_UP_MAX_ATTEMPTS": 5}
    episode = _graded_with_open_follow_ups(django_capture_on_commit_callbacks)
    long_ago = timezone.now() - timedelta(hours=2)
    GradingFollowUp.objects.filter(kind="fluency").update(
        created_at=long_ago, last_sent_at=long_ago, attempts=5,
        lease_expires_at=timezone.now() + timedelta(seconds=60))
    sent_tasks.clear()
    report = grading_reconcile()
    assert report.codings_sent == 0 and sent_tasks.count(("grading.tasks.code_log", [episode.pk])) == 0
    assert GradingFollowUp.objects.get(episode=episode, kind="fluency").done_at is None  # not given up
    # The lease lapses (its worker died) and the last send's backoff is over: only now is it given up.
    GradingFollowUp.objects.filter(kind="fluency").update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert grading_reconcile().follow_ups_closed == 1
    assert "gave up after 5 sends" in GradingFollowUp.objects.get(episode=episode, kind="fluency").note


def test_a_duplicate_coding_message_finds_the_lease_and_pays_nothing(sent_tasks, llm_server,
                                                                    django_capture_on_commit_callbacks):
    from grading import tasks
    from grading.models import FluencyCoding

    episode = _graded_with_open_follow_ups(django_capture_on_commit_callbacks)
    GradingFollowUp.objects.filter(kind="fluency").update(lease_expires_at=timezone.now() + timedelta(seconds=60))
    before = len(llm_server.requests)
    assert tasks.code_log.apply(args=[episode.pk]).get()["status"] == "in_flight"
    assert len(llm_server.requests) == before and not FluencyCoding.objects.filter(episode=episode).exists()
    # The lease lapses: the next message codes the log and closes the row.
    GradingFollowUp.objects.filter(kind="fluency").update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert tasks.code_log.apply(args=[episode.pk]).get()["status"] == "succeeded"
    assert not GradingFollowUp.objects.filter(episode=episode, done_at__isnull=True, kind="fluency").exists()


def test_the_database_allows_one_current_coding_per_episode():
    from django.db import IntegrityError, transaction

    from grading.models import FluencyCoding

    episode = submitted_episode()
    FluencyCoding.objects.create(episode=episode, status="no_log", is_current=True)
    FluencyCoding.objects.create(episode=episode, status="no_log", is_current=False)
    with pytest.raises(IntegrityError), transaction.atomic():
        FluencyCoding.objects.create(episode=episode, status="no_log", is_current=True)


def test_the_sweep_leaves_alone_a_submission_whose_task_retry_is_scheduled(llm_server, sent_tasks, settings,
                                                                          monkeypatch):
    from grading import tasks
    from tests.factories import StudyFactory

    settings.GRADING = {**settings.GRADING, "MAX_RETRIES": 0}
    episode = submitted_episode(study=StudyFactory(judges=[{"provider": "openai", "model": "gpt-4.1"}]))
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.default_responder = lambda body: ErrorReply(503, "overloaded")

    class Scheduled(BaseException):  # stops the task here, as if its countdown were running in the broker
        pass

    scheduled: list[float] = []

    def retry(**kw):
        scheduled.append(kw["countdown"])
        return Scheduled()

    monkeypatch.setattr(tasks.grade_episode, "retry", retry)
    with pytest.raises(Scheduled):
        tasks.grade_episode.apply(args=[episode.pk], throw=True)
    assert len(scheduled) == 1
    run = JudgeRun.objects.get(episode=episode)
    assert Episode.objects.get(pk=episode.pk).status == Episode.Status.GRADING and run.status == "queued"
    Episode.objects.filter(pk=episode.pk).update(updated_at=timezone.now() - timedelta(minutes=10))
    sent_tasks.clear()
    assert grading_reconcile().grading_sent == 0 and sent_tasks == []  # no second retry loop
    # The retry is lost with its worker: once the hold (countdown + one lease) lapses, the sweep takes over.
    JudgeRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert grading_reconcile().grading_sent == 1 and sent_tasks == [("grading.tasks.grade_episode", [episode.pk])]
