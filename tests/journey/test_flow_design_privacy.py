"""No worker ever sees anything of the pairing design: no mode, probability or rating on a page or in the API."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from pairing.services import posterior_cache_key
from studies import models as m
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db

PROBABILITY = 0.1234567
MU = 61.987654
MARKERS = (b"0.1234567", b"0.123457", b"12.35 %", b"61.987", b"61.99", b"assignment_probability", b"design_mode",
           b"adaptive", b"Adaptive", b"floor")


def _assert_clean(content: bytes, where: str) -> None:
    for marker in MARKERS:
        assert marker not in content, f"{where} shows {marker!r} to a worker"


def test_worker_pages_show_nothing_of_the_design(client, monkeypatch):
    monkeypatch.setattr("studyapp.celery.app.send_task", lambda name, args=None, **kwargs: None)
    world = make_world(tasks=6, agents=3, design_mode=m.Study.DesignMode.ADAPTIVE, design_floor=0.3)
    agent_ids = sorted(a.pk for a in world.agents)
    cache.set(posterior_cache_key(world.study.pk), {
        "version": 0, "n_observations": 10, "agent_ids": [str(pk) for pk in agent_ids], "mu": [MU, 50.0, 40.0],
        "cov": [[4.0, 0, 0], [0, 4.0, 0], [0, 0, 4.0]], "human_sd": 8.0, "noise_sd": 15.0, "agent_sd": 3.0,
    })
    try:
        participant = make_participant(world)
        client.force_login(participant.user)
        response = client.post(reverse("worker:task-start", args=[world.study.slug, 1]))
        assert response.status_code == 302
        episode = m.Episode.objects.get(participant=participant, position=1)
        assert episode.design_mode == "adaptive" and episode.assignment_probability is not None
        m.Episode.objects.filter(pk=episode.pk).update(assignment_probability=PROBABILITY)
        urls = [
            reverse("worker:home"), reverse("worker:study", args=[world.study.slug]),
            reverse("worker:task", args=[world.study.slug, 1]), reverse("worker:episode-setup", args=[episode.pk]),
            reverse("worker:episode-log", args=[episode.pk]), reverse("worker:episode-submit", args=[episode.pk]),
            reverse("worker:complete", args=[world.study.slug]),
        ]
        readable = 0
        for url in urls:
            response = client.get(url, follow=True)
            if response.status_code == 200:
                readable += 1
            _assert_clean(response.content, url)
        assert readable >= 4
    finally:
        cache.delete(posterior_cache_key(world.study.pk))
