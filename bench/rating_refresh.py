"""Bench: a full rating refresh from the PostgreSQL ledger to a written snapshot, at up to 10^6 humans x 10^7 obs.

Why: a refresh (``rating.services.refresh.posterior_refresh``) reads the whole active ledger, fits the study's
rating model, and writes one EntityRating row per agent and per human. At the largest scale the target is
10 s end to end; the ledger is read as binary records packed in a few large values, a large ledger in parts by
table pages on concurrent connections sharing one snapshot, and the ratings written with ``COPY ... FROM STDIN
(FORMAT BINARY)``, never row by row, the participants' while the fit finishes. The bench fills a throw-away
study with bulk ``COPY`` loads (participants and observations drawn from y = s_agent + s_human + task + noise),
then times refreshes under the models asked for and prints the rating table's size (the write's index work grows
with it), the refresh's own timings (read; fit, with the participants' rows written inside it; the rest of the
write, with the ledger's links worked out beside it), the median of the repeats (3 by default) against the
target, and the machine's load average.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_bench \\
        python bench/rating_refresh.py [--humans 1000000] [--observations 10000000] [--agents 100]
                                       [--models paper,calibrated] [--repeats 1] [--keep] [--study ID]

The database is migrated if needed; the bench study is deleted afterwards unless --keep is given. Loading
10^7 observations takes several minutes, so ``--keep`` and then ``--study ID`` (a kept bench study, never
deleted by the run) time refreshes again without rebuilding. Each refresh prints its wall time and the
machine's load average; each model runs ``--repeats`` times (3) and the median is judged against 10 s.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studyapp.settings")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from rating.fit import RATING_MODELS  # noqa: E402
from rating.services import refresh as rating_refresh  # noqa: E402
from studies import models as m  # noqa: E402

TARGET_SECONDS = 10.0
CHUNK = 1_000_000


def _copy_rows(sql: str, lines: list[str]) -> None:
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        copy.write("".join(lines))


def build(*, humans: int, observations: int, agents: int, tasks: int, seed: int) -> m.Study:
    """Create the bench study with bulk COPY loads; return it."""
    rng = np.random.default_rng(seed)
    stamp = uuid.uuid4().hex[:8]
    study = m.Study.objects.create(
        name=f"rating refresh bench {stamp}",
        slug=f"bench-refresh-{stamp}",
        status=m.Study.Status.CLOSED,
        is_simulated=True,
    )
    agent_rows = [
        m.Agent(name=f"bench agent {stamp} {i}", slug=f"bench-{stamp}-{i}", is_active=False) for i in range(agents)
    ]
    agent_pks = np.array([a.pk for a in m.Agent.objects.bulk_create(agent_rows)], dtype=np.int64)
    now = timezone.now().isoformat()
    table = m.Participant._meta.db_table
    for start in range(0, humans, CHUNK):
        stop = min(humans, start + CHUNK)
        lines = [f"{study.pk}\tB{stamp[:6]}{i:09d}\tt\tcomplete\tC{i:015d}\t{now}\t\n" for i in range(start, stop)]
        _copy_rows(
            f"COPY {table} (study_id, pseudonym, is_simulated, status, completion_code, created_at, "
            "withdrawal_reason) FROM STDIN",
            lines,
        )
    participant_pks = np.array(
        m.Participant.objects.filter(study=study).order_by("pk").values_list("pk", flat=True), dtype=np.int64
    )
    s_agent = rng.normal(55, 8, agents)
    s_human = rng.normal(0, 10, humans)
    task_uuids = [str(uuid.uuid4()) for _ in range(tasks)]
    d_task = rng.normal(0, 5, tasks)
    # Every human works with at least one agent; the rest of the observations are spread at random.
    human_of = np.concatenate([np.arange(humans), rng.integers(0, humans, max(0, observations - humans))])
    agent_of = rng.integers(0, agents, observations)
    task_of = rng.integers(0, tasks, observations)
    y = np.clip(s_agent[agent_of] + s_human[human_of] + d_task[task_of] + rng.normal(0, 12, observations), 0, 100)
    table = "rating_observation"
    for start in range(0, observations, CHUNK):
        stop = min(observations, start + CHUNK)
        buffer = io.StringIO()
        for a, h, t, value in zip(
            agent_pks[agent_of[start:stop]].tolist(),
            participant_pks[human_of[start:stop]].tolist(),
            task_of[start:stop].tolist(),
            np.round(y[start:stop], 3).tolist(),
            strict=True,
        ):
            buffer.write(f"{study.pk}\t{a}\t{h}\t{task_uuids[t]}\t\t{value}\t1\tauto\tt\t\t{now}\t{now}\n")
        with (
            connection.cursor() as cursor,
            cursor.cursor.copy(
                f"COPY {table} (study_id, agent_id, participant_id, task_uuid, external_id, y, weight, source, active, "
                "retraction_reason, recorded_at, updated_at) FROM STDIN"
            ) as copy,
        ):
            copy.write(buffer.getvalue())
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {table}")
    return study


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--humans", type=int, default=1_000_000)
    parser.add_argument("--observations", type=int, default=10_000_000)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=2_000)
    parser.add_argument("--models", default="paper,calibrated", help=f"comma-separated, from {RATING_MODELS}")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the bench study")
    parser.add_argument("--study", type=int, help="time refreshes of this kept bench study instead of building one")
    parser.add_argument("--repeats", type=int, default=3, help="refreshes per model (the median is judged)")
    args = parser.parse_args()
    models = [name.strip() for name in args.models.split(",") if name.strip()]
    unknown = sorted(set(models) - set(RATING_MODELS))
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)}")
    if args.observations < args.humans:
        parser.error("--observations must be at least --humans (every human is observed)")
    if connection.vendor != "postgresql":
        parser.error("set DATABASE_URL to a PostgreSQL database: the bench measures the PostgreSQL path")
    call_command("migrate", verbosity=0)
    if args.study is not None:
        study = m.Study.objects.get(pk=args.study, slug__startswith="bench-refresh-")
        args.keep = True
        print(f"reusing bench study {study.pk} ({study.observations.count():,} observations)")
    else:
        t0 = time.perf_counter()
        study = build(
            humans=args.humans, observations=args.observations, agents=args.agents, tasks=args.tasks, seed=args.seed
        )
        print(
            f"built {args.agents} agents x {args.humans:,} humans x {args.observations:,} observations "
            f"({args.tasks:,} tasks) in {time.perf_counter() - t0:.1f} s"
        )
    with connection.cursor() as cursor:  # the write's cost grows with the rating table's indexes
        cursor.execute(
            "SELECT count(*), pg_size_pretty(pg_total_relation_size('rating_entityrating')) FROM rating_ratingsnapshot"
        )
        snapshots, size = cursor.fetchone()
    print(f"rating table: {snapshots:,} snapshots, {size} with its indexes")
    try:
        for kind in models:
            m.Study.objects.filter(pk=study.pk).update(rating_model=kind)
            walls = []
            for _ in range(max(1, args.repeats)):
                started = time.perf_counter()
                snapshot = rating_refresh.posterior_refresh(study_id=study.pk)
                wall = time.perf_counter() - started
                walls.append(wall)
                t = snapshot.timings
                verdict = "PASS" if wall <= TARGET_SECONDS else "MISS"
                print(
                    f"{kind:>16}: refresh {wall:6.1f} s [{verdict} <= {TARGET_SECONDS:.0f} s]"
                    f"  read {t['read_ms'] / 1000:.1f} s"
                    f"  fit {t['solve_ms'] / 1000:.1f} s"
                    f" (participants' posterior at {t['participants_ready_ms'] / 1000:.1f} s,"
                    f" their rows written in {t['participants_write_ms'] / 1000:.1f} s while the fit finished)"
                    f"  rest of the write {t['write_ms'] / 1000:.1f} s"
                    f" (links {t['connectivity_ms'] / 1000:.1f} s beside it)"
                    f"  ({snapshot.ratings.count():,} rating rows, v{snapshot.version})"
                    f"  load average {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
            if len(walls) > 1:
                walls.sort()
                median = walls[len(walls) // 2]
                print(
                    f"{kind:>16}: best {walls[0]:.1f} s, median {median:.1f} s, worst {walls[-1]:.1f} s"
                    f" [{'PASS' if median <= TARGET_SECONDS else 'MISS'} median <= {TARGET_SECONDS:.0f} s]"
                    f"  load average {os.getloadavg()[0]:.1f}"
                )
    finally:
        if not args.keep:
            with connection.cursor() as cursor:  # a cascade through the ORM would load 10^7 rows
                cursor.execute(
                    "DELETE FROM rating_entityrating WHERE snapshot_id IN "
                    "(SELECT id FROM rating_ratingsnapshot WHERE study_id = %s)",
                    [study.pk],
                )
                cursor.execute("DELETE FROM rating_ratingsnapshot WHERE study_id = %s", [study.pk])
                cursor.execute("DELETE FROM rating_observation WHERE study_id = %s", [study.pk])
                cursor.execute("DELETE FROM studyapp_participant WHERE study_id = %s", [study.pk])
            agents = list(m.Agent.objects.filter(studies=None, slug__startswith="bench-").values_list("pk", flat=True))
            study.delete()
            m.Agent.objects.filter(pk__in=agents, observations=None).delete()


if __name__ == "__main__":
    main()
