"""Who gains more from the agent: the slope of the boost on solo ability, from the fitted worker covariance, its
SE against the spread of estimates over simulated studies, and the per-agent slopes with their test."""

from __future__ import annotations

import numpy as np
import pytest

from rating.synergy import SynergyData, synergy_fit
from rating.synergy_data import build_design
from rating.synergy_reml import evaluate, fit_reml
from rating.synergy_sim import StudyDesign, Truth, simulate
from rating.synergy_slope import _hessian

DESIGN = StudyDesign(workers=300, tasks_per_worker=5, solo_per_worker=2, n_tasks=30, n_agents=3,
                     order="counterbalanced")
TRUTH = Truth(boosts=(2.0, 5.0, 8.0), rho=0.5)      # slope of the boost on θ: 0.5 · 8 / 8 − 1 = −0.5


def test_the_slope_is_the_fitted_covariance_ratio_and_the_team_slope_is_one_more() -> None:
    fit = synergy_fit(simulate(DESIGN, TRUTH, np.random.default_rng(1)).data, folds=0, by_agent=False)
    vc = fit.variance_components
    boost = fit.ability_slope["boost_per_point"]
    assert boost["estimate"] == pytest.approx(vc["theta_kappa_cov"] / vc["theta_var"] - 1.0, rel=1e-10)
    assert fit.ability_slope["team_per_point"]["estimate"] == pytest.approx(boost["estimate"] + 1.0)
    assert boost["lower"] < boost["estimate"] < boost["upper"]


def test_the_hessian_equals_second_differences_of_the_criterion() -> None:
    data = simulate(DESIGN, TRUTH, np.random.default_rng(2)).data
    design = build_design(data, DESIGN.workers, DESIGN.n_tasks)
    core = fit_reml(design)
    hess = _hessian(design, core)
    x, step = core.params, 1e-3
    numeric = np.empty_like(hess)
    for i, j in np.ndindex(hess.shape):
        ei, ej = np.eye(x.size)[i] * step, np.eye(x.size)[j] * step
        dev = [evaluate(design, x + si * ei + sj * ej).deviance for si, sj in ((1, 1), (1, -1), (-1, 1), (-1, -1))]
        numeric[i, j] = (dev[0] - dev[1] - dev[2] + dev[3]) / (4 * step ** 2)
    np.testing.assert_allclose(hess, numeric, rtol=2e-3, atol=1e-2)


def test_the_slope_se_matches_its_spread_over_simulated_studies_and_its_intervals_cover() -> None:
    rng = np.random.default_rng(3)
    estimates, ses, covered = [], [], []
    for _ in range(40):
        fit = synergy_fit(simulate(DESIGN, TRUTH, rng).data, test=False)
        row = fit.ability_slope["boost_per_point"]
        estimates.append(row["estimate"])
        ses.append(row["se"])
        covered.append(row["lower"] <= -0.5 <= row["upper"])
    spread = float(np.std(estimates, ddof=1))
    assert 0.7 < float(np.mean(ses)) / spread < 1.4, (np.mean(ses), spread)
    assert abs(float(np.mean(estimates)) + 0.5) < 3 * spread / np.sqrt(40)
    assert np.mean(covered) >= 0.85


def test_theta_equal_kappa_puts_the_covariance_on_its_boundary_and_gives_no_slope() -> None:
    null = Truth(boosts=(2.0, 5.0, 8.0), sd_kappa=8.0, rho=1.0)
    fit = synergy_fit(simulate(DESIGN, null, np.random.default_rng(4)).data, test=False)
    if fit.ability_slope is None:
        assert "perfectly correlated" in fit.not_identifiable["ability_slope"]
    else:   # the estimate may land inside; then the interval must hold the truth 0 more often than not
        assert fit.ability_slope["boost_per_point"]["upper"] > -0.5


def _two_slopes(workers: int, slopes: tuple[float, float], seed: int) -> SynergyData:
    """Two agents, disjoint workers; κ_h = (1 + slope_a) θ_h + noise, so agent a's boost slope is slope_a."""
    rng = np.random.default_rng(seed)
    design = StudyDesign(workers=2 * workers, tasks_per_worker=6, solo_per_worker=3, n_tasks=30, n_agents=2,
                         order="counterbalanced")
    base = simulate(design, Truth(boosts=(4.0, 4.0), sd_gamma=0.0), rng).data
    agent = np.zeros(2 * workers, dtype=int)
    agent[base.human[base.arm > 0]] = base.arm[base.arm > 0]
    theta = rng.normal(0.0, 8.0, 2 * workers)
    kappa = (1.0 + np.array([0.0, *slopes])[agent]) * theta + rng.normal(0.0, 6.0, 2 * workers)
    team = base.arm > 0
    y = 45.0 + 4.0 * team + np.where(team, kappa[base.human], theta[base.human]) + rng.normal(0.0, 6.0, base.n)
    return SynergyData(np.clip(y, 0, 100), base.arm, base.human, base.task, base.position, base.arm_labels)


def test_agents_with_different_slopes_are_told_apart_and_equal_ones_are_not() -> None:
    differ = synergy_fit(_two_slopes(250, (0.0, -0.6), 10), folds=0).agent_slopes
    for name, truth in (("agent 1", 0.0), ("agent 2", -0.6)):
        row = differ["agents"][name]["slope"]
        assert abs(row["estimate"] - truth) < 3 * row["se"], (name, row)
    assert differ["common_slope_test"]["p_value"] < 0.01 and differ["common_slope_test"]["df"] == 1
    same = synergy_fit(_two_slopes(250, (-0.3, -0.3), 11), folds=0).agent_slopes
    assert same["common_slope_test"]["p_value"] > 0.01


def test_workers_using_several_agents_give_per_agent_slopes_but_no_test_and_say_why() -> None:
    data = simulate(DESIGN, TRUTH, np.random.default_rng(7)).data
    arm = data.arm.copy()
    team = np.flatnonzero(arm > 0)
    arm[team[::2]] = 1 + (arm[team[::2]] % 3)     # every other agent episode goes to another agent
    mixed = SynergyData(data.y, arm, data.human, data.task, data.position, data.arm_labels)
    fit = synergy_fit(mixed, folds=0)
    assert fit.agent_slopes["common_slope_test"] is None
    assert "more than one agent" in fit.not_identifiable["agent_slopes_test"]
    assert all(row["workers"] >= 10 for row in fit.agent_slopes["agents"].values())


def test_an_agent_with_few_workers_gets_no_slope_and_the_reason() -> None:
    data = simulate(StudyDesign(workers=24, n_tasks=15, n_agents=3, order="counterbalanced"),
                    Truth(boosts=(2.0, 5.0, 8.0)), np.random.default_rng(8)).data
    rows = synergy_fit(data, folds=0).agent_slopes["agents"]
    assert all(row["slope"] is None and "only 8 workers" in row["reason"] for row in rows.values())


def test_one_agent_has_no_per_agent_comparison() -> None:
    data = simulate(StudyDesign(workers=60, n_tasks=15, n_agents=1), Truth(boosts=(5.0,)),
                    np.random.default_rng(9)).data
    fit = synergy_fit(data, folds=0)
    assert fit.agent_slopes is None and "fewer than two agents" in fit.not_identifiable["agent_slopes"]
