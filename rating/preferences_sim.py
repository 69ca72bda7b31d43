"""Simulated studies with known truth for the preference model (`bench/preferences.py` and the tests).

Each task gets one deliverable per arm cell (the worker alone, each agent with a worker, each agent alone),
workers drawn from a pool; rubric scores are quality plus noise; comparison sets of 2-4 deliverables of one
task are ranked by experts with a position bias and a length preference. Pairs follow Davidson's model with
ties exactly; larger sets follow Plackett-Luce on the same log-worths (whose pair marginals are exactly
Bradley-Terry), without ties, because no joint ranking model has Davidson's pair marginals. Seeded, numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rating.preferences_data import ComparisonRow, EpisodeRow, ScoreRow, cell_label

__all__ = ["SimDesign", "SimTruth", "Simulated", "simulate", "true_win_rates"]


@dataclass(frozen=True)
class SimDesign:
    n_tasks: int = 60
    n_workers: int = 40
    agents: tuple[str, ...] = ("A", "B")
    agent_alone: bool = True
    scores_per_episode: int = 1
    score_fraction: float = 1.0        # share of deliverables with rubric scores
    sets_per_task: int = 4
    set_sizes: tuple[int, ...] = (2,)  # drawn uniformly per set
    n_experts: int = 8


@dataclass(frozen=True)
class SimTruth:
    worker_alone: float = 60.0
    with_agent: tuple[float, ...] = (68.0, 64.0)
    agent_alone: tuple[float, ...] = (55.0, 50.0)
    worker_sd: float = 6.0
    task_sd: float = 8.0
    score_sd: float = 10.0
    points_per_logit: float = 12.0
    first: float = 0.3
    length: float = 0.4
    nu: float = 0.6
    length_mean: tuple[float, float, float] = (0.0, 0.5, 0.8)   # log2 length: worker alone, with agent, alone
    length_sd: float = 0.7


@dataclass(frozen=True)
class Simulated:
    episodes: list[EpisodeRow]
    scores: list[ScoreRow]
    comparisons: list[ComparisonRow]
    levels: dict[str, float]           # cell label -> true level


def _cells(design: SimDesign, truth: SimTruth) -> list[tuple[str, str | None, float, float]]:
    """(arm, agent, level, mean log2 length) of every cell."""
    cells = [("worker_alone", None, truth.worker_alone, truth.length_mean[0])]
    cells += [("with_agent", a, truth.with_agent[i], truth.length_mean[1]) for i, a in enumerate(design.agents)]
    if design.agent_alone:
        cells += [("agent_alone", a, truth.agent_alone[i], truth.length_mean[2]) for i, a in enumerate(design.agents)]
    return cells


def _ranking(z: np.ndarray, nu: float, rng: np.random.Generator) -> list[int]:
    """Ranks (1 = best, equal = tie): Davidson for two items, Plackett-Luce (no ties) for more."""
    if z.size == 2:
        d = z[0] - z[1]
        p = np.array([math.exp(d / 2), math.exp(-d / 2), nu])
        o = rng.choice(3, p=p / p.sum())
        return [[1, 2], [2, 1], [1, 1]][o]
    order = np.argsort(-(z + rng.gumbel(size=z.size)))     # Gumbel-max = Plackett-Luce
    ranks = np.empty(z.size, dtype=int)
    ranks[order] = np.arange(1, z.size + 1)
    return ranks.tolist()


def simulate(design: SimDesign, truth: SimTruth, rng: np.random.Generator) -> Simulated:
    """Draw one study from the truth."""
    cells = _cells(design, truth)
    worker_u = rng.normal(0.0, truth.worker_sd, design.n_workers)
    episodes, scores, comparisons = [], [], []
    rho = 1.0 / truth.points_per_logit
    for t in range(design.n_tasks):
        task_u = rng.normal(0.0, truth.task_sd)
        ids, q, loglen = [], [], []
        for arm, agent, level, mean_len in cells:
            worker = None if arm == "agent_alone" else int(rng.integers(design.n_workers))
            eid = f"t{t}-{cell_label(arm, agent)}"
            episodes.append(EpisodeRow(eid, arm, f"t{t}", agent, None if worker is None else f"w{worker}"))
            quality = level + task_u + (0.0 if worker is None else worker_u[worker])
            if rng.random() < design.score_fraction:
                for g in range(design.scores_per_episode):
                    y = float(np.clip(quality + rng.normal(0.0, truth.score_sd), 0.0, 100.0))
                    scores.append(ScoreRow(eid, y, f"judge{g}"))
            ids.append(eid)
            q.append(quality)
            loglen.append(mean_len + rng.normal(0.0, truth.length_sd))
        for s in range(design.sets_per_task):
            k = min(int(rng.choice(design.set_sizes)), len(ids))
            pick = rng.choice(len(ids), size=k, replace=False)
            shown = rng.permutation(k) + 1
            z = np.array([rho * q[i] + truth.length * loglen[i] for i in pick]) + truth.first * (shown == 1)
            ranks = _ranking(z, truth.nu, rng)
            comparisons.append(ComparisonRow(
                f"t{t}-s{s}", f"x{int(rng.integers(design.n_experts))}", tuple(ids[i] for i in pick),
                tuple(int(v) for v in shown), tuple(ranks), tuple(float(2.0 ** loglen[i]) for i in pick)))
    levels = {cell_label(arm, agent): level for arm, agent, level, _ in cells}
    return Simulated(episodes, scores, comparisons, levels)


def true_win_rates(truth: SimTruth, levels: dict[str, float], a: str, b: str) -> dict[str, float]:
    """Davidson's win / tie / loss of cell a against b at no position or length advantage."""
    d = (levels[a] - levels[b]) / truth.points_per_logit
    w, l_, t = math.exp(d / 2), math.exp(-d / 2), truth.nu
    return {"win": w / (w + l_ + t), "tie": t / (w + l_ + t), "loss": l_ / (w + l_ + t)}
