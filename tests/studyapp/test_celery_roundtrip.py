"""A task goes through the real broker to a real worker process and back, on each broker kind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from studies import tasks
from tests.conftest import ROOT, requires_redis
from tests.factories import StudyFactory


def _round_trip(celery_worker_process) -> dict:
    StudyFactory(slug="visible-to-worker")
    worker = celery_worker_process(queues="default")
    result = tasks.system_check.delay()
    try:
        return result.get(timeout=90)
    except Exception as exc:  # pragma: no cover - diagnostic on failure only
        pytest.fail(f"worker did not answer: {exc}\n{worker.output()[-3000:]}")


@requires_redis
@pytest.mark.django_db(transaction=True)
def test_round_trip_through_redis_reaches_the_test_database(celery_worker_process, settings):
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    answer = _round_trip(celery_worker_process)
    assert answer["studies"] == 1
    assert answer["db_vendor"] in {"postgresql", "sqlite"}


def test_round_trip_through_the_filesystem_broker_in_the_embedded_profile(tmp_path):
    """Run the embedded default (SQLite + filesystem broker) in its own folder, whatever this run uses."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_TESTING"}}
    env.update({"VAR_DIR": str(tmp_path / "var"), "DJANGO_SETTINGS_MODULE": "studyapp.settings"})
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=300)
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "studyapp", "worker", "-Q", "default", "-P", "solo",
         "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        probe = (
            "import django; django.setup();"
            "from django.conf import settings; assert settings.CELERY_BROKER_URL == 'filesystem://';"
            "from studies.models import Study; Study.objects.create(name='x', slug='x');"
            "from studies.tasks import system_check; import json;"
            "print(json.dumps(system_check.delay().get(timeout=90)))"
        )
        out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=180)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
    assert out.returncode == 0, out.stderr + (tmp_path / "worker.log").read_text()
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    assert answer == {"db_vendor": "sqlite", "db_name": str(tmp_path / "var" / "db.sqlite3"), "studies": 1}
