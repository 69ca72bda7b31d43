"""The adaptive design maths: assignment probabilities, information gains, the stopping-rule simulation."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from pairing import design
from pairing.design import (
    DesignSummary,
    assignment_probabilities,
    criterion,
    design_summary,
    draw_index,
    eligible_mask,
    information_gains,
    plan_study,
    prior_state,
    sessions_to_target,
    simulate_sessions,
)


def _posterior(a: int = 5, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(a, a))
    return rng.normal(50, 3, a), m @ m.T / a + 0.5 * np.eye(a)


def _dense_order_uncertainty(cov: np.ndarray, weights: np.ndarray, human_var: float, noise_var: float,
                             tasks: list[int]) -> float:
    """tr(L Sigma) after the worker's tasks, by a dense Gaussian update of (agents, worker) -- no shortcuts."""
    a = cov.shape[0]
    prior = np.zeros((a + 1, a + 1))
    prior[:a, :a] = cov
    prior[a, a] = human_var
    if tasks:
        x = np.zeros((len(tasks), a + 1))
        x[np.arange(len(tasks)), tasks] = 1.0
        x[:, a] = 1.0
        post = np.linalg.inv(np.linalg.inv(prior) + x.T @ x / noise_var)
    else:
        post = prior
    sigma = post[:a, :a]
    return sum(weights[p, q] * (sigma[p, p] + sigma[q, q] - 2 * sigma[p, q])
               for p in range(a) for q in range(p + 1, a))


def test_information_gains_equal_the_dense_reduction_of_weighted_order_variance():
    mu, cov = _posterior()
    summary = design_summary([f"a{i}" for i in range(5)], mu, cov, human_sd=8.0, noise_sd=15.0, goal="ranking")
    earlier = [2, 0]
    gains = information_gains(summary, earlier)
    before = _dense_order_uncertainty(cov, summary.weights, 64.0, 225.0, earlier)
    for j in range(5):
        after = _dense_order_uncertainty(cov, summary.weights, 64.0, 225.0, [*earlier, j])
        assert gains[j] == pytest.approx(before - after, rel=1e-8, abs=1e-12)


def test_a_worker_with_an_earlier_task_makes_a_contrast_with_that_agent_cheaper():
    mu, cov = prior_state(5, agent_sd=3.0)
    summary = design_summary(list("abcde"), mu, cov, human_sd=8.0, noise_sd=15.0, goal="ranking")
    gains = information_gains(summary, [1])
    # Another task with any agent other than the one already used teaches about a within-worker contrast.
    assert gains[0] == pytest.approx(gains[2])
    assert gains[0] > 0
    assert np.isfinite(gains).all()


def test_adaptive_probabilities_keep_the_floor_and_sum_to_one():
    gains = np.array([0.0, 10.0, 0.001, 1e6, 3.0])
    p = assignment_probabilities(mode="adaptive", used=[0, 0, 0, 0, 1], gains=gains, floor=0.25)
    assert p.sum() == pytest.approx(1.0)
    assert p[4] == 0.0                                # used already: not eligible while others are unused
    assert (p[:4] >= 0.25 / 4 - 1e-15).all()          # every eligible agent keeps a real chance
    assert p[3] == p.max()


def test_adaptive_without_any_information_is_uniform():
    p = assignment_probabilities(mode="adaptive", used=[1, 0, 0], gains=[0.0, 0.0, 0.0], floor=0.1)
    np.testing.assert_allclose(p, [0.0, 0.5, 0.5])


def test_uniform_is_equal_over_the_least_used_agents_and_balanced_over_the_least_used_in_the_study():
    p = assignment_probabilities(mode="uniform", used=[1, 0, 0, 0], study_counts=[0, 9, 3, 3])
    np.testing.assert_allclose(p, [0, 1 / 3, 1 / 3, 1 / 3])
    p = assignment_probabilities(mode="balanced", used=[1, 0, 0, 0], study_counts=[0, 9, 3, 3])
    np.testing.assert_allclose(p, [0, 0, 0.5, 0.5])


def test_eligibility_allows_repeats_only_when_asked_or_when_every_agent_was_used():
    np.testing.assert_array_equal(eligible_mask([1, 0, 2]), [False, True, False])
    np.testing.assert_array_equal(eligible_mask([1, 1, 1]), [True, True, True])
    np.testing.assert_array_equal(eligible_mask([1, 0, 2], max_per_worker=2), [True, True, False])


def test_draw_index_follows_the_cdf_and_never_picks_a_zero_probability_agent():
    p = np.array([0.0, 0.2, 0.0, 0.8, 0.0])
    assert draw_index(p, 0.0) == 1
    assert draw_index(p, 0.1999) == 1
    assert draw_index(p, 0.2001) == 3
    assert draw_index(p, 0.999999999999) == 3


def test_draws_follow_the_stored_probabilities():
    p = np.array([0.1, 0.6, 0.3])
    u = np.random.default_rng(3).random(20_000)
    counts = np.bincount([draw_index(p, x) for x in u], minlength=3) / u.size
    np.testing.assert_allclose(counts, p, atol=0.015)


def test_criterion_matches_closed_forms_for_two_agents_and_adjacent_pairs():
    mu = np.array([52.0, 50.0])
    cov = np.array([[4.0, 1.0], [1.0, 3.0]])
    exact = norm.cdf(2.0 / np.sqrt(4 + 3 - 2))
    assert criterion(mu, cov, goal="top", draws=200_000) == pytest.approx(exact, abs=0.005)
    assert criterion(mu, cov, goal="ranking", draws=200_000) == pytest.approx(exact, abs=0.005)
    assert criterion(mu, cov, goal="adjacent") == pytest.approx(exact, rel=1e-12)


def test_summary_round_trips_through_json_safe_dict():
    mu, cov = _posterior(4)
    summary = design_summary(["1", "2", "3", "4"], mu, cov, human_sd=8.0, noise_sd=15.0)
    again = DesignSummary.from_dict(summary.to_dict())
    np.testing.assert_array_equal(again.cov, summary.cov)
    np.testing.assert_array_equal(again.weights, summary.weights)
    assert again.agent_ids == summary.agent_ids
    with pytest.raises(ValueError, match="malformed"):
        DesignSummary.from_dict({"mu": [1.0]})


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"mode": "random"}, "mode must be one of"),
    ({"floor": 0.0}, "floor must be in"),
    ({"used": []}, "used must be"),
    ({"gains": [1.0, np.nan]}, "gains must be"),
])
def test_bad_design_input_is_refused_with_a_named_error(kwargs, message):
    args = {"mode": "adaptive", "used": [0, 0], "gains": [1.0, 1.0], **kwargs}
    with pytest.raises(ValueError, match=message):
        assignment_probabilities(**args)


def test_simulation_is_reproducible_with_a_seed():
    mu0, cov0 = prior_state(4, agent_sd=3.0)
    truth = np.random.default_rng(1).multivariate_normal(mu0, cov0, 20)
    runs = [simulate_sessions(mu0=mu0, cov0=cov0, truth=truth, human_sd=8, noise_sd=15, mode="adaptive",
                              max_per_worker=2, max_sessions=300, seed=7) for _ in range(2)]
    np.testing.assert_array_equal(runs[0].sessions, runs[1].sessions)
    np.testing.assert_array_equal(runs[0].mu, runs[1].mu)
    np.testing.assert_array_equal(runs[0].ipw, runs[1].ipw)


def test_without_repeats_and_as_many_tasks_as_agents_every_design_sees_the_same_data():
    mu0, cov0 = prior_state(3, agent_sd=3.0)
    truth = np.random.default_rng(2).multivariate_normal(mu0, cov0, 10)
    runs = [simulate_sessions(mu0=mu0, cov0=cov0, truth=truth, human_sd=8, noise_sd=15, mode=mode,
                              tasks_per_worker=3, max_sessions=300, seed=4) for mode in design.DESIGN_MODES]
    for other in runs[1:]:
        np.testing.assert_allclose(other.mu, runs[0].mu, rtol=1e-10)


@pytest.mark.parametrize("mode", ["uniform", "adaptive"])
def test_simulated_posterior_intervals_cover_the_truth_drawn_from_the_prior(mode):
    """A wrong worker-block update (e.g. ignoring the shared worker effect) shows up as miscoverage."""
    mu0, cov0 = prior_state(4, agent_sd=3.0)
    truth = np.random.default_rng(11).multivariate_normal(mu0, cov0, 600)
    sim = simulate_sessions(mu0=mu0, cov0=cov0, truth=truth, human_sd=8, noise_sd=15, mode=mode,
                            max_per_worker=2, target=0.999999, max_sessions=200, seed=3)
    assert not sim.reached.any()
    inside = np.abs(truth - sim.mu) <= 1.959964 * sim.sd
    assert 0.93 <= inside.mean() <= 0.97
    assert np.mean(sim.mu - truth) == pytest.approx(0.0, abs=0.25)


def test_adaptive_draws_respect_the_floor_in_simulation():
    mu0, cov0 = prior_state(5, agent_sd=3.0)
    truth = np.random.default_rng(5).multivariate_normal(mu0, cov0, 30)
    sim = simulate_sessions(mu0=mu0, cov0=cov0, truth=truth, human_sd=8, noise_sd=15, mode="adaptive",
                            max_per_worker=2, floor=0.25, max_sessions=500, seed=1)
    assert sim.min_probability >= 0.25 / 5 - 1e-12


def test_stopping_estimate_shrinks_as_data_accumulate():
    truth = np.array([52.5, 50.0, 49.0, 47.0])
    mu0, cov0 = prior_state(4, agent_sd=3.0)
    medians = []
    for sessions in (0, 300, 900):
        mu, cov = _replay(truth, sessions, mu0, cov0, seed=9)
        out = sessions_to_target(mu, cov, human_sd=8.0, noise_sd=15.0, modes=("uniform",), futures=60,
                                 max_sessions=4000, seed=1)
        median = out["goals"]["top"]["uniform"]["median"]
        medians.append(10**9 if median is None else median)
    assert medians[0] > medians[1] > medians[2]


def _replay(truth, sessions, mu0, cov0, seed):
    """Posterior after ``sessions`` uniform sessions of simulated workers, by dense GLS."""
    rng = np.random.default_rng(seed)
    a = truth.size
    precision, eta = np.linalg.inv(cov0), np.linalg.inv(cov0) @ mu0
    for _ in range(sessions // 5):
        agents = np.concatenate([rng.permutation(a), rng.permutation(a)])[:5]
        h = rng.normal(0, 8.0)
        y = truth[agents] + h + rng.normal(0, 15.0, 5)
        x = np.zeros((5, a))
        x[np.arange(5), agents] = 1.0
        v_inv = np.linalg.inv(64.0 * np.ones((5, 5)) + 225.0 * np.eye(5))
        precision += x.T @ v_inv @ x
        eta += x.T @ v_inv @ y
    cov = np.linalg.inv(precision)
    return cov @ eta, cov


def test_planning_needs_fewer_sessions_with_less_noise():
    noisy = plan_study(n_agents=3, agent_sd=3.0, human_sd=8.0, noise_sd=15.0, modes=("uniform",), studies=40,
                       max_sessions=6000, seed=2)
    quiet = plan_study(n_agents=3, agent_sd=3.0, human_sd=8.0, noise_sd=5.0, modes=("uniform",), studies=40,
                       max_sessions=6000, seed=2)
    q_noisy = noisy.modes["uniform"]["sessions"]["median"] or 10**9
    q_quiet = quiet.modes["uniform"]["sessions"]["median"]
    assert q_quiet is not None and q_quiet < q_noisy
    assert quiet.modes["uniform"]["workers"]["median"] == -(-q_quiet // 5)


def test_estimate_reports_progress_and_zero_when_the_target_is_already_met():
    seen = []
    mu = np.array([70.0, 50.0, 30.0])
    out = sessions_to_target(mu, np.eye(3), human_sd=8.0, noise_sd=15.0, goals=("top", "ranking", "adjacent"),
                             futures=10, max_sessions=100, progress=seen.append)
    for goal in ("top", "ranking", "adjacent"):
        assert out["goals"][goal]["adaptive"]["median"] == 0
    mu0, cov0 = prior_state(3, agent_sd=3.0)
    sessions_to_target(mu0, cov0, human_sd=8.0, noise_sd=15.0, futures=10, max_sessions=100,
                       progress=seen.append)
    assert seen and seen[-1] == pytest.approx(1.0)
    assert all(0.0 <= f <= 1.0 for f in seen)


def test_incremental_session_state_matches_the_direct_gains():
    mu, cov = _posterior(6, seed=4)
    summary = design_summary([str(i) for i in range(6)], mu, cov, human_sd=8.0, noise_sd=15.0, goal="top")
    lap = design._laplacian(summary.weights)[None]
    cov_lap = cov[None] @ lap
    state = design._WorkerState(cov[None], cov_lap, cov_lap @ cov[None], 64.0, 225.0, tasks=5)
    earlier: list[int] = []
    for agent in (3, 1, 3, 5, 0):
        np.testing.assert_allclose(state.gains()[0], information_gains(summary, earlier), rtol=1e-8, atol=1e-12)
        state.condition(np.array([agent]))
        earlier.append(agent)


def test_the_repeat_limit_only_changes_the_adaptive_estimate_as_in_live_pairing():
    # Live uniform and balanced pairing never repeat an agent while another is unused, whatever the study's
    # repeat limit; the estimate must compare adaptive against those designs, not against repeating ones.
    mu0, cov0 = prior_state(5, agent_sd=3.0)
    common = {"human_sd": 8.0, "noise_sd": 15.0, "futures": 30, "max_sessions": 1500, "seed": 4}
    once = sessions_to_target(mu0, cov0, max_per_worker=1, **common)["goals"]["top"]
    twice = sessions_to_target(mu0, cov0, max_per_worker=2, **common)["goals"]["top"]
    assert twice["uniform"] == once["uniform"] and twice["balanced"] == once["balanced"]
    assert twice["adaptive"] != once["adaptive"], "with 5 agents and 5 tasks only repeats let adaptive differ"


def test_one_goal_blind_path_gives_every_goal_the_result_of_its_own_simulation(monkeypatch):
    # Uniform and balanced pairing ignore the goal: the estimate checks all goals along one path per mode, and
    # simulates the designs side by side; each result must equal a separate simulation (same draws, people).
    mu0, cov0 = prior_state(4, agent_sd=3.0)
    mu, cov = mu0 + np.array([2.0, 1.0, 0.0, -1.0]), cov0 / 40
    out = sessions_to_target(mu, cov, human_sd=8, noise_sd=15, goals=design.GOALS, futures=30, max_sessions=600,
                             refresh_every=2, max_per_worker=2, seed=3)
    z = np.random.default_rng([3, 0]).standard_normal((30, 4))
    truth = mu + z @ np.linalg.cholesky(cov + 1e-10 * np.eye(4) * max(1.0, float(np.abs(cov).max()))).T
    for goal in design.GOALS:
        for mode in design.DESIGN_MODES:
            sim = simulate_sessions(mu0=mu, cov0=cov, truth=truth, human_sd=8, noise_sd=15, mode=mode, goal=goal,
                                    max_per_worker=2 if mode == "adaptive" else 1, max_sessions=600,
                                    refresh_every=2, seed=3)
            assert out["goals"][goal][mode] == design._quantiles(sim.sessions, sim.reached, sim.max_sessions)
    assert any(out["goals"]["top"][mode]["median"] not in (0, None) for mode in design.DESIGN_MODES)
    # Designs simulated side by side (one batch) or one at a time (a tiny memory budget) give the same estimate.
    monkeypatch.setattr(design, "_BATCH_CELLS", 1)
    assert sessions_to_target(mu, cov, human_sd=8, noise_sd=15, goals=design.GOALS, futures=30, max_sessions=600,
                              refresh_every=2, max_per_worker=2, seed=3) == out
