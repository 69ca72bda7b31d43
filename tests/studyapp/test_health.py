"""/healthz answers without any dependency; /readyz checks database, cache, broker and storage and names failures."""

from __future__ import annotations

import socket
import threading

import pytest
from celery import current_app
from django.test import Client

from studyapp import health

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_checks(monkeypatch):
    """Every test runs the checks itself (no answer kept from another test) and stops their threads after."""
    monkeypatch.setenv("READYZ_CACHE_SECONDS", "0")
    health.stop_checks()
    yield
    health.stop_checks()  # closes the check threads' database and broker connections


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


@pytest.fixture
def connects(monkeypatch):
    """Count every new database connection and every new Redis connection (cache and broker), from any thread."""
    import redis.connection
    from django.db.backends.signals import connection_created

    counts = {"database": 0, "redis": 0}
    lock = threading.Lock()

    def database(**kwargs):
        with lock:
            counts["database"] += 1

    original = redis.connection.AbstractConnection.connect

    def redis_connect(self, *args, **kwargs):
        if self._sock is None:
            with lock:
                counts["redis"] += 1
        return original(self, *args, **kwargs)

    connection_created.connect(database, weak=False)
    monkeypatch.setattr(redis.connection.AbstractConnection, "connect", redis_connect)
    yield counts
    connection_created.disconnect(database)


def test_readiness_opens_no_new_connection_per_call(connects, settings, monkeypatch):
    from studyapp import redis_breaker

    # Timeouts far above any scheduling delay: a call timed out on a loaded machine would reconnect on purpose.
    settings.CACHES = {"default": {**settings.CACHES["default"], "OPTIONS": {
        "IGNORE_EXCEPTIONS": True, "SOCKET_CONNECT_TIMEOUT": 30, "SOCKET_TIMEOUT": 30}}}
    options = current_app.conf.broker_transport_options
    current_app.conf.broker_transport_options = {**options, "socket_timeout": 30, "socket_connect_timeout": 30}
    monkeypatch.setenv("READYZ_TIMEOUT_SECONDS", "60")
    redis_breaker.reset()
    try:
        assert Client().get("/readyz").status_code == 200  # the first probe connects
        after_first = dict(connects)
        assert after_first["database"] >= 1
        for _ in range(5):
            assert Client().get("/readyz").status_code == 200
        assert connects == after_first  # the next five reuse what the first opened
    finally:
        current_app.conf.broker_transport_options = options


def test_the_answer_is_kept_briefly_and_shared_by_every_caller(monkeypatch):
    monkeypatch.setenv("READYZ_CACHE_SECONDS", "60")
    runs = dict.fromkeys(health.CHECKS, 0)

    def counted(name):
        def run():
            runs[name] += 1  # each check answers at once: what is counted is how often it ran
        return run

    for name in list(health.CHECKS):
        monkeypatch.setitem(health.CHECKS, name, counted(name))
    answers = []
    callers = [threading.Thread(target=lambda: answers.append(Client().get("/readyz").status_code))
               for _ in range(8)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert answers == [200] * 8 and all(Client().get("/readyz").status_code == 200 for _ in range(10))
    assert runs == dict.fromkeys(health.CHECKS, 1)


def _readyz_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("readyz")]


def test_a_hung_check_is_not_started_again_and_leaves_no_thread_per_probe(monkeypatch):
    monkeypatch.setenv("READYZ_TIMEOUT_SECONDS", "0.3")
    released, entered = threading.Event(), []

    def hangs() -> None:
        entered.append(1)
        released.wait(60)

    monkeypatch.setitem(health.CHECKS, "cache", hangs)
    try:
        for _ in range(5):
            response = Client().get("/readyz")
            assert response.status_code == 503 and response.json()["failed"] == ["cache"]
            assert len(_readyz_threads()) <= len(health.CHECKS)
        assert len(entered) == 1  # the hung check was not run again on top of itself
    finally:
        released.set()
    monkeypatch.setitem(health.CHECKS, "cache", lambda: None)
    for _ in range(50):  # the check's thread returns to the pool once the hang ends
        if Client().get("/readyz").status_code == 200:
            break
        threading.Event().wait(0.1)
    assert Client().get("/readyz").status_code == 200
    assert len(_readyz_threads()) == len(health.CHECKS)
    health.stop_checks()
    for thread in _readyz_threads():
        thread.join(timeout=5)
    assert _readyz_threads() == []  # stopping ends every thread the checks used


def test_readiness_names_static_until_collectstatic_has_run(settings, tmp_path, monkeypatch):
    from django.contrib.staticfiles.storage import staticfiles_storage
    from django.core.management import call_command
    from django.utils.functional import empty

    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"}}
    settings.STATIC_ROOT = tmp_path / "static"
    settings.STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]
    staticfiles_storage._wrapped = empty
    monkeypatch.setenv("READYZ_CACHE_SECONDS", "0")
    try:
        response = Client().get("/readyz")
        assert response.status_code == 503 and response.json()["failed"] == ["static"]
        call_command("collectstatic", "--noinput", "-v", "0")
        assert Client().get("/readyz").status_code == 200
    finally:
        staticfiles_storage._wrapped = empty
        health.stop_checks()
