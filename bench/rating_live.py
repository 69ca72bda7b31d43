"""Bench: grade -> leaderboard through live updates, at 10^6 participants x 10^7 observations.

Why: between refits a new grade must reach the leaderboard in seconds (target: p95 <= 2 s), while a refit of the
whole ledger takes tens of seconds at this scale. The bench takes a kept study of `bench/rating_refresh.py`
(``--keep``), refits it once with the current code (which stores the posterior in information form), starts a
real Celery worker with the command the Makefile runs (without beat), and then lets ``--grades`` graded episodes
arrive one per ``--interval`` seconds, each sent to the worker as the grading pipeline sends it
(``record_observation``). A poller reads the newest snapshot every 10 ms; a grade's latency is from the commit of
its score to the first snapshot that counts it. It prints p50/p95/max against the target, how many snapshots
the grades were coalesced into with their own timings (read, update, write), the refit's phases, and the load.

It also checks the chain: after the run, the agents of the last live snapshot are compared with a solve of the
whole final ledger at the same variance components (``rating.live.participant_terms`` over every observation;
the largest difference is printed against 1e-9).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_bench REDIS_URL=redis://127.0.0.1:6379/12 \\
        python bench/rating_live.py --study ID [--grades 100] [--interval 0.1] [--skip-refit]

The study keeps the added episodes and observations (run it again and they are part of the ledger).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studyapp.settings")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from celery import current_app  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, connections  # noqa: E402

from grading.task_names import RECORD_OBSERVATION  # noqa: E402
from rating import selectors  # noqa: E402
from rating.live import InformationState, participant_terms  # noqa: E402
from rating.models import EntityRating, PosteriorState, RatingSnapshot  # noqa: E402
from rating.services import refresh  # noqa: E402
from studies import models as m  # noqa: E402

TARGET_P95 = 2.0


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def _bench_task(study: m.Study) -> m.TaskInstance:
    sector, _ = m.Sector.objects.get_or_create(code="bench-live", defaults={"name": "Bench live updates"})
    task, _ = m.TaskInstance.objects.get_or_create(
        title="live update bench task", sector=sector, defaults={"prompt": "Bench task."})
    task.studies.add(study)
    return task


def _worker() -> subprocess.Popen:
    """Start the worker the Makefile starts (queues default, grading, rating; two processes), without beat."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = open(ROOT / "var" / "bench-rating-live-worker.log", "w")  # noqa: SIM115 -- kept open for the child
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "studyapp", "worker", "-Q", "default,grading,rating", "-c", "2",
         "--loglevel", "INFO"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        if "ready" in (ROOT / "var" / "bench-rating-live-worker.log").read_text():
            return process
        if process.poll() is not None:
            raise SystemExit("the worker exited; see var/bench-rating-live-worker.log")
        time.sleep(0.5)
    raise SystemExit("the worker did not become ready in 120 s")


def _chain_check(study: m.Study) -> float:
    """Return the largest difference between the last snapshot's agents and a solve of the whole ledger."""
    row = PosteriorState.objects.get(study=study)
    state = InformationState.from_bytes(bytes(row.data))
    arrays = selectors.observations_arrays(study, tasks=False)
    keys = state.agent_ids.astype(np.int64)
    position = np.full(int(keys.max()) + 1, -1, dtype=np.intp)
    position[keys] = np.arange(state.n_agents)
    codes = position[arrays.agent_ids]
    low = int(arrays.participant_ids.min())
    terms = participant_terms(codes, arrays.participant_ids - low, arrays.y, arrays.w, state.n_agents, state.gammas,
                              compact=True)
    solved = dataclasses.replace(state, terms=terms).posterior()
    rows = dict(EntityRating.objects.filter(snapshot=row.snapshot, entity_kind="agent").values_list("entity_id", "mu"))
    stored = np.array([rows[int(k)] for k in keys.tolist()])
    return float(np.max(np.abs(stored - solved.agent_mu)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", type=int, required=True, help="a kept bench/rating_refresh.py study")
    parser.add_argument("--grades", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--skip-refit", action="store_true", help="start from the stored state of an earlier run")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        parser.error("set DATABASE_URL to a PostgreSQL database: the bench measures the PostgreSQL path")
    call_command("migrate", verbosity=0)
    study = m.Study.objects.get(pk=args.study, slug__startswith="bench-refresh-")
    m.Study.objects.filter(pk=study.pk).update(rating_model=m.Study.RatingModel.CALIBRATED)
    print(f"load average {_load()}")
    if not args.skip_refit or not PosteriorState.objects.filter(study=study, live=True).exists():
        t0 = time.perf_counter()
        snapshot = refresh.posterior_refresh(study_id=study.pk, reason="bench: start from a refit")
        print(f"refit v{snapshot.version}: {time.perf_counter() - t0:.1f} s  {snapshot.timings}  load {_load()}")
    rng = np.random.default_rng(args.seed)
    agents = list(m.Agent.objects.filter(observations__study=study).distinct().values_list("pk", flat=True)[:100])
    people = list(m.Participant.objects.filter(study=study, episodes__isnull=True).order_by("?")
                  .values_list("pk", flat=True)[:args.grades])
    task = _bench_task(study)
    worker = _worker()
    base = selectors.latest_snapshot(study)
    assert base is not None
    n0 = base.n_observations
    committed: list[float] = [0.0] * args.grades
    seen: list[float | None] = [None] * args.grades
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            latest = RatingSnapshot.objects.filter(study=study).order_by("-version").values_list(
                "n_observations", flat=True).first() or 0
            now = time.perf_counter()
            for i in range(min(latest - n0, args.grades)):
                if seen[i] is None and committed[i]:
                    seen[i] = now
            time.sleep(0.01)
        connections.close_all()

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        start = time.perf_counter()
        for i in range(args.grades):
            time.sleep(max(0.0, start + i * args.interval - time.perf_counter()))
            episode = m.Episode.objects.create(
                participant_id=people[i], study=study, agent_id=int(rng.choice(agents)), task=task,
                position=1, status=m.Episode.Status.GRADED,
                auto_score=float(np.round(rng.uniform(20, 95), 3)),
            )
            committed[i] = time.perf_counter()
            current_app.send_task(RECORD_OBSERVATION, args=[episode.pk], ignore_result=True)
        deadline = time.perf_counter() + 120
        while any(s is None for s in seen) and time.perf_counter() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        poller.join(5)
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(60)
    latencies = np.array([s - c for s, c in zip(seen, committed, strict=True) if s is not None])
    missing = sum(s is None for s in seen)
    updates = list(RatingSnapshot.objects.filter(study=study, version__gt=base.version).order_by("version")
                   .values_list("produced_by", "timings"))
    kinds = {kind: sum(1 for k, _ in updates if k == kind) for kind in ("update", "refit")}
    totals = np.array([t.get("total_ms", 0.0) for k, t in updates if k == "update"])
    p95 = float(np.percentile(latencies, 95)) if latencies.size else float("inf")
    verdict = "PASS" if p95 <= TARGET_P95 and not missing else "MISS"
    print(f"{args.grades} grades, one per {args.interval * 1000:.0f} ms: grade -> leaderboard p50 "
          f"{np.percentile(latencies, 50):.2f} s  p95 {p95:.2f} s  max {latencies.max():.2f} s  "
          f"[{verdict} p95 <= {TARGET_P95:.0f} s]  never seen: {missing}")
    print(f"snapshots written: {kinds['update']} live updates, {kinds['refit']} refits; live update total "
          f"median {np.median(totals) if totals.size else float('nan'):.0f} ms, max "
          f"{totals.max() if totals.size else float('nan'):.0f} ms")
    if updates:
        print(f"last update's timings: {updates[-1][1]}")
    gap = _chain_check(study)
    print(f"chain vs a solve of the final ledger at the same variance components: max |delta mu| = "
          f"{gap:.2e}  [{'PASS' if gap <= 1e-9 else 'MISS'} <= 1e-9]")
    print(f"load average {_load()}")


if __name__ == "__main__":
    main()
