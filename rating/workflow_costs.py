"""Quality and expected cost at a target quality of one workflow (GDPval-style), with task-bootstrap intervals.

A workflow's attempts each have a task, a score and a cost. When an attempt that misses the target is
thrown away and the work tried again, the number of attempts until one reaches the target is geometric, so
the expected cost of one deliverable at the target is the cost per attempt divided by the probability that
an attempt reaches it:

.. math::  E = \\bar c / \\hat p = \\sum_i c_i \\big/ \\sum_i 1[s_i \\ge T]

Attempts of one task are not independent (a hard task is hard for every attempt), so the intervals come from
a bootstrap over tasks (percentile intervals). A replicate in which no attempt reaches the target has an
infinite expected cost, so an upper bound may be infinite: the data cannot rule out that the target is
practically never reached. When no attempt reaches the target, or no attempt has both a score and a known
cost, the expected cost cannot be estimated and the reason says why; there is never a number then.

Pure numpy: arrays in, a frozen result out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

NO_ATTEMPT = "no attempt has both a score and a known cost"
ONE_TASK = "one task only: a bootstrap over tasks needs two or more"


@dataclass(frozen=True)
class BootstrapConfig:
    """How the task bootstrap is run: replicates, interval level and the seed (a fixed seed: stable pages)."""

    reps: int = 2000
    level: float = 0.95
    seed: int = 20250925


@dataclass(frozen=True)
class Interval:
    estimate: float | None
    low: float | None = None
    high: float | None = None  # may be math.inf for an expected cost


@dataclass(frozen=True)
class WorkflowEstimate:
    """One workflow's quality, cost per attempt and expected cost at the target.

    ``quality`` is over every scored attempt (``scored``); cost, reach and expected cost over the attempts with
    both a score and a known cost (``priced``). ``reason`` is empty when the expected cost was estimated;
    ``note`` says why an estimate has no interval.
    """

    scored: int
    priced: int
    tasks: int
    quality: Interval
    cost_per_attempt: Interval
    reach: Interval
    expected_cost: Interval
    reason: str = ""
    note: str = ""


def _validate(task: NDArray, score: NDArray, cost: NDArray, target: float, config: BootstrapConfig) -> None:
    if not (task.shape == score.shape == cost.shape) or task.ndim != 1:
        raise ValueError("task, score and cost must be 1-d arrays of the same length")
    if not math.isfinite(target):
        raise ValueError("target must be a finite score")
    if config.reps < 100:
        raise ValueError("reps must be at least 100")
    if not 0 < config.level < 1:
        raise ValueError("level must lie strictly between 0 and 1")
    if np.any(cost[np.isfinite(cost)] < 0):
        raise ValueError("cost must not be negative")


def _task_sums(codes: NDArray, n_tasks: int, values: NDArray) -> NDArray:
    return np.bincount(codes, weights=values, minlength=n_tasks)


def task_bootstrap_weights(n_tasks: int, config: BootstrapConfig) -> NDArray:
    """Return how often each task is drawn in each replicate (reps × tasks), tasks drawn with replacement."""
    draws = np.random.default_rng(config.seed).integers(0, n_tasks, size=(config.reps, n_tasks))
    weights = np.zeros((config.reps, n_tasks))
    np.add.at(weights, (np.repeat(np.arange(config.reps), n_tasks), draws.ravel()), 1.0)
    return weights


def _percentiles(values: NDArray, level: float) -> tuple[float, float]:
    # inverted_cdf takes order statistics, so an infinite replicate gives an infinite bound, never a NaN.
    low, high = np.quantile(values, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
    return float(low), float(high)


def _ratio(num: NDArray, den: NDArray) -> NDArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.inf)


def _ratio_interval(num: NDArray, den: NDArray, weights: NDArray | None, level: float) -> Interval:
    """Estimate sum(num)/sum(den) over tasks, with its percentile interval over the replicates."""
    estimate = float(num.sum() / den.sum()) if den.sum() > 0 else math.inf
    if weights is None:
        return Interval(estimate)
    low, high = _percentiles(_ratio(weights @ num, weights @ den), level)
    return Interval(estimate, low, high)


def _codes(task: NDArray) -> tuple[NDArray, int]:
    _, codes = np.unique(task, return_inverse=True)
    return codes.ravel(), int(codes.max()) + 1 if codes.size else 0


def _quality(task: NDArray, score: NDArray, config: BootstrapConfig) -> tuple[Interval, int]:
    keep = np.isfinite(score)
    if not keep.any():
        return Interval(None), 0
    codes, n_tasks = _codes(task[keep])
    weights = task_bootstrap_weights(n_tasks, config) if n_tasks > 1 else None
    found = _ratio_interval(_task_sums(codes, n_tasks, score[keep]), _task_sums(codes, n_tasks, np.ones(keep.sum())),
                            weights, config.level)
    return found, int(keep.sum())


def workflow_estimate(task: ArrayLike, score: ArrayLike, cost: ArrayLike, *, target: float,
                      config: BootstrapConfig | None = None) -> WorkflowEstimate:
    """Return the workflow's quality and its expected cost at ``target``, each with a task-bootstrap interval.

    Parameters
    ----------
    task : task of each attempt (any hashable codes), the bootstrap's cluster.
    score : score of each attempt; NaN when not scored.
    cost : cost of each attempt; NaN when unknown (never guessed).
    target : the score an attempt must reach (``score >= target``).
    """
    config = config or BootstrapConfig()
    task, score, cost = np.asarray(task), np.asarray(score, dtype=float), np.asarray(cost, dtype=float)
    _validate(task, score, cost, target, config)
    quality, scored = _quality(task, score, config)
    keep = np.isfinite(score) & np.isfinite(cost)
    codes, n_tasks = _codes(task[keep])
    empty = Interval(None)
    if not keep.any():
        return WorkflowEstimate(scored, 0, 0, quality, empty, empty, empty, NO_ATTEMPT)
    weights = task_bootstrap_weights(n_tasks, config) if n_tasks > 1 else None
    costs, counts = _task_sums(codes, n_tasks, cost[keep]), _task_sums(codes, n_tasks, np.ones(keep.sum()))
    hits = _task_sums(codes, n_tasks, (score[keep] >= target).astype(float))
    per_attempt = _ratio_interval(costs, counts, weights, config.level)
    reach = _ratio_interval(hits, counts, weights, config.level)
    priced = int(keep.sum())
    if hits.sum() == 0:
        reason = f"no attempt reaches the target score {target:g} (the best scored {score[keep].max():.1f})"
        return WorkflowEstimate(scored, priced, n_tasks, quality, per_attempt, reach, empty, reason)
    expected = _ratio_interval(costs, hits, weights, config.level)
    return WorkflowEstimate(scored, priced, n_tasks, quality, per_attempt, reach, expected,
                            note="" if weights is not None else ONE_TASK)
