"""The ToM analysis of a study from its stored codings: the synergy model's episodes, each with the study's judge
pair's current ToM and response-quality codes, fitted by :func:`rating.tom_analysis.tom_analysis`.

It lives in grading (not rating/services) because it reads the codings through grading's selectors, and the
layer contract keeps rating below grading. The result is JSON-ready and stored as a background job's result
(console/dashboard/services.py), so the "Why some gain more" page and the exports only read it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from django.core.exceptions import ImproperlyConfigured

from grading.prompts import TOM_PAIR_PROMPT_VERSION
from grading.providers import tom_coders
from grading.selectors import EpisodeProcessCodes, JudgeCode, study_process_codes, study_tom_pair_results
from rating.synergy_episodes import SynergyEpisodes, synergy_episodes
from rating.tom_analysis import TomInputs, tom_analysis
from rating.tom_moderation import TomModerationData
from rating.tom_pairwise_summary import PairAnswer, pairwise_summary
from rating.tom_quality import QualityData
from rating.tom_reliability import judge_gold_table, rating_table
from rating.tom_weighted_icc import GoldDesign
from studies.models import Study

__all__ = ["study_tom"]

SUCCEEDED = "succeeded"


def _judge_scores(codes: dict[str, JudgeCode], labels: tuple[str, ...]) -> list[tuple[str, float]]:
    """The pair's succeeded scores of one instrument, by judge label (other judges' old codings are ignored)."""
    return [(label, float(score)) for label in labels if label in codes and codes[label].status == SUCCEEDED
            and (score := codes[label].score) is not None]


def _mean(scores: list[tuple[str, float]]) -> float:
    return float(np.mean([s for _, s in scores])) if scores else math.nan


def _status(row: EpisodeProcessCodes, labels: tuple[str, ...], team: bool) -> str:
    """Why an episode has the ToM code it has, in the words of the panel's count table."""
    if not team:
        return "solo episode: no agent to talk to, not coded"
    found = [row.tom[label] for label in labels if label in row.tom]
    done = [c for c in found if c.status == SUCCEEDED and c.score is not None]
    if len(done) == len(labels):
        return "coded by both judges"
    if done:
        return "coded by one judge only"
    statuses = {c.status for c in found}
    if "not_coded" in statuses:
        return "not coded: no parsable log"
    if "failed" in statuses:
        return "not coded: the coding failed"
    if "running" in statuses:
        return "not coded yet: coding running"
    return "not coded yet"


def _gold_design(strata: Mapping[int, tuple[str, int]]) -> GoldDesign | None:
    """The gold sample's design for the weighted judge-vs-gold ICC: each sampled episode's stratum and N_h."""
    if not strata:
        return None
    return GoldDesign(strata={str(pk): h for pk, (h, _) in strata.items()},
                      stratum_population={h: int(n) for h, n in strata.values()})


def _inputs(coded: SynergyEpisodes, rows: dict[int, EpisodeProcessCodes], labels: tuple[str, ...],
            gold: Sequence[tuple[int, object, float]] = (),
            gold_strata: Mapping[int, tuple[str, int]] | None = None) -> tuple[TomInputs, dict[str, int]]:
    """The analysis inputs aligned to the synergy rows, and the count of episodes per coding status.

    ``gold`` holds the experts' submitted codes of the gold sample, (episode id, expert, score): the judges' mean
    is set beside the experts' mean per sampled episode for the judge-vs-gold ICC. ``gold_strata`` maps each
    sampled episode to (stratum, N_h), for the same ICC weighted by the sample's design.
    """
    syn = coded.data
    team = syn.team
    tom = np.full(syn.n, math.nan)
    quality = np.full(syn.n, math.nan)
    effort = np.full((syn.n, 3), math.nan)
    judge_rows: list[tuple[int, str, float]] = []
    counts: Counter[str] = Counter()
    simulated = False
    for i, episode_id in enumerate(coded.episode_ids.tolist()):
        row = rows.get(episode_id)
        if row is None:  # scored but not among the coded rows (e.g. withdrawn meanwhile): treat as not coded
            counts["not coded yet"] += 1
            continue
        counts[_status(row, labels, bool(team[i]))] += 1
        if not team[i]:
            continue
        tom_scores = _judge_scores(row.tom, labels)
        quality_scores = _judge_scores(row.response_quality, labels)
        simulated |= any(row.tom[label].is_simulated for label, _ in tom_scores)
        simulated |= any(row.response_quality[label].is_simulated for label, _ in quality_scores)
        simulated |= row.effort_simulated
        tom[i], quality[i] = _mean(tom_scores), _mean(quality_scores)
        judge_rows.extend((episode_id, label, score) for label, score in tom_scores)
        effort[i] = [math.nan if v is None else float(v) for v in (row.worker_turns, row.worker_chars,
                                                                   row.edit_ratio)]
    quality_data = QualityData(quality=quality[team], human=syn.human[team], tom=tom[team], turns=effort[team, 0],
                               characters=effort[team, 1], edit_ratio=effort[team, 2])
    judges = rating_table(judge_rows, raters=labels) if judge_rows else None
    gold_table = judge_gold_table(judge_rows, gold) if gold and judge_rows else None
    inputs = TomInputs(moderation=TomModerationData(syn, tom), quality=quality_data, judges=judges,
                       gold=gold_table, gold_design=_gold_design(gold_strata or {}) if gold_table else None,
                       simulated=simulated)
    return inputs, dict(counts)


def _worker_traits(coded: SynergyEpisodes, tom: np.ndarray) -> list[dict[str, Any]]:
    """Each worker's ToM trait as exported: the mean of their coded episodes' codes (the fit's leave-one-out and
    calibrated versions are computed inside it) and how many coded episodes it rests on."""
    human = coded.data.human
    out = []
    for code, participant_id in enumerate(coded.participant_ids):
        values = tom[(human == code) & ~np.isnan(tom)]
        out.append({"participant_id": participant_id, "pseudonym": coded.pseudonyms[code],
                    "n_coded": int(values.size), "tom_mean": float(values.mean()) if values.size else None})
    return out


def study_tom(study: Study, *, level: float = 0.95, gold: Sequence[tuple[int, object, float]] = (),
              gold_strata: Mapping[int, tuple[str, int]] | None = None) -> dict[str, Any]:
    """Fit the ToM analysis to the study's scored episodes and current codings; JSON-ready, ``simulated`` first.

    ``gold``: the experts' gold-sample codes (episode id, expert, score), read by the caller from the expert
    workspace (a higher app), so the judges can be checked against people as well as against each other;
    ``gold_strata``: each sampled episode's (stratum, N_h), so that check is also weighted to every coded episode.

    Without ToM coding on, a usable judge pair or a scored episode the result says why and carries no estimate.
    """
    if not study.tom_coding:
        return {"simulated": False, "analysis": None,
                "reason": "ToM coding is off for this study: tick “ToM coding” on the study and run "
                          "manage.py code_processes."}
    try:
        pair = tom_coders(study)
    except ImproperlyConfigured as exc:
        return {"simulated": False, "analysis": None, "reason": f"ToM coding is not configured: {exc}"}
    labels = tuple(spec.label for spec in pair)
    coded = synergy_episodes(study)
    if coded is None:
        return {"simulated": False, "analysis": None, "judges": list(labels), "reason": "no episode is scored yet"}
    rows = {row.episode_id: row for row in study_process_codes(study.pk)}
    inputs, counts = _inputs(coded, rows, labels, gold, gold_strata)
    analysis = tom_analysis(inputs, level=level).to_dict()
    return {
        "simulated": inputs.simulated, "analysis": analysis, "judges": list(labels), "level": level,
        "n_episodes": coded.data.n, "n_agent_episodes": int(coded.data.team.sum()), "n_gold_codes": len(gold),
        "coding_counts": dict(sorted(counts.items())),
        "simulated_effort": _simulated_effort(coded, rows),
        "workers": _worker_traits(coded, inputs.moderation.tom), "reason": None,
        "quality_note": _quality_note(inputs.quality),
        "pairwise": _pairwise(study, rows, labels, level),
    }


def _pairwise(study: Study, rows: dict[int, EpisodeProcessCodes], labels: tuple[str, ...],
              level: float) -> dict[str, Any]:
    """The pairwise robustness run summarised per judge of the pair (current pair prompt only), against each
    episode's mean absolute ToM code; a study that does not ask for the run and has none says so."""
    results = [r for r in study_tom_pair_results(study.pk) if r.prompt_version == TOM_PAIR_PROMPT_VERSION]
    if not results and study.tom_pairwise_pairs < 1:
        return {"level": level, "rows": [], "reason": "this study does not ask for a pairwise run: set its "
                "pairwise pairs cap and run manage.py code_tom_pairs"}
    answers = [PairAnswer(episode_a=r.episode_a, episode_b=r.episode_b, order=r.order,
                          judge=f"{r.provider}/{r.model}", shown=r.shown_choice, winner=r.winner) for r in results]
    absolute = {pk: _mean(_judge_scores(row.tom, labels)) for pk, row in rows.items()}
    return pairwise_summary(answers, absolute, labels, level)


def _simulated_effort(coded: SynergyEpisodes, rows: dict[int, EpisodeProcessCodes]) -> int:
    """With-agent episodes of the fit whose effort controls are simulated draws (the demo's), not a parsed log."""
    team = coded.episode_ids[coded.data.team].tolist()
    return sum(1 for pk in team if pk in rows and rows[pk].effort_simulated)


def _quality_note(quality: QualityData | None) -> str | None:
    """Say plainly when the effort controls are missing, which the regression reports only as too few rows."""
    if quality is None or quality.turns.size == 0:
        return None
    if np.all(np.isnan(quality.turns) | np.isnan(quality.characters) | np.isnan(quality.edit_ratio)):
        return ("no with-agent episode has a parsed log, so the effort controls (turns, characters, edit ratio) "
                "are unknown and the regression cannot be fitted")
    return None
