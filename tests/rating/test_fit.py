"""Behaviour of the rating models (rating/fit.py): exactness against dense and independent REML, calibration
by simulation with known truth, and model checks; no database, no Django."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.optimize
from scipy.stats import norm

from rating.engine import RatingConfig, SkillModel
from rating.fit import (
    RATING_MODELS,
    ModelSpec,
    compare_models,
    fit_model,
    heldout_coverage,
)
from tests.rating.simulated import NOISE_SD, simulate


def in_code_order(values: np.ndarray, truth: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Return ``truth`` (indexed by integer id) in the fit's first-appearance order."""
    return truth[ids.astype(int)]


def gap_coverage(mu: np.ndarray, cov: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Return, per agent pair, whether the 95 % interval of the gap covers the true gap."""
    i, j = np.triu_indices(mu.shape[0], 1)
    sd = np.sqrt(cov[i, i] + cov[j, j] - 2.0 * cov[i, j])
    return np.abs((mu[i] - mu[j]) - (truth[i] - truth[j])) <= norm.ppf(0.975) * sd


def dense_reml(
    agent: np.ndarray, human: np.ndarray, y: np.ndarray, task: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """Independent REML: V = Z G Z^T + beta^2 I with dense matrices, agents as fixed effects, scipy optimiser.

    Returns the standard deviations (beta, sigma_human[, sigma_task]) and the maximised restricted
    log-likelihood -1/2 [(n - p) log 2 pi + log|V| + log|X^T V^-1 X| + y^T P y].
    """
    n = y.shape[0]
    x = np.eye(agent.max() + 1)[agent]
    zs = [np.eye(human.max() + 1)[human]]
    if task is not None:
        zs.append(np.eye(task.max() + 1)[task])
    p = x.shape[1]

    def negative(log_var: np.ndarray) -> float:
        v = np.exp(log_var[0]) * np.eye(n)
        for z, lv in zip(zs, log_var[1:], strict=True):
            v += np.exp(lv) * (z @ z.T)
        v_inv = np.linalg.inv(v)
        xtvx = x.T @ v_inv @ x
        proj = v_inv - v_inv @ x @ np.linalg.solve(xtvx, x.T @ v_inv)
        return 0.5 * (
            (n - p) * math.log(2 * math.pi) + np.linalg.slogdet(v)[1] + np.linalg.slogdet(xtvx)[1] + y @ proj @ y
        )

    start = np.full(1 + len(zs), math.log(np.var(y)))
    best = scipy.optimize.minimize(negative, start, method="BFGS", options={"gtol": 1e-7})
    # Polish with a small simplex around the quasi-Newton optimum (finite-difference gradients stall).
    simplex = best.x + np.vstack([np.zeros(best.x.size), 1e-3 * np.eye(best.x.size)])
    best = scipy.optimize.minimize(
        negative,
        best.x,
        method="Nelder-Mead",
        options={"initial_simplex": simplex, "xatol": 1e-10, "fatol": 1e-13, "maxfev": 4_000},
    )
    return np.exp(0.5 * best.x), -float(best.fun)


# --------------------------------------------------------------------------------------------------------
# Specification
# --------------------------------------------------------------------------------------------------------


def test_model_spec_round_trips_through_json_exactly() -> None:
    spec = ModelSpec(kind="paper", k=2.5, paper=RatingConfig(mu0=50.0, sigma0=10.0, beta=7.5), integrate_hyper=False)
    again = ModelSpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec
    assert ModelSpec.from_dict({}) == ModelSpec()
    assert RATING_MODELS == ("paper", "calibrated", "calibrated_task", "judge_aware")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "bayes"}, "kind"),
        ({"k": -1}, "k must"),
        ({"colour": 1}, "colour"),
        ({"paper": {"beta": 0}}, "paper: beta"),
        ({"paper": {"sigma": 1}}, "paper: config has unknown keys: sigma"),
        ({"integrate_hyper": "yes"}, "integrate_hyper"),
    ],
)
def test_model_spec_rejects_bad_values_naming_them(data: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ModelSpec.from_dict(data)


def test_fit_model_rejects_bad_input_with_clear_errors() -> None:
    with pytest.raises(ValueError, match="spec must be a ModelSpec"):
        fit_model(["a"], ["h"], [1.0], spec="calibrated")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scores must be finite"):
        fit_model(["a", "b"], ["h", "h"], [1.0, math.nan], spec=ModelSpec())
    with pytest.raises(ValueError, match="human_ids has 1 entries"):
        fit_model(["a", "b"], ["h"], [1.0, 2.0], spec=ModelSpec())
    with pytest.raises(ValueError, match="task_ids"):
        fit_model(["a", "b", "a"], ["h", "h", "g"], [1.0, 2.0, 3.0], spec=ModelSpec(kind="calibrated_task"))
    with pytest.raises(ValueError, match="more observations"):
        fit_model(["a", "b"], ["h", "g"], [1.0, 2.0], spec=ModelSpec())


# --------------------------------------------------------------------------------------------------------
# Paper model: the existing engine exactly
# --------------------------------------------------------------------------------------------------------


def test_paper_model_reproduces_the_hand_derived_posterior() -> None:
    fit = fit_model(["A1", "A2", "A1"], ["H1", "H1", "H2"], [3.0, 2.0, 1.0], spec=ModelSpec(kind="paper"))
    np.testing.assert_allclose(fit.agent_mu, [19 / 21, 8 / 21], rtol=1e-14)
    np.testing.assert_allclose(fit.agent_cov, [[10 / 21, 2 / 21], [2 / 21, 13 / 21]], rtol=1e-14)
    np.testing.assert_allclose(fit.human_mu, [26 / 21, 1 / 21], rtol=1e-13)
    np.testing.assert_allclose(fit.human_sigma, np.sqrt([10 / 21, 13 / 21]), rtol=1e-14)
    assert fit.level is None and fit.log_likelihood is None
    assert fit.config == RatingConfig()


def test_paper_model_equals_the_skill_model_on_simulated_data() -> None:
    data = simulate(np.random.default_rng(3))
    config = RatingConfig(mu0=1.0, sigma0=2.0, beta=3.0)
    fit = fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec(kind="paper", paper=config))
    model = SkillModel.from_arrays(data["agent"], data["human"], data["y"], config=config)
    post = model.posterior()
    order = np.argsort(post.agent_ids.astype(int))
    np.testing.assert_allclose(np.sort(fit.agent_mu), np.sort(post.mu_agents), rtol=1e-12)
    fit_order = np.argsort(fit.agent_ids.astype(int))
    np.testing.assert_allclose(fit.agent_mu[fit_order], post.mu_agents[order], rtol=1e-12)
    np.testing.assert_allclose(fit.agent_sigma()[fit_order], post.sigma_agents[order], rtol=1e-12)
    np.testing.assert_allclose(fit.conservative()[fit_order], (post.mu_agents - 3 * post.sigma_agents)[order])


# --------------------------------------------------------------------------------------------------------
# Calibrated models: exact REML
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_reml_estimates_equal_an_independent_dense_reml(seed: int) -> None:
    rng = np.random.default_rng(seed)
    data = simulate(rng, n_agents=3 + seed, n_humans=25, n_obs=90)
    fit = fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec(integrate_hyper=False))
    sds, loglik = dense_reml(data["agent"], data["human"], data["y"])
    assert fit.hyper["beta"]["estimate"] == pytest.approx(sds[0], rel=1e-6)
    assert fit.hyper["sigma_human"]["estimate"] == pytest.approx(sds[1], rel=1e-6)
    assert fit.log_likelihood == pytest.approx(loglik, rel=1e-10)


def test_task_model_reml_equals_an_independent_dense_reml() -> None:
    data = simulate(np.random.default_rng(11), n_agents=3, n_humans=20, n_obs=80, n_tasks=6, task_sd=8.0)
    fit = fit_model(
        data["agent"], data["human"], data["y"], data["task"], spec=ModelSpec(kind="calibrated_task")
    )
    sds, loglik = dense_reml(data["agent"], data["human"], data["y"], data["task"])
    assert fit.hyper["beta"]["estimate"] == pytest.approx(sds[0], rel=1e-6)
    assert fit.hyper["sigma_human"]["estimate"] == pytest.approx(sds[1], rel=1e-6)
    assert fit.hyper["sigma_task"]["estimate"] == pytest.approx(sds[2], rel=1e-6)
    assert fit.log_likelihood == pytest.approx(loglik, rel=1e-10)


def test_task_model_solution_equals_a_dense_solve_of_the_mixed_model_equations() -> None:
    data = simulate(np.random.default_rng(12), n_agents=4, n_humans=30, n_obs=150, n_tasks=9)
    spec = ModelSpec(kind="calibrated_task", integrate_hyper=False)
    fit = fit_model(data["agent"], data["human"], data["y"], data["task"], spec=spec)
    beta2 = fit.hyper["beta"]["estimate"] ** 2
    g_h = fit.hyper["sigma_human"]["estimate"] ** 2
    g_t = fit.hyper["sigma_task"]["estimate"] ** 2
    # Columns in the fit's first-appearance order: agents, humans, tasks.
    a_pos = {k: i for i, k in enumerate(fit.agent_ids.astype(int))}
    h_pos = {k: i for i, k in enumerate(fit.human_ids.astype(int))}
    t_pos = {k: i for i, k in enumerate(fit.task_ids.astype(int))}
    n_a, n_h, n_t = len(a_pos), len(h_pos), len(t_pos)
    design = np.zeros((data["y"].shape[0], n_a + n_h + n_t))
    rows = np.arange(data["y"].shape[0])
    design[rows, [a_pos[a] for a in data["agent"]]] = 1
    design[rows, [n_a + h_pos[h] for h in data["human"]]] = 1
    design[rows, [n_a + n_h + t_pos[t] for t in data["task"]]] = 1
    prior = np.concatenate([np.zeros(n_a), np.full(n_h, beta2 / g_h), np.full(n_t, beta2 / g_t)])
    lhs = design.T @ design + np.diag(prior)
    solution = np.linalg.solve(lhs, design.T @ data["y"])
    cov = beta2 * np.linalg.inv(lhs)
    np.testing.assert_allclose(fit.agent_mu, solution[:n_a], rtol=1e-10)
    np.testing.assert_allclose(fit.agent_cov, cov[:n_a, :n_a], rtol=1e-9)
    np.testing.assert_allclose(fit.human_mu, solution[n_a : n_a + n_h], rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(fit.human_sigma, np.sqrt(np.diag(cov)[n_a : n_a + n_h]), rtol=1e-9)
    np.testing.assert_allclose(fit.task_mu, solution[n_a + n_h :], rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(fit.task_sigma, np.sqrt(np.diag(cov)[n_a + n_h :]), rtol=1e-9)
    np.testing.assert_allclose(fit.residuals, data["y"] - design @ solution, atol=1e-8)


def test_reml_agrees_with_statsmodels_mixedlm() -> None:
    statsmodels = pytest.importorskip("statsmodels.regression.mixed_linear_model")
    data = simulate(np.random.default_rng(5), n_agents=4, n_humans=40, n_obs=200)
    fit = fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec(integrate_hyper=False))
    exog = np.eye(4)[data["agent"]]
    # statsmodels' default L-BFGS start can stall on the boundary; BFGS converges.
    result = statsmodels.MixedLM(data["y"], exog, groups=data["human"]).fit(reml=True, method="bfgs")
    assert fit.hyper["beta"]["estimate"] ** 2 == pytest.approx(result.scale, rel=1e-4)
    assert fit.hyper["sigma_human"]["estimate"] ** 2 == pytest.approx(float(np.asarray(result.cov_re)[0, 0]), rel=1e-4)
    order = fit.agent_ids.astype(int)
    np.testing.assert_allclose(fit.agent_mu, np.asarray(result.fe_params)[order], rtol=1e-4)
    assert fit.log_likelihood == pytest.approx(result.llf, rel=1e-9)


def test_a_variance_component_with_no_signal_is_estimated_at_zero() -> None:
    rng = np.random.default_rng(8)
    agent = rng.integers(0, 3, 300)
    human = np.arange(300) % 60
    y = 50.0 + 4.0 * agent + rng.normal(0.0, 10.0, 300)  # no participant effect at all
    fit = fit_model(agent, human, y, spec=ModelSpec())
    assert fit.hyper["sigma_human"]["estimate"] < 2.0
    assert fit.hyper["beta"]["estimate"] == pytest.approx(10.0, rel=0.15)
    assert np.all(np.isfinite(fit.agent_cov))


# --------------------------------------------------------------------------------------------------------
# Calibration by simulation with known truth
# --------------------------------------------------------------------------------------------------------


def test_calibrated_gap_intervals_cover_the_truth_and_the_paper_model_does_not() -> None:
    rng = np.random.default_rng(2026)
    calibrated, paper = [], []
    for _ in range(80):
        data = simulate(rng)
        for spec, sink in ((ModelSpec(), calibrated), (ModelSpec(kind="paper"), paper)):
            fit = fit_model(data["agent"], data["human"], data["y"], spec=spec)
            truth = in_code_order(fit.agent_mu, data["truth"], fit.agent_ids)
            sink.append(gap_coverage(fit.agent_mu, fit.agent_cov, truth))
    assert np.mean(calibrated) >= 0.90
    assert np.mean(paper) < 0.5


def test_calibrated_levels_are_unbiased_where_the_paper_prior_pulls_them_down() -> None:
    rng = np.random.default_rng(7)
    share = np.array([3.0, 3.0, 3.0, 3.0, 1.0])  # the last agent has a third of the others' sessions
    level_err, small_err, paper_level_err = [], [], []
    for _ in range(100):
        data = simulate(rng, agent_share=share)
        fit = fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec(integrate_hyper=False))
        truth = in_code_order(fit.agent_mu, data["truth"], fit.agent_ids)
        err = fit.agent_mu - truth
        level_err.append(err.mean())
        small = fit.agent_ids.astype(int) == 4
        small_err.append(err[small].mean() - err[~small].mean())
        paper = fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec(kind="paper"))
        paper_level_err.append((paper.agent_mu - in_code_order(paper.agent_mu, data["truth"], paper.agent_ids)).mean())
    assert abs(np.mean(level_err)) < 0.5
    assert abs(np.mean(small_err)) < 0.5
    assert np.mean(paper_level_err) < -2.0


def test_hyperparameter_uncertainty_widens_intervals_when_data_are_few() -> None:
    data = simulate(np.random.default_rng(9), n_agents=3, n_humans=12, n_obs=40)
    plug = fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec(integrate_hyper=False))
    integrated = fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec())
    assert integrated.diagnostics["hyper_integrated"]
    assert np.all(integrated.agent_sigma() > plug.agent_sigma())
    probs = integrated.prob_greater()
    np.testing.assert_allclose(probs + probs.T, 1.0, atol=1e-12)


# --------------------------------------------------------------------------------------------------------
# Model checks
# --------------------------------------------------------------------------------------------------------


def test_standardized_residuals_have_unit_spread_when_the_model_holds() -> None:
    data = simulate(np.random.default_rng(4), n_humans=300, n_obs=2000)
    fit = fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec())
    assert fit.diagnostics["standardized"]["sd"] == pytest.approx(1.0, abs=0.05)
    assert fit.hyper["beta"]["estimate"] == pytest.approx(NOISE_SD, rel=0.1)
    assert fit.residuals.shape == data["y"].shape
    json.dumps(fit.to_dict())


def test_heldout_coverage_is_nominal_for_calibrated_and_low_for_paper() -> None:
    data = simulate(np.random.default_rng(6), n_humans=150, n_obs=900)
    good = heldout_coverage(data["agent"], data["human"], data["y"], spec=ModelSpec(), folds=5)
    bad = heldout_coverage(data["agent"], data["human"], data["y"], spec=ModelSpec(kind="paper"), folds=5)
    assert 0.92 <= good["coverage"] <= 0.98
    assert bad["coverage"] < 0.5
    assert good["n_predicted"] == 900


def test_compare_models_prefers_the_task_term_only_when_tasks_differ() -> None:
    rng = np.random.default_rng(10)
    with_tasks = simulate(rng, n_humans=80, n_obs=600, n_tasks=15, task_sd=8.0)
    rows = compare_models(with_tasks["agent"], with_tasks["human"], with_tasks["y"], with_tasks["task"])
    assert [r["model"] for r in rows] == ["calibrated", "calibrated_task"]
    assert rows[1]["preferred_by_aic"] and rows[1]["p_value"] < 0.01
    flat = simulate(rng, n_humans=80, n_obs=600, n_tasks=15, task_sd=0.0)
    rows = compare_models(flat["agent"], flat["human"], flat["y"], flat["task"])
    assert rows[0]["preferred_by_aic"]
    json.dumps(rows)


def test_sparse_gathers_equal_dense_projections_for_per_participant_variances(monkeypatch) -> None:
    import rating.fit as fit_module

    data = simulate(np.random.default_rng(17), n_humans=40, n_obs=300, n_tasks=12)
    spec = ModelSpec(kind="calibrated_task", integrate_hyper=False)
    dense = fit_model(data["agent"], data["human"], data["y"], data["task"], spec=spec)
    monkeypatch.setattr(fit_module, "_DENSE_CORE", 0)  # force the gather path
    gathered = fit_model(data["agent"], data["human"], data["y"], data["task"], spec=spec)
    np.testing.assert_allclose(gathered.human_sigma, dense.human_sigma, rtol=1e-10)
    np.testing.assert_allclose(gathered.standardized_residuals, dense.standardized_residuals, rtol=1e-9)


@pytest.mark.parametrize("kind", ["calibrated", "calibrated_task"])
def test_average_information_leverages_and_participant_variances_equal_dense_algebra(kind: str) -> None:
    """The pooled-sum forms (average information, leverages, participant variances) against the dense
    mixed-model matrices of the same design: weights, and for the task model rows without a task."""
    import rating.fit as fit_module

    rng = np.random.default_rng(31)
    data = simulate(rng, n_agents=4, n_humans=25, n_obs=120, n_tasks=7)
    weights = rng.uniform(0.5, 2.0, 120)
    tasks = kind == "calibrated_task"
    task = data["task"].astype(object)
    task[::9] = None
    spec = ModelSpec(kind=kind, integrate_hyper=False)
    obs = fit_module._observations(data["agent"], data["human"], data["y"], task if tasks else None, weights)
    st = fit_module._structure(obs, tasks=tasks)
    ev = fit_module._reml(st).evaluation
    fit = fit_model(data["agent"], data["human"], data["y"], task, spec=spec, weights=weights)

    n, n_a, n_h = obs.n, obs.n_agents, obs.n_humans
    blocks = [np.eye(n_a)[obs.agent], np.eye(n_h)[obs.human]]
    prior = [np.zeros(n_a), np.full(n_h, 1.0 / ev.gamma["human"])]
    if tasks:
        assert obs.task is not None
        blocks.append(np.where(obs.task[:, None] >= 0, np.eye(obs.n_tasks)[np.maximum(obs.task, 0)], 0.0))
        prior.append(np.full(obs.n_tasks, 1.0 / ev.gamma["task"]))
    design, w = np.hstack(blocks), np.diag(obs.omega)
    c0_inv = np.linalg.inv(design.T @ w @ design + np.diag(np.concatenate(prior)))
    b = c0_inv @ design.T @ w @ obs.y
    p0 = w - w @ design @ c0_inv @ design.T @ w
    beta2 = float(obs.y @ p0 @ obs.y) / (n - n_a)
    # Working vectors: the residuals, then each random component's fitted part.
    vectors, start = [obs.y - design @ b], n_a
    for block in blocks[1:]:
        stop = start + block.shape[1]
        vectors.append(block @ b[start:stop])
        start = stop
    v = np.column_stack(vectors)
    m = np.eye(v.shape[1])
    m[1:, 0] = 1.0
    info = m.T @ (v.T @ p0 @ v / (2.0 * beta2)) @ m
    np.testing.assert_allclose(fit_module._average_information(st, ev), info, rtol=1e-10, atol=1e-12 * abs(info).max())

    leverage = obs.omega * np.einsum("ij,jk,ik->i", design, c0_inv, design)
    standardized = vectors[0] / np.sqrt(beta2 / obs.omega * (1.0 - leverage))
    np.testing.assert_allclose(fit.residuals, vectors[0], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(fit.standardized_residuals, standardized, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(fit.human_sigma, np.sqrt(beta2 * np.diag(c0_inv)[n_a : n_a + n_h]), rtol=1e-10)
