"""One simulated study of the calibrated model with known truth, shared by the fit and stability tests."""

from __future__ import annotations

import numpy as np

# Realistic noise on a 0-100 score scale: agent spread 3, participant spread 8, noise 15, level 70.
LEVEL, AGENT_SD, HUMAN_SD, NOISE_SD = 70.0, 3.0, 8.0, 15.0


def simulate(
    rng: np.random.Generator,
    *,
    n_agents: int = 5,
    n_humans: int = 93,
    n_obs: int = 386,
    agent_share: np.ndarray | None = None,
    n_tasks: int = 0,
    task_sd: float = 4.0,
    noise_sd: float = NOISE_SD,
) -> dict[str, np.ndarray]:
    """Return one simulated study (every participant appears at least once) and its true agent levels."""
    p = None if agent_share is None else agent_share / agent_share.sum()
    agent = rng.choice(n_agents, size=n_obs, p=p)
    human = np.concatenate([np.arange(n_humans), rng.integers(0, n_humans, n_obs - n_humans)])
    rng.shuffle(human)
    skill = rng.normal(0.0, AGENT_SD, n_agents)
    offset = rng.normal(0.0, HUMAN_SD, n_humans)
    y = LEVEL + skill[agent] + offset[human] + rng.normal(0.0, noise_sd, n_obs)
    out = {"agent": agent, "human": human, "y": y, "truth": LEVEL + skill}
    if n_tasks:
        task = rng.integers(0, n_tasks, n_obs)
        difficulty = rng.normal(0.0, task_sd, n_tasks)
        out["task"] = task
        out["y"] = y + difficulty[task]
        out["difficulty"] = difficulty
    return out
