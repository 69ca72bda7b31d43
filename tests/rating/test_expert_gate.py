"""The expert gate's statistics against statsmodels and a direct formula, and the calibration sample by simulation."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.inter_rater import cohens_kappa

from rating.expert_gate import (
    NOT_ENOUGH,
    GateRule,
    bias,
    episodes_for_bias_width,
    gate_evaluate,
    inclusion_probability,
    quadratic_weighted_kappa,
    statistics_bootstrap,
)

GRID = np.array([0.0, 0.25, 0.5, 0.75, 1.0])


def _table(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    table = np.zeros((GRID.size, GRID.size))
    for a, b in zip(x, y, strict=True):
        table[np.searchsorted(GRID, a), np.searchsorted(GRID, b)] += 1
    return table


def test_kappa_equals_statsmodels_quadratic_kappa_on_an_equally_spaced_grid():
    rng = np.random.default_rng(3)
    expert = rng.integers(0, 2, 400).astype(float)
    judge = np.clip(expert + rng.choice([-0.75, -0.5, -0.25, 0, 0, 0, 0.25], 400), 0, 1)
    expected = cohens_kappa(_table(judge, expert), wt="quadratic", return_results=False)
    assert quadratic_weighted_kappa(judge, expert) == pytest.approx(expected, abs=1e-12)


def test_weights_act_as_replicated_episodes():
    rng = np.random.default_rng(4)
    judge, expert = rng.choice(GRID, 60), rng.integers(0, 2, 60).astype(float)
    copies = rng.integers(1, 5, 60)
    replicated = cohens_kappa(_table(np.repeat(judge, copies), np.repeat(expert, copies)), wt="quadratic",
                              return_results=False)
    assert quadratic_weighted_kappa(judge, expert, copies) == pytest.approx(replicated, abs=1e-12)
    assert bias(judge, expert, copies) == pytest.approx(
        100 * np.mean(np.repeat(judge, copies) - np.repeat(expert, copies)))


def test_kappa_on_continuous_scores_is_the_pairwise_formula():
    rng = np.random.default_rng(5)
    judge, expert = rng.uniform(size=50), rng.integers(0, 2, 50).astype(float)
    expected_disagreement = np.mean((judge[:, None] - expert[None, :]) ** 2)
    direct = 1 - np.mean((judge - expert) ** 2) / expected_disagreement
    assert quadratic_weighted_kappa(judge, expert) == pytest.approx(direct, abs=1e-12)


def test_a_constant_offset_lowers_agreement_where_a_correlation_would_not():
    rng = np.random.default_rng(6)
    expert = rng.integers(0, 2, 200).astype(float)
    fair = 0.2 + 0.6 * expert
    assert quadratic_weighted_kappa(fair + 0.2, expert) < quadratic_weighted_kappa(fair, expert)


def test_the_bootstrap_resamples_whole_episodes():
    episodes = np.repeat(np.arange(30), 4)
    rng = np.random.default_rng(7)
    expert = rng.integers(0, 2, 120).astype(float)
    judge = np.clip(expert + rng.normal(0, 0.3, 120), 0, 1)
    kappa_draws, bias_draws = statistics_bootstrap(judge, expert, episodes, rounds=300, seed=1)
    # A resample made of whole episodes has a multiple of 4 items, so its bias is a mean over 4k items;
    # the same draws again with the same seed.
    again = statistics_bootstrap(judge, expert, episodes, rounds=300, seed=1)
    np.testing.assert_array_equal(bias_draws, again[1])
    assert np.all(np.isfinite(kappa_draws))
    assert np.std(bias_draws) > 0


def test_bootstrap_interval_covers_the_truth_by_simulation():
    """95 % percentile intervals of the bias cover the true bias about 95 % of the time (episode clusters)."""
    hits, reps = 0, 200
    for rep in range(reps):
        rng = np.random.default_rng(100 + rep)
        n = 60
        episode_effect = np.repeat(rng.normal(0, 0.15, n), 4)
        expert = rng.integers(0, 2, 4 * n).astype(float)
        judge = expert + 0.05 + episode_effect + rng.normal(0, 0.1, 4 * n)
        _, draws = statistics_bootstrap(judge, expert, np.repeat(np.arange(n), 4), rounds=400, seed=rep)
        low, high = np.quantile(draws, [0.025, 0.975])
        hits += low <= 5.0 <= high
    assert 0.88 <= hits / reps <= 0.99


def test_no_overlap_says_not_enough_and_invents_nothing():
    result = gate_evaluate([], [], [], rule=GateRule(min_episodes=5))
    assert not result.passes
    assert result.reasons[0].startswith(NOT_ENOUGH)
    assert (result.agreement, result.bias, result.agreement_interval, result.bias_interval) == (None,) * 4
    assert result.more_for_bias_width is None


def test_too_few_episodes_fail_even_when_they_agree():
    episodes = np.repeat(np.arange(3), 2)
    expert = np.array([1, 0, 1, 0, 1, 0], dtype=float)
    result = gate_evaluate(expert, expert, episodes, rule=GateRule(min_episodes=10), rounds=200)
    assert not result.passes
    assert result.reasons == [f"{NOT_ENOUGH}: 3 of the 10 required"]
    assert result.agreement == pytest.approx(1.0)


def test_a_good_judge_passes_and_a_lenient_one_fails_with_its_bias_named():
    rng = np.random.default_rng(8)
    episodes = np.repeat(np.arange(80), 4)
    expert = rng.integers(0, 2, 320).astype(float)
    good = np.clip(expert + rng.normal(0, 0.15, 320), 0, 1)
    rule = GateRule(min_agreement=0.5, max_bias=10, min_episodes=20)
    assert gate_evaluate(good, expert, episodes, rule=rule, rounds=500).passes
    lenient = gate_evaluate(np.clip(good + 0.3, 0, 1), expert, episodes, rule=rule, rounds=500)
    assert not lenient.passes
    assert any(r.startswith("biased: +") for r in lenient.reasons)
    assert lenient.bias_interval is not None and lenient.bias_interval[0] > 10


def test_uncovered_families_fail_the_gate():
    episodes = np.repeat(np.arange(30), 2)
    expert = np.tile([1.0, 0.0], 30)
    result = gate_evaluate(expert, expert, episodes, rule=GateRule(min_episodes=5), rounds=200,
                           uncovered_families=("google",))
    assert not result.passes
    assert result.reasons == ["experts graded no sampled episode of agent family google"]


def test_more_episodes_for_a_width_follow_the_square_root_law():
    assert episodes_for_bias_width(n_episodes=20, interval=(-10.0, 10.0), width=10.0) == 60
    assert episodes_for_bias_width(n_episodes=20, interval=(-2.0, 2.0), width=10.0) == 0
    assert episodes_for_bias_width(n_episodes=1, interval=None, width=10.0) is None
    with pytest.raises(ValueError, match="width"):
        episodes_for_bias_width(n_episodes=5, interval=(0.0, 1.0), width=0)


def test_the_predicted_number_of_episodes_reaches_the_width_by_simulation():
    rng = np.random.default_rng(9)

    def width(n: int, seed: int) -> float:
        local = np.random.default_rng(seed)
        expert = local.integers(0, 2, 3 * n).astype(float)
        judge = expert + local.normal(0.05, 0.3, 3 * n)
        _, draws = statistics_bootstrap(judge, expert, np.repeat(np.arange(n), 3), rounds=1000, seed=seed)
        low, high = np.quantile(draws, [0.025, 0.975])
        return float(high - low)

    now = float(np.median([width(30, int(s)) for s in rng.integers(0, 10**6, 9)]))
    more = episodes_for_bias_width(n_episodes=30, interval=(0.0, now), width=now / 2)
    assert more == pytest.approx(90, abs=1)
    reached = np.median([width(30 + more, int(s)) for s in rng.integers(0, 10**6, 9)])
    assert reached == pytest.approx(now / 2, rel=0.15)


def test_inclusion_probability_takes_each_family_floor_then_the_rate():
    assert inclusion_probability(rate=0.1, sampled_in_family=0, min_per_family=3) == 1.0
    assert inclusion_probability(rate=0.1, sampled_in_family=3, min_per_family=3) == 0.1
    assert inclusion_probability(rate=0.0, sampled_in_family=0, min_per_family=3) == 0.0
    with pytest.raises(ValueError, match="rate"):
        inclusion_probability(rate=1.5, sampled_in_family=0, min_per_family=3)


def test_rule_rejects_impossible_settings():
    with pytest.raises(ValueError, match="min_episodes"):
        GateRule(min_episodes=1)
    with pytest.raises(ValueError, match="max_bias"):
        GateRule(max_bias=-1)


def _draw_sample(rng: np.random.Generator, families: np.ndarray, rate: float, floor: int) -> tuple[np.ndarray, ...]:
    """Stream episodes through the calibration draw; return the sampled mask and each one's probability."""
    sampled = np.zeros(families.size, dtype=bool)
    pi = np.zeros(families.size)
    counts: dict[int, int] = {}
    for i, family in enumerate(families):
        pi[i] = inclusion_probability(rate=rate, sampled_in_family=counts.get(family, 0), min_per_family=floor)
        sampled[i] = rng.random() < pi[i]
        counts[family] = counts.get(family, 0) + int(sampled[i])
    return sampled, pi


def test_the_weighted_calibration_sample_is_unbiased_where_selected_grades_are_not():
    """The judge is 20 points lenient on the small family and fair on the large one; the truth is the mean
    over every automatically graded episode. Experts who grade the episodes the judges scored highest (a
    disagreement- or quality-driven queue) see a biased picture; the calibration sample, weighted by 1 / pi,
    does not; the same sample unweighted over-counts the small family, whose first episodes it took for sure.
    """
    n, reps = 400, 300
    weighted, unweighted, selected, truths = [], [], [], []
    for rep in range(reps):
        rng = np.random.default_rng(rep)
        families = (rng.random(n) < 0.15).astype(int)  # 1 = the small family
        expert = rng.integers(0, 2, n).astype(float)
        judge = np.clip(expert + np.where(families == 1, 0.2, 0.0) + rng.normal(0, 0.25, n), -1, 2)
        truths.append(100 * np.mean(judge - expert))
        sampled, pi = _draw_sample(rng, families, rate=0.1, floor=15)
        weighted.append(bias(judge[sampled], expert[sampled], 1 / pi[sampled]))
        unweighted.append(bias(judge[sampled], expert[sampled]))
        top = np.argsort(-judge)[: int(sampled.sum())]
        selected.append(bias(judge[top], expert[top]))
    truth = float(np.mean(truths))
    standard_error = np.std(weighted) / np.sqrt(reps)
    assert abs(np.mean(weighted) - truth) < 3 * standard_error
    assert abs(np.mean(unweighted) - truth) > 10 * standard_error
    assert abs(np.mean(selected) - truth) > 10 * standard_error
