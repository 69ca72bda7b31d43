"""Settings profiles: embedded default, services from the environment, and hardened production."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT


def _settings_in_subprocess(env_overrides: dict[str, str], tmp_path, extra: str = "") -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "STORAGE_BACKEND", "DJANGO_ENV", "DJANGO_SECRET_KEY",
                        "DJANGO_ALLOWED_HOSTS", "DJANGO_TESTING"}}
    env.update({"VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "studyapp.settings"})
    env.update(env_overrides)
    code = (
        "import json, django; django.setup(); from django.conf import settings as s;"
        "out = {'engine': s.DATABASES['default']['ENGINE'], 'db_name': str(s.DATABASES['default']['NAME']),"
        " 'broker': s.CELERY_BROKER_URL, 'cache': s.CACHES['default']['BACKEND'],"
        " 'storage': s.STORAGES['default']['BACKEND'], 'debug': s.DEBUG,"
        " 'secure_cookies': getattr(s, 'SESSION_COOKIE_SECURE', False), 'hsts': getattr(s, 'SECURE_HSTS_SECONDS', 0),"
        " 'secret_len': len(s.SECRET_KEY)};" + extra + "print(json.dumps(out))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_no_variables_give_the_embedded_profile(tmp_path):
    out = _settings_in_subprocess({}, tmp_path)
    assert out["engine"] == "django.db.backends.sqlite3"
    assert out["db_name"] == str(tmp_path / "var" / "db.sqlite3")
    assert out["broker"] == "filesystem://"
    assert out["cache"].endswith("FileBasedCache")
    assert out["storage"].endswith("FileSystemStorage")


def test_embedded_secret_key_is_generated_once_and_reused(tmp_path):
    first = _settings_in_subprocess({}, tmp_path, extra="out['key'] = s.SECRET_KEY;")
    second = _settings_in_subprocess({}, tmp_path, extra="out['key'] = s.SECRET_KEY;")
    assert first["key"] == second["key"]
    assert first["secret_len"] >= 50
    assert oct((tmp_path / "var" / "secret_key").stat().st_mode)[-3:] == "600"


def test_service_urls_switch_to_postgres_redis_and_s3(tmp_path):
    out = _settings_in_subprocess(
        {"DATABASE_URL": "postgres://u:p@db.example:5432/study", "REDIS_URL": "redis://cache.example:6379/2",
         "STORAGE_BACKEND": "s3", "AWS_STORAGE_BUCKET_NAME": "study-bucket"},
        tmp_path,
        extra="out['s3'] = s.STORAGES['default']['OPTIONS'];",
    )
    assert out["engine"] == "django.db.backends.postgresql"
    assert out["db_name"] == "study"
    assert out["broker"] == "redis://cache.example:6379/2"
    assert out["cache"].endswith("RedisCache")
    assert out["storage"] == "storages.backends.s3.S3Storage"
    assert out["s3"]["bucket_name"] == "study-bucket"
    assert out["s3"]["default_acl"] == "private"


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_SECRET_KEY", "DJANGO_TESTING"}}
    env.update({"DJANGO_ENV": "production", "DJANGO_ALLOWED_HOSTS": "study.example.org", "VAR_DIR": str(tmp_path)})
    proc = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in proc.stderr


def test_production_refuses_to_start_without_allowed_hosts(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_ALLOWED_HOSTS", "DJANGO_TESTING"}}
    env.update({"DJANGO_ENV": "production", "DJANGO_SECRET_KEY": "x" * 64, "VAR_DIR": str(tmp_path)})
    proc = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    assert "DJANGO_ALLOWED_HOSTS must be set" in proc.stderr


def test_production_passes_check_deploy_with_no_warnings(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_TESTING", "DJANGO_ALLOW_ASYNC_UNSAFE"}}
    env.update({"DJANGO_ENV": "production", "DJANGO_SECRET_KEY": "k3y-" + "a1B2c3D4e5" * 7,
                "DJANGO_ALLOWED_HOSTS": "study.example.org", "VAR_DIR": str(tmp_path)})
    proc = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout


def test_production_profile_hardens_cookies_and_hsts(tmp_path):
    out = _settings_in_subprocess(
        {"DJANGO_ENV": "production", "DJANGO_SECRET_KEY": "z" * 64, "DJANGO_ALLOWED_HOSTS": "study.example.org"},
        tmp_path,
    )
    assert out["secure_cookies"] is True
    assert out["hsts"] >= 31536000
    assert out["debug"] is False


def test_demo_is_refused_in_production(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DJANGO_TESTING", "DATABASE_URL"}}
    env.update({"DJANGO_ENV": "production", "DJANGO_SECRET_KEY": "z" * 64, "DJANGO_ALLOWED_HOSTS": "x.org",
                "VAR_DIR": str(tmp_path)})
    proc = subprocess.run([sys.executable, "manage.py", "demo"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    assert "refused when DJANGO_ENV=production" in proc.stderr


_UNKNOWN_ADDRESS = (
    "from django.test import Client; response = Client(HTTP_HOST='localhost').get('/no-such-page/');"
    "out['status'] = response.status_code; out['body'] = response.content.decode();"
    "from django.template.loader import render_to_string; out['error_page'] = render_to_string('500.html');"
)


def test_the_embedded_default_shows_the_projects_own_404_not_the_url_patterns(tmp_path):
    out = _settings_in_subprocess({}, tmp_path, extra=_UNKNOWN_ADDRESS)
    assert out["debug"] is False
    assert out["status"] == 404
    assert "Page not found" in out["body"] and "There is no page at this address" in out["body"]
    assert "URLconf" not in out["body"] and "admin/" not in out["body"]
    assert "Something went wrong on our side" in out["error_page"]


def test_technical_error_pages_only_when_a_developer_sets_django_debug(tmp_path):
    out = _settings_in_subprocess({"DJANGO_DEBUG": "1"}, tmp_path, extra=_UNKNOWN_ADDRESS)
    assert out["debug"] is True
    assert out["status"] == 404 and "URLconf" in out["body"]
