"""With Redis unreachable, pages that do not need the broker keep answering: sign-in (site, admin, API
token), the worker's pages, the dashboard and the API. The cache is pointed at a closed port with the
configured backend and options, so the real Redis client meets the refused connection."""

from __future__ import annotations

import logging
import os
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


@pytest.fixture
def everything_on_redis_down(caplog, monkeypatch):
    """Broker, result backend and cache each pointed at its own closed port, with the configured clients.

    Every connection attempt the Redis client makes is counted per port, so the test can tell a dropped
    publish (one or two attempts) from a retry loop, and see that the result backend is never contacted.
    """
    import redis.connection
    from celery import current_app

    ports = {"broker": _closed_port(), "backend": _closed_port(), "cache": _closed_port()}
    attempts = dict.fromkeys(ports.values(), 0)
    connect = redis.connection.Connection.connect

    def counting_connect(self, *args, **kwargs):
        if self.port in attempts:
            attempts[self.port] += 1
        return connect(self, *args, **kwargs)

    monkeypatch.setattr(redis.connection.Connection, "connect", counting_connect)
    app = current_app
    saved = app.conf.broker_url, app.conf.result_backend
    assert str(saved[0]).startswith("redis://") and str(saved[1]).startswith("redis://")

    def repoint(broker: str, backend: str) -> None:
        app._pool = None
        app.amqp._producer_pool = None
        app.conf.broker_url, app.conf.result_backend = broker, backend
        app._local.__dict__.pop("backend", None)

    repoint(f"redis://127.0.0.1:{ports['broker']}/0", f"redis://127.0.0.1:{ports['backend']}/0")
    cache = {**settings.CACHES["default"], "LOCATION": f"redis://127.0.0.1:{ports['cache']}/0"}
    caplog.set_level(logging.WARNING)
    try:
        with override_settings(CACHES={"default": cache}):
            yield ports, attempts, caplog
    finally:
        repoint(*saved)


def test_submit_and_every_staff_page_answer_with_broker_backend_and_cache_down(
        everything_on_redis_down, django_capture_on_commit_callbacks):
    import time

    from django.utils import timezone

    from studies.models import Episode
    from tests.factories.scenarios import submitted_episode

    ports, attempts, caplog = everything_on_redis_down
    episode = submitted_episode(status=Episode.Status.IN_PROGRESS, prior_experience="few", ready_at=timezone.now(),
                                logs={"session.txt": b"User: total the column\nAgent: 1,234,567"})
    worker = Client()
    worker.force_login(episode.participant.user)
    began = time.monotonic()
    with django_capture_on_commit_callbacks(execute=True):
        response = worker.post(reverse("worker:episode-submit", args=[episode.pk]), follow=True)
    submit_seconds = time.monotonic() - began
    assert response.status_code == 200 and "Grading will start shortly" in response.content.decode()
    assert Episode.objects.get(pk=episode.pk).status == Episode.Status.SUBMITTED
    # The publish was tried, dropped and recorded; the sweep sends it once the broker is back.
    dropped = [r for r in caplog.records if "could not enqueue grading.tasks.grade_episode" in r.getMessage()]
    assert len(dropped) == 1
    # No retry loop: the publish retries once (TASK_PUBLISH_RETRY_POLICY), the result backend is never asked.
    assert 1 <= attempts[ports["broker"]] <= 4, attempts
    assert attempts[ports["backend"]] == 0, attempts

    world = make_world()
    staff = UserFactory(username="staffer", roles=["staff"])
    client = Client()
    client.force_login(staff)
    slug = world.study.slug
    pages = [reverse("dashboard:index"), reverse("admin:index")]
    pages += [reverse(f"dashboard:{name}", args=[slug])
              for name in ("overview", "leaderboard", "surveys", "collaboration", "exports")]
    pages += [reverse(f"expert:staff_{name}")
              for name in ("experts", "invite", "rubrics", "routing", "gold", "adjudication", "metrics")]
    timings = []
    for url in pages:
        began = time.monotonic()
        page = client.get(url)
        timings.append((url, time.monotonic() - began))
        assert page.status_code == 200, url
    # A staff action that publishes: retrying a failed grading answers, the send is dropped and recorded.
    Episode.objects.filter(pk=episode.pk).update(status=Episode.Status.FAILED, study=world.study)
    began = time.monotonic()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("dashboard:staff_action", args=[slug, "retry"]),
                               {"episode": episode.pk})
    timings.append(("retry action", time.monotonic() - began))
    assert response.status_code == 302
    assert Episode.objects.get(pk=episode.pk).status == Episode.Status.SUBMITTED
    # Tried and dropped, or (a send failed moments ago) not tried at all: recorded either way.
    dropped = [r for r in caplog.records if "enqueue grading.tasks.grade_episode" in r.getMessage()]
    assert len(dropped) == 2
    assert attempts[ports["backend"]] == 0, attempts
    print(f"submit with Redis down: {submit_seconds:.2f} s; slowest staff page "
          f"{max(timings, key=lambda t: t[1])[0]} {max(t for _, t in timings):.2f} s; load {os.getloadavg()}")
