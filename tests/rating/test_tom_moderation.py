"""The ToM moderation (paper Eq. 3) is the synergy REML with covariate columns: equal to lme4 on the same
episodes, recovers known effects, and gives no number when the data cannot carry one."""

from __future__ import annotations

import numpy as np
import pytest

from rating.synergy_data import CollinearCovariates, build_design, subset
from rating.synergy_sim import StudyDesign
from rating.tom_moderation import MIN_WORKERS, TomModerationData, moderation_columns, tom_moderation
from rating.tom_sim import TomTruth, simulate_tom
from tests.rating.synergy_lme4 import lme4_available, run_lme4

TOL = 1e-4


def _study(seed: int, workers: int = 60, order: str = "counterbalanced", **truth: float):
    design = StudyDesign(workers=workers, tasks_per_worker=6, solo_per_worker=2, n_tasks=20, n_agents=3, order=order)
    return simulate_tom(design, TomTruth(**truth), np.random.default_rng(seed))


@pytest.mark.skipif(not lme4_available(), reason="Rscript with lme4 (Debian r-cran-lme4) is not installed")
@pytest.mark.parametrize(("seed", "within", "kind"), [(1, False, "calibrated"), (2, True, "loo_mean")])
def test_moderation_equals_lme4_with_the_same_covariates(seed: int, within: bool, kind: str) -> None:
    study = _study(seed, kappa_per_tom=4.0)
    data = TomModerationData(study.data, study.tom)
    fit = tom_moderation(data, trait_kind=kind, within=within)
    rows, cov, _, _ = moderation_columns(data, kind, within, "mundlak" if within else "loo")
    ref = run_lme4(subset(study.data, rows), covariates=cov)
    assert abs(fit.reml_criterion - ref["reml"]) <= TOL, (fit.reml_criterion, ref["reml"])
    assert set(fit.fixed_effects) == set(ref["fixef"])
    for name, value in ref["fixef"].items():
        assert abs(fit.fixed_effects[name]["estimate"] - value) <= TOL * max(1.0, abs(value)), name
    assert fit.kappa["estimate"] == fit.fixed_effects["tom_trait:agent"]["estimate"]
    assert fit.theta["estimate"] == fit.fixed_effects["tom_trait:solo"]["estimate"]
    assert (fit.deviation is not None) is within


def test_a_large_study_recovers_known_moderation_within_its_interval() -> None:
    study = _study(3, workers=600, kappa_per_tom=5.0, theta_per_tom=0.0)
    fit = tom_moderation(TomModerationData(study.data, study.tom))
    assert fit.kappa["lower"] <= 5.0 <= fit.kappa["upper"]
    assert fit.kappa["lower"] > 0
    assert fit.theta["lower"] <= 0.0 <= fit.theta["upper"]
    assert fit.boost["estimate"] == pytest.approx(fit.kappa["estimate"] - fit.theta["estimate"], abs=1e-12)


def test_without_the_agent_episode_codes_the_trait_is_missing_and_counted() -> None:
    study = _study(4)
    tom = study.tom.copy()
    only_worker_zero = study.data.human == 0
    tom[only_worker_zero] = np.nan
    fit = tom_moderation(TomModerationData(study.data, tom))
    assert fit.excluded["no_trait"] == int(only_worker_zero.sum())
    assert 0 not in set(study.data.human[moderation_columns(TomModerationData(study.data, tom), "calibrated",
                                                                 False, "loo")[0]].tolist())


def test_too_few_workers_with_a_trait_give_a_reason_and_no_number() -> None:
    study = _study(5)
    tom = np.where(study.data.human < MIN_WORKERS - 1, study.tom, np.nan)
    fit = tom_moderation(TomModerationData(study.data, tom))
    assert fit.kappa is None and fit.theta is None
    assert "workers" in fit.reasons


def test_codes_without_between_worker_spread_give_no_number() -> None:
    study = _study(6)
    tom = np.where(np.isnan(study.tom), np.nan, 3.0)
    fit = tom_moderation(TomModerationData(study.data, tom))
    assert fit.kappa is None and "no stable difference" in fit.reasons["tom"]


def test_collinear_covariates_are_refused_by_the_design() -> None:
    study = _study(7)
    constant = np.ones(study.data.n)
    with pytest.raises(CollinearCovariates):
        build_design(study.data, 60, 20, covariates={"c": constant})


def test_codes_outside_the_scale_are_refused() -> None:
    study = _study(8)
    bad = study.tom.copy()
    bad[np.flatnonzero(~np.isnan(bad))[0]] = 6.0
    with pytest.raises(ValueError, match="0-5"):
        TomModerationData(study.data, bad)


def test_without_covariates_the_design_is_the_synergy_design() -> None:
    study = _study(9)
    plain = build_design(study.data, 60, 20)
    empty = build_design(study.data, 60, 20, covariates={})
    assert plain.fixed_names == empty.fixed_names
    assert np.array_equal(plain.gram, empty.gram)
