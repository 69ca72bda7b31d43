"""Planning a solo condition: the expected width of an agent's boost interval for a grid of designs (workers ×
solo tasks per worker), by simulating studies from given (fitted or assumed) variance components and fitting
each with the synergy model. Pure, seeded and bounded in time: replicates are spread round-robin over the grid
until each cell has ``replicates`` or ``max_seconds`` has passed; every row says how many it used.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from rating.synergy import synergy_fit
from rating.synergy_data import SynergyInputError
from rating.synergy_sim import StudyDesign, Truth, simulate

__all__ = ["PlanCell", "plan_boost_widths", "smallest_design", "truth_from_components"]


def truth_from_components(components: dict[str, float], n_agents: int) -> Truth:
    """A simulation truth from variance components as `SynergyFit.variance_components` names them (points²);
    the boosts are 0 (the width does not depend on them) and the solo level 50."""
    need = ("theta_var", "kappa_var", "theta_kappa_cov", "task_solo_var", "task_agent_extra_var", "residual_var")
    missing = [k for k in need if k not in components or components[k] is None]
    if missing:
        raise SynergyInputError(f"variance components missing: {missing}")
    var_t, var_k = max(components["theta_var"], 0.0), max(components["kappa_var"], 0.0)
    if components["residual_var"] <= 0:
        raise SynergyInputError("the residual variance must be positive")
    rho = components["theta_kappa_cov"] / math.sqrt(var_t * var_k) if var_t > 0 and var_k > 0 else 0.0
    return Truth(solo_level=50.0, boosts=(0.0,) * n_agents, sd_theta=math.sqrt(var_t), sd_kappa=math.sqrt(var_k),
                 rho=float(np.clip(rho, -1.0, 1.0)), sd_beta=math.sqrt(max(components["task_solo_var"], 0.0)),
                 sd_gamma=math.sqrt(max(components["task_agent_extra_var"], 0.0)),
                 sd_noise=math.sqrt(components["residual_var"]))


@dataclass
class PlanCell:
    """One design of the grid; its random stream depends only on (seed, workers, solo tasks), so a cell's
    widths do not change when the grid around it does."""

    workers: int
    solo_per_worker: int
    widths: list[float]
    rng: np.random.Generator

    def row(self, replicates: int) -> dict[str, Any]:
        w = np.array(self.widths)
        return {
            "workers": self.workers, "solo_per_worker": self.solo_per_worker, "replicates": int(w.size),
            "replicates_asked": replicates,
            "mean_width": float(w.mean()) if w.size else None,
            "width_sd": float(w.std(ddof=1)) if w.size > 1 else None,
        }


def _width(design: StudyDesign, truth: Truth, rng: np.random.Generator, level: float) -> float:
    """Mean width over the agents of the boost intervals of one simulated study."""
    fit = synergy_fit(simulate(design, truth, rng).data, level=level, test=False)
    widths = [b["upper"] - b["lower"] for b in fit.boosts.values()]
    return float(np.mean(widths)) if widths else math.nan


def plan_boost_widths(components: dict[str, float], *, workers: list[int], solo_per_worker: list[int],
                      tasks_per_worker: int, n_tasks: int, n_agents: int, order: str = "counterbalanced",
                      replicates: int = 20, level: float = 0.95, seed: int = 0,
                      max_seconds: float = 60.0) -> list[dict[str, Any]]:
    """One row per (workers, solo tasks per worker) of the grid, in grid order."""
    truth = truth_from_components(components, n_agents)
    cells = [PlanCell(w, k, [], np.random.default_rng([seed, w, k])) for w in workers for k in solo_per_worker]
    for cell in cells:
        if not 1 <= cell.solo_per_worker < tasks_per_worker:
            raise SynergyInputError("solo tasks per worker must be at least 1 and fewer than the tasks per worker")
        if cell.workers < 2:
            raise SynergyInputError("a design needs at least two workers")
    deadline = time.process_time() + max_seconds
    for _ in range(replicates):
        for cell in cells:
            if time.process_time() > deadline:
                return [c.row(replicates) for c in cells]
            design = StudyDesign(workers=cell.workers, tasks_per_worker=tasks_per_worker,
                                 solo_per_worker=cell.solo_per_worker, n_tasks=n_tasks, n_agents=n_agents,
                                 order=order)
            width = _width(design, truth, cell.rng, level)
            if math.isfinite(width):
                cell.widths.append(width)
    return [c.row(replicates) for c in cells]


def smallest_design(rows: list[dict[str, Any]], width: float) -> dict[str, Any] | None:
    """The design with the fewest solo episodes (workers × solo tasks) whose mean width is at most ``width``."""
    fits = [r for r in rows if r["mean_width"] is not None and r["mean_width"] <= width]
    return min(fits, key=lambda r: (r["workers"] * r["solo_per_worker"], r["workers"]), default=None)
