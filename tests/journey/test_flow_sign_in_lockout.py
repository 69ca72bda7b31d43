"""One lockout policy for every way to sign in (site form, admin, API token), keyed on the user and on the
client address as the trusted proxies report it, and the same answer for a wrong password and a wrong role."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "pw-correct-horse"


@pytest.fixture(autouse=True)
def _small_limit(settings):
    settings.AXES_FAILURE_LIMIT = 3
    cache.clear()  # the API's anonymous throttle counts in the cache; these tests are about the lockout


def _site(client, username: str, password: str, **extra):
    return client.post(reverse("login"), {"username": username, "password": password}, **extra)


def _admin(client, username: str, password: str, **extra):
    return client.post(reverse("admin:login"), {"username": username, "password": password}, **extra)


def _api(client, username: str, password: str, **extra):
    return APIClient().post(reverse("api-token"), {"username": username, "password": password}, format="json",
                            **extra)


SIGN_INS = {"site": _site, "admin": _admin, "api": _api}


def _signed_in(way: str, client, response) -> bool:
    if way == "api":
        return response.status_code == 200 and "token" in response.json()
    return response.status_code == 302 and "_auth_user_id" in client.session


@pytest.mark.parametrize("way", sorted(SIGN_INS))
def test_repeated_failures_lock_the_account_even_against_the_right_password(way):
    UserFactory(username="carol", roles=["staff"])
    client = Client()
    sign_in = SIGN_INS[way]
    for _ in range(2):
        assert sign_in(client, "carol", "wrong").status_code in (200, 400)
    assert sign_in(client, "carol", "wrong").status_code == 429  # the failure that reaches the limit
    response = sign_in(client, "carol", PASSWORD)
    assert response.status_code == 429
    assert not _signed_in(way, client, response)
    if way == "api":
        assert response.json()["error"]["code"] == "locked_out"
        assert int(response["Retry-After"]) > 0
    else:
        assert "Too many failed sign-in attempts" in response.content.decode()


def test_failures_through_every_way_count_together():
    UserFactory(username="erin", roles=["staff"])
    client = Client()
    _site(client, "erin", "wrong")
    _admin(client, "erin", "wrong")
    _api(client, "erin", "wrong")
    for way, sign_in in SIGN_INS.items():
        assert sign_in(client, "erin", PASSWORD).status_code == 429, way


def test_a_successful_sign_in_resets_the_count():
    UserFactory(username="dave", roles=["staff"])
    client = Client()
    for _ in range(2):
        _site(client, "dave", "wrong")
    assert _signed_in("site", client, _site(client, "dave", PASSWORD))
    client.logout()
    for _ in range(2):
        _site(client, "dave", "wrong")
    assert _signed_in("site", client, _site(client, "dave", PASSWORD))


def test_a_forged_forwarded_for_header_does_not_escape_the_lockout(settings):
    settings.TRUSTED_PROXY_COUNT = 0
    UserFactory(username="frank", roles=["staff"])
    for attempt in range(3):
        _api(None, "frank", "wrong", HTTP_X_FORWARDED_FOR=f"198.51.100.{attempt}")
    response = _api(None, "frank", PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.77")
    assert response.status_code == 429


def test_behind_a_trusted_proxy_the_address_the_proxy_saw_is_the_key(settings):
    """The proxy appends the address it saw; whatever the client put before it does not count."""
    settings.TRUSTED_PROXY_COUNT = 1
    UserFactory(username="gina", roles=["staff"])
    for attempt in range(3):
        _site(Client(), "gina", "wrong", HTTP_X_FORWARDED_FOR=f"10.9.9.{attempt}, 203.0.113.5")
    locked = _site(Client(), "gina", PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.5")
    assert locked.status_code == 429
    other = Client()
    assert _signed_in("site", other, _site(other, "gina", PASSWORD, HTTP_X_FORWARDED_FOR="203.0.113.6"))


@pytest.mark.parametrize("role", ["worker", "expert"])
def test_a_token_for_a_non_staff_role_answers_like_a_wrong_password(role):
    UserFactory(username="henry", roles=[role])
    right = _api(None, "henry", PASSWORD)
    wrong = _api(None, "henry", "wrong")
    assert right.status_code == wrong.status_code == 400
    assert right.json() == wrong.json()


def test_token_attempts_with_a_non_staff_role_count_as_failures():
    UserFactory(username="ivy", roles=["worker"])
    for _ in range(3):
        _api(None, "ivy", PASSWORD)
    client = Client()
    assert _site(client, "ivy", PASSWORD).status_code == 429
