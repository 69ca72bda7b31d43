"""Simulated ToM studies with known truth: the bench, the tests and the demo draw from here.

A worker has a stable ToM level τ_h; each with-agent episode expresses it with a situational change ν_e; two
judges of different families code it 0–5 with their own bias and noise (rounded and clipped like a real code).
Solo episodes have no prompts and so no code. ToM raises the with-agent ability κ by ``kappa_per_tom`` points per
ToM point and the solo ability θ by ``theta_per_tom`` (0 in the paper's finding); the agent's response quality
(0–5) rises with the trait and the deviation over and above effort (turns, characters, edit ratio), which itself
rises with ToM so that the controls matter. Every output is flagged ``simulated``. Seeded and pure (numpy only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rating.synergy_data import SynergyData
from rating.synergy_sim import StudyDesign, Truth, _sessions

__all__ = ["JUDGES", "TomStudy", "TomTruth", "simulate_tom"]

JUDGES = ("judge family A (simulated)", "judge family B (simulated)")


@dataclass(frozen=True)
class TomTruth:
    """The synergy truth plus ToM's: code scale, judge noise and the effects ToM has (known amounts)."""

    synergy: Truth = field(default_factory=Truth)
    tom_mean: float = 2.5
    sd_trait: float = 0.8            # σ_τ: between workers
    sd_state: float = 0.4            # ν: within a worker, episode to episode
    sd_judge: float = 0.5            # each judge's noise on a code
    judge_bias: tuple[float, float] = (0.0, 0.3)
    kappa_per_tom: float = 3.0       # δ_κ: with-agent points per ToM point of the trait
    theta_per_tom: float = 0.0       # δ_θ: solo points per ToM point
    uncoded_share: float = 0.05      # with-agent episodes whose log cannot be parsed: not coded
    quality_trait: float = 0.3       # response quality per trait point
    quality_deviation: float = 0.15  # response quality per point of the episode's deviation
    quality_effort: tuple[float, float, float] = (-0.1, 0.3, -0.8)   # per turn, per 1 000 characters, per edit ratio
    sd_quality_worker: float = 0.3
    sd_quality: float = 0.6


@dataclass(frozen=True)
class TomStudy:
    """One simulated study; ``codes`` is (episodes × 2 judges), NaN where not coded."""

    data: SynergyData
    codes: np.ndarray
    tom: np.ndarray                  # mean of the judges' codes per episode, NaN where not coded
    quality: np.ndarray              # agent's response quality 0–5, NaN on solo or uncoded episodes
    turns: np.ndarray
    characters: np.ndarray
    edit_ratio: np.ndarray
    trait: np.ndarray                # τ_h (truth)
    state: np.ndarray                # τ_h + ν_e per episode (truth)
    simulated: bool = True

    def episode_records(self) -> list[dict[str, Any]]:
        """One plain dict per episode, flagged simulated, for the demo's panel and exports."""
        d = self.data
        out = []
        for e in range(d.n):
            codes = {JUDGES[j]: None if np.isnan(self.codes[e, j]) else int(self.codes[e, j]) for j in range(2)}
            out.append({
                "simulated": True, "human": int(d.human[e]), "task": int(d.task[e]),
                "arm": d.arm_labels[int(d.arm[e])], "position": int(d.position[e]), "score": float(d.y[e]),
                "tom_codes": codes, "quality": None if np.isnan(self.quality[e]) else int(self.quality[e]),
                "turns": int(self.turns[e]), "characters": int(self.characters[e]),
                "edit_ratio": float(self.edit_ratio[e]),
            })
        return out


def _codes(state: np.ndarray, coded: np.ndarray, truth: TomTruth, rng: np.random.Generator) -> np.ndarray:
    noise = rng.normal(0.0, truth.sd_judge, (state.size, 2)) + np.asarray(truth.judge_bias)
    codes = np.clip(np.round(state[:, None] + noise), 0.0, 5.0)
    codes[~coded] = np.nan
    return codes


def _effort(trait_dev: np.ndarray, team: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Turns, characters and edit ratio; higher ToM writes a little more (so effort and ToM are correlated)."""
    n = trait_dev.size
    turns = np.where(team, 1 + rng.poisson(np.exp(0.8 + 0.15 * trait_dev)), 0)
    characters = np.where(team, np.round(rng.lognormal(5.5 + 0.2 * trait_dev, 0.5, n) * np.maximum(turns, 1)), 0)
    edit_ratio = np.where(team, rng.beta(2.0 + 0.5 * np.maximum(trait_dev + 2.0, 0.0), 3.0, n), 0.0)
    return turns.astype(float), characters.astype(float), edit_ratio


def simulate_tom(design: StudyDesign, truth: TomTruth, rng: np.random.Generator) -> TomStudy:
    """One study of ``design`` under ``truth`` (scores clipped to 0–100, codes to 0–5)."""
    syn = truth.synergy
    human, task, position, solo, agent_of = _sessions(design, rng)
    team = ~solo
    arm = np.where(solo, 0, agent_of[human])
    u = rng.multivariate_normal(np.zeros(2), syn.worker_cov(), size=design.workers)
    tau = rng.normal(0.0, truth.sd_trait, design.workers)
    state = truth.tom_mean + tau[human] + rng.normal(0.0, truth.sd_state, human.size)
    beta = rng.normal(0.0, syn.sd_beta, design.n_tasks)
    gamma = rng.normal(0.0, syn.sd_gamma, design.n_tasks)
    level = syn.solo_level + np.concatenate([[0.0], syn.boosts])[arm]
    pos_effect = np.concatenate([[0.0], syn.positions, np.zeros(design.tasks_per_worker)])[position - 1]
    ability = np.where(team, u[human, 1] + truth.kappa_per_tom * tau[human],
                       u[human, 0] + truth.theta_per_tom * tau[human])
    y = level + pos_effect + ability + beta[task] + team * gamma[task] + rng.normal(0.0, syn.sd_noise, human.size)
    data = SynergyData(y=np.clip(y, 0.0, 100.0), arm=arm, human=human, task=task, position=position,
                       arm_labels=("solo", *(f"agent {a}" for a in range(1, design.n_agents + 1))))
    coded = team & (rng.random(human.size) >= truth.uncoded_share)
    codes = _codes(state, coded, truth, rng)
    tom = codes.mean(axis=1)
    turns, characters, edit_ratio = _effort(tau[human], team, rng)
    q_worker = rng.normal(0.0, truth.sd_quality_worker, design.workers)
    b_turns, b_chars, b_edit = truth.quality_effort
    quality = (2.5 + truth.quality_trait * tau[human] + truth.quality_deviation * (state - truth.tom_mean - tau[human])
               + b_turns * turns + b_chars * characters / 1000.0 + b_edit * edit_ratio + q_worker[human]
               + rng.normal(0.0, truth.sd_quality, human.size))
    quality = np.where(coded, np.clip(np.round(quality), 0.0, 5.0), np.nan)
    return TomStudy(data=data, codes=codes, tom=tom, quality=quality, turns=turns, characters=characters,
                    edit_ratio=edit_ratio, trait=truth.tom_mean + tau, state=state)
