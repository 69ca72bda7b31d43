"""Bench: the worker task page under a realistic table size, and memory while a worker uploads 1 GB.

Why: the task page is the page workers keep open and reload for an hour per task, so it must stay cheap
when the study holds 10⁵ episodes (targets: ≤ 10 queries, p50 ≤ 20 ms server time); and a worker uploading a
screen recording must not make the web process hold the file in memory (target: ≤ 64 MB growth while a
1 GB file streams through a real gunicorn worker).

The bench builds a throwaway database (SQLite under VAR_DIR, or a scratch PostgreSQL database when
DATABASE_URL points at PostgreSQL), fills it, measures, prints the figures as JSON, and drops it again.

    python bench/worker_pages.py [--episodes 100000] [--requests 300] [--upload-mb 1024] [--skip-upload]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studyapp.settings")
os.environ.setdefault("VAR_DIR", str(ROOT / "var" / "bench-worker"))
# Test-profile settings: plain static storage (no collectstatic needed), DEBUG off, no Celery traffic.
os.environ.setdefault("DJANGO_TESTING", "1")

AGENTS, TASKS, POSITIONS = 6, 600, 5


def setup_database() -> tuple[str, str]:
    """Create an empty scratch database with every migration applied; return (its name, the original)."""
    import django
    from django.conf import settings

    django.setup()
    from django.db import connection

    original = connection.settings_dict["NAME"]
    name = (f"bench_worker_{os.getpid()}" if connection.vendor == "postgresql"
            else str(Path(settings.VAR_DIR) / "bench-worker.sqlite3"))
    connection.settings_dict.setdefault("TEST", {})["NAME"] = name
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    return name, original


def fill(episodes: int) -> dict:
    """Bulk-load a study with `episodes` episodes plus one worker whose task page is measured."""
    from django.contrib.auth import get_user_model
    from django.core.files.base import ContentFile
    from django.utils import timezone

    from studies import models as m
    from studies.roles import WORKER, grant_role

    study = m.Study.objects.create(name="Bench study", slug="bench", status=m.Study.Status.RECRUITING,
                                   max_episodes_per_task=10**6, task_time_limit_minutes=120)
    consent = m.ConsentVersion.objects.create(study=study, version=1, text="Bench consent.",
                                              llm_providers=["openai", "anthropic"])
    sector = m.Sector.objects.create(code="bench", name="Bench sector")
    occupation = m.Occupation.objects.create(soc_code="13-2011.00", title="Accountants and Auditors", sector=sector)
    agents = [m.Agent.objects.create(name=f"Agent {i}", slug=f"agent-{i}",
                                     setup_guide="## Install\n\n1. Download\n2. Run `agent --version`\n" * 3)
              for i in range(AGENTS)]
    study.agents.add(*agents)
    tasks = m.TaskInstance.objects.bulk_create([
        m.TaskInstance(title=f"Task {i}", prompt="Prepare the report described in the attached files. " * 20,
                       sector=sector, expected_deliverables=["report.docx", "summary.xlsx"],
                       hidden_info="gold notes " * 50)
        for i in range(TASKS)
    ])
    m.TaskInstance.studies.through.objects.bulk_create(
        [m.TaskInstance.studies.through(taskinstance_id=t.pk, study_id=study.pk) for t in tasks])
    participants_needed = episodes // POSITIONS + 1
    now = timezone.now()
    batch = 5000
    created = 0
    for start in range(0, participants_needed, batch):
        people = m.Participant.objects.bulk_create([
            m.Participant(study=study, status=m.Participant.Status.WORKING, occupation=occupation,
                          consent_version=consent, consented_at=now, pseudonym=f"P-B{start + i:09d}")
            for i in range(min(batch, participants_needed - start))
        ])
        rows = []
        for person_index, person in enumerate(people, start=start):
            for position in range(1, POSITIONS + 1):
                if created + len(rows) >= episodes:
                    break
                rows.append(m.Episode(
                    participant=person, study=study, agent=agents[(person_index + position) % AGENTS],
                    task=tasks[(person_index * POSITIONS + position) % TASKS], position=position,
                    status=m.Episode.Status.SUBMITTED, started_at=now, submitted_at=now,
                ))
        m.Episode.objects.bulk_create(rows, batch_size=batch)
        created += len(rows)

    user = get_user_model().objects.create_user("bench-worker", password="bench-Pass-8472")
    grant_role(user, WORKER)
    worker = m.Participant.objects.create(study=study, user=user, status=m.Participant.Status.WORKING,
                                         occupation=occupation, consent_version=consent, consented_at=now)
    m.ParticipantIdentity.objects.create(participant=worker, study=study)
    task = tasks[0]
    for name, content in (("data.xlsx", b"PK\x03\x04" + b"\x00" * 4096), ("brief.pdf", b"%PDF-1.4\n" + b"x" * 4096),
                          ("notes.txt", b"Reference notes\n" * 200), ("gold.txt", b"hidden")):
        kind = m.TaskFile.Kind.HIDDEN if name == "gold.txt" else m.TaskFile.Kind.REFERENCE
        record = m.TaskFile(task=task, kind=kind, name=name, size=len(content))
        record.file.save(name, ContentFile(content), save=False)
        record.save()
    episode = m.Episode.objects.create(participant=worker, study=study, agent=agents[0], task=task, position=1,
                                       status=m.Episode.Status.IN_PROGRESS, started_at=now, prior_experience="few",
                                       ready_at=now, deadline_at=now + timezone.timedelta(hours=2))
    for name in ("report.docx", "summary.xlsx", "session-log.txt"):
        kind = m.EpisodeFile.Kind.LOG if name.endswith(".txt") else m.EpisodeFile.Kind.DELIVERABLE
        record = m.EpisodeFile(episode=episode, kind=kind, name=name, size=10, sha256="0" * 64)
        record.file.save(name, ContentFile(b"PK\x03\x04" + b"\x00" * 6), save=False)
        record.save()
    return {"user": user, "episode": episode, "study": study,
            "episodes_in_db": m.Episode.objects.count()}


def measure_task_page(world: dict, requests: int) -> dict:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    client = Client()
    client.force_login(world["user"])
    url = reverse("worker:task", args=[world["study"].slug, 1])
    for _ in range(20):
        assert client.get(url).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200 and b"gold notes" not in response.content
    query_count = len(queries.captured_queries)
    timings = []
    for _ in range(requests):
        started = time.perf_counter()
        client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    return {
        "queries": query_count,
        "p50_ms": round(statistics.median(timings), 2),
        "p95_ms": round(timings[int(0.95 * (len(timings) - 1))], 2),
        "requests": requests,
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status(pid: int) -> dict[str, int]:
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in {"VmRSS", "VmHWM"}:
            values[key] = int(rest.split()[0]) * 1024
    return values


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found += [int(x) for x in text]
    return found


def wait_for_web(base: str, seconds: float = 60) -> None:
    """Block until the server at ``base`` answers its login page."""
    import httpx

    deadline = time.time() + seconds
    while True:
        try:
            httpx.get(base + "/accounts/login/", timeout=2)
            return
        except httpx.HTTPError:
            if time.time() > deadline:
                raise RuntimeError("gunicorn did not start")
            time.sleep(0.3)


def signed_in_worker(world: dict, base: str, timeout: float | None) -> tuple[Any, str]:
    """An HTTP client (httpx) signed in as the bench worker, and the CSRF token of their first task page."""
    import httpx
    from django.conf import settings
    from django.test import Client
    from django.urls import reverse

    session = Client()
    session.force_login(world["user"])
    cookies = {settings.SESSION_COOKIE_NAME: session.cookies[settings.SESSION_COOKIE_NAME].value}
    http = httpx.Client(base_url=base, cookies=cookies, timeout=timeout)
    page = http.get(reverse("worker:task", args=[world["study"].slug, 1]))
    page.raise_for_status()
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    if match is None:
        raise RuntimeError("the task page carries no CSRF token")
    return http, match.group(1)


def measure_upload(world: dict, database_name: str, megabytes: int) -> dict:
    """Stream `megabytes` MB through a real gunicorn worker and report its peak memory growth."""
    from django.conf import settings
    from django.db import connection
    from django.urls import reverse

    env = dict(os.environ)
    if connection.vendor == "postgresql":
        db = connection.settings_dict
        env["DATABASE_URL"] = (f"postgres://{db.get('USER') or 'postgres'}@{db.get('HOST') or '127.0.0.1'}:"
                               f"{db.get('PORT') or 5432}/{database_name}")
    else:
        env.pop("DATABASE_URL", None)
        env["SQLITE_PATH"] = database_name
    env.update({"DJANGO_DEBUG": "0", "VAR_DIR": str(settings.VAR_DIR),
                "UPLOAD_MAX_FILE_BYTES": str(max(2 * 2**30, (megabytes + 16) * 2**20)),
                "UPLOAD_MAX_EPISODE_BYTES": str(max(4 * 2**30, (megabytes + 64) * 2**20))})
    port = _free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally block below
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "studyapp.wsgi", "-w", "1", "-k", "sync", "--timeout", "900",
         "-b", f"127.0.0.1:{port}"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for_web(base)
        worker_pid = _children(server.pid)[0]
        http, token = signed_in_worker(world, base, timeout=900)
        with contextlib.closing(http):
            upload_url = reverse("worker:episode-upload", args=[world["episode"].pk])
            headers = {"X-CSRFToken": token, "Accept": "application/json"}
            warm = http.post(upload_url, headers=headers, data={"kind": "deliverable"},
                             files={"file": ("warmup.txt", b"warm up\n" * 1000, "text/plain")})
            warm.raise_for_status()
            before = _status(worker_pid)
            boundary = "benchboundary7MA4YWxkTrZu0gW"
            head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"kind\"\r\n\r\ndeliverable\r\n"
                    f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"recording.txt\"\r\n"
                    f"Content-Type: text/plain\r\n\r\n").encode()
            tail = f"\r\n--{boundary}--\r\n".encode()
            chunk = (b"0123456789abcdef" * 4096)[: 1 << 16]
            total = megabytes * 2**20

            def body():
                yield head
                sent = 0
                while sent < total:
                    piece = chunk[: min(len(chunk), total - sent)]
                    sent += len(piece)
                    yield piece
                yield tail

            started = time.perf_counter()
            response = http.post(upload_url, content=body(), headers={
                **headers, "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Content-Length": str(len(head) + total + len(tail)),
            })
            seconds = time.perf_counter() - started
            after = _status(worker_pid)
        reply = response.json()
        if not reply.get("ok"):
            raise RuntimeError(f"upload refused: {reply}")
        return {
            "file_mb": megabytes, "stored_bytes": reply["files"][0]["size"], "seconds": round(seconds, 1),
            "rss_before_mb": round(before["VmRSS"] / 2**20, 1),
            "peak_rss_mb": round(after["VmHWM"] / 2**20, 1),
            "growth_mb": round((after["VmHWM"] - before["VmRSS"]) / 2**20, 1),
        }
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--upload-mb", type=int, default=1024)
    parser.add_argument("--skip-upload", action="store_true")
    args = parser.parse_args()
    name, original = setup_database()
    from django.db import connection

    try:
        started = time.perf_counter()
        world = fill(args.episodes)
        result = {"database": connection.vendor, "episodes_in_db": world["episodes_in_db"],
                  "fill_seconds": round(time.perf_counter() - started, 1),
                  "task_page": measure_task_page(world, args.requests)}
        result["task_page"]["targets"] = {"queries": 10, "p50_ms": 20}
        if not args.skip_upload:
            result["upload"] = measure_upload(world, name, args.upload_mb)
            result["upload"]["target_growth_mb"] = 64
        print(json.dumps(result, indent=2))
    finally:
        _delete_stored_files()
        connection.creation.destroy_test_db(original, verbosity=0)


def _delete_stored_files() -> None:
    """Remove the files the bench stored (the 1 GB upload included) before the scratch database goes."""
    from django.core.files.storage import default_storage

    from studies import models as m

    for model in (m.EpisodeFile, m.TaskFile):
        for path in model.objects.values_list("file", flat=True):
            if path:
                default_storage.delete(path)


if __name__ == "__main__":
    main()
