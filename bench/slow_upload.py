"""Bench: a worker on a slow line uploads 1 GB through the production web server while others keep working.

Why: workers upload screen recordings of up to 2 GB from home connections. The production server (gunicorn
started with ``gunicorn.conf.py`` exactly as the Dockerfile and docker-compose.yml start it) must keep such an
upload alive for as long as it takes, hold it on disk rather than in memory, and keep answering other
people's pages while several slow uploads are in flight. Targets: the upload is stored intact although it
lasts longer than the worker timeout, the worker grows by ≤ 64 MB, and a page answers in < 1 s (p95) while
``--slow-clients`` other uploads trickle in.

    python bench/slow_upload.py [--upload-mb 1024] [--rate-mb 4] [--slow-clients 8] [--timeout 120]

At the defaults the upload takes about 256 s, twice the 120 s worker timeout of the shipped configuration.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.worker_pages import (  # noqa: E402 - needs ROOT on sys.path first
    _children,
    _delete_stored_files,
    _free_port,
    _status,
    fill,
    setup_database,
    signed_in_worker,
    wait_for_web,
)

BOUNDARY = "benchslowboundary7MA4YWxkTrZu0gW"
PIECE = 1 << 18


def _web_command() -> list[str]:
    """The compose web command (the Dockerfile CMD is the same; tests/studyapp check that)."""
    import yaml

    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["web"]["command"]


class Upload:
    """A text file of `total` bytes sent at `rate` bytes per second; hashes what it sent."""

    def __init__(self, name: str, total: int, rate: float) -> None:
        self.name, self.total, self.rate = name, total, rate
        self.sha256 = hashlib.sha256()
        self.head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"kind\"\r\n\r\ndeliverable\r\n"
                     f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
                     "Content-Type: text/plain\r\n\r\n").encode()
        self.tail = f"\r\n--{BOUNDARY}--\r\n".encode()
        line = f"{name} slow upload line\n".encode()
        self.piece = (line * (PIECE // len(line) + 1))[:PIECE]

    def body(self):
        yield self.head
        sent, started = 0, time.monotonic()
        while sent < self.total:
            piece = self.piece[: min(PIECE, self.total - sent)]
            self.sha256.update(piece)
            sent += len(piece)
            ahead = sent / self.rate - (time.monotonic() - started)
            if ahead > 0:
                time.sleep(ahead)
            yield piece
        yield self.tail

    def send(self, http, url: str, csrf: str):
        return http.post(url, content=self.body(), headers={
            "X-CSRFToken": csrf, "Accept": "application/json",
            "Content-Type": f"multipart/form-data; boundary={BOUNDARY}",
            "Content-Length": str(len(self.head) + self.total + len(self.tail)),
        })


def measure(world: dict, database_name: str, args: argparse.Namespace) -> dict:
    import httpx
    from django.conf import settings
    from django.core.files.storage import default_storage
    from django.db import connection
    from django.urls import reverse

    from studies import models as m

    db = connection.settings_dict
    port = _free_port()
    env = dict(os.environ)
    env.update({
        "DATABASE_URL": (f"postgres://{db.get('USER') or 'postgres'}@{db.get('HOST') or '127.0.0.1'}:"
                         f"{db.get('PORT') or 5432}/{database_name}"),
        "DJANGO_DEBUG": "0", "VAR_DIR": str(settings.VAR_DIR), "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "GUNICORN_BIND": f"127.0.0.1:{port}", "GUNICORN_TIMEOUT": str(args.timeout),
        "UPLOAD_MAX_FILE_BYTES": str(max(2 * 2**30, (args.upload_mb + 16) * 2**20)),
        "UPLOAD_MAX_EPISODE_BYTES": str(max(4 * 2**30, (args.upload_mb + 256) * 2**20)),
    })
    if connection.vendor != "postgresql":
        env.pop("DATABASE_URL")
        env["SQLITE_PATH"] = database_name
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally block below
    server = subprocess.Popen([sys.executable, "-m", *_web_command()], cwd=ROOT, env=env, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for_web(base)
        http, csrf = signed_in_worker(world, base, timeout=None)
        signed_in = dict(http.cookies)
        url = reverse("worker:episode-upload", args=[world["episode"].pk])
        http.post(url, headers={"X-CSRFToken": csrf, "Accept": "application/json"}, data={"kind": "deliverable"},
                  files={"file": ("warm.txt", b"warm up\n" * 4096, "text/plain")}).raise_for_status()
        workers = _children(server.pid)
        before = {pid: _status(pid)["VmRSS"] for pid in workers}

        big = Upload("recording.txt", args.upload_mb * 2**20, args.rate_mb * 2**20)
        others = [Upload(f"slow-{i}.txt", 16 * 2**20, 16 * 2**20 / (args.upload_mb / args.rate_mb))
                  for i in range(args.slow_clients)]
        replies: dict[str, httpx.Response] = {}

        def send(upload: Upload) -> None:
            with httpx.Client(base_url=base, cookies=signed_in, timeout=None) as own:
                replies[upload.name] = upload.send(own, url, csrf)

        threads = [threading.Thread(target=send, args=(u,)) for u in [big, *others]]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        latencies, failures = [], 0
        with httpx.Client(base_url=base, timeout=30) as visitor:
            while threads[0].is_alive():
                t0 = time.perf_counter()
                try:
                    ok = visitor.get("/accounts/login/").status_code == 200
                except httpx.HTTPError:
                    ok = False
                latencies.append((time.perf_counter() - t0) * 1000)
                failures += not ok
                threads[0].join(timeout=1)
        seconds = time.monotonic() - started
        for thread in threads:
            thread.join()
        after = {pid: _status(pid)["VmHWM"] for pid in workers if Path(f"/proc/{pid}").exists()}
        reply = replies[big.name].json()
        record = m.EpisodeFile.objects.get(episode=world["episode"], name=big.name)
        digest = hashlib.sha256()
        with default_storage.open(record.file.name, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        latencies.sort()
        log.seek(0)
        output = log.read().decode(errors="replace")
        return {
            "file_mb": args.upload_mb, "rate_mb_s": args.rate_mb, "worker_timeout_s": args.timeout,
            "seconds": round(seconds, 1), "ok": bool(reply.get("ok")), "stored_bytes": record.size,
            "intact": record.sha256 == digest.hexdigest() == big.sha256.hexdigest(),
            "other_slow_uploads_ok": sum(replies[u.name].status_code == 200 for u in others),
            "other_slow_uploads": len(others),
            "workers_replaced": sorted(after) != sorted(workers),
            "worker_timeouts_logged": output.count("WORKER TIMEOUT"),
            "max_growth_mb": round(max(after[pid] - before[pid] for pid in after) / 2**20, 1),
            "page_during_uploads": {"requests": len(latencies), "failures": failures,
                                    "p50_ms": round(statistics.median(latencies), 1),
                                    "p95_ms": round(latencies[int(0.95 * (len(latencies) - 1))], 1),
                                    "max_ms": round(latencies[-1], 1)},
            "targets": {"max_growth_mb": 64, "page_p95_ms": 1000},
        }
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upload-mb", type=int, default=1024)
    parser.add_argument("--rate-mb", type=float, default=4.0, help="upload speed of the slow client, MB/s")
    parser.add_argument("--slow-clients", type=int, default=8, help="other slow uploads at the same time")
    parser.add_argument("--timeout", type=int, default=120, help="gunicorn worker timeout (the shipped value)")
    args = parser.parse_args()
    name, original = setup_database()
    from django.db import connection

    try:
        world = fill(100)
        print(json.dumps(measure(world, name, args), indent=2))
    finally:
        _delete_stored_files()
        connection.creation.destroy_test_db(original, verbosity=0)


if __name__ == "__main__":
    main()
