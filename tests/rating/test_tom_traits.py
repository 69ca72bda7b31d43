"""The ToM trait never uses an episode's own code (leave-one-out), the Mundlak deviation sums to zero within a
worker, and the calibrated trait is the best linear predictor with the ANOVA variance components."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rating.tom_traits import code_variance, tom_traits

HUMAN = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 3])
CODE = np.array([1.0, 3.0, np.nan, 2.0, 4.0, 5.0, np.nan, 2.5, np.nan, np.nan])


def test_leave_one_out_trait_is_the_mean_of_the_other_coded_episodes() -> None:
    t = tom_traits(HUMAN, CODE, "loo")
    assert t.trait[:4].tolist() == [2.5, 1.5, 2.0, 2.0]      # uncoded (solo) episode: mean of all three codes
    assert t.codes_used[:4].tolist() == [2, 2, 3, 2]
    assert t.deviation[0] == -1.5 and math.isnan(t.deviation[2])
    assert math.isnan(t.trait[7]) and t.trait[8] == 2.5       # worker 2: one code, no other code for itself
    assert math.isnan(t.trait[9])                             # worker 3: no code at all


def test_changing_an_episodes_code_does_not_change_its_own_trait() -> None:
    changed = CODE.copy()
    changed[0] = 5.0
    assert tom_traits(HUMAN, changed).trait[0] == tom_traits(HUMAN, CODE).trait[0]


def test_mundlak_deviation_sums_to_zero_within_each_worker() -> None:
    t = tom_traits(HUMAN, CODE, "mundlak")
    assert t.trait[0] == t.trait[2] == 2.0
    for h in (0, 1, 2):
        rows = (h == HUMAN) & ~np.isnan(CODE)
        assert t.deviation[rows].sum() == pytest.approx(0.0, abs=1e-12)


def test_code_variance_is_the_one_way_anova_and_calibration_shrinks_by_reliability() -> None:
    rng = np.random.default_rng(0)
    human = np.repeat(np.arange(200), 4)
    code = rng.normal(0, 1.0, 200)[human] + rng.normal(0, 0.5, human.size) + 2.5
    var = code_variance(human, code)
    # balanced one-way ANOVA by hand
    means = code.reshape(200, 4).mean(axis=1)
    msw = ((code.reshape(200, 4) - means[:, None]) ** 2).sum() / (800 - 200)
    msb = 4 * ((means - code.mean()) ** 2).sum() / 199
    assert var.within == pytest.approx(msw, rel=1e-12)
    assert var.between == pytest.approx((msb - msw) / 4, rel=1e-12)
    t = tom_traits(human, code, "loo")
    lam = var.between / (var.between + var.within / 3)
    assert t.calibrated[0] == pytest.approx(var.mean + lam * (t.trait[0] - var.mean), abs=1e-12)


def test_too_few_codes_give_no_variance_and_no_calibrated_trait() -> None:
    human = np.array([0, 1, 2])
    code = np.array([1.0, 2.0, 3.0])
    assert code_variance(human, code) is None
    assert np.all(np.isnan(tom_traits(human, code).calibrated))
