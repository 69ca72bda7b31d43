"""With Redis unreachable, pages that do not need the broker keep answering: sign-in (site, admin, API
token), the worker's pages, the dashboard and the API. The cache is pointed at a closed port with the
configured backend and options, so the real Redis client meets the refused connection."""

from __future__ import annotations

import logging
import socket

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from tests.conftest import requires_redis
from tests.factories import UserFactory
from tests.factories.scenarios import make_participant, make_world

pytestmark = [pytest.mark.django_db, requires_redis]

PASSWORD = "pw-correct-horse"


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def redis_down(caplog):
    """The configured cache backend, pointed at a port where nothing listens."""
    unreachable = {**settings.CACHES["default"], "LOCATION": f"redis://127.0.0.1:{_closed_port()}/0"}
    assert "redis" in unreachable["BACKEND"].lower()
    caplog.set_level(logging.WARNING)
    with override_settings(CACHES={"default": unreachable}):
        yield caplog


def test_every_way_to_sign_in_works_without_redis(redis_down):
    UserFactory(username="staffer", roles=["staff"])
    site = Client()
    response = site.post(reverse("login"), {"username": "staffer", "password": PASSWORD})
    assert response.status_code == 302 and "_auth_user_id" in site.session
    admin = Client()
    response = admin.post(reverse("admin:login"), {"username": "staffer", "password": PASSWORD})
    assert response.status_code == 302 and "_auth_user_id" in admin.session
    response = APIClient().post(reverse("api-token"), {"username": "staffer", "password": PASSWORD}, format="json")
    assert response.status_code == 200 and response.json()["token"]
    # Failures are still counted (in the database) while Redis is down.
    response = Client().post(reverse("login"), {"username": "staffer", "password": "wrong"})
    assert response.status_code == 200 and b"enter a correct username and password" in response.content


def test_worker_pages_answer_without_redis(redis_down):
    world = make_world()
    participant = make_participant(world)
    client = Client()
    client.force_login(participant.user)
    assert client.get(reverse("worker:home")).status_code == 302
    page = client.get(reverse("worker:study", args=[world.study.slug]))
    assert page.status_code == 200 and world.study.name.encode() in page.content
    assert client.post(reverse("worker:task-start", args=[world.study.slug, 1])).status_code == 302
    task = client.get(reverse("worker:task", args=[world.study.slug, 1]))
    assert task.status_code == 200 and any(row.title.encode() in task.content for row in world.tasks)
    assert any(record.name == "studyapp.cache" for record in redis_down.records), "the outage is logged"


def test_a_dashboard_page_and_api_calls_answer_without_redis(redis_down):
    world = make_world()
    staff = UserFactory(username="staffer", roles=["staff"])
    client = Client()
    client.force_login(staff)
    page = client.get(reverse("dashboard:overview", args=[world.study.slug]))
    assert page.status_code == 200 and world.study.name.encode() in page.content
    token = APIClient().post(reverse("api-token"), {"username": "staffer", "password": PASSWORD},
                             format="json").json()["token"]
    api = APIClient(HTTP_AUTHORIZATION=f"Token {token}")
    response = api.get("/api/studies/")
    assert response.status_code == 200
    assert [row["slug"] for row in response.json()["results"]] == [world.study.slug]
    assert api.get(f"/api/studies/{world.study.slug}/").status_code == 200
    assert any(record.name == "studyapp.cache" for record in redis_down.records), "throttles log the outage"
