"""Every request of a recruit's launch journey sends a small, bounded number of queries, whatever the study's
size: the same journey the launch bench drives (bench/launch_flow.py), through the full middleware stack."""

from __future__ import annotations

from collections import defaultdict

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from bench.launch_flow import launch_journey
from bench.launch_study import integrity_check, recruits, survey_spec
from studies import models as m
from surveys.services import instrument_install_default
from tests.factories import ParticipantFactory
from tests.factories.scenarios import make_world

pytestmark = pytest.mark.django_db

# Queries per request, counted today plus a little room; a page that starts to grow with the data fails here.
# Sign-up includes the sign-in audit (django-axes); the survey submit re-checks every answer once; the profile
# counts the study's occupations (the "this study covers N occupations" line); the task page reads the stored
# transcript for the log-format warning and the task's field for the related-field notice.
BOUNDS = {
    "join": 4, "signup": 35, "consent": 10, "consent-submit": 16, "profile": 12, "occupation-search": 7,
    "profile-submit": 13, "pre-survey": 12, "pre-survey-autosave": 14, "pre-survey-submit": 28,
    "task-start-page": 8, "task-assign": 22, "task": 11, "reference-download": 5, "setup": 8, "upload": 12,
    "review": 6, "log": 8, "submit": 19,
}


class CountingClient:
    """The journey's Http protocol over the test client (CSRF enforced), keeping the queries of each step."""

    def __init__(self) -> None:
        self.client = Client(enforce_csrf_checks=True)
        self.queries: dict[str, list[int]] = defaultdict(list)

    def csrf(self) -> str:
        cookie = self.client.cookies.get("csrftoken")
        return cookie.value if cookie else ""

    def request(self, step, method, path, *, data=None, files=None, headers=None):
        payload = dict(data or {})
        for field, (name, content, content_type) in (files or {}).items():
            payload[field] = SimpleUploadedFile(name, content, content_type)
        with CaptureQueriesContext(connection) as captured:
            call = self.client.get if method == "GET" else self.client.post
            response = call(path, payload, headers=headers or {})
            if hasattr(response, "streaming_content"):
                b"".join(response.streaming_content)
        self.queries[step].append(len(captured))
        return response


def _world(busy: bool):
    instrument_install_default()
    world = make_world(tasks=12, capacity=50, with_files=True)
    if busy:  # others already in the study: no worker page may read their rows one by one
        for _ in range(25):
            participant = ParticipantFactory(study=world.study, status=m.Participant.Status.WORKING,
                                             occupation=world.occupation, consent_version=world.consent)
            m.Episode.objects.create(participant=participant, study=world.study, agent=world.agents[0],
                                     task=world.tasks[0], position=1, status=m.Episode.Status.IN_PROGRESS)
    return world


@pytest.mark.parametrize("busy", [False, True], ids=["empty-study", "busy-study"])
def test_every_step_of_the_launch_journey_stays_within_its_query_bound(settings, busy):
    settings.JOIN_THROTTLE_RATE = "100000/min"
    world = _world(busy)
    http = CountingClient()
    [recruit] = recruits(world.study, run="qc", count=1)
    launch_journey(http, recruit, survey_spec(world.study))
    assert set(http.queries) >= set(BOUNDS) - {"log"}
    over = {step: max(counts) for step, counts in http.queries.items() if max(counts) > BOUNDS[step]}
    assert not over, over
    report = integrity_check(world.study, run="qc", arrivals=1)
    assert report["ok"] and report["submitted"] == 1 and report["files_checked"] == 2, report

