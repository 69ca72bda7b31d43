"""The preference analysis of a study: its blind expert rankings and its rubric scores fitted jointly by the
preference model (:mod:`rating.preferences`), the JSON-ready result stored as a background job's result
(console/dashboard/services.py) so the "Comparisons" page, the staff API and the exports only read it.

It lives in the experts app, not in ``rating/services``, because it reads comparison sets (experts) and the
import contract keeps ``rating`` below ``experts``.

Deliverables get stable ids in the model input: ``e<pk>`` for an episode, ``s<pk>`` for a solo-agent run (a
``SoloRun`` is not an episode and the two pk sequences overlap). Arms are mapped from the comparison selectors'
names (``human_agent``/``human_alone``/``agent_alone``) to the model's (``with_agent``/``worker_alone``/
``agent_alone``); the episode's condition decides, so a solo-condition episode is the worker alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from experts.comparison_selectors import SubmittedComparison, study_submitted_comparisons
from experts.models import ComparisonItem
from rating.models import GradeObservation
from rating.preferences import (
    ComparisonRow,
    EpisodeRow,
    PreferenceInputError,
    PreferenceSpec,
    ScoreRow,
    preference_agreement,
    preference_fit,
)
from studies.models import Agent, Episode, SoloRun, Study

# The score of an episode with no per-grader row in the grade ledger, and of a solo run (runs have no ledger).
EPISODE_SCORE_GRADER = "episode score"
SOLO_RUN_SCORE_GRADER = "solo-run score"
MODEL_ARM = {"human_agent": "with_agent", "human_alone": "worker_alone", "agent_alone": "agent_alone"}


@dataclass(frozen=True)
class PreferenceRows:
    """The model's input built from the database, and what each deliverable id stands for."""

    episodes: list[EpisodeRow]
    scores: list[ScoreRow]
    comparisons: list[ComparisonRow]
    sources: dict[str, dict[str, Any]]


def episode_key(pk: int) -> str:
    return f"e{pk}"


def solo_run_key(pk: int) -> str:
    return f"s{pk}"


def expert_key(expert_id: int) -> str:
    """The comparing expert's id, spelled like an expert grader in the grade ledger (``expert:<profile pk>``)."""
    return f"expert:{expert_id}"


def _compared(study: Study) -> tuple[set[int], set[int]]:
    items = ComparisonItem.objects.filter(comparison_set__study=study)
    return (set(items.filter(episode__isnull=False).values_list("episode_id", flat=True)),
            set(items.filter(solo_run__isnull=False).values_list("solo_run_id", flat=True)))


def _agent_labels(agent_ids: set[int]) -> dict[int, str]:
    """Agent names label the arms; two agents of one name get their id added so their arms stay apart."""
    names = dict(Agent.objects.filter(pk__in=agent_ids).values_list("pk", "name"))
    return {pk: (f"{name} (#{pk})" if list(names.values()).count(name) > 1 else name) for pk, name in names.items()}


def _episode_rows(study: Study, compared: set[int], labels: dict[int, str]) -> tuple[list[EpisodeRow], dict]:
    """Scored or graded episodes of the study (not gold, not skipped) and every compared episode."""
    graded = GradeObservation.objects.filter(study=study, active=True).values("episode_id")
    rows = (Episode.objects.filter(study=study, is_gold=False).exclude(status=Episode.Status.SKIPPED)
            .filter(score__isnull=False) | Episode.objects.filter(pk__in=graded, study=study, is_gold=False)
            | Episode.objects.filter(pk__in=compared))
    out, sources = [], {}
    for pk, agent_id, condition, participant_id, task_id in rows.distinct().order_by("pk").values_list(
            "pk", "agent_id", "condition", "participant_id", "task_id"):
        alone = agent_id is None or condition == Episode.Condition.SOLO
        arm = "worker_alone" if alone else "with_agent"
        out.append(EpisodeRow(episode_key(pk), arm, task_id, None if alone else labels[agent_id], participant_id))
        sources[episode_key(pk)] = {"kind": "episode", "id": pk, "arm": arm}
    return out, sources


def _solo_rows(study: Study, compared: set[int], labels: dict[int, str]) -> tuple[list[EpisodeRow], dict]:
    runs = (SoloRun.objects.filter(study=study, score__isnull=False) | SoloRun.objects.filter(pk__in=compared))
    out, sources = [], {}
    for pk, agent_id, task_id in runs.distinct().order_by("pk").values_list("pk", "agent_id", "task_id"):
        out.append(EpisodeRow(solo_run_key(pk), "agent_alone", task_id, labels[agent_id], None))
        sources[solo_run_key(pk)] = {"kind": "solo_run", "id": pk, "arm": "agent_alone"}
    return out, sources


def _score_rows(study: Study, episode_ids: set[int], run_ids: set[int]) -> list[ScoreRow]:
    """Per-grader rubric scores from the grade ledger (judges and experts); the episode's own score where the
    ledger has no row for it; a solo run's score."""
    out, in_ledger = [], set()
    for episode_id, grader, y in (GradeObservation.objects.filter(study=study, active=True, episode_id__in=episode_ids)
                                  .order_by("episode_id", "grader").values_list("episode_id", "grader", "y")):
        out.append(ScoreRow(episode_key(episode_id), float(y), grader))
        in_ledger.add(episode_id)
    for pk, score in (Episode.objects.filter(pk__in=episode_ids - in_ledger, score__isnull=False)
                      .order_by("pk").values_list("pk", "score")):
        out.append(ScoreRow(episode_key(pk), float(score or 0.0), EPISODE_SCORE_GRADER))  # filtered: never None
    for pk, score in SoloRun.objects.filter(pk__in=run_ids, score__isnull=False).order_by("pk").values_list(
            "pk", "score"):
        out.append(ScoreRow(solo_run_key(pk), float(score or 0.0), SOLO_RUN_SCORE_GRADER))  # filtered: never None
    return out


def _comparison_row(comparison: SubmittedComparison) -> ComparisonRow:
    shown = comparison.shown
    ids = tuple(episode_key(d.episode_id) if d.episode_id else solo_run_key(d.solo_run_id or 0) for d in shown)
    lengths = [d.length_chars for d in shown]
    return ComparisonRow(
        set_id=comparison.set_id, expert_id=expert_key(comparison.expert_id), episode_ids=ids,
        positions=tuple(d.position for d in shown), ranks=tuple(d.rank for d in shown),
        lengths=tuple(float(n or 0) for n in lengths) if all(n for n in lengths) else None)


def preference_rows(study: Study) -> PreferenceRows:
    """Build the preference model's input rows of the study from the database."""
    submitted = study_submitted_comparisons(study)
    compared_episodes, compared_runs = _compared(study)
    agents = set(Episode.objects.filter(study=study, agent__isnull=False).values_list("agent_id", flat=True))
    agents |= set(SoloRun.objects.filter(study=study).values_list("agent_id", flat=True))
    labels = _agent_labels(agents)
    episodes, sources = _episode_rows(study, compared_episodes, labels)
    runs, run_sources = _solo_rows(study, compared_runs, labels)
    scores = _score_rows(study, {s["id"] for s in sources.values()}, {s["id"] for s in run_sources.values()})
    return PreferenceRows(episodes + runs, scores, [_comparison_row(c) for c in submitted], sources | run_sources)


def study_preferences(study: Study, *, level: float = 0.95) -> dict[str, Any]:
    """Fit the study's rankings and scores and return the JSON-ready result the page, API and exports read.

    Rows the model refuses (too few scores to fit, a set with one deliverable, ...) give ``error`` and
    ``not_identifiable["model"]`` with the model's reason and no fit; the agreement counts stay when they can.
    """
    rows = preference_rows(study)
    base: dict[str, Any] = {
        "level": level, "n_comparisons": len(rows.comparisons), "n_episodes": len(rows.episodes),
        "n_solo_runs": sum(1 for s in rows.sources.values() if s["kind"] == "solo_run"),
        "n_scores": len(rows.scores), "fit": None, "agreement": None, "error": None, "not_identifiable": {},
    }
    if not rows.comparisons:
        return base | {"not_identifiable": {"win_rates": "no comparison is submitted yet"}}
    try:   # the agreement needs no fit, so it is there even when the rankings are too few to fit
        agreement = preference_agreement(rows.episodes, rows.scores, rows.comparisons, level=level)
    except PreferenceInputError as exc:
        return base | {"error": str(exc), "not_identifiable": {"model": str(exc)}}
    try:
        fit = preference_fit(rows.episodes, rows.scores, rows.comparisons, PreferenceSpec(level=level))
    except PreferenceInputError as exc:
        return base | {"agreement": agreement, "error": str(exc), "not_identifiable": {"model": str(exc)}}
    result = fit.to_dict()
    return base | {"fit": result, "agreement": agreement, "not_identifiable": dict(result["not_identifiable"])}
