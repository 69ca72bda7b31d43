"""Reads behind the staff dashboard.

Every function aggregates in the database (annotate / values / Count / Subquery) or reads a bounded page
of rows, so a page's query count does not grow with the number of episodes. Long analyses are never run
here: pages read the result a background job stored under a cache key derived from the data it used.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

from django.core.paginator import Page, Paginator
from django.db.models import (
    Count,
    DecimalField,
    Max,
    Min,
    OuterRef,
    Q,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Coalesce
from django.utils import timezone

from console.dashboard import counts
from console.jobs import tom_cache_key
from experts.comparison_selectors import preferences_fingerprint
from grading.models import EpisodeTranscript, FluencyCoding, JudgeRun, LLMUsage
from grading.selectors import episodes_held
from rating import selectors as rating_selectors
from rating.conf import rating_settings
from rating.models import EntityRating, RatingSnapshot
from rating.synergy_episodes import synergy_fingerprint
from studies.models import Agent, BackgroundJob, Episode, Participant, Sector, SoloRun, Study
from studies.roles import file_jobs_visible
from studies.task_choice import participants_with_task
from surveys.selectors import answers_fingerprint

ANALYSIS_KINDS = ("stability", "surveys", "collaboration", "graders", "synergy", "tom", "preferences")
FILE_JOB_KINDS = ("export", "payouts")
STALE_AFTER = dt.timedelta(hours=24)
MONITOR_LIMIT = 50
# The monitor's rows per page: each row carries its own action forms, so 50 of them made the overview a
# 200 KB page at 2 000 participants; the step table above it still counts everyone.
MONITOR_PAGE_SIZE = 20
FAILED_LIMIT = 50
HUMANS_PER_PAGE = 50

# The participant journey in order; "reached" counts everyone at or past a step.
FUNNEL = (
    Participant.Status.INVITED,
    Participant.Status.CONSENTED,
    Participant.Status.PRE_SURVEY,
    Participant.Status.WORKING,
    Participant.Status.POST_SURVEY,
    Participant.Status.COMPLETE,
)
ACTIVE_STEPS = (
    Participant.Status.CONSENTED,
    Participant.Status.PRE_SURVEY,
    Participant.Status.WORKING,
    Participant.Status.POST_SURVEY,
)
OPEN_EPISODE = (Episode.Status.ASSIGNED, Episode.Status.IN_PROGRESS)


def bootstrap_rounds() -> int:
    """Return the configured number of bootstrap rounds (paper: 10 000)."""
    return int(rating_settings()["BOOTSTRAP_ROUNDS"])


# ------------------------------------------------------------------------------------------ studies


def study_list() -> list[dict[str, Any]]:
    """Return every study with its participant and episode counts (three queries)."""
    studies = list(Study.objects.order_by("-created_at"))
    participants, episodes = counts.participant_totals(studies), counts.episode_totals(studies)
    return [
        {"study": study, "participants": participants.get(study.pk, 0), "episodes": episodes.get(study.pk, 0)}
        for study in studies
    ]


def study_get(slug: str) -> Study | None:
    """Return the study with this slug, or None (the view decides what a missing study answers)."""
    return Study.objects.filter(slug=slug).first()


# -------------------------------------------------------------------------------------------- overview


def funnel(study: Study) -> dict[str, Any]:
    """Return participants currently at each step and how many reached it (one query)."""
    current = counts.participants_by_status(study)
    withdrawn = current.get(Participant.Status.WITHDRAWN, 0)
    declined = current.get(Participant.Status.DECLINED, 0)
    rows = []
    for index, status in enumerate(FUNNEL):
        reached = sum(current.get(later, 0) for later in FUNNEL[index:])
        # Withdrawal needs consent first, so a withdrawn person reached "consented"; a decliner only "invited".
        if index <= FUNNEL.index(Participant.Status.CONSENTED):
            reached += withdrawn
        if index == 0:
            reached += declined
        rows.append({"status": status, "label": status.label, "current": current.get(status, 0), "reached": reached})
    return {
        "steps": rows,
        "withdrawn": withdrawn,
        "declined": declined,
        "total": sum(current.values()),
    }


WAITING = (Episode.Status.SUBMITTED, Episode.Status.GRADING)
SUBMITTED = (Episode.Status.SUBMITTED, Episode.Status.GRADING, Episode.Status.GRADED, Episode.Status.FAILED)


def episode_breakdown(study: Study) -> dict[str, Any]:
    """Return episode counts by (agent, sector, status) in one scan, the names behind the ids and the tasks per
    sector (four queries).

    Progress tables and grading-queue counts are all sums over these few rows, so the episode table is read
    once per page however many episodes there are.
    """
    rows = list(
        Episode.objects.filter(study=study)
        .values("agent_id", "task__sector_id", "status")
        .annotate(
            n=Count("pk"),
            review=Count("pk", filter=Q(needs_expert_review=True)),
            oldest=Min("submitted_at", filter=Q(status__in=WAITING)),
        )
        .order_by()
    )
    agents = dict(Agent.objects.filter(pk__in={row["agent_id"] for row in rows}).values_list("pk", "name"))
    sectors = dict(Sector.objects.filter(pk__in={row["task__sector_id"] for row in rows}).values_list("pk", "name"))
    return {"rows": rows, "agents": agents, "sectors": sectors, "tasks_by_sector": counts.tasks_by_sector(study)}


def _progress_rows(breakdown: dict[str, Any], by: str) -> list[dict[str, Any]]:
    names = breakdown["agents"] if by == "agent" else breakdown["sectors"]
    key = "agent_id" if by == "agent" else "task__sector_id"
    groups: dict[str, dict[str, Any]] = {}
    for row in breakdown["rows"]:
        label = names.get(row[key], "") or ("Solo (no agent)" if by == "agent" and row[key] is None else "")
        group = groups.setdefault(
            label, {"label": label, "total": 0, "open": 0, "submitted": 0, "graded": 0, "skipped": 0, "failed": 0}
        )
        n, status = row["n"], row["status"]
        group["total"] += n
        group["open"] += n if status in OPEN_EPISODE else 0
        group["submitted"] += n if status in SUBMITTED else 0
        group["graded"] += n if status == Episode.Status.GRADED else 0
        group["skipped"] += n if status == Episode.Status.SKIPPED else 0
        group["failed"] += n if status == Episode.Status.FAILED else 0
    result = sorted(groups.values(), key=lambda group: group["label"])
    if by == "sector":
        # "Tasks" are the study's task instances in the sector; "total" counts episodes (a task is done many times).
        tasks = breakdown.get("tasks_by_sector", {})
        by_label = {names.get(sector_id, ""): n for sector_id, n in tasks.items()}
        for group in result:
            group["tasks"] = by_label.get(group["label"], 0)
    for group in result:
        group["percent"] = round(100 * group["graded"] / group["total"]) if group["total"] else 0
    return result


def progress_by_sector(study: Study, breakdown: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Return episode counts by status for each task sector."""
    return _progress_rows(breakdown or episode_breakdown(study), "sector")


def progress_by_agent(study: Study, breakdown: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Return episode counts by status for each agent."""
    return _progress_rows(breakdown or episode_breakdown(study), "agent")


def monitor(study: Study, *, now: dt.datetime | None = None, limit: int = MONITOR_PAGE_SIZE,
            page: int = 1) -> dict[str, Any]:
    """Return who is where in the journey, how long since they were last active, stalest first, ``limit``
    people on page ``page`` (clamped to the pages there are; three queries whatever the page)."""
    now = now or timezone.now()
    stale_before = now - STALE_AFTER
    active = Participant.objects.filter(study=study, status__in=ACTIVE_STEPS).annotate(
        seen=Coalesce("last_activity_at", "created_at")
    )
    steps = {
        row["status"]: row
        for row in active.values("status")
        .annotate(n=Count("pk"), stale=Count("pk", filter=Q(seen__lt=stale_before)), oldest=Min("seen"))
        .order_by()
    }
    step_rows = []
    for status in ACTIVE_STEPS:
        row = steps.get(status, {"n": 0, "stale": 0, "oldest": None})
        step_rows.append(
            {
                "status": status,
                "label": status.label,
                "n": row["n"],
                "stale": row["stale"],
                "longest_idle": (now - row["oldest"]) if row["oldest"] else None,
            }
        )
    total = sum(row["n"] for row in step_rows)
    pages = max(1, -(-total // limit))
    page = min(max(1, page), pages)
    offset = (page - 1) * limit
    people = list(active.order_by("seen", "pk").values("pk", "pseudonym", "status", "seen")[offset:offset + limit])
    # The open task of just these participants: one more query, whatever the size of the study.
    open_tasks: dict[int, Mapping[str, Any]] = {}
    episode: Mapping[str, Any]
    for episode in (
        Episode.objects.filter(participant_id__in=[person["pk"] for person in people], status__in=OPEN_EPISODE)
        .order_by("participant_id", "position")
        .values("pk", "participant_id", "status", "position", "deadline_at", "agent_id", "agent__name", "task__title")
    ):
        open_tasks.setdefault(episode["participant_id"], episode)
    for person in people:
        episode = open_tasks.get(person["pk"], {})
        person.update(
            episode_id=episode.get("pk"), episode_status=episode.get("status"),
            episode_position=episode.get("position"), episode_deadline=episode.get("deadline_at"),
            episode_agent=episode.get("agent__name"), episode_agent_id=episode.get("agent_id"),
            episode_task=episode.get("task__title"),
        )
    for person in people:
        person["idle"] = now - person["seen"] if person["seen"] else None
        person["stale"] = bool(person["seen"] and person["seen"] < stale_before)
        person["status_label"] = Participant.Status(person["status"]).label
        person["overdue"] = bool(person["episode_deadline"] and person["episode_deadline"] < now)
        if person["episode_status"]:
            person["episode_status_label"] = Episode.Status(person["episode_status"]).label
    stale_hours = int(STALE_AFTER.total_seconds() // 3600)
    return {"steps": step_rows, "people": people, "limit": limit, "stale_hours": stale_hours, "page": page,
            "pages": pages, "total": total, "first": offset + 1 if people else 0, "last": offset + len(people)}


def stranded_workers(study: Study, *, limit: int = MONITOR_LIMIT) -> list[dict[str, Any]]:
    """Participants on the task step with no open task, fewer tasks than the session asks, and no task that
    can still be matched to them: they are waiting for nothing unless staff act (add tasks or fallbacks)."""
    # Under the "all submitted" gate a skipped task is replaced, so only submitted ones count as done.
    counted = (~Q(status=Episode.Status.SKIPPED)
               if study.post_survey_gate == Study.PostSurveyGate.ALL_SUBMITTED else Q())
    # Per participant, two counts over its own few episodes, found by the episode-by-participant index alone (the
    # conditions are in the counts, not in the lookup). The earlier anti-join on open episodes plus a grouped
    # count was planned, once the tables' statistics lagged behind a launch's inserts, as a loop over every open
    # episode of the study per participant: seconds at a few thousand participants. Scalar subqueries are never
    # turned into joins, so this costs the same whatever the planner believes.
    def tally(condition: Q) -> Coalesce:
        rows = Episode.objects.filter(participant=OuterRef("pk")).order_by().values("participant")
        return Coalesce(Subquery(rows.annotate(n=Count("pk", filter=condition)).values("n")), 0)

    window = list(
        Participant.objects.filter(study=study, status=Participant.Status.WORKING, is_simulated=False)
        .annotate(busy=tally(Q(status__in=OPEN_EPISODE)), done=tally(counted))
        .filter(busy=0, done__lt=study.tasks_per_session)
        .select_related("study", "occupation", "occupation__sector")
        .order_by("last_activity_at", "pk")[: limit * 4]
    )
    # One set-based answer for the whole page: asking the matching rule worker by worker cost five queries each
    # (777 with a launch's crowd waiting).
    matchable = participants_with_task(study=study, participants=window)
    stranded = []
    for participant in window:
        if participant.pk in matchable:
            continue
        occupation = participant.occupation
        stranded.append({
            "pk": participant.pk, "pseudonym": participant.pseudonym, "done": participant.done,
            "occupation": occupation.title if occupation else "—",
            "sector": occupation.sector.name if occupation and occupation.sector else "—",
            "seen": participant.last_activity_at,
        })
        if len(stranded) >= limit:
            break
    return stranded


def grading_queue(
    study: Study, *, limit: int = FAILED_LIMIT, breakdown: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Return queue counts, the oldest waiting submission and failed episodes with reasons."""
    breakdown = breakdown or episode_breakdown(study)
    counts: dict[str, Any] = {"submitted": 0, "grading": 0, "failed": 0, "graded": 0, "needs_review": 0}
    oldest = None
    for row in breakdown["rows"]:
        if row["status"] in counts:
            counts[row["status"]] += row["n"]
        counts["needs_review"] += row["review"]
        if row["oldest"] is not None and (oldest is None or row["oldest"] < oldest):
            oldest = row["oldest"]
    held = episodes_held(study)
    counts["held"] = held.count()
    counts["held_episodes"] = list(held.values("pk", "participant__pseudonym", "grading_note")[:limit])
    runs = dict(
        JudgeRun.objects.filter(episode__study=study).values("status").annotate(n=Count("pk"))
        .values_list("status", "n").order_by()
    )
    last_error = JudgeRun.objects.filter(episode=OuterRef("pk"), status=JudgeRun.Status.FAILED).order_by("-created_at")
    failed = list(
        Episode.objects.filter(study=study, status=Episode.Status.FAILED)
        .annotate(
            judge_error=Subquery(last_error.values("error")[:1]),
            judge_model=Subquery(last_error.values("model")[:1]),
        )
        .order_by("-updated_at")
        .values(
            "pk", "participant__pseudonym", "agent__name", "task__title", "grading_note", "updated_at",
            "judge_error", "judge_model",
        )[:limit]
    )
    failed_runs = list(
        JudgeRun.objects.filter(episode__study=study, status=JudgeRun.Status.FAILED)
        .order_by("-created_at")
        .values("pk", "episode_id", "provider", "model", "attempts", "error", "created_at")[:20]
    )
    # Why submissions wait: the pipeline records the reason (no judge key, budget reached, …) on each one.
    waiting_reasons = list(
        Episode.objects.filter(study=study, status=Episode.Status.SUBMITTED, is_simulated=False)
        .values("grading_note").annotate(n=Count("pk")).order_by("-n", "grading_note")[:10]
    )
    return {
        **counts,
        "waiting_reasons": [
            {"reason": row["grading_note"] or "Not picked up yet: the grading sweep starts it within 15 minutes "
                                              "(or at once when a worker is running).", "n": row["n"]}
            for row in waiting_reasons
        ],
        "oldest_waiting": (timezone.now() - oldest) if oldest else None,
        # Labelled by what each status means: a judge run "waiting" is not a submission waiting to be graded.
        "judge_runs": {status.label: runs.get(status.value, 0) for status in JudgeRun.Status},
        "failed_episodes": failed,
        "failed_runs": failed_runs,
        "limit": limit,
    }


def llm_spend(study: Study) -> dict[str, Any]:
    """Return LLM cost by purpose against the study's budget (one query)."""
    zero = Value(Decimal("0"), output_field=DecimalField(max_digits=16, decimal_places=6))
    rows = list(
        LLMUsage.objects.filter(study=study)
        .values("purpose")
        .annotate(
            cost=Coalesce(Sum("cost_usd"), zero),
            calls=Count("pk"),
            failed=Count("pk", filter=Q(succeeded=False)),
            input_tokens=Coalesce(Sum("input_tokens"), 0),
            output_tokens=Coalesce(Sum("output_tokens"), 0),
        )
        .order_by("purpose")
    )
    labels = dict(LLMUsage.Purpose.choices)
    for row in rows:
        row["label"] = labels.get(row["purpose"], row["purpose"])
    total = sum((row["cost"] for row in rows), Decimal("0"))
    budget = study.llm_budget_usd
    percent = float(100 * total / budget) if budget else None
    return {
        "rows": rows,
        "total": total,
        "budget": budget,
        "percent": percent,
        "over_budget": bool(budget is not None and total >= budget),
    }


def overview(study: Study) -> dict[str, Any]:
    """Return everything the overview page shows (the episode table is scanned once)."""
    breakdown = episode_breakdown(study)
    return {
        "funnel": funnel(study),
        "by_sector": progress_by_sector(study, breakdown),
        "by_agent": progress_by_agent(study, breakdown),
        "monitor": monitor(study),
        "stranded": stranded_workers(study),
        "queue": grading_queue(study, breakdown=breakdown),
        "spend": llm_spend(study),
        # Agents a task can be moved to: the study's own (the reassign service accepts no other).
        "agents": list(Agent.objects.filter(studies=study).order_by("name").values("pk", "name", "is_active")),
    }


# ------------------------------------------------------------------------------------------- analyses


STABILITY_CLUSTERS = ("observation", "human")


def stability_cluster(value: Any) -> str:
    """Return the bootstrap resampling unit asked for ("observation" unless "human" is named)."""
    return "human" if value == "human" else "observation"


def analysis_cache_key(
    study: Study, kind: str, snapshot: RatingSnapshot | None, *, cluster: str = "observation"
) -> str | None:
    """Return the cache key of an analysis over the study's current data, or None when there is no data.

    The key changes whenever the data behind the analysis may have changed, so a stored result is shown
    only while it still describes the data.
    """
    version = snapshot.version if snapshot else 0
    if kind == "stability":
        if snapshot is None:
            return None
        # The model is part of the key: switching it makes the stored result stale even before a refresh.
        suffix = "" if cluster == "observation" else ":human"
        return f"stability:{study.pk}:v{snapshot.version}:r{bootstrap_rounds()}:{study.rating_model}{suffix}"
    if kind == "graders":
        grades = rating_selectors.grade_ledger_fingerprint(study)
        return None if grades is None else f"graders:{study.pk}:{grades}:{study.grade_reference}:k{study.rating_k}"
    if kind == "surveys":
        fingerprint = answers_fingerprint(study)
        return None if fingerprint.startswith("0-") else f"surveys:{study.pk}:v{version}:{fingerprint}"
    if kind == "collaboration":
        episodes = Episode.objects.filter(study=study, score__isnull=False, is_gold=False).aggregate(
            n=Count("pk"), s=Sum("score")
        )
        codings = FluencyCoding.objects.filter(episode__study=study, episode__is_gold=False).aggregate(
            n=Count("pk"), t=Max("created_at")
        )
        solo = SoloRun.objects.filter(study=study, score__isnull=False).aggregate(n=Count("pk"), s=Sum("score"))
        if not (episodes["n"] or codings["n"] or solo["n"]):
            return None
        stamp = int(codings["t"].timestamp()) if codings["t"] else 0
        fingerprint = f"{episodes['n']}.{round(episodes['s'] or 0, 3)}.{codings['n']}.{stamp}.{solo['n']}." + str(
            round(solo["s"] or 0, 3)
        ) + _transcripts_fingerprint(study)
        return f"collaboration:{study.pk}:v{version}:{fingerprint}"[:128]
    if kind == "synergy":
        stamp = synergy_fingerprint(study)
        return None if stamp is None else f"synergy:{study.pk}:{stamp}"[:128]
    if kind == "tom":
        return tom_cache_key(study)
    if kind == "preferences":
        stamp = preferences_fingerprint(study)
        return None if stamp is None else f"preferences:{study.pk}:{stamp}"[:128]
    raise ValueError(f"kind must be one of {ANALYSIS_KINDS}, got {kind!r}")


def _transcripts_fingerprint(study: Study) -> str:
    """Return a short stamp that changes whenever an episode's transcript is (re)parsed."""
    parsed = EpisodeTranscript.objects.filter(episode__study=study).aggregate(n=Count("pk"), t=Max("parsed_at"))
    return f".t{parsed['n']}.{int(parsed['t'].timestamp() * 1000) if parsed['t'] else 0}" if parsed["n"] else ""


@dataclass(frozen=True)
class AnalysisState:
    """What a page knows about one analysis: the current result, a job in flight, or an older result."""

    kind: str
    cache_key: str | None
    result: dict[str, Any] | None
    job: BackgroundJob | None
    stale: BackgroundJob | None
    failed: BackgroundJob | None

    @property
    def has_data(self) -> bool:
        return self.cache_key is not None


def analysis_state(
    study: Study, kind: str, snapshot: RatingSnapshot | None, *, cluster: str = "observation"
) -> AnalysisState:
    """Return the stored result for the current data, the job computing it, or the latest older result."""
    key = analysis_cache_key(study, kind, snapshot, cluster=cluster)
    jobs = list(
        BackgroundJob.objects.filter(study=study, kind=kind).order_by("-created_at")[:20]
    )
    if kind == "stability":  # an older result of the other resampling unit is not this one's stale result
        jobs = [job for job in jobs if (job.params or {}).get("cluster", "observation") == cluster]
    current = [job for job in jobs if key is not None and job.cache_key == key]
    done = next((job for job in current if job.status == BackgroundJob.Status.DONE), None)
    running = next(
        (job for job in current if job.status in (BackgroundJob.Status.QUEUED, BackgroundJob.Status.RUNNING)), None
    )
    failed = next((job for job in current if job.status == BackgroundJob.Status.FAILED), None)
    stale = None
    if done is None:
        stale = next((job for job in jobs if job.status == BackgroundJob.Status.DONE), None)
    return AnalysisState(
        kind=kind,
        cache_key=key,
        result=done.result if done else None,
        job=running,
        stale=stale,
        failed=failed if (done is None and running is None) else None,
    )


def latest_job(study: Study, kind: str) -> BackgroundJob | None:
    """Return the study's newest job of ``kind`` (for a page that shows its progress or its failure)."""
    return BackgroundJob.objects.filter(study=study, kind=kind).order_by("-created_at").first()


def job_get(study: Study, job_id: int, *, user: Any) -> BackgroundJob | None:
    """Return one of the study's jobs the user may open, or None (a job they may not open is not found)."""
    return file_jobs_visible(BackgroundJob.objects.all(), user).filter(pk=job_id, study=study).first()


def file_jobs(study: Study, *, user: Any, limit: int = 20) -> list[BackgroundJob]:
    """Return the study's recent export and payout jobs the user may open, newest first."""
    jobs = BackgroundJob.objects.filter(study=study, kind__in=FILE_JOB_KINDS)
    return list(file_jobs_visible(jobs, user).select_related("requested_by").order_by("-created_at")[:limit])


# ----------------------------------------------------------------------------------------- leaderboard


def agent_ratings(snapshot: RatingSnapshot) -> list[dict[str, Any]]:
    """Return the snapshot's agent rows in rank order."""
    return cast(list[dict[str, Any]], list(  # the stubs type values() rows as TypedDicts, which are not dicts
        rating_selectors.snapshot_ratings(snapshot, EntityRating.Kind.AGENT)
        .values("entity_id", "label", "mu", "sigma", "conservative", "n", "rank")
    ))


def human_ratings_page(snapshot: RatingSnapshot, page: int | str | None) -> Page:
    """Return one page of the snapshot's human rows in rank order (labels are pseudonyms)."""
    rows = rating_selectors.snapshot_ratings(snapshot, EntityRating.Kind.HUMAN).values(
        "entity_id", "label", "mu", "sigma", "conservative", "n", "rank"
    )
    return Paginator(rows, HUMANS_PER_PAGE).get_page(page)


def leaderboard(study: Study, page: int | str | None = None, *, cluster: str = "observation") -> dict[str, Any]:
    """Return the agent leaderboard merged with the stored stability result, and a page of humans."""
    snapshot = rating_selectors.latest_snapshot(study)
    if snapshot is None:
        return {"snapshot": None}
    state = analysis_state(study, "stability", snapshot, cluster=cluster)
    stability = state.result or (state.stale.result if state.stale else None)
    agents = agent_ratings(snapshot)
    by_agent = {row["agent_id"]: row for row in (stability or {}).get("leaderboard", [])}
    for row in agents:
        extra = by_agent.get(str(row["entity_id"]))
        row["stability"] = extra
    pairwise = None
    if stability and stability.get("pairwise"):
        ids = stability["pairwise"]["agent_ids"]
        names = stability.get("agent_names", {})
        order = sorted(range(len(ids)), key=lambda i: by_agent.get(ids[i], {}).get("rank", i))
        matrix = stability["pairwise"]["prob_greater"]
        labels = [names.get(ids[i], ids[i]) for i in order]
        ordered = [[matrix[i][j] for j in order] for i in order]
        pairwise = {
            "labels": labels,
            "matrix": ordered,
            "rows": [{"label": label, "values": values} for label, values in zip(labels, ordered, strict=True)],
        }
    names_by_id = {str(row["entity_id"]): row["label"] for row in agents}
    connectivity = snapshot.connectivity or (stability or {}).get("connectivity") or {}
    components = [
        [names_by_id.get(str(agent), str(agent)) for agent in component]
        for component in connectivity.get("components", [])
        if isinstance(component, list)
    ]
    return {
        "snapshot": snapshot,
        "agents": agents,
        "humans": human_ratings_page(snapshot, page),
        "stability": stability,
        "stability_state": state,
        "stability_is_stale": state.result is None and stability is not None,
        "pairwise": pairwise,
        "connectivity": connectivity,
        "components": components,
        "rounds": bootstrap_rounds(),
        "cluster": cluster,
        "model": rating_selectors.model_fit_summary(snapshot),
        "model_checks": (stability or {}).get("model_checks"),
    }
