"""The open invitation link under abuse: throttled per client address, and a race of sign-ups with one
platform id leaves exactly one account and one participant (real threads on PostgreSQL)."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import close_old_connections, connection
from django.test import Client
from django.urls import reverse

from studies import models as m
from tests.conftest import requires_postgres
from tests.factories.scenarios import make_world

PASSWORD = "a-long-pass-phrase-9"


@pytest.fixture(autouse=True)
def _fresh_counters():
    cache.clear()
    yield
    cache.clear()


def _signup(client: Client, url: str, username: str, **extra):
    return client.post(url, {"username": username, "email": "", "password1": PASSWORD, "password2": PASSWORD},
                       **extra)


@pytest.mark.django_db
def test_the_invitation_link_is_throttled_per_client_address(settings):
    settings.JOIN_THROTTLE_RATE = "3/min"
    world = make_world()
    url = reverse("worker:join", args=[world.study.invite_code])
    for _ in range(3):
        assert Client(REMOTE_ADDR="198.51.100.7").get(url).status_code == 200
    refused = _signup(Client(REMOTE_ADDR="198.51.100.7"), url, "late-worker")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert "Too many" in refused.content.decode()
    assert not get_user_model().objects.filter(username="late-worker").exists()
    # A forged X-Forwarded-For does not make a new client; another real address is unaffected.
    assert Client(REMOTE_ADDR="198.51.100.7", HTTP_X_FORWARDED_FOR="203.0.113.1").get(url).status_code == 429
    assert Client(REMOTE_ADDR="198.51.100.8").get(url).status_code == 200


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_a_race_of_sign_ups_with_one_platform_id_leaves_no_orphan_account():
    world = make_world()
    url = reverse("worker:join", args=[world.study.invite_code]) + "?PROLIFIC_PID=5f00000000000000000a0ace"
    racers = 6
    barrier = threading.Barrier(racers)
    statuses: list[int] = []
    lock = threading.Lock()

    def race(index: int) -> None:
        close_old_connections()
        try:
            client = Client(REMOTE_ADDR=f"198.51.100.{index + 1}")
            barrier.wait(timeout=30)
            status = _signup(client, url, f"racer-{index}").status_code
        finally:
            connection.close()
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(statuses) == [302] + [409] * (racers - 1), statuses
    identity = m.ParticipantIdentity.objects.get(study=world.study, platform_worker_id="5f00000000000000000a0ace")
    racers_created = get_user_model().objects.filter(username__startswith="racer-")
    assert list(racers_created) == [identity.participant.user], "losing sign-ups leave no account behind"


@pytest.mark.django_db
def test_a_sign_up_posted_after_the_platform_id_joined_is_refused_like_the_race_loser():
    world = make_world()
    url = reverse("worker:join", args=[world.study.invite_code]) + "?PROLIFIC_PID=5f00000000000000000001a7"
    assert _signup(Client(REMOTE_ADDR="198.51.100.20"), url, "first-comer").status_code == 302
    late = _signup(Client(REMOTE_ADDR="198.51.100.21"), url, "late-comer")
    assert late.status_code == 409
    assert not get_user_model().objects.filter(username="late-comer").exists()


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_sign_ups_from_one_address_never_pass_the_limit(settings):
    """Counted atomically: a read-modify-write of the request history let 52 of 60 concurrent sign-ups through
    a limit of 30."""
    settings.JOIN_THROTTLE_RATE = "5/min"
    world = make_world()
    racers = 16
    barrier = threading.Barrier(racers)
    statuses: list[int] = []
    lock = threading.Lock()

    def sign_up(index: int) -> None:
        close_old_connections()
        try:
            url = reverse("worker:join", args=[world.study.invite_code]) + f"?PROLIFIC_PID={index:024x}"
            barrier.wait(timeout=30)
            response = Client(REMOTE_ADDR="198.51.100.9").post(url, {"username": "", "email": "", "password1": "",
                                                                     "password2": ""})
            with lock:
                statuses.append(response.status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=sign_up, args=(i,)) for i in range(racers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(statuses) == racers
    assert statuses.count(302) == 5 == m.Participant.objects.count(), statuses
    assert statuses.count(429) == racers - 5


@pytest.mark.django_db
def test_the_limits_key_on_the_client_behind_the_proxy_and_survive_redis_down(settings, mailoutbox):
    from tests.factories import UserFactory

    settings.TRUSTED_PROXY_COUNT = 1
    UserFactory(username="target", email="target@example.org")
    for n in range(6):  # six users behind the same proxy, one reset each: nobody is refused
        response = Client(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").post(
            reverse("password_reset"), {"email": "target@example.org"})
        assert response.status_code == 302
    # Redis down (nothing listens): the limit cannot count, and lets the request through instead of a 500.
    settings.CACHES = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://127.0.0.1:1/0",
                                   "OPTIONS": {"IGNORE_EXCEPTIONS": True, "SOCKET_CONNECT_TIMEOUT": 0.2}}}
    response = Client(REMOTE_ADDR="10.0.0.2").post(reverse("password_reset"), {"email": "target@example.org"})
    assert response.status_code == 302
