"""Agent, then done by hand when it misses: a hand computation, a loop bootstrap, the refusals and a simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rating.workflow_costs import NO_ATTEMPT, ONE_TASK, BootstrapConfig, workflow_estimate
from rating.workflow_fallback import NO_RUN, fallback_estimate

# Runs on tasks a and b; human-alone attempts on a, b, c and d (tasks the agent never ran). Target 70.
RUN_TASK, RUN_SCORE, RUN_COST = ["a", "a", "b", "b"], [80.0, 60.0, 75.0, 50.0], [2.0, 3.0, 1.0, 4.0]
HUMAN_TASK, HUMAN_SCORE, HUMAN_COST = ["a", "b", "c", "d"], [72.0, 68.0, 90.0, 70.0], [30.0, 20.0, 40.0, 10.0]


def _estimate(target=70.0, config=None, **changed):
    arrays = {"run_task": RUN_TASK, "run_score": RUN_SCORE, "run_cost": RUN_COST, "human_task": HUMAN_TASK,
              "human_score": HUMAN_SCORE, "human_cost": HUMAN_COST, **changed}
    return fallback_estimate(arrays["run_task"], arrays["run_score"], arrays["run_cost"], arrays["human_task"],
                             arrays["human_score"], arrays["human_cost"], target=target, config=config)


def test_the_estimates_equal_a_hand_computation():
    found = _estimate()
    assert (found.scored, found.priced, found.tasks, found.reason, found.note) == (4, 4, 4, "", "")
    assert found.cost_per_attempt.estimate == pytest.approx(10 / 4)
    assert found.reach.estimate == pytest.approx(2 / 4)
    # human alone: 100 USD over 3 attempts reaching 70; half the runs miss: 2.5 + 0.5 * 100 / 3
    assert found.expected_cost.estimate == pytest.approx(2.5 + 0.5 * 100 / 3)
    assert workflow_estimate(HUMAN_TASK, HUMAN_SCORE, HUMAN_COST, target=70).expected_cost.estimate == (
        pytest.approx(100 / 3))
    # delivered: runs reaching (80, 75) half the time, else a human deliverable at the target (72, 90, 70)
    assert found.quality.estimate == pytest.approx(0.5 * (80 + 75) / 2 + 0.5 * (72 + 90 + 70) / 3)


def test_runs_that_never_reach_the_target_are_all_done_by_hand():
    found = _estimate(run_score=[50.0, 60.0, 65.0, 40.0])
    assert found.reason == "" and found.reach.estimate == 0
    assert found.expected_cost.estimate == pytest.approx(2.5 + 100 / 3)
    assert found.quality.estimate == pytest.approx((72 + 90 + 70) / 3)


def _loop_bootstrap(reps: int, seed: int, target: float) -> tuple[list[float], list[float], list[float]]:
    """Replicate by replicate, attempt by attempt: the workflow's cost, its quality and the runs' mean cost."""
    union = sorted({*RUN_TASK, *HUMAN_TASK})
    draws = np.random.default_rng(seed).integers(0, len(union), size=(reps, len(union)))
    costs, qualities, per_run = [], [], []
    for row in draws:
        drawn = [union[code] for code in row]
        runs = [i for t in drawn for i, task in enumerate(RUN_TASK) if task == t]
        hand = [i for t in drawn for i, task in enumerate(HUMAN_TASK) if task == t]
        if not runs or not hand:
            continue  # undefined: left out
        mean_cost = sum(RUN_COST[i] for i in runs) / len(runs)
        per_run.append(mean_cost)
        reaching = [i for i in runs if RUN_SCORE[i] >= target]
        miss = 1 - len(reaching) / len(runs)
        hand_reaching = [i for i in hand if HUMAN_SCORE[i] >= target]
        if miss == 0:
            costs.append(mean_cost)
            qualities.append(sum(RUN_SCORE[i] for i in reaching) / len(runs))
        elif not hand_reaching:
            costs.append(math.inf)  # a miss is never delivered by hand: no quality
        else:
            by_hand = sum(HUMAN_COST[i] for i in hand) / len(hand_reaching)
            costs.append(mean_cost + miss * by_hand)
            qualities.append(sum(RUN_SCORE[i] for i in reaching) / len(runs)
                             + miss * sum(HUMAN_SCORE[i] for i in hand_reaching) / len(hand_reaching))
    return costs, qualities, per_run


@pytest.mark.parametrize("target", [70.0, 72.0])
def test_the_intervals_equal_a_bootstrap_written_out_attempt_by_attempt(target):
    config = BootstrapConfig(reps=400, seed=5)
    found = _estimate(target=target, config=config)
    costs, qualities, per_run = _loop_bootstrap(400, 5, target)
    assert len(costs) < 400  # some replicates draw only tasks c and d, which have no run

    def bounds(values):
        return tuple(np.quantile(values, [0.025, 0.975], method="inverted_cdf"))

    assert (found.expected_cost.low, found.expected_cost.high) == pytest.approx(bounds(costs), abs=1e-12)
    assert (found.quality.low, found.quality.high) == pytest.approx(bounds(qualities), abs=1e-12)
    assert (found.cost_per_attempt.low, found.cost_per_attempt.high) == pytest.approx(bounds(per_run), abs=1e-12)
    if target == 72.0:  # only a and c reach 72 by hand: a replicate of b and d alone is unbounded
        assert math.isinf(found.expected_cost.high) and math.isinf(max(costs))


def test_no_priced_run_gives_a_reason_and_no_number():
    found = _estimate(run_cost=[math.nan] * 4)
    assert found.reason == NO_RUN and found.expected_cost.estimate is None and found.priced == 0
    assert found.quality.estimate is not None  # quality needs no cost
    nothing = _estimate(run_task=[], run_score=[], run_cost=[])
    assert nothing.reason == NO_RUN and nothing.quality.estimate is None and nothing.tasks == 4


def test_a_human_alone_cost_that_cannot_be_estimated_gives_its_reason_and_no_number():
    unpriced = _estimate(human_cost=[math.nan] * 4)
    assert unpriced.expected_cost.estimate is None and unpriced.reason.endswith(NO_ATTEMPT)
    assert "human-alone expected cost" in unpriced.reason
    assert unpriced.cost_per_attempt.estimate == pytest.approx(2.5)  # the runs are still priced
    unreached = _estimate(target=95.0)
    assert unreached.expected_cost.estimate is None
    assert "no attempt reaches the target score 95 (the best scored 90.0)" in unreached.reason
    assert unreached.quality.estimate is None  # no deliverable reaches 95 at all
    no_human = _estimate(human_task=[], human_score=[], human_cost=[])
    assert no_human.expected_cost.estimate is None and no_human.reason.endswith(NO_ATTEMPT)


def test_runs_that_always_reach_still_need_a_priced_human_alone_workflow():
    found = _estimate(run_score=[80.0, 90.0, 75.0, 85.0], target=75.0)
    assert found.expected_cost.estimate == pytest.approx(2.5) and found.reason == ""
    refused = _estimate(run_score=[96.0, 97.0, 98.0, 99.0], target=95.0)
    assert refused.expected_cost.estimate is None and "no attempt reaches the target score 95" in refused.reason
    assert refused.quality.estimate == pytest.approx(97.5)


def test_one_task_gives_the_estimate_without_an_interval_and_says_why():
    found = _estimate(run_task=["a"] * 4, human_task=["a"] * 4)
    assert found.tasks == 1 and found.note == ONE_TASK and found.reason == ""
    assert found.expected_cost.estimate == pytest.approx(2.5 + 0.5 * 100 / 3) and found.expected_cost.low is None


@pytest.mark.parametrize(("changed", "named"), [
    ({"run_task": ["a"]}, "same length"),
    ({"human_cost": [1.0]}, "same length"),
    ({"target": math.inf}, "target"),
    ({"human_cost": [-1.0] * 4}, "cost"),
    ({"config": BootstrapConfig(reps=10)}, "reps"),
])
def test_bad_inputs_are_refused_naming_the_parameter(changed, named):
    with pytest.raises(ValueError, match=named):
        _estimate(**changed)


def test_the_interval_covers_the_true_expected_cost_in_simulated_studies():
    """Tasks share a difficulty for runs and humans; the truth c_run + (1 - p_run) c_human / p_human is closed form."""
    rng = np.random.default_rng(23)
    target, tau, sigma, run_mean, human_mean, run_cost, human_cost = 70.0, 6.0, 8.0, 66.0, 72.0, 4.0, 40.0
    spread = math.hypot(tau, sigma)
    p_run, p_human = stats.norm.sf(target, run_mean, spread), stats.norm.sf(target, human_mean, spread)
    truth = run_cost + (1 - p_run) * human_cost / p_human
    n_tasks, per_task, covered, studies = 60, 2, 0, 200
    task = np.repeat(np.arange(n_tasks), per_task)
    for study in range(studies):
        difficulty = rng.normal(0, tau, n_tasks)[task]
        runs = run_mean + difficulty + rng.normal(0, sigma, task.size)
        humans = human_mean + difficulty + rng.normal(0, sigma, task.size)
        found = fallback_estimate(task, runs, rng.gamma(4.0, run_cost / 4, task.size), task, humans,
                                  rng.gamma(4.0, human_cost / 4, task.size), target=target,
                                  config=BootstrapConfig(reps=500, seed=study))
        covered += found.expected_cost.low <= truth <= found.expected_cost.high
    assert 0.92 <= covered / studies <= 0.97
