"""Simulated studies with known truth for the synergy model: planning (`rating/synergy_plan.py`), the bench and
the tests draw from here. Seeded and pure (numpy only).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rating.synergy_data import SynergyData, SynergyInputError

__all__ = ["StudyDesign", "Truth", "simulate"]

ORDERS = ("solo_first", "agent_first", "counterbalanced")


@dataclass(frozen=True)
class StudyDesign:
    """Who does what: each worker does ``tasks_per_worker`` distinct tasks, ``solo_per_worker`` of them alone and
    the rest with one agent drawn per worker (fixed within the worker, as in the paper's design)."""

    workers: int = 100
    tasks_per_worker: int = 5
    solo_per_worker: int = 2
    n_tasks: int = 30
    n_agents: int = 5
    order: str = "solo_first"

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise SynergyInputError(f"order must be one of {ORDERS}")
        if not 0 <= self.solo_per_worker <= self.tasks_per_worker <= self.n_tasks:
            raise SynergyInputError("need 0 <= solo tasks <= tasks per worker <= tasks")
        if self.workers < 1 or self.n_agents < 1:
            raise SynergyInputError("need at least one worker and one agent")


@dataclass(frozen=True)
class Truth:
    """Variance components (SDs, points) and fixed effects of the simulated study."""

    solo_level: float = 45.0
    boosts: tuple[float, ...] = (2.0, 4.0, 6.0, 8.0, 10.0)
    sd_theta: float = 8.0
    sd_kappa: float = 8.0
    rho: float = 0.6
    sd_beta: float = 6.0
    sd_gamma: float = 3.0
    sd_noise: float = 10.0
    positions: tuple[float, ...] = field(default_factory=tuple)   # effect of position 2, 3, ... (1 is 0)

    def worker_cov(self) -> np.ndarray:
        off = self.rho * self.sd_theta * self.sd_kappa
        return np.array([[self.sd_theta ** 2, off], [off, self.sd_kappa ** 2]])


@dataclass(frozen=True)
class Simulated:
    data: SynergyData
    theta: np.ndarray
    kappa: np.ndarray
    beta: np.ndarray
    gamma: np.ndarray


def _sessions(design: StudyDesign, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(human, task, position, solo?) per episode and each worker's agent."""
    n, k = design.tasks_per_worker, design.solo_per_worker
    agent_of = rng.permutation(np.arange(design.workers) % design.n_agents) + 1
    human = np.repeat(np.arange(design.workers), n)
    task = np.concatenate([rng.choice(design.n_tasks, n, replace=False) for _ in range(design.workers)])
    position = np.tile(np.arange(1, n + 1), design.workers)
    solo_first = {"solo_first": np.ones(design.workers, bool), "agent_first": np.zeros(design.workers, bool),
                  "counterbalanced": rng.random(design.workers) < 0.5}[design.order]
    slot = np.tile(np.arange(n), design.workers)
    solo = np.where(solo_first[human], slot < k, slot >= n - k)
    return human, task, position, solo, agent_of


def simulate(design: StudyDesign, truth: Truth, rng: np.random.Generator) -> Simulated:
    """One study: scores clipped to 0–100 (rare at the default levels)."""
    if len(truth.boosts) != design.n_agents:
        raise SynergyInputError("truth.boosts needs one boost per agent")
    human, task, position, solo, agent_of = _sessions(design, rng)
    arm = np.where(solo, 0, agent_of[human])
    u = rng.multivariate_normal(np.zeros(2), truth.worker_cov(), size=design.workers)
    beta = rng.normal(0.0, truth.sd_beta, design.n_tasks)
    gamma = rng.normal(0.0, truth.sd_gamma, design.n_tasks)
    level = truth.solo_level + np.concatenate([[0.0], truth.boosts])[arm]
    pos_effect = np.concatenate([[0.0], truth.positions, np.zeros(design.tasks_per_worker)])[position - 1]
    team = ~solo
    y = (level + pos_effect + np.where(team, u[human, 1], u[human, 0]) + beta[task] + team * gamma[task]
         + rng.normal(0.0, truth.sd_noise, human.size))
    data = SynergyData(
        y=np.clip(y, 0.0, 100.0), arm=arm, human=human, task=task, position=position,
        arm_labels=("solo", *(f"agent {a}" for a in range(1, design.n_agents + 1))),
    )
    return Simulated(data, u[:, 0], u[:, 1], beta, gamma)
