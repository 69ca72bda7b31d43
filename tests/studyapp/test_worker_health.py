"""The worker's heartbeat: fresh while a real worker consumes, stale once it stops or loses the broker."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, requires_redis, wait_for, worker_environment


def _check(env: dict[str, str], max_age: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "studyapp.worker_health", "--max-age", str(max_age)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_the_check_fails_without_a_heartbeat_file(tmp_path):
    result = _check({**os.environ, "WORKER_HEARTBEAT_FILE": str(tmp_path / "none")}, 60)
    assert result.returncode == 1 and "no heartbeat file" in result.stdout


def test_compose_checks_web_readiness_and_the_worker_heartbeat():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert "/readyz" in " ".join(services["web"]["healthcheck"]["test"])
    assert services["worker"]["healthcheck"]["test"][1:4] == ["python", "-m", "studyapp.worker_health"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _redis(port: int, folder: Path) -> subprocess.Popen:
    process = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(folder)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: _listening(port), timeout=30, message="the private redis-server")
    return process


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@requires_redis
@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs the redis-server binary")
def test_a_real_worker_beats_while_consuming_and_stops_beating_without_its_broker(transactional_db, tmp_path):
    port = _free_port()
    broker = _redis(port, tmp_path)
    heartbeat = tmp_path / "worker.heartbeat"
    env = worker_environment({"CELERY_BROKER_URL": f"redis://127.0.0.1:{port}/0",
                              "WORKER_HEARTBEAT_FILE": str(heartbeat), "WORKER_HEARTBEAT_SECONDS": "0.5"})
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "studyapp", "worker", "-Q", "default", "-P", "solo",
         "--without-heartbeat", "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(heartbeat.exists, timeout=120, message="the first heartbeat")
        first = heartbeat.stat().st_mtime
        wait_for(lambda: heartbeat.stat().st_mtime > first, timeout=60, message="a second heartbeat")
        healthy = _check(env, 30)
        assert healthy.returncode == 0 and healthy.stdout.startswith("healthy"), healthy.stdout

        broker.terminate()  # the broker goes away: the consumer stops, and so does the heartbeat
        broker.wait(timeout=30)
        wait_for(lambda: _check(env, 3).returncode == 1, timeout=120, message="the check to fail without a broker")
        assert worker.poll() is None  # the worker itself is still running: only the heartbeat tells

        broker = _redis(port, tmp_path)  # back: the worker reconnects and beats again
        wait_for(lambda: _check(env, 3).returncode == 0, timeout=120, message="the heartbeat after reconnecting")
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
        broker.terminate()
        broker.wait(timeout=30)
    wait_for(lambda: _check(env, 3).returncode == 1, timeout=60, message="the check to fail once the worker stopped")


def test_the_heartbeat_file_defaults_under_var_dir_not_the_shared_temporary_folder(tmp_path, monkeypatch):
    from studyapp.worker_heartbeat import heartbeat_file

    monkeypatch.delenv("WORKER_HEARTBEAT_FILE", raising=False)
    monkeypatch.setenv("VAR_DIR", str(tmp_path))
    path = heartbeat_file()
    assert tmp_path in path.parents
    monkeypatch.delenv("VAR_DIR")
    assert (ROOT / "var") in heartbeat_file().parents
