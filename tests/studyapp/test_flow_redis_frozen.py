"""A hung Redis (SIGSTOP: it accepts connections and answers nothing) must not hold a request.

The test starts its own `redis-server` on a free port and stops it by pid; cache and broker both point at it.
What the code controls is asserted: the timeouts in effect on the live clients, that each request completed
and what it wrote, and that the cache waited for the frozen server once, not once per call. The wall time of
the same fault is printed by `bench/grading_recovery.py` (never asserted here).
"""

from __future__ import annotations

import logging

import pytest
from celery import current_app
from django.conf import settings
from django.core.cache import cache
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from studies.models import Episode
from studyapp import redis_breaker
from tests.conftest import requires_redis
from tests.factories import UserFactory
from tests.factories.scenarios import submitted_episode
from tests.grading.chaos import OwnRedis

pytestmark = [pytest.mark.django_db, requires_redis]

BOUND = 0.5  # "well under a second" for one call, with its one retry


def test_every_request_path_redis_client_is_configured_with_a_short_timeout():
    assert settings.REDIS_REQUEST_TIMEOUT_SECONDS <= BOUND / 2
    options = settings.CACHES["default"]["OPTIONS"]
    assert options["SOCKET_TIMEOUT"] <= BOUND / 2 and options["SOCKET_CONNECT_TIMEOUT"] <= BOUND / 2
    pool = cache.client.get_client().connection_pool  # the live cache client, not only the setting
    assert pool.connection_class is redis_breaker.FailFastConnection
    assert pool.connection_kwargs["socket_timeout"] <= BOUND / 2
    assert pool.connection_kwargs["socket_connect_timeout"] <= BOUND / 2
    with current_app.connection_for_write() as connection:
        transport = connection.transport_options
        assert transport["socket_timeout"] <= BOUND / 2 and transport["socket_connect_timeout"] <= BOUND / 2
    assert current_app.conf.task_publish_retry_policy["max_retries"] <= 1
    assert current_app.conf.redis_socket_timeout <= BOUND / 2
    # Sessions never touch Redis (database sessions), and the provider rate limiter is bounded too.
    assert settings.SESSION_ENGINE == "studyapp.sessions"
    from grading.rate_limits import RedisWindow

    window = RedisWindow("redis://127.0.0.1:1/0")
    window._connect()
    assert window._client.connection_pool.connection_kwargs["socket_timeout"] <= BOUND


def test_the_worker_keeps_longer_timeouts_for_its_own_consumer_connection():
    from studyapp.celery import WORKER_BROKER_TIMEOUT, _worker_broker_timeouts

    class Conf:
        broker_transport_options = dict(current_app.conf.broker_transport_options)

    _worker_broker_timeouts(conf=Conf)
    assert Conf.broker_transport_options["socket_timeout"] == WORKER_BROKER_TIMEOUT
    assert current_app.conf.broker_transport_options["socket_timeout"] <= BOUND / 2, "web processes unchanged"


@pytest.fixture
def frozen_redis(caplog, monkeypatch):
    """Our own redis-server, cache and broker pointed at it, then SIGSTOPped; SIGCONT and stopped after."""
    server = OwnRedis().start()
    monkeypatch.setattr(redis_breaker, "TRIP_SECONDS", 600.0)  # the window never ends within the test
    trips: list[tuple[str, int]] = []
    trip = redis_breaker.FailFastConnection._trip

    def counting_trip(self):
        trips.append((self.host, self.port))
        trip(self)

    monkeypatch.setattr(redis_breaker.FailFastConnection, "_trip", counting_trip)
    redis_breaker.reset()
    app = current_app
    saved = app.conf.broker_url

    def repoint(url: str) -> None:
        app._pool = None
        app.amqp._producer_pool = None
        app.conf.broker_url = url

    repoint(server.url)
    caplog.set_level(logging.WARNING)
    try:
        with override_settings(CACHES={"default": {**settings.CACHES["default"], "LOCATION": server.url}}):
            cache.set("warm", 1)  # a connection made before the freeze, as a running server has
            server.freeze()
            yield server, trips, caplog
    finally:
        server.thaw()
        server.stop()
        repoint(saved)
        redis_breaker.reset()


def test_submit_next_page_and_staff_overview_complete_while_redis_is_frozen(
        frozen_redis, django_capture_on_commit_callbacks):
    server, trips, caplog = frozen_redis
    episode = submitted_episode(status=Episode.Status.IN_PROGRESS, prior_experience="few", ready_at=timezone.now(),
                                logs={"session.txt": b"User: total the column\nAgent: 1,234,567"})
    worker = Client()
    worker.force_login(episode.participant.user)
    with django_capture_on_commit_callbacks(execute=True):
        response = worker.post(reverse("worker:episode-submit", args=[episode.pk]))
    assert response.status_code == 302
    assert Episode.objects.get(pk=episode.pk).status == Episode.Status.SUBMITTED, "the submission is saved"
    # Dropped after its timeout, or skipped because a send of this request failed moments before: logged either way.
    dropped = [r for r in caplog.records if "enqueue grading.tasks.grade_episode" in r.getMessage()]
    assert len(dropped) == 1, "the publish was dropped and logged; the sweep sends it later"
    page = worker.get(response.url)
    assert page.status_code == 200 and "Grading will start shortly" in page.content.decode()
    staff = Client()
    staff.force_login(UserFactory(roles=["staff"]))
    overview = staff.get(reverse("dashboard:overview", args=[episode.study.slug]))
    assert overview.status_code == 200
    # The cache waited for the frozen server once; every later call in these three requests failed at once.
    assert trips == [("127.0.0.1", server.port)], trips
