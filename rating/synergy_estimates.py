"""Summaries of a fitted synergy model: the agents' boosts, their pairwise differences, the workers' and tasks'
shrunk effects with prediction intervals, the position effects and the variance components.

Intervals are normal, at the plug-in REML variance components; P(x > 0) is the normal approximation of the
posterior under flat priors on the fixed effects (Φ(estimate / SE)). Pure numpy/scipy.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.special

from rating.synergy_data import Design, SynergyData
from rating.synergy_reml import BOUNDARY, CoreFit, task_scales, worker_factor

__all__ = [
    "arm_summaries", "interval", "pairwise_boosts", "position_effects", "task_effects", "variance_components",
    "worker_effects",
]


def interval(estimate: float, se: float, level: float) -> dict[str, float]:
    """Estimate, SE, normal interval at ``level`` and P(> 0)."""
    # statistics.NormalDist and erfc rather than scipy.stats: this runs once per worker and quantity.
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    p_pos = 0.5 * math.erfc(-estimate / (se * math.sqrt(2.0))) if se > 0 else (1.0 if estimate > 0 else 0.0)
    return {"estimate": float(estimate), "se": float(se), "lower": float(estimate - z * se),
            "upper": float(estimate + z * se), "p_positive": p_pos}


def _contrast(cov: np.ndarray, vec: np.ndarray) -> float:
    return float(math.sqrt(max(float(vec @ cov @ vec), 0.0)))


def arm_summaries(data: SynergyData, design: Design, core: CoreFit, cov: np.ndarray, level: float,
                  reasons: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each arm's level m_arm (at the reference position) and each agent's boost m_agent − m_solo."""
    levels: dict[str, Any] = {}
    boosts: dict[str, Any] = {}
    counts = np.bincount(data.arm, minlength=len(data.arm_labels))
    solo = design.arm_columns.get(0)
    for code, label in enumerate(data.arm_labels):
        column = design.arm_columns.get(code)
        if column is None:
            if code > 0:
                reasons[f"boost:{label}"] = f"no episode with the agent {label!r}: its boost cannot be estimated"
            continue
        vec = np.zeros(design.d)
        vec[column] = 1.0
        levels[label] = interval(core.ev.solution[column], _contrast(cov, vec), level) | {"episodes": int(counts[code])}
        if code > 0 and solo is not None:
            vec[solo] = -1.0
            boosts[label] = interval(core.ev.solution[column] - core.ev.solution[solo], _contrast(cov, vec), level) | {
                "episodes": int(counts[code])}
    return levels, boosts


def pairwise_boosts(data: SynergyData, design: Design, core: CoreFit, cov: np.ndarray, level: float,
                    reasons: dict[str, str]) -> list[dict[str, Any]]:
    """boost_a − boost_b = m_a − m_b for every pair of agents with episodes."""
    agents = [(code, design.arm_columns[code]) for code in sorted(design.arm_columns) if code > 0]
    if len(agents) < 2:
        reasons["pairwise"] = "fewer than two agents have episodes: there is no pair of agents to compare"
        return []
    out = []
    for i, (code_a, col_a) in enumerate(agents):
        for code_b, col_b in agents[i + 1:]:
            vec = np.zeros(design.d)
            vec[col_a], vec[col_b] = 1.0, -1.0
            est = core.ev.solution[col_a] - core.ev.solution[col_b]
            out.append({"agent": data.arm_labels[code_a], "versus": data.arm_labels[code_b]}
                       | interval(est, _contrast(cov, vec), level))
    return out


def position_effects(design: Design, core: CoreFit, cov: np.ndarray, level: float) -> dict[str, Any]:
    """p_position − p_reference for every position with episodes (learning > 0, fatigue < 0)."""
    out = {}
    for pos, column in sorted(design.position_columns.items()):
        vec = np.zeros(design.d)
        vec[column] = 1.0
        out[str(pos)] = interval(core.ev.solution[column], _contrast(cov, vec), level)
    return out


def variance_components(core: CoreFit) -> dict[str, float]:
    """Σ_h, the task variances and the residual variance on the score scale (points²)."""
    sigma = core.worker_cov()
    var_b, var_g = core.task_variances()
    return {
        "theta_var": float(sigma[0, 0]), "kappa_var": float(sigma[1, 1]), "theta_kappa_cov": float(sigma[0, 1]),
        "boost_var": float(sigma[0, 0] + sigma[1, 1] - 2.0 * sigma[0, 1]),
        "task_solo_var": var_b, "task_agent_extra_var": var_g, "residual_var": float(core.sigma2),
    }


def correlation(core: CoreFit, reasons: dict[str, str], both: int) -> float | None:
    """corr(θ, κ), or None with the reason when it is not identifiable."""
    lam = worker_factor(core.params, core.restricted)
    if both < 2:
        reasons["correlation"] = (
            "fewer than two workers did tasks both alone and with an agent: the correlation of solo and "
            "with-agent ability cannot be estimated")
        return None
    if abs(lam[0, 0]) < BOUNDARY or math.hypot(lam[1, 0], lam[1, 1]) < BOUNDARY:
        reasons["correlation"] = (
            "the spread of solo or of with-agent ability across workers is estimated at zero: their "
            "correlation is undefined")
        return None
    sigma = core.worker_cov()
    return float(sigma[0, 1] / math.sqrt(sigma[0, 0] * sigma[1, 1]))


def _worker_pev(design: Design, core: CoreFit, contrasts: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """σ² (cᵀ K_h c + v_hᵀ S⁻¹ v_h) per worker and contrast c, v_h = D M_hᵀ K_h c: prediction error variance of
    cᵀ u_h. v_h is linear in K_h c, so with W_s = M_s D L⁻ᵀ and W_t = M_t D L⁻ᵀ (L the Cholesky factor of S) every
    contrast's quadratic form comes from the three row products W_s·W_s, W_s·W_t, W_t·W_t, computed once."""
    ev = core.ev
    k = ev.k[design.patterns.of_worker]
    scale = scipy.sparse.diags(ev.scale)
    m_solo, m_team = (design.m_solo @ scale).tocsr(), (design.m_team @ scale).tocsr()
    # L⁻¹ applied from the right as a triangular solve of the transposed rows: no explicit inverse.
    ss, st, tt = (np.empty(design.n_humans) for _ in range(3))
    for start in range(0, design.n_humans, 2048):
        rows = slice(start, start + 2048)
        w_s = scipy.linalg.solve_triangular(ev.chol, m_solo[rows].toarray().T, lower=True, check_finite=False)
        w_t = scipy.linalg.solve_triangular(ev.chol, m_team[rows].toarray().T, lower=True, check_finite=False)
        ss[rows], st[rows], tt[rows] = (np.einsum("ij,ij->j", a, b) for a, b in ((w_s, w_s), (w_s, w_t), (w_t, w_t)))
    out = {}
    for name, contrast in contrasts.items():
        kc = k @ contrast
        quad = kc[:, 0] ** 2 * ss + 2.0 * kc[:, 0] * kc[:, 1] * st + kc[:, 1] ** 2 * tt
        out[name] = core.sigma2 * (kc @ contrast + quad)
    return out


def _intervals(estimates: np.ndarray, variances: np.ndarray, level: float) -> list[dict[str, float]]:
    """`interval` for many values at once (same numbers, one pass)."""
    se = np.sqrt(np.maximum(variances, 0.0))
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_pos = np.where(se > 0, 0.5 * scipy.special.erfc(-estimates / (se * math.sqrt(2.0))),
                         (estimates > 0).astype(float))
    columns = (estimates.tolist(), se.tolist(), (estimates - z * se).tolist(), (estimates + z * se).tolist(),
               p_pos.tolist())
    return [{"estimate": e, "se": s, "lower": lo, "upper": hi, "p_positive": pp}
            for e, s, lo, hi, pp in zip(*columns, strict=True)]


def worker_effects(data: SynergyData, design: Design, core: CoreFit, level: float,
                   reasons: dict[str, str]) -> list[dict[str, Any]]:
    """θ_h, κ_h and the boost κ_h − θ_h per worker with prediction SEs; None where the worker has no episode in
    the condition the quantity needs."""
    u = core.worker_effects
    contrasts = {"theta": np.array([1.0, 0.0]), "kappa": np.array([0.0, 1.0]), "boost": np.array([-1.0, 1.0])}
    pev = _worker_pev(design, core, contrasts)
    values = {"theta": u[:, 0], "kappa": u[:, 1], "boost": u[:, 1] - u[:, 0]}
    rows = {name: _intervals(values[name], pev[name], level) for name in contrasts}
    agents = _worker_agents(data, design.n_humans)
    n_solo, n_team = design.n_solo.astype(int).tolist(), design.n_team.astype(int).tolist()
    only_solo: list[int] = []
    only_team: list[int] = []
    out: list[dict[str, Any]] = []
    for h in range(design.n_humans):
        ns, nt = n_solo[h], n_team[h]
        if ns + nt == 0:
            continue
        out.append({"human": h, "solo_episodes": ns, "agent_episodes": nt, "agents": agents[h],
                    "theta": rows["theta"][h] if ns > 0 else None, "kappa": rows["kappa"][h] if nt > 0 else None,
                    "boost": rows["boost"][h] if ns > 0 and nt > 0 else None})
        (only_solo if nt == 0 else only_team if ns == 0 else []).append(h)
    if only_solo:
        reasons["workers_only_solo"] = (
            f"workers {only_solo} did no task with an agent: their with-agent ability and boost are not estimated")
    if only_team:
        reasons["workers_only_agent"] = (
            f"workers {only_team} did no task alone: their solo ability and boost are not estimated")
    return out


def _worker_agents(data: SynergyData, n_humans: int) -> list[list[str]]:
    agents: list[set[int]] = [set() for _ in range(n_humans)]
    team = np.flatnonzero(data.team)
    for h, a in set(zip(data.human[team].tolist(), data.arm[team].tolist(), strict=True)):
        agents[h].add(a)
    return [[data.arm_labels[a] for a in sorted(s)] for s in agents]


def task_effects(data: SynergyData, design: Design, core: CoreFit, cov: np.ndarray, level: float,
                 reasons: dict[str, str]) -> list[dict[str, Any]]:
    """β_t (solo difficulty shift), γ_t (extra shift with an agent) and β_t + γ_t per task, each only when the
    task's episodes identify it."""
    p, t = design.p, design.n_tasks
    team = data.team
    n_solo = np.bincount(data.task[~team], minlength=t)
    n_team = np.bincount(data.task[team], minlength=t)
    sol = core.ev.solution
    only_solo: list[int] = []
    only_team: list[int] = []
    out: list[dict[str, Any]] = []
    for task in range(t):
        if n_solo[task] + n_team[task] == 0:
            continue
        row: dict[str, Any] = {"task": task, "solo_episodes": int(n_solo[task]), "agent_episodes": int(n_team[task])}
        effects = (("beta", [p + task]), ("gamma", [p + t + task]), ("beta_plus_gamma", [p + task, p + t + task]))
        for name, cols in effects:
            vec = np.zeros(design.d)
            vec[cols] = 1.0
            known = {"beta": n_solo[task] > 0, "gamma": n_solo[task] > 0 and n_team[task] > 0,
                     "beta_plus_gamma": n_team[task] > 0}[name]
            row[name] = interval(float(vec @ sol), _contrast(cov, vec), level) if known else None
        (only_solo if n_team[task] == 0 else only_team if n_solo[task] == 0 else []).append(task)
        out.append(row)
    if only_solo:
        reasons["tasks_only_solo"] = (
            f"tasks {only_solo} were done only alone: their extra difficulty with an agent (γ) is not estimated")
    if only_team:
        reasons["tasks_only_agent"] = (
            f"tasks {only_team} were done only with an agent: their solo difficulty β and extra difficulty γ are "
            "not separable; only their sum β + γ is given")
    return out


def boundary_components(core: CoreFit) -> list[str]:
    """Names of the variance components estimated at zero."""
    lb, lg = task_scales(core.params, core.restricted)
    lam = worker_factor(core.params, core.restricted)
    out = []
    if abs(lam[0, 0]) < BOUNDARY:
        out.append("theta_var")
    if not core.restricted and math.hypot(lam[1, 0], lam[1, 1]) < BOUNDARY:
        out.append("kappa_var")
    if lb < BOUNDARY:
        out.append("task_solo_var")
    if lg < BOUNDARY:
        out.append("task_agent_extra_var")
    return out
