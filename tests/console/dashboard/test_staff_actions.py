"""Staff actions from the live monitor and the grading queue: each changes one thing and is audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from grading.exceptions import RetryRefused
from grading.services.pipeline import episode_grading_retry
from studies.models import AuditEvent, Episode, Participant, ParticipantIdentity
from studies.services import staff_actions
from studies.services.staff_actions import StaffActionError
from tests.factories import AgentFactory, EpisodeFactory, ParticipantFactory, StudyFactory


@pytest.fixture
def open_episode(db):
    study = StudyFactory()
    participant = ParticipantFactory(study=study, status="working")
    ParticipantIdentity.objects.create(participant=participant, study=study, email="worker@example.org")
    episode = EpisodeFactory(participant=participant, position=1, status=Episode.Status.IN_PROGRESS,
                             ready_at=timezone.now(), prior_experience="few")
    study.agents.add(episode.agent)
    return episode


def _audit(action: str) -> AuditEvent:
    return AuditEvent.objects.get(action=action)


@pytest.mark.django_db
def test_a_reminder_is_emailed_and_audited_without_the_address(open_episode, staff_user):
    staff_actions.participant_remind(participant=open_episode.participant, actor=staff_user, message="See you soon")
    (message,) = mail.outbox
    assert message.to == ["worker@example.org"]
    assert "See you soon" in message.body and open_episode.study.name in message.subject
    event = _audit("staff.remind")
    assert event.actor == staff_user and event.study == open_episode.study
    assert "worker@example.org" not in str(event.after) + event.note


@pytest.mark.django_db
def test_a_reminder_needs_an_address_and_an_unfinished_journey(open_episode, staff_user):
    participant = open_episode.participant
    participant.identity.delete()
    participant.user.email = ""
    participant.user.save()
    with pytest.raises(StaffActionError, match="no email"):
        staff_actions.participant_remind(participant=Participant.objects.get(pk=participant.pk), actor=staff_user)
    Participant.objects.filter(pk=participant.pk).update(status="complete")
    with pytest.raises(StaffActionError, match="nothing to remind"):
        staff_actions.participant_remind(participant=Participant.objects.get(pk=participant.pk), actor=staff_user)
    assert not mail.outbox


@pytest.mark.django_db
def test_extending_a_passed_deadline_counts_from_now(open_episode, staff_user):
    Episode.objects.filter(pk=open_episode.pk).update(deadline_at=timezone.now() - timedelta(hours=3))
    before = timezone.now()
    episode = staff_actions.episode_extend_deadline(episode=open_episode, actor=staff_user, hours=2)
    assert before + timedelta(hours=2) <= episode.deadline_at <= timezone.now() + timedelta(hours=2)
    event = _audit("staff.extend_deadline")
    assert event.after["hours"] == 2 and event.before["deadline_at"] is not None


@pytest.mark.django_db
def test_extending_a_future_deadline_adds_to_it(open_episode, staff_user):
    deadline = timezone.now() + timedelta(hours=10)
    Episode.objects.filter(pk=open_episode.pk).update(deadline_at=deadline)
    episode = staff_actions.episode_extend_deadline(episode=open_episode, actor=staff_user, hours=24)
    assert episode.deadline_at == deadline + timedelta(hours=24)
    with pytest.raises(StaffActionError):
        staff_actions.episode_extend_deadline(episode=open_episode, actor=staff_user, hours=0)


@pytest.mark.django_db
def test_skipping_marks_the_task_skipped_by_staff(open_episode, staff_user):
    episode = staff_actions.episode_skip(episode=open_episode, actor=staff_user, reason="agent will not install")
    assert episode.status == "skipped" and episode.skip_reason == "staff"
    assert _audit("staff.skip_task").note == "agent will not install"
    with pytest.raises(StaffActionError, match="only open tasks"):
        staff_actions.episode_skip(episode=episode, actor=staff_user, reason="again")


@pytest.mark.django_db
def test_reassigning_pairs_the_task_with_another_study_agent_and_resets_setup(open_episode, staff_user):
    other = AgentFactory()
    with pytest.raises(StaffActionError, match="not one of this study"):
        staff_actions.episode_reassign(episode=open_episode, actor=staff_user, agent=other)
    open_episode.study.agents.add(other)
    episode = staff_actions.episode_reassign(episode=open_episode, actor=staff_user, agent=other)
    assert episode.agent == other and episode.ready_at is None and episode.prior_experience == ""
    assert episode.status == "assigned"
    event = _audit("staff.reassign_agent")
    assert event.before["agent"] == open_episode.agent_id and event.after["agent"] == other.pk
    with pytest.raises(StaffActionError, match="already paired"):
        staff_actions.episode_reassign(episode=episode, actor=staff_user, agent=other)


@pytest.mark.django_db
def test_marking_withdrawn_goes_through_the_withdrawal_service(open_episode, staff_user,
                                                               django_capture_on_commit_callbacks, monkeypatch):
    sent = []
    monkeypatch.setattr("celery.current_app.send_task", lambda name, args, **kw: sent.append((name, args)))
    with django_capture_on_commit_callbacks(execute=True):
        staff_actions.participant_mark_withdrawn(participant=open_episode.participant, actor=staff_user,
                                                 reason="asked by email")
    participant = Participant.objects.get(pk=open_episode.participant_id)
    assert participant.status == "withdrawn" and participant.withdrawal_reason == "asked by email"
    assert AuditEvent.objects.filter(action="participant.withdraw", actor=staff_user).exists()
    assert ("rating.tasks.retract_participant", [participant.pk, "asked by email"]) in sent
    with pytest.raises(StaffActionError, match="already withdrawn"):
        staff_actions.participant_mark_withdrawn(participant=participant, actor=staff_user, reason="again")


@pytest.mark.django_db
def test_retrying_a_failed_grading_requeues_it_after_commit(open_episode, staff_user,
                                                            django_capture_on_commit_callbacks, monkeypatch):
    sent = []
    monkeypatch.setattr("celery.current_app.send_task", lambda name, args, **kw: sent.append((name, args)))
    Episode.objects.filter(pk=open_episode.pk).update(status=Episode.Status.FAILED, grading_note="judge timeout")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        episode = episode_grading_retry(episode=open_episode, actor=staff_user)
    assert sent == []  # nothing is queued before the commit
    for callback in callbacks:
        callback()
    assert sent == [("grading.tasks.grade_episode", [episode.pk])]
    assert episode.status == "submitted"
    assert _audit("grading.retry").before["grading_note"] == "judge timeout"
    Episode.objects.filter(pk=episode.pk).update(status=Episode.Status.ASSIGNED)
    with pytest.raises(RetryRefused, match="no grading to retry"):
        episode_grading_retry(episode=episode, actor=staff_user)


@pytest.mark.django_db
def test_actions_over_http_report_success_and_refuse_other_studies_objects(staff_client, open_episode):
    url = reverse("dashboard:staff_action", args=[open_episode.study.slug, "extend"])
    response = staff_client.post(url, {"episode": open_episode.pk, "hours": "12"}, follow=True)
    assert response.status_code == 200
    assert "now ends" in response.content.decode()
    assert Episode.objects.get(pk=open_episode.pk).deadline_at is not None

    elsewhere = EpisodeFactory(status=Episode.Status.IN_PROGRESS, position=1)
    response = staff_client.post(url, {"episode": elsewhere.pk, "hours": "12"}, follow=True)
    assert "Nothing was changed" in response.content.decode()
    assert Episode.objects.get(pk=elsewhere.pk).deadline_at is None

    response = staff_client.post(
        reverse("dashboard:staff_action", args=[open_episode.study.slug, "skip"]),
        {"episode": open_episode.pk, "reason": ""}, follow=True,
    )
    assert "Nothing was changed" in response.content.decode()
    unknown = reverse("dashboard:staff_action", args=[open_episode.study.slug, "explode"])
    assert staff_client.post(unknown).status_code == 404
    assert staff_client.get(url).status_code == 405


@pytest.mark.django_db
def test_workers_cannot_run_staff_actions(client, worker_user, open_episode):
    client.force_login(worker_user)
    url = reverse("dashboard:staff_action", args=[open_episode.study.slug, "skip"])
    response = client.post(url, {"episode": open_episode.pk, "reason": "x"})
    assert response.status_code == 302
    assert Episode.objects.get(pk=open_episode.pk).status == "in_progress"
