"""The synergy model: the fit against a dense REML written here, what it refuses to estimate, and recovery of
known truth on simulated studies."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rating.synergy import AgentBaseline, SynergyData, SynergyInputError, strong_synergy, synergy_fit
from rating.synergy_data import build_design
from rating.synergy_reml import evaluate, gradient, worker_factor
from rating.synergy_sim import StudyDesign, Truth, simulate

LABELS = ("solo", "a", "b", "c")


def _study(seed: int = 0, **design: object) -> SynergyData:
    spec = {"workers": 40, "n_tasks": 15, "n_agents": 3, "order": "counterbalanced"} | design
    boosts = (2.0, 5.0, 8.0)[: int(spec["n_agents"])]
    return simulate(StudyDesign(**spec), Truth(boosts=boosts), np.random.default_rng(seed)).data


def _dense_reml(data: SynergyData, params: np.ndarray, x: np.ndarray) -> tuple[float, np.ndarray]:
    """−2 REML log-likelihood from the marginal covariance V (no elimination), and the GLS fixed effects."""
    n, h, t = data.n, int(data.human.max()) + 1, int(data.task.max()) + 1
    team = data.team
    lam = worker_factor(params, False)
    z = np.zeros((n, 2 * h))
    z[np.arange(n), 2 * data.human + team] = 1.0
    w = np.zeros((n, 2 * t))
    w[np.arange(n), data.task] = 1.0
    w[np.flatnonzero(team), t + data.task[team]] = 1.0
    g_task = np.diag([params[3] ** 2] * t + [params[4] ** 2] * t)
    v = np.eye(n) + z @ np.kron(np.eye(h), lam @ lam.T) @ z.T + w @ g_task @ w.T
    v_inv = np.linalg.inv(v)
    xtvx = x.T @ v_inv @ x
    beta = np.linalg.solve(xtvx, x.T @ v_inv @ data.y)
    r = data.y - x @ beta
    q, p = float(r @ v_inv @ r), x.shape[1]
    dev = np.linalg.slogdet(v)[1] + np.linalg.slogdet(xtvx)[1] + (n - p) * (1 + np.log(2 * np.pi * q / (n - p)))
    return float(dev), beta


def test_eliminated_criterion_and_gradient_equal_dense_solve() -> None:
    data = _study(1)
    design = build_design(data, 40, 15)
    x = design.rows[:, :design.p].toarray()
    params = np.array([0.7, 0.3, 0.5, 0.4, 0.2])
    ev = evaluate(design, params)
    dev, beta = _dense_reml(data, params, x)
    assert ev.deviance == pytest.approx(dev, abs=1e-8)
    np.testing.assert_allclose(ev.solution[:design.p], beta, atol=1e-8)
    grad = gradient(design, params, False, ev)
    step = 1e-6
    numeric = [(evaluate(design, params + e).deviance - evaluate(design, params - e).deviance) / (2 * step)
               for e in np.eye(5) * step]
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-5)


def test_fit_reports_boosts_pairs_workers_and_is_json() -> None:
    fit = synergy_fit(_study(2), folds=3)
    assert set(fit.boosts) == {"agent 1", "agent 2", "agent 3"}
    assert len(fit.pairwise) == 3
    for row in fit.pairwise:
        a, b = fit.boosts[row["agent"]], fit.boosts[row["versus"]]
        assert row["estimate"] == pytest.approx(a["estimate"] - b["estimate"])
    assert all(w["boost"] is not None for w in fit.workers)
    assert fit.theta_kappa_test["heldout"]["folds"] == 3
    # 40 workers put corr(θ, κ) on its boundary here: the ability slopes say so rather than give an interval.
    slope_keys = {"ability_slope", "agent_slopes_test"}
    assert set(fit.not_identifiable) <= slope_keys
    assert (fit.ability_slope is None) == ("ability_slope" in fit.not_identifiable)
    json.dumps(fit.to_dict())


def test_no_solo_episode_gives_no_boost() -> None:
    data = _study(3)
    team = data.team
    only_team = SynergyData(data.y[team], data.arm[team], data.human[team], data.task[team], data.position[team],
                            data.arm_labels)
    fit = synergy_fit(only_team)
    assert fit.boosts == {} and fit.pairwise == [] and fit.reml_criterion is None
    assert "solo" in fit.not_identifiable["boost"]


def test_task_seen_in_one_condition_still_fits_and_says_so() -> None:
    data = _study(4)
    keep = ~((data.task == 0) & data.team) & ~((data.task == 1) & ~data.team)
    fit = synergy_fit(SynergyData(data.y[keep], data.arm[keep], data.human[keep], data.task[keep],
                                  data.position[keep], data.arm_labels), folds=0)
    tasks = {row["task"]: row for row in fit.tasks}
    assert tasks[0]["gamma"] is None and tasks[0]["beta"] is not None
    assert tasks[1]["gamma"] is None and tasks[1]["beta"] is None and tasks[1]["beta_plus_gamma"] is not None
    assert "[0]" in fit.not_identifiable["tasks_only_solo"] and "[1]" in fit.not_identifiable["tasks_only_agent"]
    assert set(fit.boosts) == {"agent 1", "agent 2", "agent 3"}


def test_worker_with_only_solo_tasks_has_no_boost() -> None:
    data = _study(5)
    keep = ~((data.human == 7) & data.team)
    fit = synergy_fit(SynergyData(data.y[keep], data.arm[keep], data.human[keep], data.task[keep],
                                  data.position[keep], data.arm_labels), folds=0)
    worker = next(w for w in fit.workers if w["human"] == 7)
    assert worker["boost"] is None and worker["kappa"] is None and worker["theta"] is not None
    assert "[7]" in fit.not_identifiable["workers_only_solo"]


def test_single_agent_has_a_boost_but_no_pairwise() -> None:
    data = _study(6, n_agents=1)
    fit = synergy_fit(data, folds=0)
    assert set(fit.boosts) == {"agent 1"} and fit.pairwise == []
    assert "pairwise" in fit.not_identifiable


def test_agent_without_episodes_is_named_not_estimated() -> None:
    data = _study(7)
    fit = synergy_fit(SynergyData(data.y, data.arm, data.human, data.task, data.position, (*data.arm_labels, "d")),
                      folds=0)
    assert "d" not in fit.boosts and "boost:d" in fit.not_identifiable


def test_fixed_order_leaves_positions_out_and_says_so() -> None:
    fit = synergy_fit(_study(8, order="solo_first"), folds=0)
    assert fit.positions == {} and "position_effects" in fit.not_identifiable


@pytest.mark.parametrize(("change", "message"), [
    ({"y": np.array([50.0, 101.0])}, "0-100"),
    ({"arm": np.array([0, 4])}, "arm codes"),
    ({"position": np.array([0, 1])}, "position codes"),
    ({"human": np.array([0])}, "rows"),
    ({"arm_labels": ("a", "b", "c", "d")}, "solo"),
])
def test_bad_inputs_are_refused(change: dict, message: str) -> None:
    base = {"y": np.array([50.0, 60.0]), "arm": np.array([0, 1]), "human": np.array([0, 0]),
            "task": np.array([0, 1]), "position": np.array([1, 2]), "arm_labels": LABELS}
    with pytest.raises(SynergyInputError, match=message):
        SynergyData(**(base | change))


def test_strong_synergy_compares_three_levels() -> None:
    data = _study(9)
    rng = np.random.default_rng(0)
    arm, task = np.repeat([1, 2, 3], 30), np.tile(np.repeat(np.arange(15), 2), 3)
    baseline = AgentBaseline(np.clip(rng.normal(80.0, 5.0, 90), 0, 100), arm, task)
    table = strong_synergy(data, baseline)
    assert len(table["cells"]) == 45 and len(table["agents"]) == 3
    for row in table["agents"]:
        # an agent alone far above the team: no strong synergy, and the contrast says so with certainty
        assert row["strong_synergy"]["p_team_beats_both"] < 0.01
        assert row["with_agent_minus_agent_alone"]["upper"] < 0
    single = AgentBaseline(np.full(3, 50.0), np.array([1, 2, 3]), np.array([0, 0, 0]))
    fit = synergy_fit(data, baseline=single, folds=0)
    assert fit.strong_synergy is None and "strong_synergy" in fit.not_identifiable


def test_recovers_planted_boosts_and_position_effect() -> None:
    """Known truth, counterbalanced order with learning: boosts and positions within their intervals (a few
    seeds, so a failure is a bias, not bad luck: each interval misses with probability 5 %)."""
    truth = Truth(boosts=(0.0, 6.0, 12.0), positions=(3.0, 5.0, 6.0, 6.0))
    misses, total = 0, 0
    for seed in range(4):
        sim = simulate(StudyDesign(workers=150, n_tasks=30, n_agents=3, order="counterbalanced"), truth,
                       np.random.default_rng(100 + seed))
        fit = synergy_fit(sim.data, folds=0, test=False)
        for k, label in enumerate(("agent 1", "agent 2", "agent 3")):
            b = fit.boosts[label]
            misses += not b["lower"] <= truth.boosts[k] <= b["upper"]
            total += 1
        for pos, value in zip(("2", "3", "4", "5"), truth.positions, strict=True):
            misses += not fit.positions[pos]["lower"] <= value <= fit.positions[pos]["upper"]
            total += 1
    assert misses <= 3, f"{misses} of {total} intervals missed the truth"


def test_sparse_worker_elimination_equals_the_grouped_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many distinct per-worker counts fall back to a sparse elimination per evaluation: same criterion."""
    data = _study(10)
    params = np.array([0.6, 0.2, 0.4, 0.5, 0.3])
    grouped = build_design(data, 40, 15)
    monkeypatch.setattr("rating.synergy_data.PATTERN_BYTES_LIMIT", 0)
    sparse = build_design(data, 40, 15)
    assert grouped.patterns.p_ss is not None and sparse.patterns.p_ss is None
    ev_g, ev_s = evaluate(grouped, params), evaluate(sparse, params)
    assert ev_s.deviance == pytest.approx(ev_g.deviance, abs=1e-9)
    np.testing.assert_allclose(gradient(sparse, params, False, ev_s), gradient(grouped, params, False, ev_g),
                               atol=1e-7)
