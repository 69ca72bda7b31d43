"""A hung Redis (SIGSTOP: it accepts connections and answers nothing) must not hold a request.

The test starts its own `redis-server` on a free port and stops it by pid; cache and broker both point at it.
What the code controls is asserted: the timeouts and connection classes in effect on the live clients, that
each request completed and what it wrote, how many times any Redis client in this process waited for the frozen
server (every read that ended in a socket timeout, counted below redis-py's connection classes, so a client that
does not fail fast is counted too), and that the dropped grading message is sent by the sweep once Redis
answers again. The wall time of the same fault is printed by `bench/grading_recovery.py` (never asserted here).
"""

from __future__ import annotations

import logging

import pytest
import redis
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
        # The publish goes through the same fail-fast connections as the cache (the live channel's pool).
        publish_pool = connection.default_channel.client.connection_pool
        assert issubclass(publish_pool.connection_class, redis_breaker.FailFast)
        assert publish_pool.connection_kwargs["socket_timeout"] <= BOUND / 2
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
    # The consumer keeps plain connections: a refused reconnect is retried on the consumer's own schedule.
    assert Conf.broker_transport_options["fail_fast"] is False
    with current_app.connection_for_write(transport_options=Conf.broker_transport_options) as connection:
        pool = connection.default_channel.client.connection_pool
        assert not issubclass(pool.connection_class, redis_breaker.FailFast)
        assert pool.connection_kwargs["socket_timeout"] == WORKER_BROKER_TIMEOUT


class Frozen:
    def __init__(self, server: OwnRedis, trips: list, waits: list, caplog) -> None:
        self.server, self.trips, self.waits, self.caplog = server, trips, waits, caplog

    def dropped(self, name: str) -> list[logging.LogRecord]:
        """Sends of task `name` logged as not enqueued (dropped after the wait, or skipped after it)."""
        return [r for r in self.caplog.records if f"enqueue {name}" in r.getMessage()]


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
    waits: list[str] = []
    read_response = redis.connection.AbstractConnection.read_response

    def counting_read(self, *args, **kwargs):  # every redis-py connection class reads its replies here
        try:
            return read_response(self, *args, **kwargs)
        except redis.exceptions.TimeoutError:
            waits.append(type(self).__name__)
            raise

    monkeypatch.setattr(redis.connection.AbstractConnection, "read_response", counting_read)
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
            yield Frozen(server, trips, waits, caplog)
    finally:
        server.thaw()
        server.stop()
        repoint(saved)
        redis_breaker.reset()


def test_submit_next_page_and_staff_overview_complete_while_redis_is_frozen(
        frozen_redis, django_capture_on_commit_callbacks):
    frozen = frozen_redis
    episode = submitted_episode(status=Episode.Status.IN_PROGRESS, prior_experience="few", ready_at=timezone.now(),
                                logs={"session.txt": b"User: total the column\nAgent: 1,234,567"})
    worker = Client()
    worker.force_login(episode.participant.user)
    with django_capture_on_commit_callbacks(execute=True):
        response = worker.post(reverse("worker:episode-submit", args=[episode.pk]))
    assert response.status_code == 302
    assert Episode.objects.get(pk=episode.pk).status == Episode.Status.SUBMITTED, "the submission is saved"
    # Dropped after its timeout, or skipped because a call to this server failed moments before: logged either way.
    assert len(frozen.dropped("grading.tasks.grade_episode")) == 1, "the publish was dropped and logged"
    page = worker.get(response.url)
    assert page.status_code == 200 and "Grading will start shortly" in page.content.decode()
    staff = Client()
    staff.force_login(UserFactory(roles=["staff"]))
    overview = staff.get(reverse("dashboard:overview", args=[episode.study.slug]))
    assert overview.status_code == 200
    # One wait for the frozen server in these three requests, cache and broker together: the first unanswered
    # call tripped the breaker, and every later call -- the publish and kombu's reconnection attempt included --
    # failed at once.
    assert frozen.trips == [("127.0.0.1", frozen.server.port)], frozen.trips
    assert len(frozen.waits) == 1, frozen.waits


def test_a_publish_to_a_frozen_broker_waits_once_and_its_retry_and_later_sends_fail_at_once(frozen_redis):
    """The publish of a process that never reached the broker yet (as a fresh web process): kombu connects,
    pings, and on the ping's timeout reconnects once (transport option max_retries); that reconnect, and each
    send after it within the trip window, is refused by the breaker without touching the socket."""
    from studies.task_sending import send_task_now

    frozen = frozen_redis
    for _ in range(3):
        with pytest.raises(Exception, match="did not answer recently"):
            send_task_now("grading.tasks.grade_episode", [1])
    assert len(frozen.waits) == 1, frozen.waits
    assert frozen.trips == [("127.0.0.1", frozen.server.port)]


def test_the_sweep_sends_the_grading_a_frozen_broker_dropped_once_it_answers(
        frozen_redis, django_capture_on_commit_callbacks, settings):
    from grading.services.reconcile import grading_reconcile
    from studies.task_sending import broker_skip_reset

    frozen = frozen_redis
    episode = submitted_episode(status=Episode.Status.IN_PROGRESS, prior_experience="few", ready_at=timezone.now(),
                                logs={"session.txt": b"User: total the column\nAgent: 1,234,567"})
    worker = Client()
    worker.force_login(episode.participant.user)
    with django_capture_on_commit_callbacks(execute=True):
        assert worker.post(reverse("worker:episode-submit", args=[episode.pk])).status_code == 302
    assert len(frozen.dropped("grading.tasks.grade_episode")) == 1
    broker = redis.Redis.from_url(frozen.server.url, socket_timeout=5)
    frozen.server.thaw()
    assert broker.llen("grading") == 0, "nothing reached the broker while it was frozen"
    # SIGCONT, then the trip window and the send skip run out; the sweep finds the submission from its row.
    redis_breaker.reset()
    broker_skip_reset()
    settings.GRADING = {**getattr(settings, "GRADING", {}), "REQUEUE_AFTER_SECONDS": 0}
    report = grading_reconcile()
    assert report.grading_sent == 1 and report.send_errors == 0
    assert broker.llen("grading") == 1, "the grading message is queued for the worker"
    assert len(frozen.waits) == 1, frozen.waits
