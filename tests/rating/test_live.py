"""Live updates of the calibrated model (rating/live.py): a chain of participant updates equals a solve of the
final ledger at the same variance components, checked against the refit and an independent dense GLS solve."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from rating.fit import ModelSpec, fit_model
from rating.live import InformationState, SingularUpdate, information_state, participant_terms
from tests.rating.simulated import simulate


def _fit_and_state(data: dict[str, np.ndarray], *, integrate: bool, omega: np.ndarray | None = None):
    fit = fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec(integrate_hyper=integrate),
                    weights=omega)
    position = {int(a): i for i, a in enumerate(fit.agent_ids)}
    codes = np.array([position[int(a)] for a in data["agent"]])
    state = information_state(fit, codes, data["human"], data["y"], omega)
    assert state is not None
    return fit, state, codes


def _dense_gls(agent, human, y, omega, n_agents, gamma, beta2):
    """The agents' GLS estimate and covariance at fixed variance components, from the n x n covariance."""
    n = y.shape[0]
    x = np.zeros((n, n_agents))
    x[np.arange(n), agent] = 1.0
    z = (human[:, None] == np.unique(human)[None, :]).astype(float)
    v = np.diag(1.0 / omega) + gamma * z @ z.T
    v_inv = np.linalg.inv(v)
    info = x.T @ v_inv @ x
    cov = np.linalg.inv(info)
    return cov @ x.T @ v_inv @ y, beta2 * cov


@pytest.mark.parametrize("integrate", [True, False])
@pytest.mark.parametrize("weighted", [True, False])
def test_the_state_of_a_refit_reproduces_its_agents(integrate, weighted):
    rng = np.random.default_rng(3)
    data = simulate(rng, n_agents=6, n_humans=120, n_obs=700)
    omega = rng.uniform(0.5, 2.0, data["y"].shape[0]) if weighted else None
    fit, state, codes = _fit_and_state(data, integrate=integrate, omega=omega)
    # Unit weights: the fit hands over its pooled sums; they equal a pass over the participants.
    assert (fit.variance_nodes.pooled_terms is None) == weighted
    direct = participant_terms(codes, data["human"], data["y"], np.ones(700) if omega is None else omega,
                               state.n_agents, state.gammas)
    for name in ("schur", "rhs", "q1", "q2", "agent_n"):
        np.testing.assert_allclose(getattr(state.terms, name), getattr(direct, name), rtol=1e-12, atol=1e-9)
    for name in ("n", "n_humans", "ywy", "s2d", "q0", "sum_inv_d", "sum_log_omega"):
        assert getattr(state.terms, name) == pytest.approx(getattr(direct, name), rel=1e-12, abs=1e-12)
    post = state.posterior()
    np.testing.assert_allclose(post.agent_mu, fit.agent_mu, rtol=0, atol=1e-9)
    np.testing.assert_allclose(post.agent_cov, fit.agent_cov, rtol=0, atol=1e-9)
    np.testing.assert_allclose(post.prob_greater, fit.prob_greater(), rtol=0, atol=1e-9)
    # At the REML estimate the score is zero: no drift.
    test = state.score_test()
    assert test.statistic < 1e-6 and test.p_value > 0.999


def _apply(state: InformationState, ledger: dict[int, list[tuple[int, float, float]]], human: int,
           rows: list[tuple[int, float, float]]) -> InformationState:
    """Replace one participant's observations (agent code, y, omega) and update the state."""

    def terms(obs):
        if not obs:
            return participant_terms(np.zeros(0, int), np.zeros(0, int), np.zeros(0), np.zeros(0),
                                     state.n_agents, state.gammas)
        a, yy, w = (np.array(col) for col in zip(*obs, strict=True))
        return participant_terms(a, np.full(len(obs), human), yy, w, state.n_agents, state.gammas)

    before, after = terms(ledger.get(human, [])), terms(rows)
    ledger[human] = rows
    return state.updated(before, after)


def test_a_chain_of_updates_equals_a_solve_of_the_final_ledger():
    rng = np.random.default_rng(11)
    data = simulate(rng, n_agents=5, n_humans=80, n_obs=400)
    fit, state, codes = _fit_and_state(data, integrate=True)
    ledger: dict[int, list[tuple[int, float, float]]] = {}
    for a, h, y in zip(codes, data["human"], data["y"], strict=True):
        ledger.setdefault(int(h), []).append((int(a), float(y), 1.0))
    for _ in range(150):
        kind = rng.integers(4)
        human = int(rng.integers(0, 100))  # 80..99 are new participants
        rows = list(ledger.get(human, []))
        if kind == 0 or not rows:  # a new episode scored
            rows.append((int(rng.integers(0, 5)), float(rng.normal(70, 15)), 1.0))
        elif kind == 1:  # a regrade changes a score
            i = int(rng.integers(len(rows)))
            rows[i] = (rows[i][0], float(rng.normal(70, 15)), rows[i][2])
        elif kind == 2:  # one episode retracted
            rows.pop(int(rng.integers(len(rows))))
        else:  # the participant withdraws
            rows = []
        state = _apply(state, ledger, human, rows)
    agent, human, y, omega = [], [], [], []
    for h, rows in ledger.items():
        for a, yy, w in rows:
            agent.append(a), human.append(h), y.append(yy), omega.append(w)
    agent_a, human_a, y_a, omega_a = (np.array(v) for v in (agent, human, y, omega))
    fresh = dataclasses.replace(
        state, terms=participant_terms(agent_a, human_a, y_a, omega_a, state.n_agents, state.gammas))
    chained, direct = state.posterior(), fresh.posterior()
    np.testing.assert_allclose(chained.agent_mu, direct.agent_mu, rtol=0, atol=1e-9)
    np.testing.assert_allclose(chained.agent_cov, direct.agent_cov, rtol=0, atol=1e-9)
    np.testing.assert_allclose(chained.prob_greater, direct.prob_greater, rtol=0, atol=1e-9)
    assert state.terms.n == fresh.terms.n and state.terms.n_humans == fresh.terms.n_humans
    # Independently: the centre node is the GLS solve at the fitted variance components.
    mean, cov = _dense_gls(agent_a, human_a, y_a, omega_a, 5, float(state.gammas[0]), math.exp(state.tau))
    np.testing.assert_allclose(chained.centre_mu, mean, rtol=0, atol=1e-9)
    plug_in = information_state(
        fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec(integrate_hyper=False)),
        codes, data["human"], data["y"],
    )
    assert plug_in is not None
    plug_in = dataclasses.replace(
        plug_in, terms=participant_terms(agent_a, human_a, y_a, omega_a, state.n_agents, plug_in.gammas))
    np.testing.assert_allclose(plug_in.posterior().agent_cov, cov, rtol=1e-9, atol=1e-12)


def test_the_score_test_finds_drifted_variance_components_and_not_more_data_of_the_same():
    rng = np.random.default_rng(5)
    data = simulate(rng, n_agents=4, n_humans=300, n_obs=1500)
    fit, state, codes = _fit_and_state(data, integrate=True)
    same, drifted = state, state
    skill = data["truth"][fit.agent_ids.astype(int)]  # the true levels, in the state's agent order
    for _ in range(400):
        agents = rng.integers(0, 4, 5)
        calm = skill[agents] + rng.normal(0, 8) + rng.normal(0, 15, 5)
        wild = skill[agents] + rng.normal(0, 30) + rng.normal(0, 15, 5)
        empty = participant_terms(np.zeros(0, int), np.zeros(0, int), np.zeros(0), np.zeros(0), 4, state.gammas)
        ones = np.ones(5)
        same = same.updated(empty, participant_terms(agents, np.zeros(5, int), calm, ones, 4, state.gammas))
        drifted = drifted.updated(empty, participant_terms(agents, np.zeros(5, int), wild, ones, 4, state.gammas))
    assert same.score_test().p_value > 0.01
    assert drifted.score_test().p_value < 1e-6
    assert drifted.score_test().df == 2


def test_the_state_round_trips_through_bytes_and_refuses_an_agent_without_observations():
    rng = np.random.default_rng(8)
    data = simulate(rng, n_agents=3, n_humans=40, n_obs=200)
    _, state, codes = _fit_and_state(data, integrate=True)
    again = InformationState.from_bytes(state.to_bytes())
    np.testing.assert_array_equal(again.posterior().agent_mu, state.posterior().agent_mu)
    assert again.score_test() == state.score_test() and again.integrated and again.free == state.free
    # Retract every observation of agent 0, participant by participant.
    ledger: dict[int, list[tuple[int, float, float]]] = {}
    for a, h, y in zip(codes, data["human"], data["y"], strict=True):
        ledger.setdefault(int(h), []).append((int(a), float(y), 1.0))
    for human in list(ledger):
        state = _apply(state, ledger, human, [row for row in ledger[human] if row[0] != 0])
    with pytest.raises(SingularUpdate):
        state.posterior()
