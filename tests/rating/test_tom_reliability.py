"""ICC(2,1) and ICC(2,k) equal an independent computation and the textbook values, and refuse thin data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import f as f_dist

from rating.tom_reliability import RatingTable, icc_agreement, judge_gold_table, rating_table

# Shrout & Fleiss (1979), Table 2: 6 targets rated by 4 judges.
SHROUT_FLEISS = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]], float)


def _table(x: np.ndarray) -> RatingTable:
    return RatingTable(items=tuple(f"e{i}" for i in range(x.shape[0])),
                       raters=tuple(f"r{j}" for j in range(x.shape[1])), scores=x)


def _by_loops(x: list[list[float]], level: float = 0.95) -> tuple[float, float, tuple[float, float]]:
    """ICC(2,1), ICC(2,k) and McGraw & Wong's ICC(A,1) interval from sums of squares written out by loops."""
    n, k = len(x), len(x[0])
    grand = sum(sum(row) for row in x) / (n * k)
    row_means = [sum(row) / k for row in x]
    col_means = [sum(x[i][j] for i in range(n)) / n for j in range(k)]
    ssr = sum(k * (m - grand) ** 2 for m in row_means)
    ssc = sum(n * (m - grand) ** 2 for m in col_means)
    sse = sum((x[i][j] - row_means[i] - col_means[j] + grand) ** 2 for i in range(n) for j in range(k))
    msr, msc, mse = ssr / (n - 1), ssc / (k - 1), sse / ((n - 1) * (k - 1))
    single = (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n)
    average = (msr - mse) / (msr + (msc - mse) / n)
    a = k * single / (n * (1 - single))
    b = 1 + k * single * (n - 1) / (n * (1 - single))
    v = (a * msc + b * mse) ** 2 / ((a * msc) ** 2 / (k - 1) + (b * mse) ** 2 / ((n - 1) * (k - 1)))
    fs = f_dist.ppf(0.5 + level / 2, n - 1, v)
    fl = f_dist.ppf(0.5 + level / 2, v, n - 1)
    low = n * (msr - fs * mse) / (fs * (k * msc + (k * n - k - n) * mse) + n * msr)
    high = n * (fl * msr - mse) / (k * msc + (k * n - k - n) * mse + n * fl * msr)
    return single, average, (low, high)


def test_the_shrout_fleiss_example_gives_the_published_values() -> None:
    res = icc_agreement(_table(SHROUT_FLEISS))
    assert round(res.icc_single, 2) == 0.29
    assert round(res.icc_average, 2) == 0.62
    # McGraw & Wong's interval of this example (as printed by pingouin's documentation): [0.02, 0.76], [0.07, 0.93]
    assert [round(v, 2) for v in res.icc_single_interval] == [0.02, 0.76]
    assert [round(v, 2) for v in res.icc_average_interval] == [0.07, 0.93]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_icc_equals_the_loop_formula_to_1e9(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, k = 40 + seed, 2 + seed
    x = rng.normal(2.5, 1.0, (n, 1)) + rng.normal(0, 0.3, (1, k)) + rng.normal(0, 0.7, (n, k))
    res = icc_agreement(_table(x))
    single, average, (low, high) = _by_loops(x.tolist())
    assert res.icc_single == pytest.approx(single, abs=1e-9)
    assert res.icc_average == pytest.approx(average, abs=1e-9)
    assert res.icc_single_interval == pytest.approx((low, high), abs=1e-9)
    # ICC(2,k)'s interval is McGraw & Wong's ICC(A,k) one: the Spearman-Brown step-up of the ICC(A,1) bounds
    assert res.icc_average_interval == pytest.approx((k * low / (1 + (k - 1) * low), k * high / (1 + (k - 1) * high)),
                                                     abs=1e-9)


def test_missing_codes_are_left_out_as_complete_cases_and_counted() -> None:
    x = SHROUT_FLEISS.copy()
    extra = np.array([[5.0, np.nan, 4.0, 6.0], [np.nan, 3.0, 3.0, 3.0]])
    res = icc_agreement(_table(np.vstack([x, extra])))
    assert res.n_items == 6 and res.n_incomplete == 2
    assert res.icc_single == pytest.approx(icc_agreement(_table(x)).icc_single, abs=1e-12)
    assert "complete cases" in res.missing_rule


def test_too_few_items_give_a_reason_and_no_number() -> None:
    res = icc_agreement(_table(SHROUT_FLEISS[:4]))
    assert res.icc_single is None and res.icc_average is None and res.icc_single_interval is None
    assert "only 4 items" in res.reason


def test_codes_that_do_not_vary_give_no_number() -> None:
    res = icc_agreement(_table(np.full((8, 2), 3.0)))
    assert res.icc_single is None and "do not vary" in res.reason


def test_perfect_agreement_is_one_without_an_interval() -> None:
    x = np.repeat(np.arange(8.0)[:, None], 2, axis=1)
    res = icc_agreement(_table(x))
    assert res.icc_single == 1.0 and res.icc_average == 1.0 and res.icc_single_interval is None


def test_rating_table_from_rows_and_repeated_codes_are_refused() -> None:
    rows = [("ep1", "gpt", 3), ("ep1", "claude", 4), ("ep2", "gpt", 1)]
    table = rating_table(rows, raters=["gpt", "claude"])
    assert table.items == ("ep1", "ep2") and table.raters == ("gpt", "claude")
    assert table.scores[0].tolist() == [3.0, 4.0] and math.isnan(table.scores[1, 1])
    with pytest.raises(ValueError, match="more than one code"):
        rating_table([*rows, ("ep1", "gpt", 2)])


def test_a_single_rater_is_refused_with_a_reason() -> None:
    res = icc_agreement(_table(SHROUT_FLEISS[:, :1]))
    assert res.icc_single is None and "two raters" in res.reason


def test_judge_against_gold_averages_each_side_per_episode() -> None:
    judges = [("e1", "gpt", 2), ("e1", "claude", 4), ("e2", "gpt", 1), ("e2", "claude", 1), ("e3", "gpt", 5)]
    gold = [("e1", "x1", 3), ("e1", "x2", 4), ("e2", "x1", 0), ("e4", "x1", 2)]
    table = judge_gold_table(judges, gold)
    assert table.raters == ("judges", "gold")
    by_item = dict(zip(table.items, table.scores.tolist(), strict=True))
    assert by_item["e1"] == [3.0, 3.5] and by_item["e2"] == [1.0, 0.0]
    assert math.isnan(by_item["e3"][1]) and math.isnan(by_item["e4"][0])
