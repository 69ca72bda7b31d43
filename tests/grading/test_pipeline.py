"""The grading pipeline: combining judges, waiting, failing, re-grading and idempotency."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.utils import timezone

from grading.exceptions import NotGradable, RetryLater
from grading.models import CriterionScore, JudgeRun, Rubric
from grading.prompts import JUDGE_PROMPT_VERSION
from grading.selectors import episodes_held
from grading.services import judging, pipeline
from grading.services.pipeline import episode_grade, episode_grading_retry, judge_run_retry
from grading.services.rubric_generation import rubric_approve, rubric_copy
from rating.models import GradeObservation
from studies.models import Agent, AuditEvent, Episode, Participant
from tests.factories import StudyFactory, UserFactory
from tests.factories.grading import make_rubric
from tests.factories.scenarios import submitted_episode
from tests.grading.responders import judge_reply
from tests.llm_server import ErrorReply

pytestmark = pytest.mark.django_db

RATING = ("grading.tasks.record_observation",)


def grade(episode, capture, **kwargs):
    with capture(execute=True):
        return episode_grade(episode_id=episode.pk, **kwargs)


def test_a_new_task_gets_a_rubric_then_two_judges_and_the_mean_score(llm_server, sent_tasks,
                                                                      django_capture_on_commit_callbacks):
    episode = submitted_episode()
    llm_server.enqueue("anthropic", judge_reply(0.7))
    outcome = grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "graded"
    assert episode.status == Episode.Status.GRADED
    assert episode.auto_score == pytest.approx((80 + 70) / 2)
    assert not episode.needs_expert_review  # a spread of 10 is within the threshold of 15
    runs = JudgeRun.objects.filter(episode=episode)
    assert {(r.provider, r.total, r.is_current) for r in runs} == {("openai", 80, True), ("anthropic", 70, True)}
    rubric = episode.task.rubrics.get()
    assert all(r.rubric == rubric for r in runs)
    assert ("grading.tasks.record_observation", [episode.pk]) in sent_tasks
    assert ("grading.tasks.code_log", [episode.pk]) in sent_tasks


def test_each_judges_grade_of_a_graded_episode_reaches_the_grade_ledger_with_its_family(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    study = StudyFactory(judges=[{"provider": "openai", "model": "gpt-4.1"},
                                 {"provider": "anthropic", "model": "claude-sonnet-4-6", "family": "claude-lab"}])
    episode = submitted_episode(study=study)
    Agent.objects.filter(pk=episode.agent_id).update(family="google")
    llm_server.enqueue("anthropic", judge_reply(0.7))
    grade(episode, django_capture_on_commit_callbacks)
    rows = {(g.grader, g.grader_kind, g.grader_family, g.agent_family, g.y, g.active)
            for g in GradeObservation.objects.filter(episode=episode)}
    # The family a study names for a judge wins; a judge without one gets its model name's family.
    assert rows == {("openai/gpt-4.1", "judge", "openai", "google", 80.0, True),
                    ("anthropic/claude-sonnet-4-6", "judge", "claude-lab", "google", 70.0, True)}
    runs = {r.provider: r.pk for r in JudgeRun.objects.filter(episode=episode)}
    assert set(GradeObservation.objects.filter(episode=episode).values_list("source_id", flat=True)) == set(
        runs.values())


def test_a_disagreement_above_the_threshold_flags_the_episode_for_expert_review(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.enqueue("openai", judge_reply(0.9))
    llm_server.enqueue("anthropic", judge_reply(0.5))
    grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert episode.auto_score == pytest.approx(70)
    assert episode.needs_expert_review
    assert "disagree by 40.0 points (threshold 15)" in episode.grading_note


def test_the_studys_own_threshold_overrides_the_default(llm_server, sent_tasks,
                                                        django_capture_on_commit_callbacks):
    episode = submitted_episode(study=StudyFactory(disagreement_threshold=50))
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.enqueue("openai", judge_reply(0.9))
    llm_server.enqueue("anthropic", judge_reply(0.5))
    grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert not episode.needs_expert_review and episode.grading_note == ""


def test_a_spread_equal_to_the_threshold_does_not_flag(llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.enqueue("openai", judge_reply(0.8))
    llm_server.enqueue("anthropic", judge_reply(0.65))
    grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert not episode.needs_expert_review


def test_grading_again_changes_nothing_and_calls_no_provider(llm_server, sent_tasks,
                                                             django_capture_on_commit_callbacks):
    episode = submitted_episode()
    grade(episode, django_capture_on_commit_callbacks)
    calls, sent = len(llm_server.requests), len(sent_tasks)
    outcome = grade(episode, django_capture_on_commit_callbacks)
    assert outcome.status == "unchanged"
    assert len(llm_server.requests) == calls and len(sent_tasks) == sent
    assert JudgeRun.objects.filter(episode=episode).count() == 2
    assert AuditEvent.objects.filter(action="grading.scored").count() == 1


def test_the_score_is_audited_with_the_runs_and_rubric_it_used(llm_server, sent_tasks,
                                                               django_capture_on_commit_callbacks):
    episode = submitted_episode()
    rubric = make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    grade(episode, django_capture_on_commit_callbacks)
    event = AuditEvent.objects.get(action="grading.scored")
    runs = sorted(JudgeRun.objects.values_list("pk", flat=True))
    assert event.before == {"score": None, "judge_runs": []}
    assert event.after["judge_runs"] == runs and event.after["rubric"] == rubric.pk
    assert event.after["prompt_version"] == JUDGE_PROMPT_VERSION and event.after["score"] == 80


def test_without_keys_the_episode_waits_submitted_with_a_configure_note(no_llm_keys, sent_tasks,
                                                                        django_capture_on_commit_callbacks):
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    outcome = grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "waiting"
    assert episode.status == Episode.Status.SUBMITTED
    assert episode.grading_note.startswith("No judge is configured: set OPENAI_API_KEY / ANTHROPIC_API_KEY")
    assert "OPENAI_BASE_URL" in episode.grading_note and "grade --pending" in episode.grading_note
    assert set(JudgeRun.objects.values_list("status", flat=True)) == {JudgeRun.Status.WAITING}
    assert sent_tasks == []


def test_without_a_rubric_generator_key_the_episode_waits_too(no_llm_keys, sent_tasks,
                                                              django_capture_on_commit_callbacks):
    episode = submitted_episode()
    outcome = grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "waiting" and episode.status == Episode.Status.SUBMITTED
    assert "No judge is configured" in episode.grading_note and "rubric" in episode.grading_note
    assert not Rubric.objects.exists() and not JudgeRun.objects.exists()


def test_a_waiting_episode_is_graded_once_keys_are_configured(llm_server, settings, sent_tasks,
                                                              django_capture_on_commit_callbacks):
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    configured = settings.GRADING
    settings.GRADING = {**configured, "ANTHROPIC_API_KEY": None, "ANTHROPIC_BASE_URL": None}
    assert grade(episode, django_capture_on_commit_callbacks).status == "waiting"
    assert JudgeRun.objects.get(provider="openai").status == "succeeded"
    assert "ANTHROPIC_API_KEY" in Episode.objects.get(pk=episode.pk).grading_note
    settings.GRADING = configured
    assert grade(episode, django_capture_on_commit_callbacks).status == "graded"
    assert len(llm_server.requests_for("openai")) == 1  # the succeeded run was not redone


def test_a_provider_missing_from_the_consent_is_not_sent_the_files(llm_server, sent_tasks,
                                                                   django_capture_on_commit_callbacks):
    episode = submitted_episode(providers=["openai"])
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    outcome = grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "graded" and episode.auto_score == 80
    assert llm_server.requests_for("anthropic") == []
    assert list(JudgeRun.objects.values_list("provider", flat=True)) == ["openai"]
    assert "anthropic/claude-sonnet-4-6 not used" in episode.grading_note
    assert "does not name anthropic" in episode.grading_note


def test_when_consent_allows_no_judge_grading_waits_and_nothing_is_sent(llm_server, sent_tasks,
                                                                        django_capture_on_commit_callbacks):
    episode = submitted_episode(providers=[])
    outcome = grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "waiting" and episode.status == Episode.Status.SUBMITTED
    assert "No judge may receive this participant's files" in episode.grading_note
    assert llm_server.requests == []


def test_a_participant_without_recorded_consent_is_never_sent(llm_server):
    episode = submitted_episode()
    Participant.objects.filter(pk=episode.participant_id).update(consent_version=None)
    assert episode_grade(episode_id=episode.pk).status == "waiting"
    assert llm_server.requests == []


def test_simulated_participants_need_no_consent(llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    Participant.objects.filter(pk=episode.participant_id).update(consent_version=None, is_simulated=True)
    assert grade(episode, django_capture_on_commit_callbacks).status == "graded"


def test_server_errors_until_the_client_gives_up_leave_the_episode_waiting_for_the_provider_with_the_reason(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode(study=StudyFactory(judges=[{"provider": "openai", "model": "gpt-4.1"}]))
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.default_responder = lambda body: ErrorReply(500, "internal trouble")
    outcome = grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    # A provider outage is not the submission's failure: it waits (tests/grading/test_outages.py).
    assert outcome.status == "waiting"
    assert episode.status == Episode.Status.SUBMITTED
    assert "openai returned HTTP 500: internal trouble (gave up after 3 attempts)" in episode.grading_note
    assert len(llm_server.requests) == 3  # first try + MAX_RETRIES (2)
    run = JudgeRun.objects.get()
    assert run.status == "waiting" and run.total is None
    assert not any(name in RATING for name, _ in sent_tasks)


def test_on_a_non_final_attempt_provider_trouble_asks_for_a_retry_and_keeps_the_other_judge(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.enqueue("openai", *[ErrorReply(503)] * 3)
    with pytest.raises(RetryLater, match="HTTP 503"):
        grade(episode, django_capture_on_commit_callbacks, final_attempt=False)
    episode.refresh_from_db()
    assert episode.status == Episode.Status.GRADING
    statuses = dict(JudgeRun.objects.values_list("provider", "status"))
    assert statuses == {"openai": "queued", "anthropic": "succeeded"}
    assert grade(episode, django_capture_on_commit_callbacks, final_attempt=False).status == "graded"
    assert len(llm_server.requests_for("anthropic")) == 1


def test_one_judge_failing_for_good_holds_the_episode_out_of_the_rating_and_asks_an_expert(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.enqueue("anthropic", ErrorReply(400, "model not available"))
    outcome = grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "held" and episode.status == Episode.Status.SUBMITTED
    assert episode.auto_score is None and episode.needs_expert_review
    assert episode.grading_note.startswith("Held out of the rating: only 1 of 2 judges scored it (openai/gpt-4.1 80)")
    assert "model not available" in episode.grading_note
    assert not [name for name, _args in sent_tasks if name == "grading.tasks.record_observation"]
    assert list(episodes_held(episode.study)) == [episode]
    # The missing judge succeeds on a later pass: the full panel's score goes in, the hold is gone.
    outcome = grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "graded" and episode.auto_score == 80 and "Held" not in episode.grading_note
    assert sorted(JudgeRun.objects.filter(is_current=True).values_list("provider", flat=True)) == [
        "anthropic", "openai"]


def test_a_study_that_accepts_partial_panels_grades_from_the_judges_that_scored(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode(study=StudyFactory(partial_panel="accept"))
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.enqueue("anthropic", ErrorReply(400, "model not available"))
    outcome = grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "graded" and episode.auto_score == 80
    assert episode.needs_expert_review
    assert "Only 1 of 2 judges produced a score" in episode.grading_note
    assert "model not available" in episode.grading_note
    # Which judges produced the score is recorded: the current runs, and the audit of the scoring.
    assert list(JudgeRun.objects.filter(is_current=True).values_list("provider", flat=True)) == ["openai"]


def test_a_rubric_that_cannot_be_generated_fails_the_episode_with_the_reason(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    llm_server.enqueue("openai", *["{}"] * 3)
    outcome = grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "failed" and episode.status == Episode.Status.FAILED
    assert episode.grading_note.startswith("Rubric generation failed (openai/gpt-4.1)")


def test_a_new_rubric_version_regrades_with_new_runs_and_keeps_the_old_ones(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    first = make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    grade(episode, django_capture_on_commit_callbacks)
    old_runs = set(JudgeRun.objects.values_list("pk", flat=True))
    second = rubric_copy(rubric=first, actor=None)
    rubric_approve(rubric=second, actor=None)
    llm_server.enqueue("openai", judge_reply(0.5))
    llm_server.enqueue("anthropic", judge_reply(0.5))
    sent_tasks.clear()
    outcome = grade(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "graded" and episode.auto_score == 50
    assert JudgeRun.objects.count() == 4
    assert set(JudgeRun.objects.filter(is_current=True).values_list("rubric", flat=True)) == {second.pk}
    assert not JudgeRun.objects.filter(pk__in=old_runs, is_current=True).exists()
    assert set(JudgeRun.objects.filter(pk__in=old_runs).values_list("total", flat=True)) == {80}
    assert [t for t in sent_tasks if t[0] in RATING] == [("grading.tasks.record_observation", [episode.pk])]


def test_a_new_judge_model_adds_runs_without_overwriting_earlier_ones(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    study = StudyFactory(judges=[{"provider": "openai", "model": "gpt-4.1"}])
    episode = submitted_episode(study=study)
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    grade(episode, django_capture_on_commit_callbacks)
    study.judges = [{"provider": "openai", "model": "gpt-4.1-mini"}]
    study.save()
    llm_server.enqueue("openai", judge_reply(0.5))
    grade(episode, django_capture_on_commit_callbacks)
    runs = {r.model: r for r in JudgeRun.objects.all()}
    assert runs["gpt-4.1"].total == 80 and not runs["gpt-4.1"].is_current
    assert runs["gpt-4.1-mini"].total == 50 and runs["gpt-4.1-mini"].is_current
    assert Episode.objects.get(pk=episode.pk).auto_score == 50


def test_a_run_left_running_by_a_killed_worker_has_no_score_and_is_redone_once_its_lease_lapses(
        llm_server, sent_tasks, django_capture_on_commit_callbacks):
    episode = submitted_episode(study=StudyFactory(judges=[{"provider": "openai", "model": "gpt-4.1"}]))
    rubric = make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    run = JudgeRun.objects.create(episode=episode, rubric=rubric, provider="openai", model="gpt-4.1",
                                  prompt_version=JUDGE_PROMPT_VERSION, status=JudgeRun.Status.RUNNING,
                                  started_at=timezone.now(), lease_expires_at=timezone.now() + timedelta(seconds=60))
    Episode.objects.filter(pk=episode.pk).update(status=Episode.Status.GRADING)
    # A live worker holds it: the rerun does not call the provider and scores nothing.
    assert grade(episode, django_capture_on_commit_callbacks).status == "pending"
    assert llm_server.requests == [] and not CriterionScore.objects.exists()
    # A non-final attempt is told to come back just after the lease would lapse, not acknowledged as done.
    with pytest.raises(RetryLater) as caught:
        pipeline.episode_grade(episode_id=episode.pk, final_attempt=False)
    assert 55 < caught.value.countdown <= 61
    JudgeRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert grade(episode, django_capture_on_commit_callbacks).status == "graded"
    run.refresh_from_db()
    assert run.status == "succeeded" and run.attempts == 1 and run.criterion_scores.count() == 8


def test_an_interrupted_call_frees_its_runs_and_writes_no_score(llm_server, sent_tasks, monkeypatch,
                                                                django_capture_on_commit_callbacks):
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)

    def interrupted(job):
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(pipeline, "judge_call", interrupted)
    with pytest.raises(SoftTimeLimitExceeded):
        grade(episode, django_capture_on_commit_callbacks)
    assert set(JudgeRun.objects.values_list("status", flat=True)) == {"queued"}
    assert not CriterionScore.objects.exists() and JudgeRun.objects.filter(total__isnull=False).count() == 0
    assert Episode.objects.get(pk=episode.pk).auto_score is None
    monkeypatch.setattr(pipeline, "judge_call", judging.judge_call)
    assert grade(episode, django_capture_on_commit_callbacks).status == "graded"


@pytest.mark.parametrize("status", [Episode.Status.ASSIGNED, Episode.Status.IN_PROGRESS, Episode.Status.SKIPPED,
                                    Episode.Status.FAILED])
def test_episodes_that_are_not_submitted_work_are_not_graded(llm_server, status):
    episode = submitted_episode()
    Episode.objects.filter(pk=episode.pk).update(status=status)
    with pytest.raises(NotGradable):
        episode_grade(episode_id=episode.pk)
    assert llm_server.requests == []


def test_a_withdrawn_participants_episode_is_not_graded(llm_server):
    episode = submitted_episode()
    Participant.objects.filter(pk=episode.participant_id).update(status=Participant.Status.WITHDRAWN)
    with pytest.raises(NotGradable, match="withdrew"):
        episode_grade(episode_id=episode.pk)


def test_staff_retry_sends_a_failed_episode_back_to_grading(sent_tasks, django_capture_on_commit_callbacks):
    staff = UserFactory(roles=["staff"])
    episode = submitted_episode()
    Episode.objects.filter(pk=episode.pk).update(status=Episode.Status.FAILED, grading_note="every judge failed")
    episode.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        episode_grading_retry(episode=episode, actor=staff)
    episode.refresh_from_db()
    assert episode.status == Episode.Status.SUBMITTED and episode.grading_note == ""
    assert sent_tasks == [("grading.tasks.grade_episode", [episode.pk])]
    event = AuditEvent.objects.get(action="grading.retry")
    assert event.actor == staff and event.before["grading_note"] == "every judge failed"


def test_retrying_a_failed_judge_run_regrades_its_episode(llm_server, sent_tasks,
                                                          django_capture_on_commit_callbacks):
    episode = submitted_episode(study=StudyFactory(judges=[{"provider": "openai", "model": "gpt-4.1"}]))
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.enqueue("openai", ErrorReply(401, "bad key"))
    grade(episode, django_capture_on_commit_callbacks)
    run = JudgeRun.objects.get()
    assert run.status == "failed"
    with django_capture_on_commit_callbacks(execute=True):
        assert judge_run_retry(run=run, actor=None)
    assert sent_tasks[-1] == ("grading.tasks.grade_episode", [episode.pk])
    assert grade(episode, django_capture_on_commit_callbacks).status == "graded"
    run.refresh_from_db()
    assert run.status == "succeeded" and run.attempts == 2


def test_a_run_outside_the_current_plan_cannot_be_retried(llm_server, sent_tasks,
                                                          django_capture_on_commit_callbacks):
    episode = submitted_episode()
    old = make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    run = JudgeRun.objects.create(episode=episode, rubric=old, provider="openai", model="gpt-4.1",
                                  prompt_version="0" * 16, status=JudgeRun.Status.FAILED, error="x")
    assert not judge_run_retry(run=run, actor=None)
    assert sent_tasks == []
