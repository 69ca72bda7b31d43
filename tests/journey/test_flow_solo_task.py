"""HTTP flow of a solo task (the solo condition): the page says to work without any AI tool, shows no agent
setup and asks for no agent log, records the honest "I used an AI tool anyway" answer, and submits with the
same uploads, payment and grading as an agent task; agent-only steps are refused on it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from rating.models import Observation
from rating.services.ledger import observation_record
from studies import models as m
from tests.factories.files import XLSX, upload
from tests.factories.scenarios import HIDDEN_MARKER, make_participant, make_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    calls = []
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda name, args, **options: calls.append((name, args)))
    return calls


@pytest.fixture
def world():
    return make_world(with_files=True, solo_tasks_per_session=1, condition_order="solo_first")


@pytest.fixture
def worker(client, world):
    participant = make_participant(world)
    client.force_login(participant.user)
    return participant


def _start(client, position=1):
    response = client.post(reverse("worker:task-start", args=["pilot", position]))
    assert response.status_code == 302, response.content[:500]
    return m.Episode.objects.get(participant__user__username=response.wsgi_request.user.username, position=position)


def test_a_solo_task_page_says_to_work_alone_with_no_agent_setup_or_log(client, worker, world):
    episode = _start(client)
    assert episode.condition == m.Episode.Condition.SOLO and episode.agent is None
    page = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert "without any AI tool" in page and 'id="solo-form"' in page
    assert 'id="setup"' not in page and 'id="log-form"' not in page and "Collaboration log" not in page
    for agent in world.agents:
        assert agent.name not in page
    assert HIDDEN_MARKER not in page
    assert "Upload at least one deliverable file." in page  # the same uploads as an agent task
    overview = client.get(reverse("worker:study", args=["pilot"])).content.decode()
    assert "On your own (no AI)" in overview


def test_the_used_ai_anyway_answer_is_recorded_and_audited(client, worker):
    episode = _start(client)
    response = client.post(reverse("worker:episode-solo", args=[episode.pk]),
                           {"used_ai_anyway": "1", "notes": "I checked one formula with a chatbot."})
    assert response.status_code == 302
    episode.refresh_from_db()
    assert episode.used_ai_anyway and episode.notes == "I checked one formula with a chatbot."
    assert episode.status == m.Episode.Status.IN_PROGRESS
    assert m.AuditEvent.objects.filter(action="episode.used_ai_anyway", object_id=str(episode.pk)).exists()
    page = client.get(reverse("worker:task", args=["pilot", 1])).content.decode()
    assert 'id="used-ai-anyway" value="1" checked' in page


def test_a_solo_task_submits_with_a_deliverable_only_is_paid_and_sent_to_grading(
        client, worker, world, sent, django_capture_on_commit_callbacks):
    episode = _start(client)
    client.post(reverse("worker:episode-upload", args=[episode.pk]),
                {"kind": "deliverable", "file": upload("summary.xlsx", XLSX)})
    response = client.post(reverse("worker:episode-solo", args=[episode.pk]), {"notes": "", "next": "review"})
    assert response.status_code == 302 and response.url == reverse("worker:episode-submit", args=[episode.pk])
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(reverse("worker:episode-submit", args=[episode.pk])).status_code == 302
    episode.refresh_from_db()
    assert episode.status == m.Episode.Status.SUBMITTED and not episode.used_ai_anyway
    assert m.Payment.objects.filter(episode=episode, kind=m.Payment.Kind.TASK,
                                    amount=world.study.compensation_per_task).count() == 1
    assert sent == [("grading.tasks.grade_episode", [episode.pk])], "graded by the same pipeline"
    # The next task is with an agent and shows its setup panel as always.
    second = _start(client, 2)
    assert second.condition == m.Episode.Condition.WITH_AGENT and second.agent is not None
    page = client.get(reverse("worker:task", args=["pilot", 2])).content.decode()
    assert 'id="setup"' in page and second.agent.name in page


def test_agent_steps_are_refused_on_a_solo_task_and_change_nothing(client, worker):
    episode = _start(client)
    client.post(reverse("worker:episode-setup", args=[episode.pk]), {"prior_experience": "few", "ready": "1"})
    client.post(reverse("worker:episode-log", args=[episode.pk]), {"share_url": "", "notes": "x"})
    episode.refresh_from_db()
    assert episode.ready_at is None and episode.prior_experience == "" and episode.notes == ""


def test_a_scored_solo_episode_keeps_its_score_but_never_enters_the_collabskill_ledger(worker):
    episode = m.Episode.objects.create(participant=worker, study=worker.study, task=m.TaskInstance.objects.first(),
                                       position=1, condition=m.Episode.Condition.SOLO, agent=None,
                                       status=m.Episode.Status.GRADED, auto_score=61.5)
    assert observation_record(episode_id=episode.pk) is None
    episode.refresh_from_db()
    assert episode.score == 61.5
    assert not Observation.objects.filter(episode=episode).exists()


def test_the_database_refuses_a_solo_episode_with_an_agent(worker, world):
    from django.db import IntegrityError, transaction
    with pytest.raises(IntegrityError), transaction.atomic():
        m.Episode.objects.create(participant=worker, study=worker.study, task=world.tasks[0], position=1,
                                 condition=m.Episode.Condition.SOLO, agent=world.agents[0])
