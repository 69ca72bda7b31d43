"""Provider outages: a judge whose provider kept failing waits for it, and grading resumes once it answers.

The fake server's model list is the probe (`grading.provider_probe`); `models_down` makes it answer 503 as a
provider does during an outage. No staff retry anywhere: the sweep does the recovery.
"""

from __future__ import annotations

import pytest

from grading.models import GradingFollowUp, JudgeRun, Rubric
from grading.selectors import PROVIDER_DOWN, PROVIDER_WAIT_MARK, episodes_held, episodes_pending_grading
from grading.services.pipeline import episode_grade
from grading.services.reconcile import grading_reconcile
from studies.models import AuditEvent, Episode
from tests.factories.grading import make_rubric
from tests.factories.scenarios import submitted_episode
from tests.llm_server import ErrorReply

pytestmark = pytest.mark.django_db

GRADE = "grading.tasks.grade_episode"


@pytest.fixture
def sweep_now(settings):
    """Sweep settings with no quiet time, so one sweep looks at what the test just wrote."""
    settings.GRADING = {**settings.GRADING, "REQUEUE_AFTER_SECONDS": 0.0, "WAITING_RECHECK_SECONDS": 0.0}


def _final_attempt(episode, capture):
    with capture(execute=True):
        return episode_grade(episode_id=episode.pk, final_attempt=True)


def _probes(server) -> list[str]:
    return [r.provider for r in server.requests if r.path == "/v1/models"]


def test_both_providers_failing_through_every_attempt_leave_the_episode_waiting_then_graded_by_the_sweep(
        llm_server, sent_tasks, sweep_now, settings, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.enqueue("openai", *[ErrorReply(500, "openai outage")] * 3)
    llm_server.enqueue("anthropic", *[ErrorReply(529, "overloaded")] * 3)
    outcome = _final_attempt(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "waiting"
    assert episode.status == Episode.Status.SUBMITTED, "an outage is not the submission's failure"
    assert episode.grading_note.startswith(PROVIDER_WAIT_MARK) and "overloaded" in episode.grading_note
    assert not AuditEvent.objects.filter(action="grading.failed").exists()
    runs = JudgeRun.objects.filter(episode=episode)
    assert {(r.status, r.error.startswith(PROVIDER_DOWN)) for r in runs} == {("waiting", True)}
    # Not the waiting cadence's business: only the probe sends it again (no retry round paid while down).
    assert episode not in episodes_pending_grading()

    llm_server.models_down = {"openai", "anthropic"}
    report = grading_reconcile()
    assert (report.provider_probes, report.outage_grading_sent) == (2, 0)
    assert sorted(_probes(llm_server)) == ["anthropic", "openai"]
    assert not [a for name, a in sent_tasks if name == GRADE]
    judge_calls = len([r for r in llm_server.requests if r.path != "/v1/models"])

    llm_server.models_down = {"anthropic"}  # one provider answers again: grading resumes by itself
    report = grading_reconcile()
    assert report.outage_grading_sent == 1
    assert sent_tasks.count((GRADE, [episode.pk])) == 1
    assert len([r for r in llm_server.requests if r.path != "/v1/models"]) == judge_calls, "probes cost nothing"
    settings.GRADING = {**settings.GRADING, "REQUEUE_AFTER_SECONDS": 60.0}  # the default quiet time
    assert grading_reconcile().outage_grading_sent == 0, "sent once, not once per sweep while it is queued"
    outcome = _final_attempt(episode, django_capture_on_commit_callbacks)  # the task the sweep sent
    episode.refresh_from_db()
    assert outcome.status == "graded" and episode.status == Episode.Status.GRADED
    kinds = set(GradingFollowUp.objects.filter(episode=episode).values_list("kind", flat=True))
    assert kinds == {"observation", "fluency"}, "observed and its log coded, as any grade"


def test_one_provider_down_for_good_holds_the_episode_and_the_probe_releases_it_when_it_is_back(
        llm_server, sent_tasks, sweep_now, django_capture_on_commit_callbacks):
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.enqueue("anthropic", *[ErrorReply(503, "anthropic outage")] * 3)
    outcome = _final_attempt(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "held" and episode.needs_expert_review
    assert list(episodes_held(episode.study)) == [episode]
    assert JudgeRun.objects.get(episode=episode, provider="anthropic").status == "waiting"
    llm_server.models_down = {"anthropic"}
    assert grading_reconcile().outage_grading_sent == 0
    llm_server.models_down = set()
    assert grading_reconcile().outage_grading_sent == 1
    assert _final_attempt(episode, django_capture_on_commit_callbacks).status == "graded"
    assert sorted(JudgeRun.objects.filter(episode=episode, is_current=True).values_list("provider", flat=True)) == [
        "anthropic", "openai"]


def test_a_run_is_given_up_after_its_outage_rounds_so_the_cost_stays_bounded(
        llm_server, sent_tasks, sweep_now, settings, django_capture_on_commit_callbacks):
    settings.GRADING = {**settings.GRADING, "PROVIDER_OUTAGE_ROUNDS": 2}  # with TASK_RETRIES 2: 6 attempts
    episode = submitted_episode()
    make_rubric(episode.task, per_category=2, origin=Rubric.Origin.EXPERT)
    llm_server.default_responder = lambda body: ErrorReply(500, "still failing")
    assert _final_attempt(episode, django_capture_on_commit_callbacks).status == "waiting"
    JudgeRun.objects.filter(episode=episode).update(attempts=5)  # the rounds before this one were spent
    outcome = _final_attempt(episode, django_capture_on_commit_callbacks)
    episode.refresh_from_db()
    assert outcome.status == "failed" and episode.status == Episode.Status.FAILED
    assert {r.status for r in JudgeRun.objects.filter(episode=episode)} == {"failed"}
    assert "Gave up after 6 attempts while the provider kept failing" in episode.grading_note
    llm_server.models_down = set()
    assert grading_reconcile().outage_grading_sent == 0, "a run given up is staff's to retry"


def test_the_probe_counts_a_refused_connection_and_a_5xx_as_down_and_any_other_reply_as_up(llm_server, settings):
    from grading.provider_probe import provider_down_reason
    from grading.providers import JudgeSpec

    spec = JudgeSpec(provider="openai", model="gpt-4.1")
    assert provider_down_reason(spec) is None
    llm_server.models_down = {"openai"}
    assert provider_down_reason(spec) == "openai answered HTTP 503"
    assert provider_down_reason(JudgeSpec(provider="anthropic", model="claude-sonnet-4-6")) is None
    settings.GRADING = {**settings.GRADING, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}  # discard port: refused
    assert provider_down_reason(spec).startswith("openai unreachable")
