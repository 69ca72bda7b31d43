"""Who gains more from the agent, the weaker or the stronger worker? The slope of ability with an agent on
ability alone, read from the fitted worker covariance, not from raw score differences.

Across workers (θ_h, κ_h) ~ N(0, Σ_h), so E[κ_h | θ_h] = r θ_h with r = σ_θκ / σ_θ². A worker one point stronger
alone scores r points higher with an agent and gains r − 1 points more from it: r − 1 < 0 means the agent helps
the weaker workers more (the paper's finding). Regressing raw team-minus-solo differences on raw solo scores
would give a negative slope even when r = 1, because the solo score's noise enters both sides (regression to
the mean); r from Σ_h has no such bias.

In the factor form Σ_h = σ² L Lᵀ with L = [[a, 0], [b, c]], r = b / a: σ² cancels. Its SE is the delta method on
the observed information of the profiled REML criterion (its Hessian in the relative SDs, by forward
differences of the analytic gradient). That normal approximation needs an interior optimum: when a is 0 (no
spread alone) r is undefined, and when c is 0 (corr(θ, κ) = ±1, on the boundary of the covariances) the
interval is not valid, so neither is given and the reason is.

Per agent: the model shares κ_h across agents, so it has one slope. Whether the slope differs between agents is
asked of separate fits, one per agent on the workers who used it (their solo and that agent's episodes), each
with its own Σ_h. Their slopes are independent when no worker used two agents; only then are they compared
(Wald test of one common slope). Pure numpy/scipy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import chi2

from rating.synergy_data import Design, SynergyData, build_design, subset
from rating.synergy_estimates import interval
from rating.synergy_reml import BOUNDARY, CoreFit, _bounds, evaluate, fit_reml, gradient

__all__ = ["ability_slope", "agent_slopes", "slope_of"]

# Fewest workers with both solo and with-agent episodes for an agent's own slope.
MIN_WORKERS = 10


def _hessian(design: Design, core: CoreFit) -> np.ndarray:
    """Hessian of the REML criterion in the relative SDs, by forward differences of the analytic gradient (one
    gradient per parameter: the error, O(step), is far below the sampling error of the slope)."""
    x = core.params
    base = gradient(design, x, False, core.ev)
    out = np.empty((x.size, x.size))
    for j in range(x.size):
        step = 1e-5 * max(1.0, abs(x[j]))
        up = x.copy()
        up[j] += step
        out[:, j] = (gradient(design, up, False, evaluate(design, up)) - base) / step
    return 0.5 * (out + out.T)


def slope_of(design: Design, core: CoreFit, level: float) -> tuple[dict[str, Any] | None, str | None]:
    """(interval of r − 1, None) or (None, the reason it is not given), for a full-model fit."""
    a, b, c = core.params[:3]
    if a < BOUNDARY:
        return None, "the spread of ability alone is estimated at zero: there is no ability range to compare along"
    if c < BOUNDARY:
        return None, ("ability alone and with an agent are estimated perfectly correlated (a boundary of the "
                      "model): the slope's normal interval does not hold")
    # Task SDs at their bound 0 are held there (their curvature is not defined one-sidedly).
    lower = np.array([lo for lo, _ in _bounds(False)])
    free = np.flatnonzero((core.params > lower + BOUNDARY) | (np.arange(core.params.size) < 3))
    hess = _hessian(design, core)[np.ix_(free, free)]
    try:
        cov = 2.0 * np.linalg.inv(hess)
    except np.linalg.LinAlgError:
        return None, "the REML criterion is flat in the worker covariance: the slope is not identified"
    grad = np.zeros(free.size)
    grad[0], grad[1] = -b / a ** 2, 1.0 / a          # free always starts with a, b, c
    var = float(grad @ cov @ grad)
    if not (np.all(np.linalg.eigvalsh(hess) > 0) and var > 0):
        return None, "the REML optimum is not a strict minimum in the worker covariance: the slope's SE is undefined"
    return interval(b / a - 1.0, math.sqrt(var), level), None


def ability_slope(design: Design, core: CoreFit, level: float, reasons: dict[str, str]) -> dict[str, Any] | None:
    """Boost per point of solo ability (r − 1) and team score per point of solo ability (r), or None with the
    reason in ``reasons["ability_slope"]``."""
    boost, why = slope_of(design, core, level)
    if boost is None:
        reasons["ability_slope"] = why or ""
        return None
    team = {key: boost[key] + 1.0 for key in ("estimate", "lower", "upper")} | {"se": boost["se"]}
    return {"boost_per_point": boost, "team_per_point": team,
            "meaning": "per point of solo ability (theta): a worker's boost changes by boost_per_point and their "
                       "score with an agent by team_per_point; below 0 the agent helps weaker workers more"}


def _agent_rows(data: SynergyData, code: int) -> tuple[np.ndarray, int]:
    """Episodes of the workers who used agent ``code``: their solo ones and those with that agent; and how many
    of those workers did both."""
    users = np.unique(data.human[data.arm == code])
    rows = np.flatnonzero(np.isin(data.human, users) & ((data.arm == 0) | (data.arm == code)))
    solo_users = np.unique(data.human[rows][data.arm[rows] == 0])
    return rows, int(np.intersect1d(users, solo_users).size)


def agent_slopes(data: SynergyData, level: float, reasons: dict[str, str]) -> dict[str, Any] | None:
    """Each agent's own slope r_a − 1 from a separate fit, and the test of one common slope when the agents'
    workers are disjoint; None (with the reason) when no agent has enough workers."""
    agents = [int(a) for a in np.unique(data.arm) if a > 0]
    if len(agents) < 2:
        reasons["agent_slopes"] = "fewer than two agents have episodes: there is no difference between agents to ask"
        return None
    per_agent: dict[str, Any] = {}
    n_humans, n_tasks = int(data.human.max()) + 1, int(data.task.max()) + 1
    for code in agents:
        label = data.arm_labels[code]
        rows, both = _agent_rows(data, code)
        if both < MIN_WORKERS:
            per_agent[label] = {"slope": None, "workers": both,
                                "reason": f"only {both} workers did tasks both alone and with {label} (need "
                                          f"{MIN_WORKERS})"}
            continue
        design = build_design(subset(data, rows), n_humans, n_tasks)
        slope, why = slope_of(design, fit_reml(design), level)
        per_agent[label] = {"slope": slope, "workers": both, "reason": why}
    return {"agents": per_agent, "common_slope_test": _common_test(data, per_agent, reasons)}


def _common_test(data: SynergyData, per_agent: dict[str, Any], reasons: dict[str, str]) -> dict[str, Any] | None:
    """Wald test that every agent with a slope has the same one; only for disjoint worker sets."""
    team = data.team
    agents_per_worker = np.bincount(np.unique(np.stack([data.human[team], data.arm[team]]), axis=1)[0])
    if np.any(agents_per_worker > 1):
        reasons["agent_slopes_test"] = (
            "some workers used more than one agent, so the agents' separate slopes share those workers and are not "
            "independent: whether the slope differs between agents cannot be tested here")
        return None
    rows = [v["slope"] for v in per_agent.values() if v["slope"] is not None]
    if len(rows) < 2:
        reasons["agent_slopes_test"] = "fewer than two agents have a slope: whether it differs cannot be told"
        return None
    est = np.array([r["estimate"] for r in rows])
    weight = 1.0 / np.array([r["se"] for r in rows]) ** 2
    pooled = float(weight @ est / weight.sum())
    stat = float(weight @ (est - pooled) ** 2)
    return {"statistic": stat, "df": len(rows) - 1, "p_value": float(chi2.sf(stat, len(rows) - 1)),
            "method": "Wald test of one common slope across the agents' separate fits (independent workers)"}
