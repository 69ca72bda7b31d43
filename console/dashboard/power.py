"""The leaderboard's design panel: the pairing mode (switchable, audited), the stopping-rule estimate -- how
many more episodes (one worker doing one task with one agent) until the ranking is settled, under each design --
and planning for a study without data.

Estimates run as background jobs (the dashboard's job mechanism, with progress); the page only shows the
stored result for the current posterior, or an older one marked as such.
"""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.db import transaction

from console.dashboard.exceptions import JobRefused
from console.dashboard.services import ProgressReporter, _job_execute, _user_or_none
from console.task_names import RUN_POWER
from pairing import design
from pairing.services import DESIGN_PRIOR, design_posterior_refresh, posterior_cache_key
from rating import selectors as rating_selectors
from studies.models import BackgroundJob, Study
from studies.task_sending import send_task_on_commit

POWER_KINDS = ("power", "plan")
GOAL_LABELS = {
    "top": "the top agent is identified",
    "ranking": "the full ranking is right",
    "adjacent": "every adjacent pair is in the right order",
}
# Simulation sizes: 100 futures give the 10/50/90 % quantiles; the horizon caps the work of one estimate.
ESTIMATE = {"futures": 100, "max_sessions": 5_000, "refresh_every": 10, "target": 0.95}
# What the bench (bench/adaptive_design.py) measured at paper-like settings, shown next to the repeat limit so the
# setting's consequence is stated where it is chosen (5 agents, 5 tasks per worker, 6 000 studies).
RECOMMENDED_REPEAT_LIMIT = 2
PLAN_LIMITS = {"n_agents": (2, 200), "agent_sd": (0.1, 50.0), "human_sd": (0.0, 50.0), "noise_sd": (0.1, 100.0),
               "studies": (20, 400), "max_sessions": (100, 50_000)}


def _progress(reporter: ProgressReporter) -> Any:
    def report(fraction: float) -> None:
        reporter(int(round(1000 * fraction)), 1000)
    return report


def power_request(*, study: Study, actor: Any) -> BackgroundJob:
    """Return the stopping-rule estimate job for the study's current posterior, creating it if needed."""
    snapshot = rating_selectors.latest_snapshot(study)
    if snapshot is None:
        raise JobRefused("There is no data yet: use planning instead.")
    key = f"power:v{snapshot.version}"
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).first()
        existing = (BackgroundJob.objects.filter(study=study, kind="power", cache_key=key)
                    .exclude(status=BackgroundJob.Status.FAILED).order_by("-created_at").first())
        if existing is not None:
            return existing
        job = BackgroundJob.objects.create(kind="power", study=study, requested_by=_user_or_none(actor),
                                           params={"snapshot_version": snapshot.version, **ESTIMATE}, cache_key=key)
        send_task_on_commit(RUN_POWER, [job.pk])
    return job


def plan_defaults(study: Study) -> dict[str, Any]:
    """Planning inputs: the study's agents; spreads from the calibrated fit of the most recent earlier study
    that has one cached, else the planning prior."""
    n_agents = study.agents.filter(is_active=True).count() or 5
    spreads = {k: DESIGN_PRIOR[k] for k in ("agent_sd", "human_sd", "noise_sd")}
    source = "the planning prior"
    for study_id, name in rating_selectors.studies_with_snapshots_newest_first(exclude=study):
        fitted = cache.get(posterior_cache_key(study_id))
        if fitted:
            spreads = {k: round(float(fitted[k]), 2) for k in ("agent_sd", "human_sd", "noise_sd")}
            source = f"the calibrated fit of “{name}”"
            break
    return {"n_agents": n_agents, **spreads, "studies": 100, "max_sessions": 20_000, "source": source}


def plan_params_clean(data: dict[str, Any]) -> dict[str, Any]:
    """Return validated planning inputs or raise JobRefused naming the bad field."""
    out: dict[str, Any] = {}
    for name, (low, high) in PLAN_LIMITS.items():
        raw = data.get(name)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise JobRefused(f"{name.replace('_', ' ')}: enter a number.") from None
        if not low <= value <= high:
            raise JobRefused(f"{name.replace('_', ' ')}: must be between {low:g} and {high:g}.")
        out[name] = int(value) if name in ("n_agents", "studies", "max_sessions") else value
    out["human_sd"] = max(out["human_sd"], 1e-6)
    return out


def plan_request(*, study: Study, actor: Any, params: dict[str, Any]) -> BackgroundJob:
    """Create and enqueue a planning job for a study (sessions and workers needed, per design)."""
    clean = plan_params_clean(params)
    with transaction.atomic():
        job = BackgroundJob.objects.create(kind="plan", study=study, requested_by=_user_or_none(actor),
                                           params={**clean, "tasks_per_worker": study.tasks_per_session})
        send_task_on_commit(RUN_POWER, [job.pk])
    return job


def power_job_run(*, job_id: int) -> BackgroundJob | None:
    """Run a stopping-rule estimate or a plan for its job, reporting progress into the row."""

    def work(job: BackgroundJob, reporter: ProgressReporter) -> dict[str, Any]:
        study = job.study
        reporter(0, 1000)
        if job.kind == "plan":
            p = job.params
            plan = design.plan_study(
                n_agents=p["n_agents"], agent_sd=p["agent_sd"], human_sd=p["human_sd"], noise_sd=p["noise_sd"],
                tasks_per_worker=p["tasks_per_worker"], studies=p["studies"], max_sessions=p["max_sessions"],
                max_per_worker=study.design_repeat_limit, floor=study.design_floor, seed=0,
                progress=_progress(reporter),
            )
            return plan.to_dict()
        if job.kind != "power":
            raise JobRefused(f"Job kind “{job.kind}” is not a design estimate.")
        posterior = design_posterior_refresh(study_id=study.pk)
        if posterior is None:
            raise JobRefused("The study has no active observations yet.")
        result = design.sessions_to_target(
            posterior["mu"], posterior["cov"], human_sd=posterior["human_sd"], noise_sd=posterior["noise_sd"],
            goals=tuple(GOAL_LABELS), target=job.params.get("target", ESTIMATE["target"]),
            tasks_per_worker=study.tasks_per_session, max_per_worker=study.design_repeat_limit,
            floor=study.design_floor, futures=job.params.get("futures", ESTIMATE["futures"]),
            max_sessions=job.params.get("max_sessions", ESTIMATE["max_sessions"]),
            refresh_every=job.params.get("refresh_every", ESTIMATE["refresh_every"]), seed=0,
            progress=_progress(reporter),
        )
        result.update(snapshot_version=job.params.get("snapshot_version"), n_observations=posterior["n_observations"],
                      human_sd=posterior["human_sd"], noise_sd=posterior["noise_sd"])
        return result

    return _job_execute(job_id, work)


def _rows(goals: dict[str, Any], now: dict[str, float], current: str) -> list[dict[str, Any]]:
    rows = []
    for goal, per_mode in goals.items():
        for mode in design.DESIGN_MODES:
            q = per_mode.get(mode)
            if q is not None:
                rows.append({"goal": GOAL_LABELS.get(goal, goal), "goal_key": goal, "now": now.get(goal), "mode": mode,
                             "current": mode == current, **q})
    return rows


def _equal_goals(rows: list[dict[str, Any]]) -> list[str]:
    """Return the goals for which every design gave the same median and interval."""
    by_goal: dict[str, set[tuple[Any, ...]]] = {}
    for row in rows:
        by_goal.setdefault(row["goal_key"], set()).add((row.get("median"), row.get("low"), row.get("high")))
    return [goal for goal, values in by_goal.items() if len(values) == 1 and sum(
        1 for row in rows if row["goal_key"] == goal) > 1]


def every_worker_meets_every_agent(study: Study, n_agents: int) -> bool:
    """Return True when the repeat limit leaves no design a choice: each worker meets every agent once."""
    return study.design_repeat_limit <= 1 and 0 < n_agents <= study.tasks_per_session


def repeat_advice(study: Study) -> str:
    """Return why the designs agree when the repeat limit leaves them nothing to choose, else ''.

    With no repeats and at least as many tasks per worker as agents, every worker meets every agent whatever
    the design, so adaptive pairing cannot save a session; letting an agent take two of a worker's tasks is
    what lets it pair the leading contenders within one worker.
    """
    n_agents = study.agents.filter(is_active=True).count()
    if not every_worker_meets_every_agent(study, n_agents):
        return ""
    return (f"With {study.tasks_per_session} tasks per worker, {n_agents} agents and a repeat limit of 1, every "
            "worker meets every agent whatever the design, so uniform, balanced and adaptive pairing assign the same "
            f"pairs and need the same number of episodes. To let adaptive pairing save episodes, allow "
            f"{RECOMMENDED_REPEAT_LIMIT} tasks per worker with one agent: in simulated studies like the paper's "
            "(5 agents, 5 tasks) that saves about 30 % of the episodes (median 30 %, 95 % interval 27-33 %). A limit "
            "of 3 with a floor of 0.1 saves about 34 % (31-37 %), at the price of more repetition for a worker and "
            "assignment probabilities down to 0.02 (inverse-probability weights up to 50).")


def power_context(study: Study) -> dict[str, Any]:
    """Return what the design panel shows: mode, the latest estimate (current or older), jobs in progress, plans."""
    snapshot = rating_selectors.latest_snapshot(study)
    jobs = BackgroundJob.objects.filter(study=study, kind__in=POWER_KINDS).order_by("-created_at")
    latest_power = jobs.filter(kind="power").first()
    done_power = jobs.filter(kind="power", status=BackgroundJob.Status.DONE).first()
    latest_plan = jobs.filter(kind="plan").first()
    done_plan = jobs.filter(kind="plan", status=BackgroundJob.Status.DONE).first()
    running = [job for job in (latest_power, latest_plan)
               if job is not None and job.status in (BackgroundJob.Status.QUEUED, BackgroundJob.Status.RUNNING)]
    estimate = None
    if done_power is not None and done_power.result:
        result = done_power.result
        estimate = {
            "rows": _rows(result.get("goals", {}), result.get("now", {}), study.design_mode),
            "target": result.get("target"), "futures": result.get("futures"),
            "snapshot_version": result.get("snapshot_version"),
            "stale": snapshot is not None and result.get("snapshot_version") != snapshot.version,
            "max_sessions": ESTIMATE["max_sessions"],
        }
        estimate["equal_goals"] = _equal_goals(estimate["rows"])
    plan = None
    if done_plan is not None and done_plan.result:
        plan = {"settings": done_plan.result["settings"], "rows": [
            {"mode": mode, "current": mode == study.design_mode, **values}
            for mode, values in done_plan.result["modes"].items()
        ]}
    failed = next((job for job in (latest_power, latest_plan) if job and job.status == BackgroundJob.Status.FAILED),
                  None)
    return {
        "design_mode": study.design_mode, "design_modes": Study.DesignMode.choices, "floor": study.design_floor,
        "repeat_limit": study.design_repeat_limit, "has_data": snapshot is not None, "estimate": estimate,
        "plan": plan, "running": running, "failed": failed, "plan_defaults": plan_defaults(study),
        "repeat_advice": repeat_advice(study), "n_agents": study.agents.filter(is_active=True).count(),
        "tasks_per_session": study.tasks_per_session, "mode_labels": dict(Study.DesignMode.choices),
    }
