"""The design-weighted judge-vs-gold ICC equals weighted least squares written out densely, reduces to the plain
ICC with equal weights and to the plain ICC of the replicated table with integer weights, and, by simulation with
a known population, is unbiased for the population's ICC where the plain one is not under unequal π."""

from __future__ import annotations

import numpy as np
import pytest

from rating.tom_reliability import RatingTable, icc_agreement
from rating.tom_weighted_icc import GoldDesign, design_weights, weighted_icc, weighted_icc_agreement


def _dense(x: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """Weighted two-way ANOVA by nested weighted least squares on dummy matrices (no closed-form sums)."""
    n, k = x.shape
    y = x.reshape(-1)
    cell_w = np.repeat(w, k)
    items = np.kron(np.eye(n), np.ones((k, 1)))
    raters = np.kron(np.ones((n, 1)), np.eye(k))
    ones = np.ones((n * k, 1))

    def rss(design: np.ndarray) -> float:
        root = np.sqrt(cell_w)[:, None]
        beta, *_ = np.linalg.lstsq(design * root, y * root[:, 0], rcond=None)
        resid = y - design @ beta
        return float(cell_w @ resid ** 2)

    full = rss(np.hstack([ones, items[:, 1:], raters[:, 1:]]))
    ss_rows = rss(np.hstack([ones, raters[:, 1:]])) - full
    ss_cols = rss(np.hstack([ones, items[:, 1:]])) - full
    total = w.sum()
    msr, msc, mse = ss_rows / (total - 1), ss_cols / (k - 1), full / ((total - 1) * (k - 1))
    single = (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / total)
    average = (msr - mse) / (msr + (msc - mse) / total)
    return float(single), float(average)


def _table(x: np.ndarray) -> RatingTable:
    return RatingTable(items=tuple(f"e{i}" for i in range(len(x))), raters=("judges", "gold"), scores=x)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weighted_icc_equals_dense_weighted_least_squares_to_1e9(seed: int) -> None:
    rng = np.random.default_rng(seed)
    truth = rng.normal(2.5, 1.0, 25)
    x = np.column_stack([truth + rng.normal(0, 0.5, 25), truth + 0.3 + rng.normal(0, 0.7, 25)])
    w = rng.uniform(1.0, 12.0, 25)
    assert weighted_icc(x, w) == pytest.approx(_dense(x, w), abs=1e-9)


def test_equal_weights_give_the_plain_icc_and_integer_weights_the_replicated_table() -> None:
    rng = np.random.default_rng(7)
    truth = rng.normal(3.0, 1.0, 12)
    x = np.column_stack([truth + rng.normal(0, 0.6, 12), truth + rng.normal(0, 0.6, 12)])
    plain = icc_agreement(_table(x))
    assert weighted_icc(x, np.ones(12)) == pytest.approx((plain.icc_single, plain.icc_average), abs=1e-12)
    reps = rng.integers(1, 6, 12)
    replicated = icc_agreement(_table(np.repeat(x, reps, axis=0)))
    assert weighted_icc(x, reps.astype(float)) == pytest.approx(
        (replicated.icc_single, replicated.icc_average), abs=1e-9)


def test_weights_are_the_stratum_population_over_its_coded_items() -> None:
    assert design_weights(["a", "a", "b"], {"a": 10, "b": 3}).tolist() == [5.0, 5.0, 3.0]


def _population(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A large stratum where judges and gold agree closely and a small one where they do not."""
    big, small = rng.normal(2.5, 1.0, 1500), rng.normal(3.5, 1.0, 300)
    a = np.column_stack([big + rng.normal(0, 0.3, 1500), big + 0.1 + rng.normal(0, 0.3, 1500)])
    b = np.column_stack([small + rng.normal(0, 1.2, 300), small - 0.3 + rng.normal(0, 1.2, 300)])
    return a, b


def test_the_weighted_icc_is_unbiased_for_the_population_where_the_plain_one_is_not() -> None:
    rng = np.random.default_rng(11)
    big, small = _population(rng)
    truth = weighted_icc(np.vstack([big, small]), np.ones(1800))[0]
    n_h, rounds = 60, 200  # equal allocation: π = 0.04 in the big stratum, 0.2 in the small one
    weighted, plain, covered = [], [], 0
    for _ in range(rounds):
        x = np.vstack([big[rng.choice(1500, n_h, replace=False)], small[rng.choice(300, n_h, replace=False)]])
        table = _table(x)
        design = GoldDesign({item: "big" if i < n_h else "small" for i, item in enumerate(table.items)},
                            {"big": 1500, "small": 300})
        result = weighted_icc_agreement(table, design)
        weighted.append(result.icc_single)
        plain.append(icc_agreement(table).icc_single)
        covered += result.icc_single_interval[0] < truth < result.icc_single_interval[1]
    mc_se = np.std(weighted) / np.sqrt(rounds)
    assert abs(np.mean(weighted) - truth) < max(0.01, 4 * mc_se), (np.mean(weighted), truth)
    assert abs(np.mean(plain) - truth) > 0.1, "the plain ICC over-represents the small stratum"
    assert covered / rounds >= 0.88


def test_thin_or_constant_samples_give_a_reason_and_one_item_strata_no_interval() -> None:
    x = np.array([[1.0, 1.5], [2.0, 2.0], [3.0, 3.5], [4.0, 3.5], [2.0, 2.5], [5.0, 4.5]])
    table = _table(x)
    one = GoldDesign({**{f"e{i}": "a" for i in range(5)}, "e5": "b"}, {"a": 20, "b": 4})
    result = weighted_icc_agreement(table, one)
    assert result.icc_single is not None and result.icc_single_interval is None and result.interval_note
    few = GoldDesign({"e0": "a", "e1": "a"}, {"a": 9})
    assert weighted_icc_agreement(table, few).reason.startswith("only 2 sampled episodes")
    flat = _table(np.full((6, 2), 3.0))
    design = GoldDesign({f"e{i}": "a" for i in range(6)}, {"a": 12})
    assert "do not vary" in weighted_icc_agreement(flat, design).reason
    with pytest.raises(ValueError, match="without a population"):
        GoldDesign({"e0": "a"}, {})
