"""The deployment files describe the stack the README promises."""

from __future__ import annotations

import yaml

from tests.conftest import ROOT


def test_compose_runs_postgres_redis_web_worker_and_beat_with_healthchecks():
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(services)
    for name in ("postgres", "redis", "web", "worker"):
        assert "healthcheck" in services[name], name
    assert "gunicorn" in services["web"]["command"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "studyapp", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "studyapp", "beat"]
    assert set(compose["volumes"]) >= {"pgdata", "media"}


def test_env_example_names_every_variable_production_requires():
    text = (ROOT / ".env.example").read_text()
    for name in ("DJANGO_ENV", "DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL"):
        assert f"{name}=" in text


def test_ci_script_runs_make_test_with_real_services_required():
    text = (ROOT / ".ci" / "run").read_text()
    assert "make test" in text
    assert "REQUIRE_SERVICES=1" in text
    assert "postgres://postgres@127.0.0.1:5432/postgres" in text
    assert "redis://127.0.0.1:6379/0" in text
