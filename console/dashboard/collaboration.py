"""Collaboration analyses of one study (paper §6.2, Figure 2, Figure 3, Table 5, App. H).

- AI-fluency behaviour rates by agent, and each behaviour's point-biserial correlation with the episode
  score (plus Pearson r of the number of behaviours shown with the score).
- Collaboration vs solo: each scored episode is compared with every scored solo run of the same agent on
  the same task; a win counts 1, a tie 1/2. Win rates are grouped by the human's skill quartile.
- Collaboration vs solo score by agent (Table 5 shape).

Withdrawn or declined participants' episodes and gold QA copies are left out. Human skill is the CollabSkill
score μ − kσ of the latest posterior snapshot (computed under the study's rating model). Runs inside a
Celery job; the result is JSON.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np
import scipy.stats

from console.dashboard.transcripts import transcript_analysis
from grading.models import FluencyCoding
from rating import selectors as rating_selectors
from rating.models import EntityRating
from studies.models import Agent, Episode, Participant, SoloRun, Study

# The 11 AI Fluency Index behaviours in the order the paper lists them (App. H); unknown codes follow.
BEHAVIOUR_ORDER: tuple[str, ...] = (
    "iterates_and_refines",
    "clarifies_goal_before_asking",
    "provides_examples_of_good",
    "specifies_format_and_structure",
    "sets_interaction_mode",
    "communication_tone_and_style",
    "identifies_missing_context",
    "defines_audience",
    "questions_ai_reasoning",
    "consults_ai_on_approach",
    "checks_facts_and_claims",
)

_EXCLUDED = (Participant.Status.WITHDRAWN, Participant.Status.DECLINED)


def _float(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def behaviour_label(code: str) -> str:
    """Return a readable name for a behaviour code."""
    return code.replace("_", " ").strip().capitalize()


def _ordered_behaviours(codes: set[str]) -> list[str]:
    known = [code for code in BEHAVIOUR_ORDER if code in codes]
    return known + sorted(codes - set(known))


def _present(entry: Any) -> bool | None:
    """Return whether a coded behaviour was present; None when the coding does not say."""
    if isinstance(entry, dict):
        entry = entry.get("present", entry.get("result"))
    if isinstance(entry, bool):
        return entry
    if isinstance(entry, str) and entry.strip().lower() in {"yes", "no", "true", "false"}:
        return entry.strip().lower() in {"yes", "true"}
    return None


def point_biserial(present: np.ndarray, scores: np.ndarray) -> dict[str, Any]:
    """Return scipy's point-biserial r of a 0/1 indicator with scores, or None values and a note."""
    n = int(present.size)
    n_present = int(present.sum())
    base: dict[str, Any] = {
        "n": n,
        "n_present": n_present,
        "rate": n_present / n if n else None,
        "mean_score_present": _float(scores[present == 1].mean()) if n_present else None,
        "mean_score_absent": _float(scores[present == 0].mean()) if n - n_present else None,
    }
    if n < 3 or n_present in (0, n) or np.ptp(scores) == 0:
        reason = (
            "fewer than 3 scored episodes" if n < 3
            else "the behaviour is present in all or none of them" if n_present in (0, n)
            else "every score is the same"
        )
        return {**base, "r": None, "p_value": None, "note": f"Not computed: {reason}."}
    test = scipy.stats.pointbiserialr(present, scores)
    return {**base, "r": _float(test.statistic), "p_value": _float(test.pvalue), "note": ""}


def fluency_analysis(study: Study) -> dict[str, Any]:
    """Return behaviour rates by agent and each behaviour's correlation with the episode score."""
    rows = list(
        FluencyCoding.objects.filter(
            episode__study=study, episode__is_gold=False, is_current=True, status=FluencyCoding.Status.SUCCEEDED
        )
        .exclude(episode__participant__status__in=_EXCLUDED)
        .order_by("episode_id", "-created_at")
        .values_list("episode_id", "episode__agent__name", "episode__score", "behaviours")
    )
    seen: set[int] = set()
    codings: list[tuple[str, float | None, dict[str, bool]]] = []
    codes: set[str] = set()
    for episode_id, agent_name, score, behaviours in rows:
        if episode_id in seen:  # one current coding per episode; the newest wins if several are flagged
            continue
        seen.add(episode_id)
        flags = {}
        for code, entry in (behaviours or {}).items():
            present = _present(entry)
            if present is not None:
                flags[str(code)] = present
        codes.update(flags)
        codings.append((agent_name, score, flags))
    order = _ordered_behaviours(codes)

    by_agent: dict[str, list[dict[str, bool]]] = defaultdict(list)
    for agent_name, _score, flags in codings:
        by_agent[agent_name].append(flags)
    agents = []
    for agent_name in sorted(by_agent):
        flags_list = by_agent[agent_name]
        counts = [sum(flags.values()) for flags in flags_list]
        rates = {}
        for code in order:
            coded = [flags[code] for flags in flags_list if code in flags]
            rates[code] = sum(coded) / len(coded) if coded else None
        agents.append(
            {"agent": agent_name, "n": len(flags_list), "mean_count": float(np.mean(counts)), "rates": rates}
        )

    scored = [(score, flags) for _agent, score, flags in codings if score is not None]
    correlations = []
    for code in order:
        pairs = [(float(score), 1 if flags[code] else 0) for score, flags in scored if code in flags]
        scores = np.asarray([pair[0] for pair in pairs], dtype=float)
        present = np.asarray([pair[1] for pair in pairs], dtype=int)
        correlations.append({"behaviour": code, "label": behaviour_label(code), **point_biserial(present, scores)})

    count_corr: dict[str, Any] = {"n": len(scored), "r": None, "p_value": None, "note": ""}
    if len(scored) >= 3:
        totals = np.asarray([sum(flags.values()) for _score, flags in scored], dtype=float)
        scores = np.asarray([score for score, _flags in scored], dtype=float)
        if np.ptp(totals) > 0 and np.ptp(scores) > 0:
            test = scipy.stats.pearsonr(totals, scores)
            count_corr.update(r=_float(test.statistic), p_value=_float(test.pvalue))
        else:
            count_corr["note"] = "Not computed: the behaviour count or the score is constant."
    else:
        count_corr["note"] = "Not computed: fewer than 3 scored, coded episodes."
    return {
        "n_codings": len(codings),
        "behaviours": [{"code": code, "label": behaviour_label(code)} for code in order],
        "by_agent": agents,
        "correlations": correlations,
        "count_correlation": count_corr,
    }


def skill_quartiles(skill: dict[int, float]) -> dict[int, int]:
    """Return quartile 1-4 per participant by ascending skill (ties broken by id, groups as equal as possible)."""
    ordered = sorted(skill, key=lambda pid: (skill[pid], pid))
    n = len(ordered)
    return {pid: min(4, 1 + (4 * index) // n) for index, pid in enumerate(ordered)}


def _solo_scores(study: Study) -> dict[tuple[int, int], list[float]]:
    solo: dict[tuple[int, int], list[float]] = defaultdict(list)
    rows = SoloRun.objects.filter(study=study, score__isnull=False).values_list("task_id", "agent_id", "score")
    for task_id, agent_id, score in rows:
        solo[(task_id, agent_id)].append(float(score))
    return solo


def _scored_episodes(study: Study) -> list[tuple[int, int, int, str, float]]:
    return list(
        # Gold QA copies repeat a real session (and get a score when the study is re-recorded): never count them.
        Episode.objects.filter(study=study, score__isnull=False, is_gold=False)
        .exclude(participant__status__in=_EXCLUDED).exclude(condition=Episode.Condition.SOLO)
        .values_list("participant_id", "task_id", "agent_id", "agent__name", "score")
    )


def solo_win_rates(
    episodes: list[tuple[int, int, int, str, float]],
    solo: dict[tuple[int, int], list[float]],
    skill: dict[int, float],
) -> dict[str, Any]:
    """Return the collaboration-vs-solo win rate overall and by human skill quartile (Figure 2)."""
    comparisons: dict[int, list[float]] = defaultdict(list)
    for participant_id, task_id, agent_id, _name, score in episodes:
        if participant_id not in skill:
            continue
        for solo_score in solo.get((task_id, agent_id), ()):
            comparisons[participant_id].append(1.0 if score > solo_score else 0.5 if score == solo_score else 0.0)
    quartile = skill_quartiles({pid: skill[pid] for pid in comparisons})
    groups = []
    for q in (1, 2, 3, 4):
        members = [pid for pid, value in quartile.items() if value == q]
        outcomes = [outcome for pid in members for outcome in comparisons[pid]]
        skills = [skill[pid] for pid in members]
        groups.append(
            {
                "quartile": f"Q{q}",
                "n_participants": len(members),
                "n_comparisons": len(outcomes),
                "wins": sum(1 for outcome in outcomes if outcome == 1.0),
                "ties": sum(1 for outcome in outcomes if outcome == 0.5),
                "losses": sum(1 for outcome in outcomes if outcome == 0.0),
                "win_rate": sum(outcomes) / len(outcomes) if outcomes else None,
                "skill_min": min(skills) if skills else None,
                "skill_max": max(skills) if skills else None,
            }
        )
    everything = [outcome for values in comparisons.values() for outcome in values]
    return {
        "n_participants": len(comparisons),
        "n_comparisons": len(everything),
        "win_rate": sum(everything) / len(everything) if everything else None,
        "quartiles": groups,
    }


def collab_vs_solo_by_agent(
    study: Study,
    episodes: list[tuple[int, int, int, str, float]],
    solo: dict[tuple[int, int], list[float]],
    snapshot_ratings: dict[int, tuple[float, float]],
) -> list[dict[str, Any]]:
    """Return per agent: CollabSkill, mean collaboration score, mean solo score and matched win rate (Table 5)."""
    collab: dict[int, list[float]] = defaultdict(list)
    matched: dict[int, list[float]] = defaultdict(list)
    for _pid, task_id, agent_id, _name, score in episodes:
        collab[agent_id].append(score)
        for solo_score in solo.get((task_id, agent_id), ()):
            matched[agent_id].append(1.0 if score > solo_score else 0.5 if score == solo_score else 0.0)
    solo_by_agent: dict[int, list[float]] = defaultdict(list)
    for (_task_id, agent_id), scores in solo.items():
        solo_by_agent[agent_id].extend(scores)
    agent_ids = set(collab) | set(solo_by_agent)
    names = dict(Agent.objects.filter(pk__in=agent_ids).values_list("pk", "name"))
    rows = []
    for agent_id in agent_ids:
        conservative, mu = snapshot_ratings.get(agent_id, (None, None))
        rows.append(
            {
                "agent": names.get(agent_id, f"agent {agent_id}"),
                "collabskill": conservative,
                "mu": mu,
                "n_episodes": len(collab[agent_id]),
                "mean_collab_score": float(np.mean(collab[agent_id])) if collab[agent_id] else None,
                "n_solo": len(solo_by_agent[agent_id]),
                "mean_solo_score": float(np.mean(solo_by_agent[agent_id])) if solo_by_agent[agent_id] else None,
                "n_matched": len(matched[agent_id]),
                "matched_win_rate": sum(matched[agent_id]) / len(matched[agent_id]) if matched[agent_id] else None,
            }
        )
    rows.sort(key=lambda row: (row["collabskill"] is None, -(row["collabskill"] or 0.0), row["agent"]))
    return rows


def collaboration_analysis(study: Study) -> dict[str, Any]:
    """Return the study's fluency, win-rate and collaboration-vs-solo analyses as JSON-ready data."""
    skill, snapshot = rating_selectors.human_skill(study, "conservative")
    ratings: dict[int, tuple[float, float]] = {}
    if snapshot is not None:
        ratings = {
            int(entity_id): (conservative, mu)
            for entity_id, conservative, mu in rating_selectors.snapshot_ratings(
                snapshot, EntityRating.Kind.AGENT
            ).values_list("entity_id", "conservative", "mu")
        }
    episodes = _scored_episodes(study)
    solo = _solo_scores(study)
    return {
        "snapshot_version": snapshot.version if snapshot else None,
        "rating_model": rating_selectors.snapshot_model_kind(snapshot),
        "skill_measure": "conservative",
        "fluency": fluency_analysis(study),
        "win_rates": solo_win_rates(episodes, solo, skill),
        "by_agent": collab_vs_solo_by_agent(study, episodes, solo, ratings),
        "n_scored_episodes": len(episodes),
        "n_solo_runs": sum(len(scores) for scores in solo.values()),
        "transcripts": transcript_analysis(study),
    }
