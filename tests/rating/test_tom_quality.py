"""The response-quality regression equals statsmodels' OLS with errors clustered by worker, and refuses thin data."""

from __future__ import annotations

import numpy as np
import pytest
import statsmodels.api as sm

from rating.synergy_sim import StudyDesign
from rating.tom_quality import MIN_CLUSTERS, TERMS, QualityData, design_matrix, tom_quality
from rating.tom_sim import TomTruth, simulate_tom


def _data(seed: int, workers: int = 80) -> QualityData:
    design = StudyDesign(workers=workers, tasks_per_worker=6, solo_per_worker=2, n_tasks=20, n_agents=3,
                         order="counterbalanced")
    s = simulate_tom(design, TomTruth(), np.random.default_rng(seed))
    team = s.data.team
    return QualityData(quality=s.quality[team], human=s.data.human[team], tom=s.tom[team], turns=s.turns[team],
                       characters=s.characters[team], edit_ratio=s.edit_ratio[team])


@pytest.mark.parametrize(("seed", "decomposition"), [(1, "mundlak"), (2, "loo")])
def test_quality_regression_equals_statsmodels_cluster_robust(seed: int, decomposition: str) -> None:
    data = _data(seed)
    res = tom_quality(data, decomposition=decomposition)
    x, y, groups = design_matrix(data, decomposition)
    ref = sm.OLS(y, x).fit(cov_type="cluster", cov_kwds={"groups": groups}, use_t=True)
    low, high = ref.conf_int(alpha=0.05).T
    for j, term in enumerate(TERMS):
        row = res.coefficients[term]
        assert row["estimate"] == pytest.approx(ref.params[j], abs=1e-8)
        assert row["se"] == pytest.approx(ref.bse[j], abs=1e-8)
        assert row["lower"] == pytest.approx(low[j], abs=1e-8)
        assert row["upper"] == pytest.approx(high[j], abs=1e-8)
        assert row["p_value"] == pytest.approx(ref.pvalues[j], abs=1e-8)
    assert res.r_squared == pytest.approx(ref.rsquared, abs=1e-10)
    assert res.n_episodes == y.size and res.excluded == data.quality.size - y.size


def test_uncoded_quality_or_tom_rows_are_left_out_and_counted() -> None:
    data = _data(3)
    quality = data.quality.copy()
    quality[:5] = np.nan
    res = tom_quality(QualityData(quality, data.human, data.tom, data.turns, data.characters, data.edit_ratio))
    assert res.excluded >= 5


def test_too_few_workers_say_so_and_give_no_coefficient() -> None:
    data = _data(4)
    keep = data.human < MIN_CLUSTERS - 1
    few = QualityData(*(getattr(data, n)[keep] for n in ("quality", "human", "tom", "turns", "characters",
                                                          "edit_ratio")))
    res = tom_quality(few)
    assert res.coefficients == {} and "need at least" in res.reason


def test_an_effort_measure_that_never_varies_is_named() -> None:
    data = _data(5)
    res = tom_quality(QualityData(data.quality, data.human, data.tom, np.full(data.quality.size, 3.0),
                                  data.characters, data.edit_ratio))
    assert res.coefficients == {} and "turns do not vary" in res.reason
