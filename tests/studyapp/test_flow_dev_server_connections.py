"""`manage.py runserver` on PostgreSQL does not leave a database connection behind per request thread.

The development server starts a thread per request; a connection kept open for CONN_MAX_AGE by a thread that
then ends is never reused and only goes away when PostgreSQL notices, so a busy page that polls (the task
page's heartbeat) used to pile connections up until "too many clients".
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from tests.conftest import ROOT, requires_postgres, worker_environment
from tests.factories import StudyFactory, UserFactory

pytestmark = requires_postgres


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _server_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
        return cursor.fetchone()[0]


@pytest.fixture
def runserver(transactional_db, tmp_path):
    port = _free_port()
    env = worker_environment({"VAR_DIR": str(tmp_path)})
    log = open(tmp_path / "runserver.log", "wb")  # noqa: SIM115 - closed below
    command = [sys.executable, "manage.py", "runserver", "--noreload", "--skip-checks", f"127.0.0.1:{port}"]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            httpx.get(base + "/accounts/login/", timeout=2)
            break
        except httpx.HTTPError:
            if time.time() > deadline or proc.poll() is not None:
                raise RuntimeError("runserver did not start: " + (tmp_path / "runserver.log").read_text())
            time.sleep(0.3)
    yield base
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def test_many_requests_through_runserver_leave_no_connections_behind(runserver):
    if connection.vendor != "postgresql":
        pytest.skip("counts PostgreSQL backends")
    StudyFactory()
    token, _ = Token.objects.get_or_create(user=UserFactory(roles=["staff"], is_staff=True))
    baseline = _server_connections()

    def fetch(_: int) -> int:
        return httpx.get(runserver + "/api/studies/", headers={"Authorization": f"Token {token.key}"},
                         timeout=30).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(fetch, range(40)))
    assert set(statuses) == {200}
    deadline = time.time() + 30  # ends as soon as the connections are closed
    while _server_connections() > baseline + 1 and time.time() < deadline:
        time.sleep(0.2)
    assert _server_connections() <= baseline + 1, "runserver keeps a connection per finished request thread"
