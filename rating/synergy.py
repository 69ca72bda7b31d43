"""The synergy model: does working with an agent make a worker better than alone, by how much, for whom?

For a 0–100 score of worker h on task t in arm a (0 = alone, 1..A = the agents) at position k of the session:

    y = m_a + p_k + θ_h·[solo] + κ_h·[with agent] + β_t + γ_t·[with agent] + ε,   ε ~ N(0, σ²)

* m_a, fixed: the level of each arm; an agent's **boost** is m_agent − m_solo, compared between agents as
  m_a − m_b. Fixed, because the agents are the few specific systems under study, not a sample.
* p_k, fixed, position 1 the reference: learning or fatigue within a session; without it an order that puts
  solo tasks first would credit learning to the agent.
* (θ_h, κ_h) ~ N(0, Σ_h), 2×2 unstructured: a worker's ability alone and with an agent, separate but correlated
  (the paper's θ ≠ κ); κ_h − θ_h is the worker's own boost around the agent's, shrunk (BLUP).
* β_t ~ N(0, σ_β²), γ_t ~ N(0, σ_γ²), independent: task difficulty alone and the extra difficulty with an
  agent. They are kept uncorrelated because a study has tens of tasks, too few to estimate a correlation
  reliably, and a free correlation with γ often on its boundary destabilises the fit; whether the boost is
  larger on harder tasks is read from the task estimates (β_t against γ_t) instead.

Fitted by exact REML (`rating/synergy_reml.py`), the workers' 2×2 blocks eliminated onto the fixed and task
effects. The θ = κ test compares the full model with θ_h = κ_h (one ability per worker) by the REML likelihood
ratio — valid since both models have the same fixed effects — against the boundary mixture ½χ²₁ + ½χ²₂
(the restricted model sets var(κ − θ) and cov(θ, κ − θ) to zero), and by K-fold held-out prediction.
Pure numpy/scipy: no Django.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import chi2
from threadpoolctl import threadpool_limits

from rating.fit import json_safe
from rating.synergy_data import SynergyData, SynergyInputError, build_design, subset
from rating.synergy_estimates import (
    arm_summaries,
    boundary_components,
    correlation,
    pairwise_boosts,
    position_effects,
    task_effects,
    variance_components,
    worker_effects,
)
from rating.synergy_reml import CoreFit, fit_reml
from rating.synergy_slope import ability_slope, agent_slopes
from rating.synergy_strong import AgentBaseline, strong_synergy_table

__all__ = ["AgentBaseline", "SynergyData", "SynergyFit", "SynergyInputError", "strong_synergy", "synergy_fit",
           "theta_kappa_lr"]


@dataclass(frozen=True)
class SynergyFit:
    """The synergy model's estimates; every number the data cannot identify is absent (None or left out) and
    named in ``not_identifiable`` with the reason."""

    arm_labels: tuple[str, ...]
    level: float
    n_episodes: int
    n_workers: int
    n_tasks: int
    boosts: dict[str, Any] = field(default_factory=dict)
    arm_levels: dict[str, Any] = field(default_factory=dict)
    pairwise: list[dict[str, Any]] = field(default_factory=list)
    workers: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    positions: dict[str, Any] = field(default_factory=dict)
    reference_position: int | None = None
    fixed_effects: dict[str, dict[str, float]] = field(default_factory=dict)
    variance_components: dict[str, float] = field(default_factory=dict)
    theta_kappa_correlation: float | None = None
    theta_kappa_test: dict[str, Any] | None = None
    ability_slope: dict[str, Any] | None = None
    agent_slopes: dict[str, Any] | None = None
    strong_synergy: dict[str, Any] | None = None
    reml_criterion: float | None = None
    convergence: dict[str, Any] = field(default_factory=dict)
    not_identifiable: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (non-finite floats as None)."""
        return json_safe(dataclasses.asdict(self))


def _codes_size(values: np.ndarray) -> int:
    return int(values.max()) + 1 if values.size else 0


def _unfittable(data: SynergyData, level: float, reasons: dict[str, str]) -> SynergyFit:
    return SynergyFit(arm_labels=data.arm_labels, level=level, n_episodes=data.n,
                      n_workers=int(np.unique(data.human).size), n_tasks=int(np.unique(data.task).size),
                      not_identifiable=reasons)


def _preconditions(data: SynergyData, level: float) -> dict[str, str]:
    """Reasons the boost cannot be estimated at all (empty when the model can be fitted)."""
    if not 0.0 < level < 1.0:
        raise SynergyInputError("level must be between 0 and 1")
    reasons: dict[str, str] = {}
    if data.n == 0:
        raise SynergyInputError("there are no scored episodes")
    if not np.any(~data.team):
        reasons["boost"] = ("no episode was done without an agent: there is no solo level to compare with, so no "
                            "agent's boost can be estimated")
    if not np.any(data.team):
        reasons["boost"] = ("no episode was done with an agent: there is nothing to compare the solo level with, "
                            "so no agent's boost can be estimated")
    return reasons


def _fixed_effects(design: Any, core: CoreFit, cov: np.ndarray) -> dict[str, dict[str, float]]:
    return {name: {"estimate": float(core.ev.solution[j]), "se": float(math.sqrt(max(cov[j, j], 0.0)))}
            for j, name in enumerate(design.fixed_names)}


def theta_kappa_lr(full: CoreFit, restricted: CoreFit) -> dict[str, Any]:
    """REML likelihood ratio of θ_h = κ_h (same fixed effects) with its boundary null distribution."""
    stat = max(restricted.deviance - full.deviance, 0.0)
    p_value = 0.5 * float(chi2.sf(stat, 1)) + 0.5 * float(chi2.sf(stat, 2))
    return {
        "method": "REML likelihood ratio, full model against theta = kappa, same fixed effects",
        "null_distribution": "0.5 chi2(1) + 0.5 chi2(2) (variance of kappa - theta on its boundary)",
        "statistic": stat, "p_value": p_value, "full_reml_criterion": full.deviance,
        "restricted_reml_criterion": restricted.deviance,
    }


def _predict(data: SynergyData, rows: np.ndarray, design: Any, core: CoreFit) -> tuple[np.ndarray, np.ndarray]:
    """Predictions of episodes ``rows`` from a fit on other episodes; rows whose arm or position the fit did not
    see are left out (returned mask)."""
    arm_col = np.array([design.arm_columns.get(a, -1) for a in range(len(data.arm_labels))])
    cols = arm_col[data.arm[rows]]
    pos = data.position[rows]
    known_pos = np.isin(pos, [design.reference_position, *design.position_columns])
    keep = (cols >= 0) & known_pos
    sol, p, t = core.ev.solution, design.p, design.n_tasks
    team = data.team[rows]
    pred = sol[np.maximum(cols, 0)] + sol[p + data.task[rows]] + team * sol[p + t + data.task[rows]]
    pos_effect = np.array([sol[design.position_columns[k]] if k in design.position_columns else 0.0 for k in pos])
    u = core.worker_effects[data.human[rows], team.astype(int)]
    return (pred + pos_effect + u)[keep], keep


def _heldout(data: SynergyData, n_humans: int, n_tasks: int, folds: int, seed: int) -> dict[str, Any] | None:
    """K-fold by episode: Gaussian log predictive density and squared error, full minus restricted."""
    if folds < 2:
        return None
    order = np.random.default_rng(seed).permutation(data.n)
    d_lpd, d_se = [], []
    for k in range(folds):
        test = np.sort(order[k::folds])
        train = np.setdiff1d(np.arange(data.n), test)
        train_data = subset(data, train)
        design = build_design(train_data, n_humans, n_tasks)
        scores = []
        for restricted in (False, True):
            core = fit_reml(design, restricted=restricted)
            pred, keep = _predict(data, test, design, core)
            resid = data.y[test][keep] - pred
            lpd = -0.5 * (np.log(2 * np.pi * core.sigma2) + resid ** 2 / core.sigma2)
            scores.append((lpd, resid ** 2))
        d_lpd.append(scores[0][0] - scores[1][0])
        d_se.append(scores[0][1] - scores[1][1])
    lpd, se2 = np.concatenate(d_lpd), np.concatenate(d_se)
    return {
        "folds": folds, "episodes": int(lpd.size),
        "delta_lpd": float(lpd.sum()), "delta_lpd_se": float(math.sqrt(lpd.size) * lpd.std(ddof=1)),
        "delta_mse": float(se2.mean()), "delta_mse_se": float(se2.std(ddof=1) / math.sqrt(se2.size)),
        "meaning": "log predictive density and squared error of held-out episodes, full model minus theta = "
                   "kappa; delta_lpd > 0 and delta_mse < 0 favour separate solo and with-agent abilities",
    }


def _convergence(core: CoreFit) -> dict[str, Any]:
    return {"converged": core.converged, "message": core.message, "evaluations": core.n_evaluations,
            "at_zero": boundary_components(core), "relative_sd": core.params.tolist()}


def synergy_fit(data: SynergyData, *, level: float = 0.95, baseline: AgentBaseline | None = None,
                folds: int = 5, seed: int = 0, test: bool = True, by_agent: bool = True) -> SynergyFit:
    """Fit the synergy model by REML and summarise it (see the module docstring).

    ``baseline`` (agent-alone runs) adds the strong-synergy table; ``folds`` (0 to skip) and ``seed`` set the
    held-out comparison of θ = κ, ``test=False`` skips the θ = κ test and the per-agent slope fits altogether
    (planning, bench timing); ``by_agent=False`` skips only the per-agent slope fits (one more fit per agent).
    """
    reasons = _preconditions(data, level)
    if reasons:
        return _unfittable(data, level, reasons)
    # Small dense solves: BLAS threads only add contention on a shared machine.
    with threadpool_limits(limits=1, user_api="blas"):
        return _fit(data, level, baseline, folds, seed, test and by_agent, test, reasons)


def _fit(data: SynergyData, level: float, baseline: AgentBaseline | None, folds: int, seed: int, by_agent: bool,
         test: bool, reasons: dict[str, str]) -> SynergyFit:
    n_humans, n_tasks = _codes_size(data.human), _codes_size(data.task)
    design = build_design(data, n_humans, n_tasks)
    if data.n - design.p < 2:
        raise SynergyInputError(f"{data.n} episodes are too few for {design.p} fixed effects")
    reasons.update(design.dropped)
    core = fit_reml(design)
    cov = core.small_cov()
    levels, boosts = arm_summaries(data, design, core, cov, level, reasons)
    both = int(np.sum((design.n_solo > 0) & (design.n_team > 0)))
    test_result = slopes = None
    if test and both >= 2:
        test_result = theta_kappa_lr(core, fit_reml(design, restricted=True))
        test_result["heldout"] = _heldout(data, n_humans, n_tasks, folds, seed)
        slopes = agent_slopes(data, level, reasons) if by_agent else None
    elif test:
        reasons["theta_kappa_test"] = "fewer than two workers did tasks both alone and with an agent"
    slope = None
    if both >= 2:
        slope = ability_slope(design, core, level, reasons)
    else:
        reasons["ability_slope"] = "fewer than two workers did tasks both alone and with an agent"
    strong = None
    if baseline is not None:
        strong = strong_synergy_table(data, design, core, cov, baseline, level, reasons)
    return SynergyFit(
        arm_labels=data.arm_labels, level=level, n_episodes=data.n,
        n_workers=int(np.sum(design.n_solo + design.n_team > 0)), n_tasks=int(np.unique(data.task).size),
        boosts=boosts, arm_levels=levels, pairwise=pairwise_boosts(data, design, core, cov, level, reasons),
        workers=worker_effects(data, design, core, level, reasons),
        tasks=task_effects(data, design, core, cov, level, reasons),
        positions=position_effects(design, core, cov, level),
        reference_position=design.reference_position if design.position_columns else None,
        fixed_effects=_fixed_effects(design, core, cov), variance_components=variance_components(core),
        theta_kappa_correlation=correlation(core, reasons, both), theta_kappa_test=test_result,
        ability_slope=slope, agent_slopes=slopes,
        strong_synergy=strong, reml_criterion=core.deviance, convergence=_convergence(core),
        not_identifiable=reasons,
    )


def strong_synergy(data: SynergyData, baseline: AgentBaseline, *, level: float = 0.95) -> dict[str, Any] | None:
    """Human alone, agent alone and human with agent per task and agent, with the strong-synergy contrasts
    (``None`` when the model cannot be fitted; the fit's reasons say why)."""
    return synergy_fit(data, level=level, baseline=baseline, test=False).strong_synergy
