"""/healthz answers without any dependency; /readyz checks database, cache, broker and storage and names failures."""

from __future__ import annotations

import socket

import pytest
from celery import current_app
from django.test import Client

pytestmark = pytest.mark.django_db


def test_liveness_answers_without_touching_the_database_and_for_any_host(django_db_blocker, settings):
    settings.ALLOWED_HOSTS = ["study.example.org"]
    with django_db_blocker.block():  # any query would raise here
        response = Client().get("/healthz", HTTP_HOST="127.0.0.1:8000")
    assert response.status_code == 200 and response.json() == {"status": "alive"}


def test_readiness_passes_with_every_service_up():
    response = Client().get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ready" and body["failed"] == []
    assert set(body["checks"]) == {"database", "cache", "broker", "storage", "static"}
    assert all(check["ok"] for check in body["checks"].values())


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens there once the socket is closed


def test_readiness_is_a_503_naming_the_cache_and_broker_when_redis_is_unreachable(settings, closed_port,
                                                                                   monkeypatch):
    settings.CACHES = {"default": {**settings.CACHES["default"],
                                   "BACKEND": "django_redis.cache.RedisCache",
                                   "LOCATION": f"redis://127.0.0.1:{closed_port}/0",
                                   "OPTIONS": {"IGNORE_EXCEPTIONS": True, "SOCKET_CONNECT_TIMEOUT": 1,
                                               "SOCKET_TIMEOUT": 1}}}
    monkeypatch.setattr(current_app.conf, "broker_url", f"redis://127.0.0.1:{closed_port}/0")
    response = Client().get("/readyz")
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "unready" and sorted(body["failed"]) == ["broker", "cache"]
    assert body["checks"]["database"]["ok"] and body["checks"]["storage"]["ok"]
    assert str(closed_port) not in response.content.decode()  # no addresses or messages leak


def _media_at(settings, location) -> None:
    settings.STORAGES = {**settings.STORAGES, "default": {
        **settings.STORAGES["default"], "OPTIONS": {**settings.STORAGES["default"].get("OPTIONS", {}),
                                                    "location": str(location)}}}


def test_readiness_names_storage_when_the_private_folder_cannot_be_written(settings, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the media folder's parent should be")
    _media_at(settings, blocker / "media")
    response = Client().get("/readyz")
    assert response.status_code == 503 and response.json()["failed"] == ["storage"]


def test_a_private_folder_not_created_yet_is_ready_when_it_can_be(settings, tmp_path):
    _media_at(settings, tmp_path / "fresh" / "media")  # before the first upload
    assert Client().get("/readyz").status_code == 200


def test_a_check_that_hangs_is_reported_at_the_deadline_instead_of_holding_the_answer(settings, monkeypatch):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connections complete, nothing is ever answered
    port = silent.getsockname()[1]
    try:
        monkeypatch.setenv("READYZ_TIMEOUT_SECONDS", "0.5")
        settings.CACHES = {"default": {"BACKEND": "django_redis.cache.RedisCache",
                                       "LOCATION": f"redis://127.0.0.1:{port}/0",
                                       "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 30, "SOCKET_TIMEOUT": 30}}}
        body = Client().get("/readyz").json()
    finally:
        silent.close()
    assert body["failed"] == ["cache"]
    assert body["checks"]["cache"] == {"ok": False, "error": "no answer within 0.5 s"}


def test_readiness_names_static_until_collectstatic_has_run(settings, tmp_path):
    from django.contrib.staticfiles.storage import staticfiles_storage
    from django.core.management import call_command
    from django.utils.functional import empty

    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"}}
    settings.STATIC_ROOT = tmp_path / "static"
    settings.STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]
    staticfiles_storage._wrapped = empty
    try:
        response = Client().get("/readyz")
        assert response.status_code == 503 and response.json()["failed"] == ["static"]
        call_command("collectstatic", "--noinput", "-v", "0")
        assert Client().get("/readyz").status_code == 200
    finally:
        staticfiles_storage._wrapped = empty
