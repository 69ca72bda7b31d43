"""Bench: server time and query count of every staff dashboard page, on a small study and on one with 10^5 episodes.

Why: staff open the dashboard every morning on the biggest study; each page must answer in about 300 ms, and
its query count must not depend on the amount of data (a query per row would grow without bound). The
bench builds two studies with bulk inserts (episodes, observations, a real posterior, surveys, log codings,
solo runs, judge runs, LLM usage), computes the stored analyses once (timed: they run in Celery jobs, never
on a request), then requests each page through Django's test client as a staff user and reports the median
server time and the number of SQL queries.

    VAR_DIR=var/h-dash DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_dash \\
        python bench/dashboard.py [--episodes 100000] [--small 1000] [--rounds 10000] [--repeat 7] [--keep]

The database is migrated if needed; the bench studies are deleted afterwards unless --keep is given.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studyapp.settings")

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client, override_settings  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import reverse  # noqa: E402
from django.utils import timezone  # noqa: E402

from console.dashboard import selectors, services  # noqa: E402
from grading.models import FluencyCoding, JudgeRun, LLMUsage, Rubric  # noqa: E402
from rating import selectors as rating_selectors  # noqa: E402
from rating.models import Observation  # noqa: E402
from rating.services import refresh as rating_refresh  # noqa: E402
from studies import models as m  # noqa: E402
from studies.models import BackgroundJob  # noqa: E402
from surveys.models import Answer, Question, SurveyResponse  # noqa: E402
from surveys.services import instrument_install_default  # noqa: E402

PAGES = ("index", "overview", "leaderboard", "surveys", "collaboration", "exports")
BEHAVIOURS = (
    "iterates_and_refines", "clarifies_goal_before_asking", "provides_examples_of_good",
    "specifies_format_and_structure", "sets_interaction_mode", "communication_tone_and_style",
    "identifies_missing_context", "defines_audience", "questions_ai_reasoning", "consults_ai_on_approach",
    "checks_facts_and_claims",
)
BATCH = 5000


def build_study(slug: str, n_episodes: int, seed: int) -> m.Study:
    """Create a study with ``n_episodes`` episodes (five per participant) and everything the pages read."""
    rng = np.random.default_rng(seed)
    now = timezone.now()
    study = m.Study.objects.create(name=f"Bench {slug}", slug=slug, status=m.Study.Status.RECRUITING,
                                   llm_budget_usd=Decimal("500.00"))
    sectors = [m.Sector.objects.get_or_create(code=f"bench-sector-{i}", defaults={"name": f"Bench sector {i}"})[0]
               for i in range(4)]
    agents = [m.Agent.objects.get_or_create(slug=f"bench-agent-{i}", defaults={"name": f"Bench agent {i}"})[0]
              for i in range(5)]
    study.agents.add(*agents)
    n_tasks = max(10, n_episodes // 200)
    tasks = m.TaskInstance.objects.bulk_create(
        [m.TaskInstance(title=f"Bench task {i}", prompt="Do the task.", sector=sectors[i % 4]) for i in range(n_tasks)]
    )
    study.tasks.add(*tasks)
    per = 5
    n_people = n_episodes // per
    statuses = np.where(rng.random(n_people) < 0.9, "complete", "working")
    people = m.Participant.objects.bulk_create(
        [
            m.Participant(study=study, status=str(statuses[i]),
                          last_activity_at=now - timedelta(minutes=int(rng.integers(0, 5000))))
            for i in range(n_people)
        ],
        batch_size=BATCH,
    )
    agent_skill = rng.normal(65, 5, size=len(agents))
    human_skill = rng.normal(0, 8, size=n_people)
    episodes = []
    for p_index, person in enumerate(people):
        chosen = rng.choice(n_tasks, size=per, replace=False)
        for position in range(1, per + 1):
            a = int(rng.integers(0, len(agents)))
            score = float(np.clip(agent_skill[a] + human_skill[p_index] + rng.normal(0, 6), 0, 100))
            open_task = person.status == "working" and position == per
            episodes.append(m.Episode(
                participant=person, study=study, agent=agents[a], task=tasks[int(chosen[position - 1])],
                position=position,
                status=m.Episode.Status.IN_PROGRESS if open_task else m.Episode.Status.GRADED,
                score=None if open_task else round(score, 3), auto_score=None if open_task else round(score, 3),
                score_source="" if open_task else "auto", submitted_at=None if open_task else now,
            ))
    episodes = m.Episode.objects.bulk_create(episodes, batch_size=BATCH)
    scored = [e for e in episodes if e.score is not None]
    Observation.objects.bulk_create(
        [Observation(study=study, episode=e, agent=e.agent, participant=e.participant, task=e.task, y=e.score,
                     task_uuid=e.task.uuid) for e in scored],
        batch_size=BATCH,
    )
    FluencyCoding.objects.bulk_create(
        [FluencyCoding(episode=e, status=FluencyCoding.Status.SUCCEEDED, model="bench",
                       behaviours={code: {"present": bool(rng.random() < 0.4), "reason": ""} for code in BEHAVIOURS})
         for e in scored],
        batch_size=BATCH,
    )
    m.SoloRun.objects.bulk_create(
        [m.SoloRun(task=t, agent=a, study=study, score=round(float(rng.uniform(40, 90)), 2),
                   status=m.Episode.Status.GRADED) for t in tasks for a in agents],
        batch_size=BATCH,
    )
    rubric = Rubric.objects.create(task=tasks[0], version=1, status=Rubric.Status.APPROVED)
    failed = scored[: max(1, len(scored) // 100)]
    m.Episode.objects.filter(pk__in=[e.pk for e in failed]).update(status=m.Episode.Status.FAILED,
                                                                   grading_note="All judges failed")
    JudgeRun.objects.bulk_create(
        [JudgeRun(episode=e, rubric=rubric, provider="openai", model="gpt-4.1", prompt_version="bench",
                  status=JudgeRun.Status.FAILED, error="HTTP 500") for e in failed],
        batch_size=BATCH,
    )
    LLMUsage.objects.bulk_create(
        [LLMUsage(study=study, purpose=purpose, provider="openai", model="gpt-4.1", cost_usd=Decimal("0.01"))
         for purpose in ("judge", "rubric", "fluency") for _ in range(200)]
    )
    _surveys(study, people, rng)
    rating_refresh.posterior_refresh(study_id=study.pk)
    return study


def _surveys(study: m.Study, people: list[m.Participant], rng: np.random.Generator) -> None:
    instrument = instrument_install_default()
    questions = {q.code: q for q in Question.objects.filter(instrument=instrument)}
    now = timezone.now()
    responses = SurveyResponse.objects.bulk_create(
        [SurveyResponse(participant=p, instrument=instrument, phase=phase, submitted_at=now)
         for p in people for phase in ("pre", "post")],
        batch_size=BATCH,
    )
    answers = []
    for response in responses:
        codes = ["D1", "D2", "D3"] if response.phase == "pre" else []
        for code in codes + ["A1", "A2", "A3", "A4", "A5", "A6"]:
            high = {"D1": 4, "D2": 5, "D3": 30, "A4": 5, "A5": 5}.get(code, 7)
            value = int(rng.integers(1, high + 1))
            answers.append(Answer(response=response, question=questions[code], value=str(value), numeric=value))
        answers.append(Answer(response=response, question=questions["A7"],
                              value=str(rng.choice(["Excited", "Curious", "Neutral", "Skeptical", "Anxious"]))))
        if len(answers) >= 20_000:
            Answer.objects.bulk_create(answers, batch_size=BATCH)
            answers = []
    Answer.objects.bulk_create(answers, batch_size=BATCH)


def compute_analyses(study: m.Study, rounds: int) -> dict[str, float]:
    """Run the stored analyses the way the Celery jobs do and return their wall times in seconds."""
    timings = {}
    with override_settings(RATING={"BOOTSTRAP_ROUNDS": rounds, "REFRESH_DEBOUNCE_SECONDS": 5}):
        snapshot = rating_selectors.latest_snapshot(study)
        for kind in ("surveys", "collaboration", "stability"):
            key = selectors.analysis_cache_key(study, kind, snapshot)
            if BackgroundJob.objects.filter(study=study, kind=kind, cache_key=key, status="done").exists():
                continue
            # Create the job row the way a request does, but run it here instead of enqueuing it.
            params = {"rounds": rounds, "seed": 0} if kind == "stability" else {}
            job = BackgroundJob.objects.create(kind=kind, study=study, cache_key=key, params=params)
            started = time.perf_counter()
            services.analysis_job_run(job_id=job.pk)
            timings[kind] = time.perf_counter() - started
            job.refresh_from_db()
            if job.status != "done":
                raise SystemExit(f"{kind} analysis failed: {job.error}")
    return timings


def measure(client: Client, url: str, repeat: int) -> tuple[float, int]:
    """Return the median server time (ms) and the query count of one page."""
    client.get(url)  # warm-up: template compilation, permission caches
    times, counts = [], []
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(url)
            elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}")
        times.append(elapsed)
        counts.append(len(queries))
    return statistics.median(times), max(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=10_000, help="bootstrap rounds of the stability job")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the bench studies")
    parser.add_argument("--reuse", action="store_true", help="reuse bench studies kept by an earlier --keep run")
    args = parser.parse_args()

    call_command("migrate", verbosity=0)
    print(f"database: {connection.vendor} {connection.settings_dict['NAME']}")
    user, _ = get_user_model().objects.get_or_create(username="bench-staff", defaults={"is_staff": True})
    user.is_staff = True
    user.save()
    studies = {}
    for label, size, seed in (("small", args.small, 1), ("large", args.episodes, 2)):
        slug = f"bench-dashboard-{label}"
        kept = m.Study.objects.filter(slug=slug).first()
        if args.reuse and kept is not None and m.Episode.objects.filter(study=kept).count() == size:
            timings = compute_analyses(kept, args.rounds)
            print(f"{label}: reusing {size} episodes from an earlier run; analyses not yet stored: "
                  + (", ".join(f"{kind} {seconds:.1f}s" for kind, seconds in timings.items()) or "none"))
            studies[label] = kept
            continue
        m.Study.objects.filter(slug=slug).delete()
        started = time.perf_counter()
        with transaction.atomic():
            study = build_study(slug, size, seed)
        build = time.perf_counter() - started
        timings = compute_analyses(study, args.rounds)
        episodes = m.Episode.objects.filter(study=study).count()
        print(f"{label}: {episodes} episodes built in {build:.1f}s; stored analyses (Celery jobs, not requests): "
              + ", ".join(f"{kind} {seconds:.1f}s" for kind, seconds in timings.items()))
        studies[label] = study

    client = Client()
    client.force_login(user)
    rows = []
    # Plain static storage: the bench measures views, not whether collectstatic has been run.
    plain_static = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
    with override_settings(STORAGES={**django.conf.settings.STORAGES, "staticfiles": plain_static}):
        for page in PAGES:
            result = {}
            for label, study in studies.items():
                url = reverse("dashboard:index") if page == "index" else reverse(f"dashboard:{page}", args=[study.slug])
                result[label] = measure(client, url, args.repeat)
            rows.append((page, result))
    print()
    print(f"{'page':<15}{'small ms':>10}{'queries':>9}{'large ms':>10}{'queries':>9}  target <= 300 ms, equal queries")
    for page, result in rows:
        (s_ms, s_q), (l_ms, l_q) = result["small"], result["large"]
        verdict = "ok" if l_ms <= 300 and s_q == l_q else "CHECK"
        print(f"{page:<15}{s_ms:>10.1f}{s_q:>9}{l_ms:>10.1f}{l_q:>9}  {verdict}")
    if not args.keep:
        for study in studies.values():
            study.delete()


if __name__ == "__main__":
    main()
