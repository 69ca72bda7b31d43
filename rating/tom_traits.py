"""A worker's ToM as a trait and as a moment-to-moment deviation (the paper's Eq. 4–5, Mundlak decomposition).

Two decompositions, because each is right for a different question:

* ``loo`` (the paper's Eq. 4–5): the trait is the mean code of the worker's *other* coded episodes (Jacob &
  Lefgren's leave-one-out mean), so an episode's own code never enters its own predictor — otherwise the code's
  noise, shared with that episode's outcome (both are LLM readings of the same dialogue), would inflate the
  trait's association. An uncoded episode (solo: there are no prompts) gets the mean of all the worker's codes.
  The deviation is the code minus that mean. This is the trait of the Eq. 3 moderation.
* ``mundlak``: the trait is the mean of all the worker's codes (one value per worker) and the deviation the code
  minus it, so the deviation sums to zero within a worker. Use it whenever trait and deviation enter together:
  the leave-one-out mean moves within a worker by −code/m, so beside it the paper's deviation also carries
  trait signal (it is a further reading of the worker's level) and shows a "within-worker" effect where there is
  none (`bench/theory_of_mind.py` measures it); the centred deviation carries none.

Either trait is also given *calibrated*: the best linear predictor of the worker's true ToM from the m codes it
averages, μ + λ_m (mean − μ), λ_m = σ_τ² / (σ_τ² + σ_w² / m), with σ_τ² (between workers) and σ_w² (within a
worker: situational change plus judge noise) from a one-way ANOVA of the codes. A mean of two or three noisy
codes is an error-prone covariate whose slope is biased towards zero by λ_m; regressing on the best linear
predictor instead (regression calibration) removes that bias, which is what lets the moderation's interval
cover the true effect per ToM point.

Pure numpy: no Django.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DECOMPOSITIONS", "CodeVariance", "TomTraits", "code_variance", "tom_traits"]

DECOMPOSITIONS = ("loo", "mundlak")


@dataclass(frozen=True)
class CodeVariance:
    """One-way random-effects decomposition of the episode codes by worker (moment estimates)."""

    mean: float                 # μ, the average code
    between: float              # σ_τ², spread of the workers' stable level
    within: float               # σ_w², spread of a worker's codes around their level
    n_workers: int              # workers with at least one code
    n_codes: int

    def reliability(self, m: np.ndarray) -> np.ndarray:
        """λ_m: the share of the variance of a mean of ``m`` codes that is the worker's stable level."""
        m = np.asarray(m, dtype=float)
        total = self.between + self.within / np.maximum(m, 1.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            lam = np.where(total > 0, self.between / total, 0.0)
        return np.where(m > 0, lam, np.nan)


@dataclass(frozen=True)
class TomTraits:
    """Per episode (aligned with the input) for one decomposition: the trait, the deviation, and how many codes
    the trait rests on."""

    decomposition: str          # "loo" or "mundlak"
    trait: np.ndarray           # NaN when the worker has no (other) coded episode
    codes_used: np.ndarray      # m: the codes the trait averages
    deviation: np.ndarray       # code − trait; NaN where the episode is not coded or has no trait
    calibrated: np.ndarray      # μ + λ_m (trait − μ); NaN like trait, or everywhere if variance is None
    variance: CodeVariance | None


def code_variance(human: np.ndarray, code: np.ndarray) -> CodeVariance | None:
    """σ_τ² and σ_w² by the unbalanced one-way ANOVA (n₀ = (N − Σ n_h² / N) / (H − 1)); None when there are
    fewer than two workers or no worker with two codes (no within-worker spread to estimate)."""
    coded = ~np.isnan(code)
    h, c = human[coded], code[coded]
    workers, inverse, counts = np.unique(h, return_inverse=True, return_counts=True)
    n_workers, n = workers.size, c.size
    if n_workers < 2 or n - n_workers < 1:
        return None
    means = np.bincount(inverse, weights=c) / counts
    grand = float(c.mean())
    ms_between = float(np.sum(counts * (means - grand) ** 2)) / (n_workers - 1)
    ms_within = float(np.sum((c - means[inverse]) ** 2)) / (n - n_workers)
    n0 = (n - float(np.sum(counts ** 2)) / n) / (n_workers - 1)
    between = max((ms_between - ms_within) / n0, 0.0)
    return CodeVariance(mean=grand, between=between, within=ms_within, n_workers=int(n_workers), n_codes=int(n))


def tom_traits(human: np.ndarray, code: np.ndarray, decomposition: str = "loo") -> TomTraits:
    """Trait, deviation and calibrated trait of every episode (see the module docstring).

    ``code`` is the episode's ToM code (the mean of the judges' codes), NaN where the episode is not coded.
    """
    if decomposition not in DECOMPOSITIONS:
        raise ValueError(f"decomposition must be one of {DECOMPOSITIONS}")
    human = np.asarray(human, dtype=np.int64)
    code = np.asarray(code, dtype=float)
    if human.shape != code.shape or human.ndim != 1:
        raise ValueError("human and code must be one-dimensional and of the same length")
    coded = ~np.isnan(code)
    size = int(human.max()) + 1 if human.size else 0
    total = np.bincount(human[coded], weights=code[coded], minlength=size)[human]
    count = np.bincount(human[coded], minlength=size).astype(float)[human]
    if decomposition == "loo":
        used, summed = count - coded, total - np.where(coded, code, 0.0)
    else:
        used, summed = count, total
    with np.errstate(invalid="ignore", divide="ignore"):
        trait = np.where(used > 0, summed / used, np.nan)
    deviation = np.where(coded, code - trait, np.nan)
    variance = code_variance(human, code)
    if variance is None:
        calibrated = np.full(code.shape, np.nan)
    else:
        calibrated = variance.mean + variance.reliability(used) * (trait - variance.mean)
    return TomTraits(decomposition=decomposition, trait=trait, codes_used=used, deviation=deviation,
                     calibrated=calibrated, variance=variance)
