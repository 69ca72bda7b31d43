"""The synergy fit equals lme4's fit of the same mixed model (REML criterion, variance components, fixed effects)."""

from __future__ import annotations

import numpy as np
import pytest

from rating.synergy import synergy_fit
from rating.synergy_data import build_design
from rating.synergy_reml import fit_reml
from rating.synergy_sim import StudyDesign, Truth, simulate
from tests.rating.synergy_lme4 import lme4_available, run_lme4

pytestmark = pytest.mark.skipif(not lme4_available(), reason="Rscript with lme4 (Debian r-cran-lme4) is not installed")

TOL = 1e-4


def _study(seed: int, order: str, **truth: float):
    design = StudyDesign(workers=60, tasks_per_worker=5, solo_per_worker=2, n_tasks=20, n_agents=3, order=order)
    return simulate(design, Truth(boosts=(2.0, 5.0, 8.0), **truth), np.random.default_rng(seed)).data


def _close(ours: float, theirs: float, scale: float = 1.0) -> bool:
    """Within TOL relative to ``scale`` (1: absolute) or to the reference value, whichever is larger."""
    return abs(ours - theirs) <= TOL * max(scale, abs(theirs))


def _close_abs(ours: float, theirs: float) -> bool:
    return abs(ours - theirs) <= TOL


@pytest.mark.parametrize(("seed", "order", "truth"), [
    (1, "counterbalanced", {}),
    (2, "counterbalanced", {"sd_gamma": 0.0, "rho": 0.9}),
    (3, "solo_first", {"sd_beta": 1.0}),
])
def test_full_model_equals_lme4(seed: int, order: str, truth: dict) -> None:
    data = _study(seed, order, **truth)
    fit = synergy_fit(data, folds=0)
    # solo first for everyone: position and condition are collinear, the fit leaves positions out (and says so)
    confounded = order == "solo_first"
    assert ("position_effects" in fit.not_identifiable) is confounded
    ref = run_lme4(data, positions=not confounded)
    assert _close_abs(fit.reml_criterion, ref["reml"]), (fit.reml_criterion, ref["reml"])
    vc = fit.variance_components
    scale = vc["residual_var"]          # components at zero are compared on the scale of the noise
    for name in ("theta_var", "kappa_var", "theta_kappa_cov", "task_solo_var", "task_agent_extra_var",
                 "residual_var"):
        assert _close(vc[name], ref[name], scale), (name, vc[name], ref[name])
    assert set(fit.fixed_effects) == set(ref["fixef"])
    for name, value in ref["fixef"].items():
        assert _close(fit.fixed_effects[name]["estimate"], value), (name, value)


def test_restricted_model_equals_lme4() -> None:
    data = _study(4, "counterbalanced")
    core = fit_reml(build_design(data, 60, 20), restricted=True)
    ref = run_lme4(data, restricted=True)
    assert _close_abs(core.deviance, ref["reml"])
    assert _close(float(core.worker_cov()[0, 0]), ref["theta_var"], core.sigma2)
    assert _close(core.sigma2, ref["residual_var"])
    # and the likelihood-ratio statistic of the fit is the difference of the two lme4 criteria
    fit = synergy_fit(data, folds=0)
    full = run_lme4(data)
    assert fit.theta_kappa_test["statistic"] == pytest.approx(max(ref["reml"] - full["reml"], 0.0), abs=2e-4)
