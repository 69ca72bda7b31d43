"""Bench: episodes graded per minute by real Celery workers against the fake providers, and 50 MB xlsx extraction.

Why: grading is I/O-bound (each judge call waits on a provider), so throughput must grow with worker
concurrency. The fake OpenAI/Anthropic server (tests/llm_server.py) adds a fixed latency to every reply
(default 300 ms); each episode is graded by two judges (one per provider) running in parallel threads,
against an approved rubric, exactly as in production: grade_episode → judges → combine → rating update.

For each concurrency the script starts `celery worker -c N` (prefork), queues fresh submitted episodes
and times from the first enqueue until the last one is graded. It runs in its own VAR_DIR (a temporary
folder, SQLite + filesystem broker) unless --database-url / --redis-url point at PostgreSQL / Redis.

    python bench/grading_throughput.py [--episodes 40] [--concurrency 1,4,8] [--latency 0.3]
        [--database-url postgres://postgres@127.0.0.1:5432/bench] [--redis-url redis://127.0.0.1:6379/2]
        [--skip-xlsx] [--xlsx-mb 50]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ANTHROPIC_MODEL = "claude-sonnet-4-6"


def ensure_postgres_database(url: str) -> None:
    """Create the bench database when it does not exist yet (trust-auth development servers)."""
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    admin = parsed._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')


def configure_environment(args: argparse.Namespace, var_dir: Path, server_urls: tuple[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_TESTING"}}
    env.update({
        "DJANGO_SETTINGS_MODULE": "studyapp.settings", "VAR_DIR": str(var_dir),
        "OPENAI_API_KEY": "bench-key", "OPENAI_BASE_URL": server_urls[0],
        "ANTHROPIC_API_KEY": "bench-key", "ANTHROPIC_BASE_URL": server_urls[1],
        "GRADING_ANTHROPIC_MODEL": ANTHROPIC_MODEL, "GRADING_RETRY_BASE_DELAY": "0.05", "LOG_LEVEL": "WARNING",
    })
    if args.database_url:
        env["DATABASE_URL"] = args.database_url
    if args.redis_url:
        env["REDIS_URL"] = args.redis_url
    os.environ.clear()
    os.environ.update(env)
    return env


def seed(episodes: int):
    """Create a study, a task with an approved rubric, and `episodes` submitted episodes with a deliverable."""
    from django.core.files.base import ContentFile

    from grading.models import Criterion, Rubric
    from grading.schemas import RUBRIC_CATEGORIES
    from studies.models import (
        Agent,
        ConsentVersion,
        Episode,
        EpisodeFile,
        Occupation,
        Participant,
        Sector,
        Study,
        TaskInstance,
    )

    tag = uuid.uuid4().hex[:8]
    study = Study.objects.create(name=f"Bench {tag}", slug=f"bench-{tag}",
                                 judges=[{"provider": "openai", "model": "gpt-4.1"},
                                         {"provider": "anthropic", "model": ANTHROPIC_MODEL}])
    consent = ConsentVersion.objects.create(study=study, version=1, text="bench", llm_providers=["openai",
                                                                                                 "anthropic"])
    sector, _ = Sector.objects.get_or_create(code="bench", defaults={"name": "Bench sector"})
    occupation, _ = Occupation.objects.get_or_create(soc_code="99-9999.00",
                                                     defaults={"title": "Bench analyst", "sector": sector})
    agent, _ = Agent.objects.get_or_create(slug="bench-agent", defaults={"name": "Bench agent"})
    task = TaskInstance.objects.create(title=f"Bench task {tag}", prompt="Summarise the quarter in a report.",
                                       sector=sector, hidden_info="Total is 1,234,567.")
    rubric = Rubric.objects.create(task=task, version=1, status=Rubric.Status.APPROVED,
                                   origin=Rubric.Origin.EXPERT)
    order = 0
    for code, name, points in RUBRIC_CATEGORIES:
        for i in range(3):
            order += 1
            Criterion.objects.create(rubric=rubric, order=order, key=f"C{order}", category=code,
                                     description=f"{name} check {i + 1}", points=points / 3,
                                     evaluation_method="Compare with the prompt.")
    ids = []
    report = ("Quarterly report\n" + "Revenue grew 4% on the quarter; total 1,234,567.\n" * 200).encode()
    for _ in range(episodes):
        participant = Participant.objects.create(study=study, occupation=occupation, consent_version=consent,
                                                 status=Participant.Status.WORKING)
        episode = Episode.objects.create(participant=participant, study=study, agent=agent, task=task,
                                         position=1, status=Episode.Status.SUBMITTED)
        row = EpisodeFile(episode=episode, kind=EpisodeFile.Kind.DELIVERABLE, name="report.txt",
                          size=len(report), sha256="0" * 64)
        row.file.save("report.txt", ContentFile(report), save=False)
        row.save()
        ids.append(episode.pk)
    return ids


def start_worker(env: dict[str, str], concurrency: int, log_path: Path, queues: str) -> subprocess.Popen:
    log = open(log_path, "wb")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "studyapp", "worker", "-Q", f"default,{queues}", "-P", "prefork",
         "-c", str(concurrency), "--without-heartbeat", "--without-gossip", "--without-mingle",
         "-n", f"bench-{uuid.uuid4().hex[:6]}@%h", "--loglevel", "WARNING"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(timeout: float = 120) -> None:
    """Block until the worker has executed a task (a ping needs broadcast support some brokers lack)."""
    from studies.tasks import system_check

    system_check.apply_async(queue="default").get(timeout=timeout)


def stop_worker(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_round(env: dict[str, str], concurrency: int, episodes: int, var_dir: Path, queues: str) -> dict:
    from celery import current_app

    from grading.models import JudgeRun
    from grading.task_names import GRADE_EPISODE
    from studies.models import Episode

    ids = seed(episodes)
    current_app.control.purge()
    log_path = var_dir / f"worker-c{concurrency}.log"
    proc = start_worker(env, concurrency, log_path, queues)
    try:
        wait_ready()
        started = time.perf_counter()
        for pk in ids:
            current_app.send_task(GRADE_EPISODE, args=[pk])
        deadline = time.monotonic() + 600
        while True:
            done = Episode.objects.filter(pk__in=ids, status__in=[Episode.Status.GRADED,
                                                                  Episode.Status.FAILED]).count()
            if done == len(ids):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {done}/{len(ids)} graded after 600 s; see {log_path}")
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
    finally:
        stop_worker(proc)
    graded = Episode.objects.filter(pk__in=ids, status=Episode.Status.GRADED).count()
    runs = JudgeRun.objects.filter(episode_id__in=ids, status=JudgeRun.Status.SUCCEEDED).count()
    return {"concurrency": concurrency, "episodes": len(ids), "graded": graded, "judge_runs": runs,
            "seconds": elapsed, "per_minute": graded / elapsed * 60}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=40, help="episodes per concurrency level")
    parser.add_argument("--concurrency", default="1,4,8")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds the fake providers take per reply")
    parser.add_argument("--database-url", help="PostgreSQL URL (the database is created if missing)")
    parser.add_argument("--redis-url", help="Redis broker URL (default: kombu filesystem broker)")
    parser.add_argument("--queues", default="grading,rating",
                        help="queues the bench worker consumes (grading,rating: grading plus the rating update)")
    parser.add_argument("--skip-xlsx", action="store_true")
    parser.add_argument("--xlsx-mb", type=float, default=50)
    args = parser.parse_args()

    from tests.grading.responders import domain_responder
    from tests.llm_server import FakeLLMServer

    server = FakeLLMServer(latency=args.latency, default_responder=domain_responder).start()
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as tmp:
        var_dir = Path(tmp)
        if args.database_url:
            ensure_postgres_database(args.database_url)
        env = configure_environment(args, var_dir, (server.openai_base_url, server.anthropic_base_url))
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        print(f"fake providers at {server.url}, {args.latency * 1000:.0f} ms per reply; "
              f"database {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}, broker "
              f"{settings.CELERY_BROKER_URL.split(':', 1)[0]}; two judges per episode, prefork workers")
        if not args.redis_url:
            print("note: kombu's filesystem broker polls once a second, which caps throughput; pass --redis-url "
                  "for figures that reflect grading rather than the broker")
        print(f"{'concurrency':>11} {'episodes':>8} {'graded':>6} {'seconds':>8} {'episodes/min':>13} {'speed-up':>8}")
        base = None
        for level in [int(c) for c in args.concurrency.split(",")]:
            result = run_round(env, level, args.episodes, var_dir, args.queues)
            base = base or result["per_minute"]
            print(f"{level:>11} {result['episodes']:>8} {result['graded']:>6} {result['seconds']:>8.1f} "
                  f"{result['per_minute']:>13.1f} {result['per_minute'] / base:>7.1f}x", flush=True)
        print(f"fake server saw at most {server.max_in_flight} requests in flight")
    server.stop()

    if not args.skip_xlsx:
        from bench.extract_xlsx import extract_in_child, generate

        with tempfile.TemporaryDirectory(prefix="xlsx-bench-") as tmp:
            started = time.perf_counter()
            path = generate(Path(tmp), args.xlsx_mb)
            print(f"generated {path.stat().st_size / 2**20:.1f} MB xlsx in {time.perf_counter() - started:.0f} s")
            result = extract_in_child(path, 400_000)
            print(f"extraction of the {path.stat().st_size / 2**20:.1f} MB xlsx (grading budget 400,000 chars): "
                  f"{result['wall_s']} s wall, peak RSS {result['peak_rss_mb']} MB, {result['chars']} chars, "
                  f"truncated={result['truncated']}")


if __name__ == "__main__":
    main()
