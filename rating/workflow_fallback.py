"""GDPval's own workflow: the agent tries once, an expert reviews, and a miss is done by hand.

The agent's run is reviewed; when it reaches the target it is delivered, otherwise the expert (a professional
of the occupation) does the task themselves, which costs what the human-alone workflow costs to deliver at the
target. So the expected cost of one deliverable at the target is

.. math::  E = \\bar c_{run} + (1 - p_{run}) \\, E_{human}

where :math:`\\bar c_{run}` is the mean cost of a run attempt (model cost + review), :math:`p_{run}` the share of
run attempts reaching the target and :math:`E_{human} = \\sum c_h / \\sum 1[s_h \\ge T]` the human-alone expected
cost (`rating/workflow_costs.py:workflow_estimate`, attempts repeated until one reaches the target).

Quality is that of the deliverable handed over: the run's score when it reaches the target, else a human-alone
deliverable *at the target*, i.e. :math:`p_{run} \\bar s_{run \\ge T} + (1 - p_{run}) \\bar s_{human \\ge T}`.
The human part is the mean score of the human-alone attempts reaching the target, not the mean of every
human-alone attempt: the cost prices the by-hand step as repeated until it reaches the target, so what is
handed over is always at the target, and mixing in the misses would report a quality below the target for a
workflow that never delivers below it.

Intervals: the same percentile bootstrap over tasks as the other workflows, the runs and the human-alone
attempts resampled jointly (one replicate weight per task over the union of their tasks), since a hard task
is hard for both. A replicate that draws no run or no human-alone attempt leaves the workflow undefined and
is left out of the percentiles; one in which no human-alone attempt reaches the target while some run misses
has an infinite expected cost (an unbounded upper bound, as elsewhere).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rating.workflow_costs import (
    ONE_TASK,
    BootstrapConfig,
    Interval,
    WorkflowEstimate,
    _percentiles,
    _validate,
    task_bootstrap_weights,
    workflow_estimate,
)

NO_RUN = "no agent-alone run has both a score and a known cost"
NO_REPLICATE = "no bootstrap replicate drew both a run and a human-alone attempt"


def _ratio(num: NDArray, den: NDArray) -> NDArray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _fallback_cost(run: list[NDArray], human: list[NDArray]) -> NDArray:
    """E per row of the task sums (run: count, cost, hits; human: count, cost, hits); NaN when undefined."""
    (n_run, run_cost, run_hits), (n_human, human_cost, human_hits) = run, human
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_cost, miss = run_cost / n_run, 1 - run_hits / n_run
        by_hand = np.where(human_hits > 0, human_cost / np.where(human_hits > 0, human_hits, 1.0), np.inf)
        found = mean_cost + np.where(miss > 0, miss * by_hand, 0.0)  # a run that never misses never needs the hand
    return np.where((n_run > 0) & (n_human > 0), found, np.nan)


def _delivered_quality(run: list[NDArray], human: list[NDArray]) -> NDArray:
    """Delivered quality per row (run: count, reaching score sum, hits; human: count, ..., ...); NaN if undefined."""
    (n_run, run_sum, run_hits), (n_human, human_sum, human_hits) = run, human
    with np.errstate(divide="ignore", invalid="ignore"):
        miss = 1 - run_hits / n_run
        by_hand = human_sum / np.where(human_hits > 0, human_hits, 1.0)
        found = run_sum / n_run + np.where(miss > 0, miss * by_hand, 0.0)
    defined = (n_run > 0) & (n_human > 0) & ((miss <= 0) | (human_hits > 0))
    return np.where(defined, found, np.nan)


def _interval(values: NDArray, level: float) -> Interval:
    """Row 0 is the estimate, the rest the replicates (none: no interval); NaN replicates are left out."""
    estimate = float(values[0])
    if math.isnan(estimate):
        return Interval(None)
    kept = values[1:][~np.isnan(values[1:])]
    if not kept.size:
        return Interval(estimate)
    low, high = _percentiles(kept, level)
    return Interval(estimate, low, high)


def fallback_estimate(run_task: ArrayLike, run_score: ArrayLike, run_cost: ArrayLike, human_task: ArrayLike,
                      human_score: ArrayLike, human_cost: ArrayLike, *, target: float,
                      config: BootstrapConfig | None = None) -> WorkflowEstimate:
    """Return the agent-then-by-hand workflow's delivered quality and expected cost at ``target``.

    The fields read as for the other workflows, over the runs: ``scored``, ``priced`` and ``cost_per_attempt``
    count and price the runs, ``reach`` is the share of runs reaching the target (delivered without the hand);
    ``tasks`` is the union of the runs' and the human-alone attempts' tasks; ``quality`` the delivered quality
    (module docstring). Every interval comes from the joint bootstrap, so the runs' cost per attempt and reach
    may have slightly other bounds than in the agent-alone row, whose bootstrap draws the runs' tasks only.
    ``reason`` says why the expected cost cannot be estimated (no priced run, or the human-alone expected cost
    cannot be: no priced attempt, or none reaching the target); one task only gives the estimates without
    intervals and ``note`` says so.

    Parameters
    ----------
    run_task, run_score, run_cost : each agent-alone run's task, score (NaN: not scored) and cost (model cost +
        review; NaN: unknown).
    human_task, human_score, human_cost : the same for each human-alone attempt.
    target : the score a deliverable must reach (``score >= target``).
    """
    config = config or BootstrapConfig()
    r_task, r_score, r_cost = np.asarray(run_task), np.asarray(run_score, float), np.asarray(run_cost, float)
    h_task, h_score, h_cost = np.asarray(human_task), np.asarray(human_score, float), np.asarray(human_cost, float)
    _validate(r_task, r_score, r_cost, target, config)
    _validate(h_task, h_score, h_cost, target, config)
    human = workflow_estimate(h_task, h_score, h_cost, target=target, config=config)
    r_scored, h_scored = np.isfinite(r_score), np.isfinite(h_score)
    union = np.unique(np.asarray([*r_task[r_scored].tolist(), *h_task[h_scored].tolist()]))
    n_tasks = int(union.size)
    # Row 0 weighs every task once (the estimate); the rows after it are the bootstrap replicates.
    matrix = np.ones((1, n_tasks))
    if n_tasks > 1:
        matrix = np.vstack([matrix, task_bootstrap_weights(n_tasks, config)])

    def sums(task: NDArray, keep: NDArray, score: NDArray, value: NDArray) -> list[NDArray]:
        """Per row: the attempts kept, the sum of ``value`` over them and how many reach the target."""
        codes = np.searchsorted(union, task[keep]).ravel()
        columns = (np.ones(int(keep.sum())), value[keep], (score[keep] >= target).astype(float))
        return [matrix @ np.bincount(codes, weights=column, minlength=n_tasks) for column in columns]

    reached = {"run": np.where(r_score >= target, r_score, 0.0), "human": np.where(h_score >= target, h_score, 0.0)}
    quality = _interval(_delivered_quality(sums(r_task, r_scored, r_score, reached["run"]),
                                           sums(h_task, h_scored, h_score, reached["human"])), config.level)
    note = ONE_TASK if n_tasks == 1 else ""
    r_priced, empty = r_scored & np.isfinite(r_cost), Interval(None)
    if not r_priced.any():
        return WorkflowEstimate(int(r_scored.sum()), 0, n_tasks, quality, empty, empty, empty, NO_RUN)
    run = sums(r_task, r_priced, r_score, r_cost)
    per_attempt, reach = _interval(_ratio(run[1], run[0]), config.level), _interval(_ratio(run[2], run[0]),
                                                                                    config.level)
    if human.reason:
        reason = f"the human-alone expected cost, which prices a miss done by hand, cannot be estimated: {human.reason}"
        return WorkflowEstimate(int(r_scored.sum()), int(r_priced.sum()), n_tasks, quality, per_attempt, reach,
                                empty, reason)
    expected = _interval(_fallback_cost(run, sums(h_task, h_scored & np.isfinite(h_cost), h_score, h_cost)),
                         config.level)
    if n_tasks > 1 and expected.low is None:
        note = NO_REPLICATE
    return WorkflowEstimate(int(r_scored.sum()), int(r_priced.sum()), n_tasks, quality, per_attempt, reach,
                            expected, note=note)
