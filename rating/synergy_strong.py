"""Strong synergy: does the worker with the agent beat the better of the worker alone and the agent alone?

Per task t and agent a the three levels are, for the average worker at the study's average position:
human alone m_solo + β_t, human with agent m_a + β_t + γ_t (both from the synergy fit, jointly normal with the
fit's error covariance) and agent alone, the mean of the agent's solo baseline runs on t (independent of the
episodes; its noise is the within-cell variance pooled over every (task, agent) with two or more runs).

The max of two uncertain levels is not a linear contrast, so both linear contrasts are reported with normal
intervals (team − human alone, team − agent alone), and the strong-synergy contrast team − max(alone, agent
alone) with P(team > both) and its interval from draws of the three levels (seeded, flat-prior approximation).
Per agent the same is done on the average over the tasks that have baseline runs. Pure numpy/scipy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rating.synergy_data import Design, SynergyData, SynergyInputError
from rating.synergy_estimates import interval
from rating.synergy_reml import CoreFit

__all__ = ["AgentBaseline", "strong_synergy_table"]

DRAWS = 20_000


@dataclass(frozen=True)
class AgentBaseline:
    """One row per solo-agent baseline run (the agent alone on a task), codes as in `SynergyData`."""

    y: np.ndarray
    arm: np.ndarray      # 1..A
    task: np.ndarray

    def __post_init__(self) -> None:
        y = np.asarray(self.y, dtype=float)
        arm, task = np.asarray(self.arm), np.asarray(self.task)
        if not (y.ndim == arm.ndim == task.ndim == 1 and y.shape == arm.shape == task.shape):
            raise SynergyInputError("baseline y, arm and task must be one-dimensional of the same length")
        if np.any(~np.isfinite(y) | (y < 0) | (y > 100)):
            raise SynergyInputError("baseline scores must be finite and within 0-100")
        if arm.size and (not np.issubdtype(arm.dtype, np.integer) or not np.issubdtype(task.dtype, np.integer)):
            raise SynergyInputError("baseline arm and task must be integer codes")
        if np.any(arm < 1) or np.any(task < 0):
            raise SynergyInputError("baseline arm codes are 1..A (agents) and task codes are >= 0")
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "arm", arm.astype(np.int64))
        object.__setattr__(self, "task", task.astype(np.int64))


def _cells(baseline: AgentBaseline) -> tuple[dict[tuple[int, int], tuple[float, int]], float | None]:
    """Mean and count per (task, agent), and the pooled within-cell variance (None without replicates)."""
    cells: dict[tuple[int, int], list[float]] = {}
    for a, t, y in zip(baseline.arm.tolist(), baseline.task.tolist(), baseline.y.tolist(), strict=True):
        cells.setdefault((t, a), []).append(y)
    ss = sum(float(np.sum((np.array(v) - np.mean(v)) ** 2)) for v in cells.values())
    dof = sum(len(v) - 1 for v in cells.values())
    pooled = ss / dof if dof > 0 else None
    return {k: (float(np.mean(v)), len(v)) for k, v in cells.items()}, pooled


def _vectors(data: SynergyData, design: Design, task: int, agent: int) -> tuple[np.ndarray, np.ndarray]:
    """Small-set vectors of human alone and human with agent on ``task`` at the average position."""
    share = np.zeros(design.d)
    for pos, col in design.position_columns.items():
        share[col] = float(np.mean(data.position == pos))
    human = share.copy()
    human[design.arm_columns[0]] += 1.0
    human[design.p + task] += 1.0
    team = share.copy()
    team[design.arm_columns[agent]] += 1.0
    team[design.p + task] += 1.0
    team[design.p + design.n_tasks + task] += 1.0
    return human, team


def _compare(est: np.ndarray, cov: np.ndarray, level: float, rng: np.random.Generator) -> dict[str, Any]:
    """Levels (human, team, agent) with covariance ``cov``: the two contrasts and the strong-synergy summary."""
    names = ("human_alone", "agent_alone", "with_agent")
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))
    out: dict[str, Any] = {n: interval(est[i], se[i], level) for i, n in zip((0, 2, 1), names, strict=True)}
    for name, i in (("with_agent_minus_human_alone", 0), ("with_agent_minus_agent_alone", 2)):
        var = cov[1, 1] + cov[i, i] - 2 * cov[1, i]
        out[name] = interval(est[1] - est[i], float(np.sqrt(max(var, 0.0))), level)
    draws = rng.multivariate_normal(est, cov, size=DRAWS, method="cholesky")
    strong = draws[:, 1] - np.maximum(draws[:, 0], draws[:, 2])
    tail = (1.0 - level) / 2.0
    out["strong_synergy"] = {
        "estimate": float(est[1] - max(est[0], est[2])),
        "lower": float(np.quantile(strong, tail)), "upper": float(np.quantile(strong, 1.0 - tail)),
        "p_team_beats_both": float(np.mean(strong > 0)),
    }
    return out


def _row(data: SynergyData, design: Design, sol: np.ndarray, cov: np.ndarray, tasks: list[int], agent: int,
         agent_mean: float, agent_var: float) -> tuple[np.ndarray, np.ndarray]:
    vecs = [_vectors(data, design, t, agent) for t in tasks]
    human = np.mean([v[0] for v in vecs], axis=0)
    team = np.mean([v[1] for v in vecs], axis=0)
    basis = np.stack([human, team])
    est = np.array([human @ sol, team @ sol, agent_mean])
    joint = np.zeros((3, 3))
    joint[:2, :2] = basis @ cov @ basis.T
    joint[2, 2] = agent_var
    return est, joint


def strong_synergy_table(data: SynergyData, design: Design, core: CoreFit, cov: np.ndarray,
                         baseline: AgentBaseline, level: float, reasons: dict[str, str]) -> dict[str, Any] | None:
    """The three-way comparison per (task, agent) with baseline runs, and per agent over those tasks."""
    cells, pooled = _cells(baseline)
    if pooled is None:
        reasons["strong_synergy"] = (
            "no (task, agent) has two or more agent-alone runs: the agent's own run-to-run noise is unknown, so "
            "no interval can be given for agent alone against the team")
        return None
    team = data.team
    both = set(np.intersect1d(data.task[team], data.task[~team]).tolist())
    rng = np.random.default_rng(0)
    rows, skipped = [], []
    by_agent: dict[int, list[tuple[int, float, int]]] = {}
    for (t, a), (mean, count) in sorted(cells.items()):
        if a not in design.arm_columns or t not in both or a >= len(data.arm_labels):
            skipped.append((t, a))
            continue
        est, joint = _row(data, design, core.ev.solution, cov, [t], a, mean, pooled / count)
        rows.append({"task": t, "agent": data.arm_labels[a], "agent_runs": count} | _compare(est, joint, level, rng))
        by_agent.setdefault(a, []).append((t, mean, count))
    agents = []
    for a, items in sorted(by_agent.items()):
        tasks = [t for t, _, _ in items]
        mean = float(np.mean([m for _, m, _ in items]))
        var = pooled * float(np.sum([1.0 / c for _, _, c in items])) / len(items) ** 2
        est, joint = _row(data, design, core.ev.solution, cov, tasks, a, mean, var)
        agents.append({"agent": data.arm_labels[a], "tasks": len(tasks)} | _compare(est, joint, level, rng))
    if skipped:
        reasons["strong_synergy_cells"] = (
            f"(task, agent) pairs {skipped} have agent-alone runs but the task was not done both alone and with an "
            "agent (or the agent has no episode): human alone against the team is not estimable there")
    return {"pooled_agent_run_variance": pooled, "cells": rows, "agents": agents}
