"""The web server exactly as the Dockerfile and the compose stack start it keeps slow uploads alive.

A worker on a slow line may need far longer than the worker timeout to send a screen recording. The server is
started as a subprocess with the shipped command (only the port, the timeout and the worker count shortened so
the test stays quick), and a throttled client streams an upload through the real upload view for three times
the timeout, while other slow uploads are in flight and normal pages still answer.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from django.conf import settings
from django.core.files.storage import default_storage
from django.test import Client
from django.urls import reverse

from pairing.services import episode_assign
from studies import models as m
from tests.conftest import ROOT, worker_environment
from tests.factories.scenarios import make_participant, make_world

TIMEOUT_SECONDS = 5
BOUNDARY = "slowuploadboundary7MA4YWxkTrZu0gW"


def shipped_web_command() -> list[str]:
    """The compose `web` command, which must be the image's own CMD (one way to run production)."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    command = compose["services"]["web"]["command"]
    cmd_line = next(line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("CMD "))
    assert json.loads(cmd_line[4:]) == command, "Dockerfile CMD and the compose web command differ"
    return command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _with_option(command: list[str], option: str, value: str) -> list[str]:
    """Replace an option's value where the command sets it on the command line."""
    out = list(command)
    for index, part in enumerate(out):
        if part == option and index + 1 < len(out):
            out[index + 1] = value
        elif part.startswith(option + "="):
            out[index] = f"{option}={value}"
    return out


class Server:
    def __init__(self, tmp_path: Path) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        command = shipped_web_command()
        assert command[0] == "gunicorn"
        command = _with_option(command, "--bind", f"127.0.0.1:{self.port}")
        command = _with_option(command, "--timeout", str(TIMEOUT_SECONDS))
        command = _with_option(command, "--workers", "1")
        env = worker_environment({
            "DJANGO_SECRET_KEY": settings.SECRET_KEY, "VAR_DIR": str(tmp_path), "DJANGO_DEBUG": "0",
            "GUNICORN_BIND": f"127.0.0.1:{self.port}", "GUNICORN_TIMEOUT": str(TIMEOUT_SECONDS),
            "GUNICORN_WORKERS": "1",
        })
        self.log_path = tmp_path / "gunicorn.log"
        self.log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([sys.executable, "-m", *command], cwd=ROOT, env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while True:
            try:
                httpx.get(self.base + "/accounts/login/", timeout=2)
                return
            except httpx.HTTPError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("gunicorn did not start:\n" + self.output())
                time.sleep(0.3)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def worker_pids(self) -> list[int]:
        found = []
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            found += [int(x) for x in (task / "children").read_text().split()]
        return found

    def stop(self) -> str:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def server(transactional_db, tmp_path) -> Iterator[Server]:
    running = Server(tmp_path)
    yield running
    running.stop()


@pytest.fixture
def worker_session(transactional_db):
    """A signed-in worker with an open episode: (episode, cookies)."""
    world = make_world(slug="slow")
    participant = make_participant(world)
    episode = episode_assign(participant=participant, position=1)
    client = Client()
    client.force_login(participant.user)
    return episode, {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}


def _memory(pid: int) -> dict[str, int]:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in {"VmRSS", "VmHWM"}:
            values[key] = int(rest.split()[0]) * 1024
    return values


class SlowUpload:
    """Stream a text file of `megabytes` MB in `pieces` pieces, pausing between them; hash what was sent."""

    def __init__(self, name: str, megabytes: int, seconds: float, pieces: int = 64) -> None:
        self.name, self.total, self.pieces = name, megabytes * 2**20, pieces
        self.pause = seconds / pieces
        self.sha256 = hashlib.sha256()
        self.head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"kind\"\r\n\r\ndeliverable\r\n"
                     f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
                     "Content-Type: text/plain\r\n\r\n").encode()
        self.tail = f"\r\n--{BOUNDARY}--\r\n".encode()

    def _piece(self, index: int, size: int) -> bytes:
        line = f"{self.name} piece {index:05d} ".encode()
        return (line * (size // len(line) + 1))[:size]

    def body(self) -> Iterator[bytes]:
        yield self.head
        size = self.total // self.pieces
        for index in range(self.pieces):
            piece = self._piece(index, size if index < self.pieces - 1 else self.total - size * index)
            self.sha256.update(piece)
            time.sleep(self.pause)
            yield piece
        yield self.tail

    def send(self, http: httpx.Client, url: str, csrf: str) -> httpx.Response:
        return http.post(url, content=self.body(), headers={
            "X-CSRFToken": csrf, "Accept": "application/json",
            "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
            "Content-Length": str(len(self.head) + self.total + len(self.tail)),
        })


def _open_session(server: Server, cookies: dict[str, str], episode: m.Episode) -> tuple[httpx.Client, str]:
    http = httpx.Client(base_url=server.base, cookies=cookies, timeout=120)
    page = http.get(reverse("worker:task", args=[episode.study.slug, episode.position]))
    assert page.status_code == 200, page.text[:500]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return http, token


def _stored(episode: m.Episode, name: str) -> tuple[m.EpisodeFile, str]:
    record = m.EpisodeFile.objects.get(episode=episode, name=name)
    digest = hashlib.sha256()
    with default_storage.open(record.file.name, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return record, digest.hexdigest()


def test_a_slow_upload_lasting_three_worker_timeouts_is_stored_intact_with_bounded_memory(server, worker_session):
    episode, cookies = worker_session
    http, csrf = _open_session(server, cookies, episode)
    url = reverse("worker:episode-upload", args=[episode.pk])
    try:
        warm = http.post(url, headers={"X-CSRFToken": csrf, "Accept": "application/json"},
                         data={"kind": "deliverable"}, files={"file": ("warm.txt", b"warm up\n" * 4096, "text/plain")})
        assert warm.status_code == 200 and warm.json()["ok"], warm.text
        pids = server.worker_pids()
        before = {pid: _memory(pid)["VmRSS"] for pid in pids}
        upload = SlowUpload("recording.txt", megabytes=40, seconds=3 * TIMEOUT_SECONDS + 1)
        started = time.monotonic()
        response = upload.send(http, url, csrf)
        elapsed = time.monotonic() - started
    finally:
        http.close()
    assert response.status_code == 200, (response.text[:500], server.output()[-3000:])
    assert elapsed > 3 * TIMEOUT_SECONDS
    assert response.json()["ok"] is True
    record, on_disk = _stored(episode, "recording.txt")
    assert record.size == upload.total
    assert record.sha256 == on_disk == upload.sha256.hexdigest()
    assert server.worker_pids() == pids, "a worker was killed and replaced during the upload"
    assert "WORKER TIMEOUT" not in server.output()
    growth = max(_memory(pid)["VmHWM"] - before[pid] for pid in pids)
    assert growth < 16 * 2**20, f"the worker grew by {growth / 2**20:.1f} MB for a 40 MB upload"


def test_normal_pages_still_answer_while_several_slow_uploads_are_in_flight(server, worker_session):
    episode, cookies = worker_session
    http, csrf = _open_session(server, cookies, episode)
    url = reverse("worker:episode-upload", args=[episode.pk])
    uploads = [SlowUpload(f"slow-{i}.txt", megabytes=4, seconds=2 * TIMEOUT_SECONDS + 2, pieces=40)
               for i in range(4)]
    results: dict[str, httpx.Response] = {}

    signed_in = dict(http.cookies)  # the session and the CSRF cookie

    def send(upload: SlowUpload) -> None:
        with httpx.Client(base_url=server.base, cookies=signed_in, timeout=120) as own:
            results[upload.name] = upload.send(own, url, csrf)

    threads = [threading.Thread(target=send, args=(upload,)) for upload in uploads]
    for thread in threads:
        thread.start()
    try:
        time.sleep(TIMEOUT_SECONDS / 2)
        answered = []
        with httpx.Client(base_url=server.base, timeout=TIMEOUT_SECONDS) as visitor:
            while any(thread.is_alive() for thread in threads) and len(answered) < 5:
                answered.append(visitor.get("/accounts/login/").status_code)
                time.sleep(1)
        assert answered and set(answered) == {200}, answered
        assert all(thread.is_alive() for thread in threads), "the uploads finished before the pages were checked"
    finally:
        for thread in threads:
            thread.join(timeout=120)
        http.close()
    for upload in uploads:
        assert results[upload.name].status_code == 200, (results[upload.name].text[:500], server.output()[-3000:])
        record, on_disk = _stored(episode, upload.name)
        assert record.sha256 == on_disk == upload.sha256.hexdigest()
