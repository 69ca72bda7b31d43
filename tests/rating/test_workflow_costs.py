"""Expected cost at a target quality: a hand computation, a loop bootstrap, named refusals and a simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rating.workflow_costs import (
    NO_ATTEMPT,
    ONE_TASK,
    BootstrapConfig,
    task_bootstrap_weights,
    workflow_estimate,
)

# Three tasks, six attempts; task "c" is never reached at target 70.
TASK = ["a", "a", "b", "b", "c", "c"]
SCORE = [80.0, 60.0, 75.0, 90.0, 40.0, 55.0]
COST = [10.0, 12.0, 8.0, 6.0, 20.0, 14.0]


def test_the_estimates_equal_a_hand_computation():
    found = workflow_estimate(TASK, SCORE, COST, target=70)
    assert found.scored == found.priced == 6 and found.tasks == 3 and found.reason == ""
    assert found.quality.estimate == pytest.approx(400 / 6)
    assert found.cost_per_attempt.estimate == pytest.approx(70 / 6)
    assert found.reach.estimate == pytest.approx(3 / 6)
    # cost per attempt / probability of reaching: (70/6) / (3/6) = 70 / 3
    assert found.expected_cost.estimate == pytest.approx(70 / 3)


def test_the_intervals_equal_a_bootstrap_written_out_attempt_by_attempt():
    config = BootstrapConfig(reps=400, seed=7)
    found = workflow_estimate(TASK, SCORE, COST, target=70, config=config)
    draws = np.random.default_rng(7).integers(0, 3, size=(400, 3))  # tasks a, b, c in sorted order
    by_task = {code: [i for i, t in enumerate(TASK) if t == name] for code, name in enumerate("abc")}
    quality, expected = [], []
    for row in draws:
        rows = [i for code in row for i in by_task[code]]
        quality.append(sum(SCORE[i] for i in rows) / len(rows))
        hits = sum(1 for i in rows if SCORE[i] >= 70)
        expected.append(sum(COST[i] for i in rows) / hits if hits else math.inf)
    low, high = np.quantile(quality, [0.025, 0.975], method="inverted_cdf")
    assert (found.quality.low, found.quality.high) == pytest.approx((low, high), abs=1e-12)
    low, high = np.quantile(expected, [0.025, 0.975], method="inverted_cdf")
    assert found.expected_cost.low == pytest.approx(low, abs=1e-12)
    assert found.expected_cost.high == high  # replicates of task c alone reach nothing: unbounded
    assert math.isinf(found.expected_cost.high)


def test_the_bootstrap_weights_count_each_replicate_s_draws():
    weights = task_bootstrap_weights(5, BootstrapConfig(reps=200, seed=3))
    assert weights.shape == (200, 5) and np.all(weights.sum(axis=1) == 5)
    draws = np.random.default_rng(3).integers(0, 5, size=(200, 5))
    assert np.array_equal(weights[17], np.bincount(draws[17], minlength=5))


def test_no_attempt_reaching_the_target_gives_a_reason_and_no_number():
    found = workflow_estimate(TASK, SCORE, COST, target=95)
    assert found.expected_cost.estimate is None and "no attempt reaches the target score 95" in found.reason
    assert "best scored 90.0" in found.reason and found.quality.estimate is not None


def test_unknown_costs_are_left_out_and_none_known_gives_a_reason():
    found = workflow_estimate(TASK, SCORE, [10.0, np.nan, 8.0, 6.0, 20.0, 14.0], target=70)
    assert found.scored == 6 and found.priced == 5
    assert found.expected_cost.estimate == pytest.approx(58 / 3)
    nothing = workflow_estimate(TASK, SCORE, [np.nan] * 6, target=70)
    assert nothing.reason == NO_ATTEMPT and nothing.expected_cost.estimate is None and nothing.priced == 0
    empty = workflow_estimate([], [], [], target=70)
    assert empty.reason == NO_ATTEMPT and empty.quality.estimate is None


def test_one_task_gives_an_estimate_without_an_interval_and_says_why():
    found = workflow_estimate(["a", "a"], [80.0, 60.0], [10.0, 12.0], target=70)
    assert found.expected_cost.estimate == pytest.approx(22.0) and found.expected_cost.low is None
    assert found.note == ONE_TASK and found.reason == ""


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"task": ["a"], "score": [1.0, 2.0], "cost": [1.0]}, "same length"),
    ({"target": math.nan}, "target"),
    ({"cost": [-1.0] * 6}, "cost"),
    ({"config": BootstrapConfig(reps=10)}, "reps"),
    ({"config": BootstrapConfig(level=1.0)}, "level"),
])
def test_bad_inputs_are_refused_naming_the_parameter(kwargs, named):
    arguments = {"task": TASK, "score": SCORE, "cost": COST, "target": 70.0, **kwargs}
    with pytest.raises(ValueError, match=named):
        workflow_estimate(arguments.pop("task"), arguments.pop("score"), arguments.pop("cost"), **arguments)


def test_the_interval_covers_the_true_expected_cost_in_simulated_studies():
    """Tasks differ in difficulty; true expected cost = E[cost] / P(score >= target), known in closed form."""
    rng = np.random.default_rng(11)
    n_tasks, per_task, target, tau, sigma, mean_score, mean_cost = 40, 3, 70.0, 8.0, 10.0, 65.0, 12.0
    truth = mean_cost / stats.norm.sf(target, loc=mean_score, scale=math.hypot(tau, sigma))
    covered, studies = 0, 200
    for study in range(studies):
        task = np.repeat(np.arange(n_tasks), per_task)
        score = mean_score + rng.normal(0, tau, n_tasks)[task] + rng.normal(0, sigma, task.size)
        cost = rng.gamma(4.0, mean_cost / 4.0, task.size)
        found = workflow_estimate(task, score, cost, target=target, config=BootstrapConfig(reps=500, seed=study))
        covered += found.expected_cost.low <= truth <= found.expected_cost.high
    assert 0.89 <= covered / studies <= 0.99
