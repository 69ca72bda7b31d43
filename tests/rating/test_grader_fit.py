"""Behaviour of the judge-aware rating model (rating/grader_fit.py): exactness against an independent dense
REML and statsmodels, reduction to the calibrated model, identification of self-preference, recovery of a
planted preference and the input checks; no database, no Django."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import scipy.optimize
from scipy.stats import norm

import rating.grader_fit as grader_fit
from rating.fit import RATING_MODELS, ModelSpec, fit_model
from rating.grader_fit import fit_graded

FAMILY = {"claude_code": "anthropic", "claude_cowork": "anthropic", "codex": "openai", "gemini_cli": "google",
          "manus": "other"}  # fmt: skip
AGENTS = list(FAMILY)
PANEL = (("gemini", "google", -1.5), ("claude", "anthropic", 1.5))
PLUG_IN = ModelSpec(kind="judge_aware", integrate_hyper=False)


def simulate(
    rng: np.random.Generator,
    *,
    n_humans: int = 30,
    n_episodes: int = 80,
    judges: tuple[tuple[str, str, float], ...] = PANEL,
    preference: dict[str, float] | None = None,
    agents: list[str] | None = None,
    experts: tuple[float, ...] = (),
    expert_share: float = 0.3,
    n_tasks: int = 0,
    grade_share: float = 1.0,
    sd: tuple[float, float, float, float] = (3.0, 8.0, 12.0, 6.0),
) -> dict[str, np.ndarray]:
    """Return one simulated study, one row per grade, with its true agent effects.

    Judges ``(id, family, leniency)`` grade each episode with probability ``grade_share`` (at least one
    grade per episode); ``experts`` (their leniencies) grade a random share of episodes.
    """
    agents = AGENTS if agents is None else agents
    preference = {"claude": 4.0} if preference is None else preference
    agent_sd, human_sd, episode_sd, noise_sd = sd
    a = rng.normal(0.0, agent_sd, len(agents))
    h = rng.normal(0.0, human_sd, n_humans)
    ep_agent = rng.integers(0, len(agents), n_episodes)
    ep_agent[: len(agents)] = np.arange(len(agents))
    ep_human = np.concatenate([np.arange(n_humans), rng.integers(0, n_humans, n_episodes - n_humans)])
    rng.shuffle(ep_human)
    quality = rng.normal(0.0, episode_sd, n_episodes)
    ep_task = rng.integers(0, n_tasks, n_episodes) if n_tasks else None
    task_effect = rng.normal(0.0, 5.0, n_tasks) if n_tasks else None
    rows = []
    expert_eps = rng.random(n_episodes) < expert_share
    for e in range(n_episodes):
        graders = [(jid, fam, lenient) for jid, fam, lenient in judges if rng.random() < grade_share]
        if not graders:
            graders = [judges[e % len(judges)]]
        if expert_eps[e]:
            graders += [(f"expert{x}", "", lenient) for x, lenient in enumerate(experts)]
        for gid, fam, lenient in graders:
            own = fam != "" and FAMILY[agents[ep_agent[e]]] == fam
            mean = 70.0 + a[ep_agent[e]] + h[ep_human[e]] + quality[e] + lenient
            mean += preference.get(gid, 0.0) if own else 0.0
            if ep_task is not None and task_effect is not None:
                mean += task_effect[ep_task[e]]
            rows.append((e, gid, fam, mean + rng.normal(0.0, noise_sd)))
    episode = np.array([r[0] for r in rows])
    out = {
        "episode": episode,
        "grader": np.array([r[1] for r in rows]),
        "grader_family": np.array([r[2] for r in rows]),
        "agent": np.array(agents)[ep_agent[episode]],
        "human": ep_human[episode],
        "y": np.array([r[3] for r in rows]),
        "truth": dict(zip(agents, 70.0 + a, strict=True)),
    }
    if ep_task is not None:
        out["task"] = ep_task[episode]
    return out


def fit(data: dict, spec: ModelSpec = PLUG_IN, **kwargs) -> object:
    return fit_graded(
        data["agent"], data["human"], data["y"], kwargs.pop("task", data.get("task")),
        episode=data["episode"], grader=data["grader"], agent_family=FAMILY,
        grader_family=kwargs.pop("grader_family", data["grader_family"]), spec=spec, **kwargs,
    )  # fmt: skip


def fixed_design(
    data: dict, reference: list[str], terms: list[str], weighting: str = "grades"
) -> tuple[np.ndarray, list[str], list[str]]:
    """Return X (agents | grader contrasts summing to zero over ``reference`` | self-preference of ``terms``).

    The contrasts make the reference graders' leniencies average zero weighted by their number of grades
    (``weighting="grades"``) or equally (``"equal"``).
    """
    agents = sorted(set(data["agent"].tolist()))
    graders = sorted(set(data["grader"].tolist()))
    last = reference[-1]
    free = [g for g in graders if g != last]
    x_agent = (data["agent"][:, None] == np.array(agents)[None, :]).astype(float)
    x_grader = (data["grader"][:, None] == np.array(free)[None, :]).astype(float)
    use = {gid: float(np.sum(data["grader"] == gid)) if weighting == "grades" else 1.0 for gid in reference}
    for j, gid in enumerate(free):
        if gid in reference:
            x_grader[data["grader"] == last, j] = -use[gid] / use[last]
    family = dict(zip(data["grader"].tolist(), data["grader_family"].tolist(), strict=True))
    agent_family = np.array([FAMILY[a] for a in data["agent"]])
    x_pref = np.column_stack([(data["grader"] == gid) & (agent_family == family[gid]) for gid in terms] or [
        np.zeros((data["y"].shape[0], 0))
    ]).astype(float)  # fmt: skip
    return np.hstack([x_agent, x_grader, x_pref]), agents, free


def dense_reml(data: dict, x: np.ndarray, weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Independent REML: V = beta^2 W^-1 + sum_j sigma_j^2 Z_j Z_j^T built densely, scipy optimiser.

    Components: episode, participant and (when the data has tasks) task. Returns the standard deviations
    (beta, episode, participant[, task]), the GLS fixed effects and their covariance (X^T V^-1 X)^-1.
    """
    y = data["y"]
    n, p = x.shape
    w = np.ones(n) if weights is None else weights
    zs = [
        (data["episode"][:, None] == np.unique(data["episode"])[None, :]).astype(float),
        (data["human"][:, None] == np.unique(data["human"])[None, :]).astype(float),
    ]
    if "task" in data:
        zs.append((data["task"][:, None] == np.unique(data["task"])[None, :]).astype(float))
    blocks = [z @ z.T for z in zs]

    def pieces(log_var: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        v = np.diag(np.exp(log_var[0]) / w)
        for block, lv in zip(blocks, log_var[1:], strict=True):
            v += np.exp(lv) * block
        v_inv = np.linalg.inv(v)
        return v, v_inv, x.T @ v_inv @ x

    def negative(log_var: np.ndarray) -> float:
        v, v_inv, xtvx = pieces(log_var)
        proj = v_inv - v_inv @ x @ np.linalg.solve(xtvx, x.T @ v_inv)
        return 0.5 * (
            (n - p) * math.log(2 * math.pi) + np.linalg.slogdet(v)[1] + np.linalg.slogdet(xtvx)[1] + y @ proj @ y
        )

    best = scipy.optimize.minimize(
        negative, np.full(1 + len(zs), math.log(np.var(y) / 3)), method="BFGS", options={"gtol": 1e-8}
    )
    simplex = best.x + np.vstack([np.zeros(best.x.size), 1e-3 * np.eye(best.x.size)])
    best = scipy.optimize.minimize(
        negative, best.x, method="Nelder-Mead",
        options={"initial_simplex": simplex, "xatol": 1e-10, "fatol": 1e-13, "maxfev": 6_000},
    )  # fmt: skip
    _, v_inv, xtvx = pieces(best.x)
    cov = np.linalg.inv(xtvx)
    return {"sd": np.exp(0.5 * best.x), "beta": cov @ (x.T @ v_inv @ y), "cov": cov, "loglik": -float(best.fun)}


def leniency_of(result, grader: str) -> dict:
    return next(row for row in result.diagnostics["graders"]["leniency"] if row["grader"] == grader)


def preference_of(result, grader: str) -> dict:
    return next(row for row in result.diagnostics["graders"]["self_preference"] if row["grader"] == grader)


def by_id(ids: np.ndarray, values: np.ndarray, order: list[str]) -> np.ndarray:
    position = {key: i for i, key in enumerate(ids.tolist())}
    return values[[position[key] for key in order]]


# --------------------------------------------------------------------------------------------------------
# Exactness
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("pooled", "weighting"), [(True, "grades"), (False, "grades"), (True, "equal")])
def test_fit_equals_an_independent_dense_reml_on_every_estimate(pooled, weighting, monkeypatch) -> None:
    if not pooled:
        monkeypatch.setattr(grader_fit, "_POOL_LIMIT", 0)
    data = simulate(np.random.default_rng(1), n_humans=30, n_episodes=70, experts=(2.0,), grade_share=0.8)
    result = fit(data, reference_weighting=weighting)
    assert result.diagnostics["backend"] == ("pooled" if pooled else "episodes")
    # The reference in the fit's order: its last grader is the one whose leniency the others' determine.
    order_ref = result.diagnostics["reference"]["graders"]
    assert sorted(order_ref) == ["claude", "gemini"]
    x, agents, free = fixed_design(data, order_ref, ["gemini", "claude"], weighting)
    last, other = order_ref[-1], order_ref[0]
    use = {gid: float(np.sum(data["grader"] == gid)) if weighting == "grades" else 1.0 for gid in ("gemini", "claude")}
    assert use["gemini"] != use["claude"] or weighting == "equal"  # the two weightings differ on these grades
    ref = dense_reml(data, x)
    ours = np.array([result.hyper[k]["estimate"] for k in ("beta", "sigma_episode", "sigma_human")])
    np.testing.assert_allclose(ours, ref["sd"], rtol=1e-4)
    order = by_id(result.agent_ids, np.arange(5), agents)
    np.testing.assert_allclose(result.agent_mu[order], ref["beta"][:5], rtol=1e-6)
    np.testing.assert_allclose(result.agent_cov[np.ix_(order, order)], ref["cov"][:5, :5], rtol=1e-4)
    # Leniencies: free graders' coefficients, the last reference grader minus the other's.
    b = dict(zip(free, ref["beta"][5:5 + len(free)], strict=True))
    b[last] = -b[other] * use[other] / use[last]
    for gid, value in b.items():
        assert leniency_of(result, gid)["leniency"] == pytest.approx(value, rel=1e-4, abs=1e-6)
    for j, gid in enumerate(["gemini", "claude"]):
        row = preference_of(result, gid)
        col = 5 + len(free) + j
        assert row["estimate"] == pytest.approx(ref["beta"][col], rel=1e-4)
        assert row["se"] == pytest.approx(math.sqrt(ref["cov"][col, col]), rel=1e-4)
    # The log-likelihood is reported for the equal-weight contrasts, whichever grader comes last.
    shift = 0.0 if weighting == "equal" else math.log(use[last] / (0.5 * (use[last] + use[other])))
    assert result.log_likelihood == pytest.approx(ref["loglik"] - shift, rel=1e-8)


def test_fit_with_tasks_and_weights_equals_the_dense_reml() -> None:
    rng = np.random.default_rng(2)
    data = simulate(rng, n_humans=25, n_episodes=60, n_tasks=6)
    weights = rng.uniform(0.5, 2.0, data["y"].shape[0])
    result = fit(data, weights=weights)
    assert result.diagnostics["backend"] == "episodes"  # weights make every episode's total its own
    x, agents, _ = fixed_design(data, ["gemini", "claude"], ["gemini", "claude"])
    ref = dense_reml(data, x, weights)
    names = ("beta", "sigma_episode", "sigma_human", "sigma_task")
    np.testing.assert_allclose([result.hyper[k]["estimate"] for k in names], ref["sd"], rtol=1e-4)
    order = by_id(result.agent_ids, np.arange(5), agents)
    np.testing.assert_allclose(result.agent_mu[order], ref["beta"][:5], rtol=1e-6)
    np.testing.assert_allclose(result.agent_cov[np.ix_(order, order)], ref["cov"][:5, :5], rtol=1e-4)
    assert preference_of(result, "claude")["estimate"] == pytest.approx(ref["beta"][-1], rel=1e-4)


def test_pooled_and_per_episode_eliminations_give_the_same_fit(monkeypatch) -> None:
    data = simulate(np.random.default_rng(3), n_humans=60, n_episodes=200, experts=(1.0, -2.0), grade_share=0.7,
                    n_tasks=5)  # fmt: skip
    models = []
    original = grader_fit._reml

    def spy(model):
        models.append(model)
        return original(model)

    monkeypatch.setattr(grader_fit, "_reml", spy)
    pooled = fit(data)
    monkeypatch.setattr(grader_fit, "_POOL_LIMIT", 0)
    per_episode = fit(data)
    assert (pooled.diagnostics["backend"], per_episode.diagnostics["backend"]) == ("pooled", "episodes")
    # The same restricted likelihood and gradient at the same variance ratios ...
    theta = np.array([1.2, -0.4, -1.5])
    a, b = (grader_fit._evaluate(m, theta, gradient=True) for m in models)
    assert a.profile_loglik(models[0]) == pytest.approx(b.profile_loglik(models[1]), rel=1e-12)
    np.testing.assert_allclose(a.profile_gradient(models[0]), b.profile_gradient(models[1]), rtol=1e-9)
    np.testing.assert_allclose(a.core_mu, b.core_mu, rtol=1e-10)
    # ... so the same fit, up to where the optimiser stops.
    np.testing.assert_allclose(pooled.agent_mu, per_episode.agent_mu, rtol=1e-7)
    np.testing.assert_allclose(pooled.agent_cov, per_episode.agent_cov, rtol=1e-5)
    np.testing.assert_allclose(pooled.human_sigma, per_episode.human_sigma, rtol=1e-5)
    np.testing.assert_allclose(pooled.standardized_residuals, per_episode.standardized_residuals, rtol=1e-5,
                               atol=1e-7)  # fmt: skip


@pytest.mark.parametrize("pooled", [True, False])
def test_restricted_likelihood_gradient_is_exact(pooled, monkeypatch) -> None:
    if not pooled:
        monkeypatch.setattr(grader_fit, "_POOL_LIMIT", 0)
    data = simulate(np.random.default_rng(4), n_humans=20, n_episodes=50, n_tasks=4, grade_share=0.8)
    captured = {}
    original = grader_fit._reml

    def spy(model):
        captured["model"] = model
        return original(model)

    monkeypatch.setattr(grader_fit, "_reml", spy)
    fit(data)
    model = captured["model"]
    assert model.components == ("episode", "human", "task")
    theta = np.array([0.3, -0.7, -1.1])
    ev = grader_fit._evaluate(model, theta, gradient=True)
    step = 1e-6
    numeric = []
    for j in range(3):
        up, down = theta.copy(), theta.copy()
        up[j] += step
        down[j] -= step
        numeric.append(
            (grader_fit._evaluate(model, up).profile_loglik(model) - grader_fit._evaluate(model, down).profile_loglik(
                model)) / (2 * step)
        )  # fmt: skip
    np.testing.assert_allclose(ev.profile_gradient(model), numeric, rtol=1e-5, atol=1e-6)


def test_fit_equals_statsmodels_mixedlm_with_participant_groups_and_an_episode_component() -> None:
    import pandas as pd
    from statsmodels.regression.mixed_linear_model import MixedLM

    data = simulate(np.random.default_rng(5), n_humans=40, n_episodes=120)
    result = fit(data)
    x, agents, _ = fixed_design(data, ["gemini", "claude"], ["gemini", "claude"])
    frame = pd.DataFrame(x, columns=[f"x{i}" for i in range(x.shape[1])])
    frame["y"], frame["human"], frame["episode"] = data["y"], data["human"], data["episode"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MixedLM.from_formula(
            "y ~ 0 + " + " + ".join(frame.columns[: x.shape[1]]), data=frame, groups="human", re_formula="1",
            vc_formula={"episode": "0 + C(episode)"},
        )  # fmt: skip
        theirs = model.fit(reml=True, method=["lbfgs"], maxiter=2000)
    assert theirs.converged
    ours_var = [result.hyper["beta"]["estimate"] ** 2, result.hyper["sigma_human"]["estimate"] ** 2,
                result.hyper["sigma_episode"]["estimate"] ** 2]  # fmt: skip
    their_var = [theirs.scale, float(np.asarray(theirs.cov_re)[0, 0]), float(theirs.vcomp[0])]
    np.testing.assert_allclose(ours_var, their_var, rtol=1e-4)
    order = by_id(result.agent_ids, np.arange(5), agents)
    np.testing.assert_allclose(result.agent_mu[order], np.asarray(theirs.fe_params)[:5], rtol=1e-4)
    their_pref = np.asarray(theirs.fe_params)[-1]
    assert preference_of(result, "claude")["estimate"] == pytest.approx(their_pref, rel=1e-4)


def test_a_variance_component_at_zero_is_reported_at_zero_and_the_likelihood_is_at_its_maximum(monkeypatch) -> None:
    # No episode effect in the data; with this seed REML puts sigma_episode on the boundary.
    data = simulate(np.random.default_rng(2), n_humans=30, n_episodes=80, sd=(3.0, 8.0, 0.0, 6.0))
    captured = {}
    original = grader_fit._reml

    def spy(model):
        captured["model"] = model
        captured["reml"] = original(model)
        return captured["reml"]

    monkeypatch.setattr(grader_fit, "_reml", spy)
    result = fit(data)
    episode = result.hyper["sigma_episode"]
    assert (episode["estimate"], episode["at_zero"], episode["ci_low"]) == (0.0, 1.0, 0.0)
    assert math.isnan(episode["se"])
    assert result.diagnostics["reml_converged"]
    json.dumps(result.to_dict(), allow_nan=False)
    # No interior episode variance does better, and the dense REML (unbounded log variances) finds nothing better.
    model, reml = captured["model"], captured["reml"]
    assert model.components[0] == "episode"
    best = reml.evaluation.profile_loglik(model)
    for log_ratio in (-8.0, -4.0, -1.0, 0.5):
        theta = reml.evaluation.theta.copy()
        theta[0] = log_ratio
        assert grader_fit._evaluate(model, theta).profile_loglik(model) < best
    x, _, _ = fixed_design(data, ["gemini", "claude"], ["gemini", "claude"])
    assert best >= dense_reml(data, x)["loglik"] - 1e-7


def test_one_grade_per_episode_by_one_grader_is_the_calibrated_model() -> None:
    data = simulate(np.random.default_rng(6), n_humans=40, n_episodes=150, judges=(("claude", "anthropic", 0.0),))
    result = fit(data)
    calibrated = fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec(integrate_hyper=False))
    np.testing.assert_allclose(result.agent_mu, calibrated.agent_mu, rtol=1e-7)
    np.testing.assert_allclose(result.agent_cov, calibrated.agent_cov, rtol=1e-5)
    for name in ("beta", "sigma_human"):
        assert result.hyper[name]["estimate"] == pytest.approx(calibrated.hyper[name]["estimate"], rel=1e-5)
    assert result.log_likelihood == pytest.approx(calibrated.log_likelihood, rel=1e-9)
    np.testing.assert_allclose(result.human_mu, calibrated.human_mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result.human_sigma, calibrated.human_sigma, rtol=1e-5)
    np.testing.assert_allclose(result.standardized_residuals, calibrated.standardized_residuals, rtol=1e-5,
                               atol=1e-6)  # fmt: skip
    assert "sigma_episode" not in result.hyper
    assert result.diagnostics["components"]["episode"].startswith("every episode has one grade")
    assert any(note.startswith("one grader") for note in result.diagnostics["notes"])
    pref = preference_of(result, "claude")
    assert not pref["identifiable"] and pref["estimate"] is None


def test_one_grader_with_repeated_runs_equals_the_calibrated_model_on_episode_means() -> None:
    rng = np.random.default_rng(7)
    base = simulate(rng, n_humans=40, n_episodes=150, judges=(("claude", "anthropic", 0.0),))
    data = {k: (np.concatenate([v, v]) if isinstance(v, np.ndarray) else v) for k, v in base.items()}
    data["y"] = data["y"] + rng.normal(0.0, 6.0, data["y"].shape[0])
    result = fit(data)
    means = np.bincount(base["episode"], weights=data["y"][: base["y"].shape[0]] + data["y"][base["y"].shape[0]:])
    means = means / 2.0
    first = np.unique(base["episode"], return_index=True)[1]
    calibrated = fit_model(base["agent"][first], base["human"][first], means, spec=ModelSpec(integrate_hyper=False))
    assert "sigma_episode" in result.hyper
    order = by_id(result.agent_ids, np.arange(5), calibrated.agent_ids.tolist())
    np.testing.assert_allclose(result.agent_mu[order], calibrated.agent_mu, rtol=1e-7)
    np.testing.assert_allclose(result.agent_cov[np.ix_(order, order)], calibrated.agent_cov, rtol=1e-5)
    assert result.hyper["sigma_human"]["estimate"] == pytest.approx(
        calibrated.hyper["sigma_human"]["estimate"], rel=1e-5
    )


# --------------------------------------------------------------------------------------------------------
# What the levels mean, and self-preference
# --------------------------------------------------------------------------------------------------------


def test_changing_the_reference_shifts_every_agent_by_the_same_leniency_difference() -> None:
    data = simulate(np.random.default_rng(8), n_humans=60, n_episodes=200, experts=(4.0, 2.0))
    panel = fit(data)
    experts = fit(data, reference="experts")
    shift = panel.agent_mu - experts.agent_mu
    np.testing.assert_allclose(shift, shift[0], atol=1e-8)
    panel_mean_in_expert_terms = np.mean([leniency_of(experts, g)["leniency"] for g in ("gemini", "claude")])
    assert shift[0] == pytest.approx(panel_mean_in_expert_terms, rel=1e-8)
    assert experts.diagnostics["reference"]["graders"] == ["expert0", "expert1"]
    # Gaps between agents do not depend on the reference, nor does their uncertainty.
    i, j = np.triu_indices(5, 1)
    gap_var = [c[i, i] + c[j, j] - 2 * c[i, j] for c in (panel.agent_cov, experts.agent_cov)]
    np.testing.assert_allclose(gap_var[0], gap_var[1], rtol=1e-6)


def test_identifiable_design_recovers_a_planted_self_preference() -> None:
    data = simulate(np.random.default_rng(9), n_humans=400, n_episodes=2000, preference={"claude": 4.0})
    result = fit(data, spec=ModelSpec(kind="judge_aware"))
    claude, gemini = preference_of(result, "claude"), preference_of(result, "gemini")
    assert claude["identifiable"] and claude["reason"] is None
    assert claude["ci_low"] < 4.0 < claude["ci_high"]
    assert abs(claude["estimate"] - 4.0) < 1.0
    assert claude["p_value"] < 1e-6
    assert abs(gemini["estimate"]) < 3 * gemini["se"]  # no preference planted for the Gemini judge
    truth = np.array([data["truth"][a] for a in result.agent_ids])  # neutral level: panel leniency averages 0
    assert np.max(np.abs(result.agent_mu - truth)) < 4 * np.max(result.agent_sigma())
    lenient = leniency_of(result, "claude")
    assert abs(lenient["leniency"] - 1.5) < 3 * lenient["se"]  # half the judges' 3-point gap


def test_self_preference_intervals_cover_the_planted_value_at_their_nominal_rate() -> None:
    covered = []
    for seed in range(60):
        data = simulate(np.random.default_rng(100 + seed), n_humans=40, n_episodes=160)
        row = preference_of(fit(data, spec=ModelSpec(kind="judge_aware")), "claude")
        covered.append(row["ci_low"] <= 4.0 <= row["ci_high"])
    # 95 % nominal: 60 studies cover at least 51 times unless the standard error is wrong (P < 0.3 %).
    assert sum(covered) >= 51


def test_preference_with_no_neutral_comparison_is_reported_not_identifiable_and_not_invented() -> None:
    agents = ["claude_code", "codex"]
    judges = (("claude", "anthropic", 1.0), ("gpt", "openai", -1.0))
    data = simulate(np.random.default_rng(10), agents=agents, judges=judges,
                    preference={"claude": 4.0, "gpt": 2.0})  # fmt: skip
    result = fit(data)
    for gid, partner in (("claude", "gpt"), ("gpt", "claude")):
        row = preference_of(result, gid)
        assert not row["identifiable"]
        assert row["estimate"] is None and row["se"] is None and row["p_value"] is None
        assert "only a combination" in row["reason"] and partner in row["reason"]
    assert sum("not identifiable" in note for note in result.diagnostics["notes"]) == 2
    assert np.all(np.isfinite(result.agent_mu))
    json.dumps(result.to_dict(), allow_nan=False)


def test_agent_family_graded_only_by_conflicted_judges_is_reported_with_the_reason() -> None:
    data = simulate(np.random.default_rng(11), n_humans=40, n_episodes=150)
    anthropic = np.isin(data["agent"], ["claude_code", "claude_cowork"])
    keep = ~(anthropic & (data["grader"] == "gemini"))
    subset = {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    result = fit(subset)
    row = preference_of(result, "claude")
    assert not row["identifiable"] and row["estimate"] is None
    assert row["reason"].startswith("every grader of the anthropic agents has a stake in them")
    assert preference_of(result, "gemini")["identifiable"]
    # An expert on the anthropic agents' episodes makes it identifiable again.
    with_expert = simulate(np.random.default_rng(11), n_humans=40, n_episodes=150, experts=(0.0,))
    anthropic = np.isin(with_expert["agent"], ["claude_code", "claude_cowork"])
    keep = ~(anthropic & (with_expert["grader"] == "gemini"))
    subset = {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in with_expert.items()}
    assert preference_of(fit(subset), "claude")["identifiable"]


def test_result_serves_the_leaderboard_contract() -> None:
    data = simulate(np.random.default_rng(12), n_humans=40, n_episodes=150, n_tasks=5)
    result = fit(data, spec=ModelSpec(kind="judge_aware"))
    probs = result.prob_greater()
    np.testing.assert_allclose(probs + probs.T, 1.0, atol=1e-12)
    assert result.conservative().shape == (5,)
    assert result.diagnostics["hyper_integrated"]
    report = result.to_dict()
    json.dumps(report, allow_nan=False)
    assert report["model"]["kind"] == "judge_aware"
    assert report["n_tasks"] == 5
    assert int(result.agent_n.sum()) == 150  # episodes, not grades
    assert result.diagnostics["n_grades"] == data["y"].shape[0]
    # Integrating over the variance components widens the intervals a little, never narrows them.
    plug = fit(data)
    assert np.all(result.agent_sigma() >= plug.agent_sigma() * (1 - 1e-9))


def test_fit_does_not_depend_on_the_order_of_the_grades() -> None:
    # Judges grading different numbers of episodes: the reference is weighted, and its last grader changes.
    data = simulate(np.random.default_rng(13), n_humans=40, n_episodes=120, experts=(1.0,), grade_share=0.8)
    order = np.random.default_rng(0).permutation(data["y"].shape[0])
    order = np.concatenate([order[data["grader"][order] == "claude"], order[data["grader"][order] != "claude"]])
    shuffled = {k: (v[order] if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    a, b = fit(data), fit(shuffled)
    ids = a.agent_ids.tolist()
    np.testing.assert_allclose(by_id(b.agent_ids, b.agent_mu, ids), a.agent_mu, rtol=1e-7)
    assert preference_of(a, "claude")["estimate"] == pytest.approx(preference_of(b, "claude")["estimate"], rel=1e-6)
    assert a.diagnostics["reference"]["graders"] != b.diagnostics["reference"]["graders"]
    assert a.log_likelihood == pytest.approx(b.log_likelihood, rel=1e-10)


# --------------------------------------------------------------------------------------------------------
# The identifiability step on its own
# --------------------------------------------------------------------------------------------------------


def test_a_zero_gram_column_gives_exactly_one_null_direction() -> None:
    basis = grader_fit._null_space(np.diag([2.0, 3.0, 0.0]))
    assert basis.shape == (3, 1)
    np.testing.assert_allclose(np.abs(basis[:, 0]), [0.0, 0.0, 1.0], atol=1e-12)
    # A real dependency (columns 0 and 1 equal) beside a zero column: two directions, both genuine.
    gram = np.array([[4.0, 4.0, 0.0, 1.0], [4.0, 4.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 5.0]])
    basis = grader_fit._null_space(gram)
    assert basis.shape == (4, 2)
    np.testing.assert_allclose(basis.T @ basis, np.eye(2), atol=1e-12)
    np.testing.assert_allclose(gram @ basis, 0.0, atol=1e-12)
    mask, _ = grader_fit._not_estimable(np.diag([2.0, 3.0, 0.0]))
    assert mask.tolist() == [False, False, True]


def _identify(data: dict) -> tuple[grader_fit._FixedDesign, grader_fit._Identification]:
    """Run the fit's design and identification steps alone (no REML) on one study's grades."""
    g = grader_fit._grades(data["agent"], data["human"], data["y"], None, data["episode"], data["grader"], FAMILY,
                           data["grader_family"], None)  # fmt: skip
    ref = grader_fit._reference(g, "panel", None)
    fd = grader_fit._fixed_design(g, ref, grader_fit._reference_weights(g, ref, "grades"))
    return fd, grader_fit._identification(g, fd, ref)


def _terms(data: dict, fd: grader_fit._FixedDesign, ident: grader_fit._Identification) -> dict[str, bool]:
    graders = sorted(set(data["grader"].tolist()), key=data["grader"].tolist().index)
    return {graders[int(c)]: bool(ok) for c, ok in zip(fd.terms.grader.tolist(), ident.identified, strict=True)}


KEPT_OFF = (("gemini", "google", -1.5), ("claude", "anthropic", 1.5), ("gpt", "openai", 0.0))


def _kept_off(seed: int, *, first: str | None = None) -> dict:
    """Three judges; the GPT judge never grades the (openai) Codex agent's episodes."""
    data = simulate(np.random.default_rng(seed), judges=KEPT_OFF)
    keep = ~((data["grader"] == "gpt") & (data["agent"] == "codex"))
    data = {k: (v[keep] if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    if first is not None:
        order = np.argsort(data["grader"] != first, kind="stable")
        data = {k: (v[order] if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    return data


@pytest.mark.parametrize("seed", range(6))
def test_a_judge_kept_off_its_own_family_keeps_the_identifiable_terms(seed) -> None:
    data = _kept_off(seed, first="gpt")
    fd, ident = _identify(data)
    assert _terms(data, fd, ident) == {"gpt": False, "gemini": True, "claude": True}
    gpt = _terms(data, fd, ident)
    reasons = dict(zip(gpt, ident.reasons, strict=True))
    assert reasons["gpt"] == "grader 'gpt' graded no episode of a openai agent"
    assert reasons["gemini"] is None and reasons["claude"] is None


@pytest.mark.parametrize("seed", range(6))
def test_one_stray_grade_from_a_third_judge_listed_first_disables_no_term(seed) -> None:
    data = simulate(np.random.default_rng(seed))
    stray = int(np.flatnonzero(data["agent"] != "codex")[0])
    extra = {k: (v[[stray]] if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    extra["grader"], extra["grader_family"] = np.array(["gpt"]), np.array(["openai"])
    both = {k: (np.concatenate([extra[k], v]) if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    fd, ident = _identify(both)
    assert _terms(both, fd, ident) == {"gpt": False, "gemini": True, "claude": True}
    result = fit(both)
    assert preference_of(result, "claude")["identifiable"] and preference_of(result, "gemini")["identifiable"]
    assert [note for note in result.diagnostics["notes"] if "not identifiable" in note] == [
        "self-preference of 'gpt' (openai) not identifiable: grader 'gpt' graded no episode of a openai agent"
    ]


def test_families_match_whatever_their_case_and_spaces() -> None:
    data = _small()
    shouting = {agent: f"  {family.upper()} " for agent, family in FAMILY.items()}
    spaced = np.array([f" {f.title()}" for f in data["grader_family"].tolist()])
    plain = fit(data)
    messy = fit_graded(data["agent"], data["human"], data["y"], episode=data["episode"], grader=data["grader"],
                       agent_family=shouting, grader_family=spaced, spec=PLUG_IN)  # fmt: skip
    assert preference_of(messy, "claude")["identifiable"] and preference_of(messy, "claude")["family"] == "anthropic"
    assert preference_of(messy, "claude")["estimate"] == preference_of(plain, "claude")["estimate"]
    np.testing.assert_array_equal(messy.agent_mu, plain.agent_mu)


# --------------------------------------------------------------------------------------------------------
# The reference: its weights and what its statement says
# --------------------------------------------------------------------------------------------------------


def _with_stray_judge(seed: int = 21) -> dict:
    """The two-judge panel and one grade from a third (openai) judge on a non-Codex episode."""
    data = simulate(np.random.default_rng(seed), n_humans=40, n_episodes=150)
    stray = int(np.flatnonzero(data["agent"] != "codex")[0])
    extra = {k: (v[[stray]] if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    extra["grader"], extra["grader_family"] = np.array(["gpt"]), np.array(["openai"])
    extra["y"] = extra["y"] + 5.0
    return {k: (np.concatenate([v, extra[k]]) if isinstance(v, np.ndarray) else v) for k, v in data.items()}


def test_a_barely_used_judge_barely_moves_the_reference_weighted_by_use() -> None:
    data = _with_stray_judge()
    by_use, equal = fit(data), fit(data, reference_weighting="equal")
    two_judges = fit({k: (v[:-1] if isinstance(v, np.ndarray) else v) for k, v in data.items()})
    n = {gid: int(np.sum(data["grader"] == gid)) for gid in ("gemini", "claude", "gpt")}
    ref = by_use.diagnostics["reference"]
    assert ref["weighting"] == "grades" and ref["graders"] == ["gemini", "claude", "gpt"]
    np.testing.assert_allclose(ref["weights"], [n[g] / sum(n.values()) for g in ref["graders"]], rtol=1e-12)
    assert "weighted by their number of grades" in ref["statement"]
    assert "(weighted equally)" in equal.diagnostics["reference"]["statement"]
    # Equal weights let one grade's leniency into every level; weighted by use the intervals stay those of
    # the two-judge panel (within its one-in-several-hundred share).
    assert np.all(equal.agent_sigma() > 1.2 * two_judges.agent_sigma())
    np.testing.assert_allclose(by_use.agent_sigma(), two_judges.agent_sigma(), rtol=0.02)
    # Gaps and their uncertainty do not depend on the weighting.
    i, j = np.triu_indices(5, 1)
    for a, b in ((by_use, equal),):
        np.testing.assert_allclose((a.agent_mu[i] - a.agent_mu[j]), (b.agent_mu[i] - b.agent_mu[j]), atol=1e-7)
        gap = [c[i, i] + c[j, j] - 2 * c[i, j] for c in (a.agent_cov, b.agent_cov)]
        np.testing.assert_allclose(gap[0], gap[1], rtol=1e-6)
    # Only the level moves, by one constant; the likelihood is the same (reported for equal-weight contrasts).
    shift = by_use.agent_mu - equal.agent_mu
    np.testing.assert_allclose(shift, shift[0], atol=1e-7)
    assert by_use.log_likelihood == pytest.approx(equal.log_likelihood, rel=1e-10)
    with pytest.raises(ValueError, match="reference_weighting must be one of grades, equal"):
        fit(data, reference_weighting="uniform")


def test_with_judges_grading_equally_often_both_weightings_are_the_same_fit() -> None:
    data = _small()  # every judge grades every episode
    a, b = fit(data), fit(data, reference_weighting="equal")
    np.testing.assert_array_equal(a.agent_mu, b.agent_mu)
    np.testing.assert_array_equal(a.agent_cov, b.agent_cov)
    assert a.log_likelihood == b.log_likelihood


def test_the_reference_statement_says_which_self_preference_the_levels_remove() -> None:
    data = _small()
    full = fit(data).diagnostics["reference"]["statement"]
    assert "with the self-preference of gemini (google), claude (anthropic) removed" in full
    assert "NOT removed" not in full
    # No neutral grader of either family: no term identified, and the levels still carry both preferences.
    agents = ["claude_code", "codex"]
    judges = (("claude", "anthropic", 1.0), ("gpt", "openai", -1.0))
    none = fit(simulate(np.random.default_rng(10), agents=agents, judges=judges)).diagnostics["reference"]
    assert "without self-preference" not in none["statement"]
    assert "removed" in none["statement"] and "NOT removed" in none["statement"]
    assert "claude (anthropic), gpt (openai) cannot be measured" in none["statement"]
    # Some identified, some not: both said.
    mixed = fit(_kept_off(3)).diagnostics["reference"]["statement"]
    assert "with the self-preference of gemini (google), claude (anthropic) removed" in mixed
    assert "that of gpt (openai) cannot be measured with these grades and is NOT removed" in mixed
    # No judge of an agent's family: nothing to remove, and it says so.
    other = fit(data, grader_family={"gemini": "meta", "claude": "xai"}).diagnostics["reference"]["statement"]
    assert "no judge shares a model family with an agent, so there is no self-preference to remove" in other
    assert grader_fit.reference_statement(["a"], [1.0], "grades", []).startswith("agent levels are what a would give")


# --------------------------------------------------------------------------------------------------------
# Inputs a coordinator can get wrong
# --------------------------------------------------------------------------------------------------------


def _small() -> dict:
    return simulate(np.random.default_rng(14), n_humans=20, n_episodes=50)


@pytest.mark.parametrize("field", ["human", "y", "episode", "grader", "grader_family"])
def test_grades_of_different_lengths_are_refused_naming_the_argument(field) -> None:
    data = _small()
    data[field] = data[field][:-1]
    name = {"y": "scores"}.get(field, field)
    with pytest.raises(ValueError, match=name):
        fit(data)


@pytest.mark.parametrize(("field", "other", "what"), [("agent", "manus", "agents"), ("human", 999, "participants")])
def test_an_episode_with_two_agents_or_participants_is_refused(field, other, what) -> None:
    data = _small()
    rows = np.flatnonzero(data["episode"] == 0)
    assert data[field][rows[0]] != other
    data[field] = data[field].copy()
    data[field][rows[-1]] = other
    with pytest.raises(ValueError, match=f"episode: episode '0' has two {what}"):
        fit(data)


def test_a_grader_with_two_families_is_refused() -> None:
    data = _small()
    families = data["grader_family"].copy()
    families[np.flatnonzero(data["grader"] == "claude")[3]] = "openai"
    message = r"grader_family: grader 'claude' has two families \('anthropic' and 'openai'\)"
    with pytest.raises(ValueError, match=message):
        fit(data, grader_family=families)


def test_a_missing_family_in_a_mapping_is_refused() -> None:
    data = _small()
    with pytest.raises(ValueError, match="grader_family names no family for grader 'claude'"):
        fit(data, grader_family={"gemini": "google"})


def test_non_finite_scores_are_refused() -> None:
    data = _small()
    data["y"] = data["y"].copy()
    data["y"][5] = np.nan
    with pytest.raises(ValueError, match="scores must be finite"):
        fit(data)


def test_an_episode_with_two_tasks_is_refused() -> None:
    data = simulate(np.random.default_rng(15), n_humans=20, n_episodes=50, n_tasks=4)
    first = np.flatnonzero(data["episode"] == 0)
    data["task"] = data["task"].copy()
    data["task"][first[-1]] = (data["task"][first[0]] + 1) % 4
    with pytest.raises(ValueError, match="task: episode '0' has two tasks"):
        fit(data)


def test_expert_who_graded_one_agent_is_named_in_the_notes_and_the_fit_stands() -> None:
    data = simulate(np.random.default_rng(16), n_humans=40, n_episodes=150)
    rows = np.flatnonzero(data["agent"] == "codex")
    episodes = np.unique(data["episode"][rows])[:8]
    extra = dict(data)
    first = np.array([np.flatnonzero(data["episode"] == e)[0] for e in episodes])
    for key in ("episode", "agent", "human"):
        extra[key] = np.concatenate([data[key], data[key][first]])
    extra["grader"] = np.concatenate([data["grader"], np.full(first.size, "expert0")])
    extra["grader_family"] = np.concatenate([data["grader_family"], np.full(first.size, "")])
    extra["y"] = np.concatenate([data["y"], data["y"][first] + 1.0])
    result = fit(extra, reference="experts")
    assert any("expert 'expert0' graded only agent 'codex'" in note for note in result.diagnostics["notes"])
    assert np.all(np.isfinite(result.agent_mu)) and np.all(np.isfinite(result.agent_cov))


def test_judge_with_no_episode_shared_with_an_expert_is_named_under_the_expert_reference() -> None:
    data = simulate(np.random.default_rng(17), n_humans=40, n_episodes=150, experts=(0.0,),
                    judges=PANEL + (("gpt", "openai", 0.0),), grade_share=0.9)  # fmt: skip
    expert_eps = set(data["episode"][data["grader"] == "expert0"].tolist())
    drop = (data["grader"] == "gpt") & np.isin(data["episode"], list(expert_eps))
    subset = {k: (v[~drop] if isinstance(v, np.ndarray) else v) for k, v in data.items()}
    result = fit(subset, reference="experts")
    assert any("judge 'gpt' shares no episode with an expert" in note for note in result.diagnostics["notes"])
    assert not any("judge 'claude'" in note for note in result.diagnostics["notes"])


def test_reference_choices_that_cannot_hold_are_refused() -> None:
    data = _small()
    with pytest.raises(ValueError, match="reference: 'experts' needs at least one expert"):
        fit(data, reference="experts")
    with pytest.raises(ValueError, match="reference must be one of panel, experts"):
        fit(data, reference="judges")
    with pytest.raises(ValueError, match="reference_graders: 'gpt' graded none"):
        fit(data, reference_graders=["gpt"])
    expert = simulate(np.random.default_rng(18), n_humans=20, n_episodes=50, experts=(0.0,))
    with pytest.raises(ValueError, match="reference_graders: 'expert0' is an expert"):
        fit(expert, reference_graders=["expert0"])


def test_agents_linked_to_the_others_by_no_grader_are_refused() -> None:
    data = _small()
    # The experts alone grade manus, and grade nothing else: manus's level has no link to the other agents.
    rows = data["agent"] == "manus"
    data["grader"] = np.where(rows, "expert0", data["grader"])
    data["grader_family"] = np.where(rows, "", data["grader_family"])
    with pytest.raises(ValueError, match="agent: these grades do not identify agent 'manus'"):
        fit(data)


def test_a_restricted_reference_averages_only_the_named_judges() -> None:
    data = _small()
    result = fit(data, reference_graders=["gemini"])
    assert leniency_of(result, "gemini")["leniency"] == 0.0
    assert leniency_of(result, "gemini")["se"] == 0.0
    assert result.diagnostics["reference"]["graders"] == ["gemini"]


def test_fit_model_refuses_the_judge_aware_kind_and_points_to_fit_graded() -> None:
    assert "judge_aware" in RATING_MODELS
    spec = ModelSpec(kind="judge_aware")
    assert ModelSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(ValueError, match="fit_graded"):
        fit_model(["a", "b", "a"], ["h", "h", "g"], [1.0, 2.0, 3.0], spec=spec)
    data = _small()
    with pytest.raises(ValueError, match="spec: fit_graded fits the judge_aware model"):
        fit(data, spec=ModelSpec(kind="calibrated"))


def test_standardized_residuals_have_unit_spread_under_the_model() -> None:
    data = simulate(np.random.default_rng(19), n_humans=200, n_episodes=900, experts=(1.0,), n_tasks=8)
    result = fit(data)
    z = result.standardized_residuals
    assert abs(float(z.std()) - 1.0) < 0.05
    assert float(np.mean(np.abs(z) > 2)) == pytest.approx(2 * norm.sf(2), abs=0.02)
