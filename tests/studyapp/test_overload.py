"""Back-pressure: a request that queued past OVERLOAD_QUEUE_SECONDS gets a "busy, retrying" answer at once,
with no database work; a fresh one is served as usual; nothing is shed without the proxy's stamp."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from studies.models import Participant
from studyapp.overload import queued_seconds
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def worker_client(client):
    world = make_world()
    client.force_login(make_participant(world).user)
    return client


def _stamp(seconds_ago: float) -> str:
    return f"t={time.time() - seconds_ago:.3f}"


def test_a_page_that_queued_too_long_is_answered_busy_and_reloads_itself(worker_client, settings):
    settings.OVERLOAD_QUEUE_SECONDS = 10
    with CaptureQueriesContext(connection) as queries:
        response = worker_client.get(reverse("worker:study", args=["pilot"]), HTTP_X_REQUEST_START=_stamp(25))
    assert response.status_code == 503 and int(response["Retry-After"]) > 0
    html = response.content.decode()
    assert "very busy" in html and 'http-equiv="refresh"' in html
    assert len(queries) == 0


def test_a_post_that_queued_too_long_changes_nothing_and_says_so(worker_client, settings):
    settings.OVERLOAD_QUEUE_SECONDS = 10
    response = worker_client.post(reverse("worker:withdraw", args=["pilot"]), {"confirm": "on"},
                                  HTTP_X_REQUEST_START=_stamp(30))
    assert response.status_code == 503 and "not</strong> processed" in response.content.decode()
    assert worker_client.get(reverse("worker:study", args=["pilot"])).status_code == 200
    assert not Participant.objects.filter(status=Participant.Status.WITHDRAWN).exists()


def test_a_script_gets_json_it_can_retry_on(worker_client, settings):
    settings.OVERLOAD_QUEUE_SECONDS = 10
    response = worker_client.post(reverse("worker:survey-autosave", args=["pilot", "pre"]), {"code": "A1"},
                                  HTTP_X_REQUEST_START=_stamp(12_000 / 1000), HTTP_ACCEPT="application/json")
    assert response.status_code == 503 and response.json()["busy"] is True


def test_fresh_or_unstamped_requests_are_served(worker_client, settings):
    settings.OVERLOAD_QUEUE_SECONDS = 10
    url = reverse("worker:study", args=["pilot"])
    assert worker_client.get(url, HTTP_X_REQUEST_START=_stamp(0.2)).status_code == 200
    assert worker_client.get(url).status_code == 200
    settings.OVERLOAD_QUEUE_SECONDS = 0
    assert worker_client.get(url, HTTP_X_REQUEST_START=_stamp(600)).status_code == 200


@pytest.mark.parametrize("scale", [1, 1000, 1_000_000])
def test_the_stamp_is_read_in_seconds_milliseconds_or_microseconds(scale):
    now = 1_800_000_000.0
    assert queued_seconds(f"t={(now - 12.5) * scale:.3f}", now=now) == pytest.approx(12.5, abs=0.01)
    assert queued_seconds("garbage", now=now) is None


def test_shed_requests_are_summarised_at_warning_never_logged_one_error_each(worker_client, settings, caplog):
    import logging

    import studyapp.overload as overload

    overload._shed_log = overload._ShedLog()
    settings.OVERLOAD_QUEUE_SECONDS = 10
    url = reverse("worker:study", args=["pilot"])
    with caplog.at_level(logging.INFO):
        for _ in range(20):
            assert worker_client.get(url, HTTP_X_REQUEST_START=_stamp(25)).status_code == 503
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "a shed request is no error"
    summaries = [r for r in caplog.records if r.name == "studyapp.overload"]
    assert len(summaries) == 1 and summaries[0].levelno == logging.WARNING


def test_a_shed_participant_is_told_within_a_few_seconds_by_default():
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {k: v for k, v in os.environ.items() if k != "OVERLOAD_QUEUE_SECONDS"}
    out = subprocess.run([sys.executable, "-c", "import studyapp.settings as s; print(s.OVERLOAD_QUEUE_SECONDS)"],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    assert 0 < float(out.strip().splitlines()[-1]) <= 3
