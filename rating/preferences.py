"""The preference model: blind expert rankings and rubric scores on one quality scale.

A deliverable's quality is its episode's skill terms, in rubric points:

    q_e = m_cell(e) + h_worker(e) + t_task(e),   h ~ N(0, σ_h²), t ~ N(0, σ_t²)

with one fixed level per arm cell (the worker alone; each agent with a worker; each agent alone), a random
worker effect (shared by the worker's deliverables with and without an agent) and a random task effect.
Rubric scores are y = q_e + ε, ε ~ N(0, σ²). An expert's ranking of 2-4 deliverables of one task is broken
into its pairs; each pair follows Davidson's Bradley-Terry model with ties on

    z = ρ (q_e − q_f) + π ([e shown first] − [f shown first]) + λ log2(len_e / len_f),

ρ the scale linking points to log-odds (estimated from both kinds of data together), π the position bias, λ
the length preference, ν the tie propensity. Pairs from one ranking are not independent, so the fit is a
composite likelihood (each pair of a ranking of k weighted 2/k) and its intervals are cluster-robust by ranking
(one-step leave-one-ranking-out jackknife). Everything is fitted jointly by Newton's method on the exact
penalised likelihood; σ, σ_h and σ_t maximise its Laplace approximation (exact gradient). The
write-up with the simulation table is ``docs/rating-models.md`` §10. Pure numpy/scipy: no Django.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from rating.fit import json_safe
from rating.preferences_data import (
    WORKER_ALONE,
    ComparisonRow,
    EpisodeRow,
    PreferenceInputError,
    ScoreRow,
    code_rows,
)
from rating.preferences_experts import agreement_by_expert, agreement_by_grader, expert_effects
from rating.preferences_fit import build
from rating.preferences_outer import fit_core
from rating.preferences_report import Estimates, cell_levels, differences, effects, win_rates, z_value
from rating.preferences_rho_cov import covariance_with_rho

__all__ = ["ComparisonRow", "EpisodeRow", "PreferenceFit", "PreferenceInputError", "PreferenceSpec", "ScoreRow",
           "preference_agreement", "preference_fit"]

COVARIANCES = ("jackknife", "sandwich", "model")


@dataclass(frozen=True)
class PreferenceSpec:
    """``worker_sd``/``task_sd``: None estimates the SD, a number fixes it (0 leaves the term out);
    ``score_sd`` (the rubric scores' noise): None estimates it, a positive number fixes it;
    ``covariance``: ``jackknife`` (cluster-robust by ranking with each ranking's leave-one-out influence, the
    default), ``sandwich`` (the plain cluster-robust one) or ``model`` (inverse information)."""

    worker_sd: float | None = None
    task_sd: float | None = None
    score_sd: float | None = None
    level: float = 0.95
    covariance: str = "jackknife"

    def __post_init__(self) -> None:
        if not 0.0 < self.level < 1.0:
            raise PreferenceInputError("level must be between 0 and 1")
        if self.covariance not in COVARIANCES:
            raise PreferenceInputError(f"covariance must be one of {COVARIANCES}")
        for name in ("worker_sd", "task_sd"):
            value = getattr(self, name)
            if value is not None and not value >= 0.0:
                raise PreferenceInputError(f"{name} must be None (estimated) or >= 0")
        if self.score_sd is not None and not self.score_sd > 0.0:
            raise PreferenceInputError("score_sd must be None (estimated) or > 0")


@dataclass(frozen=True)
class PreferenceFit:
    """The joint fit; every number the data cannot identify is absent and named in ``not_identifiable``."""

    units: str
    level: float
    n_episodes: int
    n_scores: int
    n_rankings: int
    n_pairs: int
    cells: list[dict[str, Any]] = field(default_factory=list)
    differences: list[dict[str, Any]] = field(default_factory=list)
    win_rates: list[dict[str, Any]] = field(default_factory=list)
    versus_worker_alone: list[dict[str, Any]] = field(default_factory=list)
    effects: dict[str, Any] = field(default_factory=dict)
    experts: list[dict[str, Any]] = field(default_factory=list)
    graders: list[dict[str, Any]] = field(default_factory=list)
    variance_components: dict[str, Any] = field(default_factory=dict)
    log_likelihood: float | None = None
    laplace: float | None = None
    convergence: dict[str, Any] = field(default_factory=dict)
    excluded_experts: dict[str, str] = field(default_factory=dict)
    not_identifiable: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (non-finite floats as None)."""
        return json_safe(dataclasses.asdict(self))


def _reported_columns(built: Any) -> np.ndarray:
    """The parameters whose covariance is reported: free arm levels and the extras (not the random effects)."""
    cols = [int(c) for c in built.cell_col if c >= 0] + sorted(built.problem.columns.values())
    return np.array(cols, dtype=np.int64)


def _variance_components(built: Any, core: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "score" in core.sds:
        out["score_sd"] = {"estimate": core.sds["score"], "estimated": "score" in core.estimated,
                           "at_bound": "score" in core.at_bound,
                           "units": "points"}
    for g in built.groups:
        out[f"{g}_sd"] = {"estimate": core.sds[g], "estimated": g in core.estimated, "at_bound": g in core.at_bound,
                          "units": built.units}
    return out


def preference_fit(episodes: Sequence[EpisodeRow], scores: Sequence[ScoreRow],
                   comparisons: Sequence[ComparisonRow], spec: PreferenceSpec | None = None) -> PreferenceFit:
    """Fit rubric scores and expert rankings jointly and report the leaderboard terms (see the module docstring).

    Raises ``PreferenceInputError`` for rows that cannot be fitted (a one-deliverable comparison set, unknown
    episodes, scores outside 0-100, ...); quantities that the rows do not identify are reported without a number.
    """
    spec = spec or PreferenceSpec()
    coded = code_rows(episodes, scores, comparisons)
    with threadpool_limits(limits=1, user_api="blas"):     # small solves: threads only add contention
        built = build(coded, spec.worker_sd, spec.task_sd)
        core = fit_core(built, {"worker": spec.worker_sd, "task": spec.task_sd, "score": spec.score_sd})
        cols = _reported_columns(built)
        cov = covariance_with_rho(built, core, cols, spec.covariance)
    est = Estimates(built, core, cov, {int(c): i for i, c in enumerate(cols)}, z_value(spec.level))
    reasons = dict(built.reasons)
    rates = win_rates(est) if coded.outcome.size else []
    if not coded.outcome.size:
        reasons["win_rates"] = "no usable comparison: win and tie rates need expert rankings"
    z = z_value(spec.level)
    return PreferenceFit(
        units=built.units, level=spec.level, n_episodes=len(coded.episode_ids), n_scores=int(coded.score.size),
        n_rankings=coded.n_rankings, n_pairs=int(coded.outcome.size), cells=cell_levels(est),
        differences=differences(est), win_rates=rates,
        versus_worker_alone=[r for r in rates if r["versus"] == WORKER_ALONE], effects=effects(est),
        experts=_experts(est, z), graders=agreement_by_grader(coded, z),
        variance_components=_variance_components(built, core), log_likelihood=core.log_likelihood,
        laplace=core.laplace, convergence={"converged": core.converged, "iterations": core.iterations},
        excluded_experts=dict(coded.excluded_experts), not_identifiable=reasons,
    )


def preference_agreement(episodes: Sequence[EpisodeRow], scores: Sequence[ScoreRow],
                         comparisons: Sequence[ComparisonRow], *, level: float = 0.95) -> dict[str, Any]:
    """How often the higher-scored deliverable is preferred, per comparing expert and per rubric grader, without
    the model: it needs no fit, so it is there even when the rankings are too few to fit."""
    if not 0.0 < level < 1.0:
        raise PreferenceInputError("level must be between 0 and 1")
    coded = code_rows(episodes, scores, comparisons)
    z = z_value(level)
    return json_safe({"experts": agreement_by_expert(coded, z), "graders": agreement_by_grader(coded, z)})


def _experts(est: Estimates, z: float) -> list[dict[str, Any]]:
    """Per expert: their own effects beside their agreement with the rubric scores."""
    agreement = {str(row["expert"]): row for row in agreement_by_expert(est.built.coded, z)}
    out = []
    for row in expert_effects(est):
        out.append(row | {"agreement": agreement.pop(str(row["expert"]))})
    for expert, row in agreement.items():   # experts left out of the fit (they tied everything)
        out.append({"expert": expert, "agreement": row, "not_identifiable": row.get("not_identifiable")})
    return out
