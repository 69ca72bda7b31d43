"""Worker pages say "submitted" and nothing more about grading: no grading, graded or failed state."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studies import models as m
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db

GRADING_WORDS = (b"grading", b"graded", b"failed", b"Grading failed", b"judge")


@pytest.mark.parametrize("status", ["grading", "graded", "failed"])
def test_worker_pages_show_only_submitted_for_every_grading_state(client, status):
    world = make_world()
    participant = make_participant(world)
    client.force_login(participant.user)
    assert client.post(reverse("worker:task-start", args=[world.study.slug, 1])).status_code == 302
    episode = m.Episode.objects.get(participant=participant, position=1)
    m.Episode.objects.filter(pk=episode.pk).update(status=status, grading_note="judge provider refused")
    pages = [reverse("worker:task", args=[world.study.slug, 1]), reverse("worker:study", args=[world.study.slug])]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200
        body = response.content.lower()
        assert b"submitted" in body, url
        for word in GRADING_WORDS:
            # "grading" may appear as the consent text's general promise, never as this episode's state.
            assert f"status-{word.decode()}".encode() not in body, (url, word)
        assert b"judge provider refused" not in body
