"""HTTP flow of the worker's own time report on the review page: optional, bounded, kept when refused."""

from __future__ import annotations

import pytest
from django.urls import reverse

from journey.drafts import form_draft_fields
from studies import models as m
from studies.exceptions import SubmitRejected
from studies.services.episodes import episode_submit
from tests.factories.files import XLSX, upload
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def episode(client, monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda name, args, **options: None)
    world = make_world(with_files=True)
    participant = make_participant(world)
    client.force_login(participant.user)
    client.post(reverse("worker:task-start", args=["pilot", 1]))
    episode = m.Episode.objects.get(participant=participant, position=1)
    client.post(reverse("worker:episode-setup", args=[episode.pk]), {"prior_experience": "few", "ready": "1"})
    client.post(reverse("worker:episode-upload", args=[episode.pk]),
                {"kind": "deliverable", "file": upload("summary.xlsx", XLSX)})
    client.post(reverse("worker:episode-upload", args=[episode.pk]), {"kind": "log", "file": upload("log.txt", b"log")})
    client.post(reverse("worker:episode-log", args=[episode.pk]), {"notes": "Checked the totals twice."})
    return episode


def _review(client, episode):
    return client.get(reverse("worker:episode-submit", args=[episode.pk])).content.decode()


def test_the_review_page_asks_for_the_minutes_spent_as_an_optional_field(client, episode):
    page = _review(client, episode)
    assert 'name="self_reported_minutes"' in page and "(optional)" in page and 'id="final-submit"' in page


def test_submitted_minutes_are_stored_on_the_episode(client, episode):
    response = client.post(reverse("worker:episode-submit", args=[episode.pk]), {"self_reported_minutes": "45"})
    assert response.status_code == 302
    episode.refresh_from_db()
    assert episode.status == m.Episode.Status.SUBMITTED and episode.self_reported_minutes == 45


def test_an_empty_answer_submits_without_a_report(client, episode):
    client.post(reverse("worker:episode-submit", args=[episode.pk]), {"self_reported_minutes": ""})
    episode.refresh_from_db()
    assert episode.status == m.Episode.Status.SUBMITTED and episode.self_reported_minutes is None


@pytest.mark.parametrize(("typed", "said"), [
    ("0", "from 1 to 2,400"), ("2401", "that is 40 hours"), ("forty", "whole number"), ("12.5", "whole number"),
])
def test_a_bad_answer_submits_nothing_and_is_shown_again_with_its_reason_and_the_notes_kept(
        client, episode, typed, said):
    response = client.post(reverse("worker:episode-submit", args=[episode.pk]), {"self_reported_minutes": typed})
    assert response.status_code == 302 and response["Location"] == reverse("worker:episode-submit",
                                                                           args=[episode.pk])
    episode.refresh_from_db()
    assert episode.status != m.Episode.Status.SUBMITTED and episode.self_reported_minutes is None
    assert episode.notes == "Checked the totals twice."
    page = _review(client, episode)  # a reload shows it too: it is kept in the session
    assert f'value="{typed}"' in page and said in page and 'aria-invalid="true"' in page
    fixed = client.post(reverse("worker:episode-submit", args=[episode.pk]), {"self_reported_minutes": "50"})
    assert fixed.status_code == 302
    episode.refresh_from_db()
    assert episode.self_reported_minutes == 50
    assert form_draft_fields(client.session, episode_id=episode.pk, form_name="submit") == []


def test_a_script_gets_the_reason_as_json(client, episode):
    response = client.post(reverse("worker:episode-submit", args=[episode.pk]), {"self_reported_minutes": "-3"},
                           HTTP_ACCEPT="application/json")
    assert response.status_code == 400 and "from 1 to 2,400" in response.json()["errors"]["self_reported_minutes"][0]


def test_the_service_refuses_minutes_out_of_bounds_with_nothing_changed(episode):
    with pytest.raises(SubmitRejected, match="from 1 to 2,400"):
        episode_submit(episode=episode, actor=episode.participant.user, self_reported_minutes=0)
    episode.refresh_from_db()
    assert episode.status != m.Episode.Status.SUBMITTED and episode.submitted_at is None
