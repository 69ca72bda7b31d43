"""Behaviour of the exact rating engine (paper §4, App. E); no database, no Django."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
import scipy.sparse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rating.engine import (
    RatingConfig,
    SkillModel,
    UnknownEntityError,
    _rank_order,
    conservative_score,
    posterior_general,
    prob_greater_matrix,
    solve_bipartite,
)

# --------------------------------------------------------------------------------------------------------
# Independent references: a dense batch solve and the paper's sequential Kalman update
# --------------------------------------------------------------------------------------------------------


@dataclass
class Observations:
    agents: list[str]
    humans: list[str]
    scores: list[float]
    weights: list[float]
    config: RatingConfig

    def rows(self) -> list[tuple[str, str, float, float]]:
        return list(zip(self.agents, self.humans, self.scores, self.weights, strict=True))


def first_appearance(ids: list[str]) -> list[str]:
    return list(dict.fromkeys(ids))


def dense_reference(obs: Observations) -> dict[tuple[str, str], tuple[float, float]]:
    """Build the full Lambda and eta entry by entry (paper Eq. 16-17) and solve with dense linear algebra."""
    agents, humans = first_appearance(obs.agents), first_appearance(obs.humans)
    position = {("agent", a): i for i, a in enumerate(agents)}
    position |= {("human", h): len(agents) + i for i, h in enumerate(humans)}
    n = len(position)
    Lambda = np.zeros((n, n))
    eta = np.zeros(n)
    for (kind, _), i in position.items():
        mu0, sigma0 = obs.config.prior(kind)
        Lambda[i, i] += 1.0 / sigma0**2
        eta[i] += mu0 / sigma0**2
    for agent, human, score, weight in obs.rows():
        w = weight / obs.config.beta**2
        i, j = position[("agent", agent)], position[("human", human)]
        Lambda[i, i] += w
        Lambda[j, j] += w
        Lambda[i, j] += w
        Lambda[j, i] += w
        eta[i] += w * score
        eta[j] += w * score
    mu = np.linalg.solve(Lambda, eta)
    sigma = np.sqrt(np.diag(np.linalg.inv(Lambda)))
    return {key: (mu[i], sigma[i]) for key, i in position.items()}


def model_values(model: SkillModel) -> dict[tuple[str, str], tuple[float, float]]:
    post = model.posterior()
    values = {
        ("agent", str(a)): (m, s) for a, m, s in zip(post.agent_ids, post.mu_agents, post.sigma_agents, strict=True)
    }
    values |= {
        ("human", str(h)): (m, s) for h, m, s in zip(post.human_ids, post.mu_humans, post.sigma_humans, strict=True)
    }
    return values


def assert_same_posterior(actual: dict, expected: dict, tol: float = 1e-9) -> None:
    assert actual.keys() == expected.keys()
    scale = max(1.0, max(abs(mu) for mu, _ in expected.values()))
    for key, (mu, sigma) in expected.items():
        assert actual[key][0] == pytest.approx(mu, rel=tol, abs=tol * scale), key
        assert actual[key][1] == pytest.approx(sigma, rel=tol, abs=tol), key


def build(obs: Observations, order: list[int] | None = None) -> SkillModel:
    model = SkillModel(config=obs.config)
    rows = obs.rows()
    for i in order if order is not None else range(len(rows)):
        model.add_observation(*rows[i])
    return model


@st.composite
def observation_sets(draw: st.DrawFn, max_obs: int = 25) -> Observations:
    n_agents = draw(st.integers(1, 5))
    n_humans = draw(st.integers(1, 8))
    n_obs = draw(st.integers(1, max_obs))
    index = st.integers(0, 10_000)
    agents = [f"a{draw(index) % n_agents}" for _ in range(n_obs)]
    humans = [f"h{draw(index) % n_humans}" for _ in range(n_obs)]
    scores = draw(st.lists(st.floats(0, 100), min_size=n_obs, max_size=n_obs))
    weights = draw(st.lists(st.floats(0.1, 5), min_size=n_obs, max_size=n_obs))
    optional_mu = st.none() | st.floats(-50, 50)
    optional_sigma = st.none() | st.floats(0.3, 10)
    config = RatingConfig(
        mu0=draw(st.floats(-50, 50)),
        sigma0=draw(st.floats(0.3, 10)),
        beta=draw(st.floats(0.5, 10)),
        k=draw(st.floats(0, 5)),
        agent_mu0=draw(optional_mu),
        agent_sigma0=draw(optional_sigma),
        human_mu0=draw(optional_mu),
        human_sigma0=draw(optional_sigma),
    )
    return Observations(agents, humans, scores, weights, config)


PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------------------------------------
# Worked examples
# --------------------------------------------------------------------------------------------------------


def test_worked_example_matches_the_hand_derived_posterior() -> None:
    # mu0 = 0, sigma0 = 1, beta = 1; observations (A1, H1, 3), (A2, H1, 2), (A1, H2, 1).
    # Order (A1, A2, H1, H2):
    #   Lambda = [[3, 0, 1, 1],      eta = [4, 2, 5, 1]
    #             [0, 2, 1, 0],
    #             [1, 1, 3, 0],
    #             [1, 0, 0, 2]]
    # Eliminating the humans (d = [3, 2], b_H1 = [1, 1], b_H2 = [1, 0]):
    #   S = diag(3, 2) - [[1, 1], [1, 1]] / 3 - [[1, 0], [0, 0]] / 2 = [[13/6, -1/3], [-1/3, 5/3]], det S = 7/2
    #   S^-1 = [[10/21, 2/21], [2/21, 13/21]]
    #   rhs = [4 - 5/3 - 1/2, 2 - 5/3] = [11/6, 1/3]  ->  mu_A = S^-1 rhs = [19/21, 8/21]
    #   mu_H1 = (5 - 27/21) / 3 = 26/21,   mu_H2 = (1 - 19/21) / 2 = 1/21
    #   var_H1 = 1/3 + (1/9) * (10 + 2 + 2 + 13)/21 = 10/21,   var_H2 = 1/2 + (1/4) * 10/21 = 13/21
    model = SkillModel(mu0=0.0, sigma0=1.0, beta=1.0)
    model.add_observation("A1", "H1", 3.0)
    model.add_observation("A2", "H1", 2.0)
    model.add_observation("A1", "H2", 1.0)
    post = model.posterior()

    assert list(post.agent_ids) == ["A1", "A2"]
    assert list(post.human_ids) == ["H1", "H2"]
    np.testing.assert_allclose(post.mu_agents, [19 / 21, 8 / 21], rtol=1e-14)
    np.testing.assert_allclose(post.mu_humans, [26 / 21, 1 / 21], rtol=1e-13)
    np.testing.assert_allclose(post.cov_agents, [[10 / 21, 2 / 21], [2 / 21, 13 / 21]], rtol=1e-14)
    np.testing.assert_allclose(post.sigma_agents, np.sqrt([10 / 21, 13 / 21]), rtol=1e-14)
    np.testing.assert_allclose(post.sigma_humans, np.sqrt([10 / 21, 13 / 21]), rtol=1e-14)
    assert post.n_agents.tolist() == [2, 1]
    assert post.n_humans.tolist() == [2, 1]
    # Cov(A1, H1) = -(S^-1 b_H1)_A1 / d_H1 = -(12/21) / 3;  Cov(H1, H2) = b_H1^T S^-1 b_H2 / (3 * 2) = (12/21) / 6
    assert model.covariance("A1", "agent", "H1", "human") == pytest.approx(-4 / 21, rel=1e-13)
    assert model.covariance("H1", "human", "H2", "human") == pytest.approx(2 / 21, rel=1e-13)
    assert model.rate("A2", "agent") == pytest.approx((8 / 21, math.sqrt(13 / 21)), rel=1e-13)


def test_single_observation_splits_the_score_between_agent_and_human() -> None:
    # Lambda = [[2, 1], [1, 2]], eta = [2, 2] for y = 2: mu = [2/3, 2/3], var = 2/3 (the Kalman update of Eq. 3-4).
    model = SkillModel()
    model.add_observation("agent", "human", 2.0)
    assert model.rate("agent", "agent") == pytest.approx((2 / 3, math.sqrt(2 / 3)), rel=1e-14)
    assert model.rate("human", "human") == pytest.approx((2 / 3, math.sqrt(2 / 3)), rel=1e-14)


@given(observation_sets(max_obs=12))
@PROPERTY
def test_information_form_equals_the_sequential_kalman_update_of_the_paper(obs: Observations) -> None:
    """Paper App. E.1: one Kalman measurement update per observation on the joint (dense) belief."""
    agents, humans = first_appearance(obs.agents), first_appearance(obs.humans)
    keys = [("agent", a) for a in agents] + [("human", h) for h in humans]
    m = np.array([obs.config.prior(kind)[0] for kind, _ in keys])
    Sigma = np.diag([obs.config.prior(kind)[1] ** 2 for kind, _ in keys])
    for agent, human, score, weight in obs.rows():
        x = np.zeros(len(keys))
        x[keys.index(("agent", agent))] = 1.0
        x[keys.index(("human", human))] = 1.0
        gain = Sigma @ x / (x @ Sigma @ x + obs.config.beta**2 / weight)
        m = m + gain * (score - x @ m)
        Sigma = Sigma - np.outer(gain, x @ Sigma)
    expected = {key: (m[i], math.sqrt(Sigma[i, i])) for i, key in enumerate(keys)}
    assert_same_posterior(model_values(build(obs)), expected, tol=1e-7)


# --------------------------------------------------------------------------------------------------------
# Exactness properties
# --------------------------------------------------------------------------------------------------------


@given(observation_sets())
@PROPERTY
def test_schur_posterior_equals_the_dense_batch_solve(obs: Observations) -> None:
    assert_same_posterior(model_values(build(obs)), dense_reference(obs))


@given(observation_sets(), st.randoms(use_true_random=False))
@PROPERTY
def test_posterior_does_not_depend_on_insertion_order(obs: Observations, rnd) -> None:
    order = list(range(len(obs.scores)))
    rnd.shuffle(order)
    assert_same_posterior(model_values(build(obs, order)), model_values(build(obs)))


@given(observation_sets(), observation_sets(), st.randoms(use_true_random=False))
@PROPERTY
def test_removing_added_observations_equals_never_adding_them(base: Observations, extra: Observations, rnd) -> None:
    extra.config = base.config
    model = SkillModel(config=base.config)
    tagged = [(True, row) for row in base.rows()] + [(False, row) for row in extra.rows()]
    rnd.shuffle(tagged)
    for _, row in tagged:
        model.add_observation(*row)
    removals = [row for keep, row in tagged if not keep]
    rnd.shuffle(removals)
    for row in removals:
        model.remove_observation(*row)

    never_added = build(base)
    assert set(model.agent_ids) == set(never_added.agent_ids)
    assert set(model.human_ids) == set(never_added.human_ids)
    assert model.n_observations == len(base.scores)
    assert_same_posterior(model_values(model), model_values(never_added))


@given(observation_sets())
@PROPERTY
def test_add_observations_equals_repeated_add_observation(obs: Observations) -> None:
    vectorised = SkillModel(config=obs.config)
    vectorised.add_observations(obs.agents, obs.humans, obs.scores, obs.weights)
    one_by_one = build(obs)
    assert vectorised.to_state() == one_by_one.to_state()
    assert_same_posterior(model_values(vectorised), model_values(one_by_one), tol=1e-12)


@given(observation_sets())
@PROPERTY
def test_state_round_trip_through_json_is_exact(obs: Observations) -> None:
    model = build(obs)
    state = json.loads(json.dumps(model.to_state(), allow_nan=False))
    restored = SkillModel.from_state(state)
    before, after = model.posterior(), restored.posterior()
    assert restored.to_state() == model.to_state()
    assert restored.config == model.config
    for field in ("mu_agents", "sigma_agents", "cov_agents", "mu_humans", "sigma_humans", "n_agents", "n_humans"):
        np.testing.assert_array_equal(getattr(after, field), getattr(before, field))


@given(observation_sets())
@PROPERTY
def test_from_arrays_equals_add_observations(obs: Observations) -> None:
    agents, humans = first_appearance(obs.agents), first_appearance(obs.humans)
    a_idx = np.array([agents.index(a) for a in obs.agents], dtype=np.int32)
    h_idx = np.array([humans.index(h) for h in obs.humans], dtype=np.int32)
    bulk = SkillModel.from_arrays(
        a_idx, h_idx, obs.scores, obs.weights, agent_ids=agents, human_ids=humans, config=obs.config
    )
    incremental = SkillModel(config=obs.config)
    incremental.add_observations(obs.agents, obs.humans, obs.scores, obs.weights)
    assert bulk.to_state() == incremental.to_state()


def test_from_arrays_with_unit_weights_counts_observations_and_drops_unused_ids() -> None:
    model = SkillModel.from_arrays(
        np.array([0, 0, 2, 2, 2]),
        np.array([1, 1, 1, 3, 3]),
        [10.0, 20.0, 30.0, 40.0, 50.0],
        agent_ids=["x", "unused agent", "z"],
        human_ids=["p", "q", "unused human", "s"],
    )
    assert model.agent_ids == ["x", "z"]
    assert model.human_ids == ["q", "s"]
    post = model.posterior()
    assert post.n_agents.tolist() == [2, 3]
    assert post.n_humans.tolist() == [3, 2]
    reference = SkillModel()
    reference.add_observations(["x", "x", "z", "z", "z"], ["q", "q", "q", "s", "s"], [10, 20, 30, 40, 50])
    assert model.to_state() == reference.to_state()


def test_retracting_an_entitys_last_observation_removes_it_entirely() -> None:
    model = SkillModel()
    model.add_observation("A", "H1", 60.0)
    model.add_observation("B", "H1", 70.0)
    model.add_observation("B", "H2", 80.0)
    model.remove_observation("B", "H2", 80.0)
    assert model.human_ids == ["H1"]
    with pytest.raises(UnknownEntityError, match="H2"):
        model.rate("H2", "human")
    model.remove_observation("A", "H1", 60.0)
    assert model.agent_ids == ["B"]
    assert len(model.leaderboard()) == 2
    only_b = SkillModel()
    only_b.add_observation("B", "H1", 70.0)
    assert model.to_state() == only_b.to_state()


def test_retraction_of_a_pair_without_observations_is_refused() -> None:
    model = SkillModel()
    model.add_observation("A", "H1", 60.0)
    model.add_observation("B", "H2", 60.0)
    with pytest.raises(ValueError, match="no observation to remove"):
        model.remove_observation("A", "H2", 60.0)
    with pytest.raises(UnknownEntityError, match="agent_id"):
        model.remove_observation("C", "H1", 60.0)
    with pytest.raises(ValueError, match="score"):
        model.remove_observation("A", "H1", 61.0)
    with pytest.raises(ValueError, match="weight"):
        model.remove_observation("A", "H1", 60.0, weight=2.0)
    assert model.n_observations == 2


# --------------------------------------------------------------------------------------------------------
# Ranking and comparisons
# --------------------------------------------------------------------------------------------------------


def test_leaderboard_ranks_by_conservative_score_not_by_mean() -> None:
    # "lucky" has one great episode; "steady" many good ones. With sigma0 = 10 the lucky agent's mean is
    # higher but so is its uncertainty, and mu - 3 sigma puts it below.
    model = SkillModel(sigma0=10.0, beta=5.0, k=3.0)
    for i in range(30):
        model.add_observation("steady", f"h{i}", 70.0)
        model.add_observation("other", f"h{i}", 60.0)
    model.add_observation("lucky", "h0", 95.0)
    rows = model.leaderboard("agent")
    by_id = {row["entity_id"]: row for row in rows}
    assert by_id["lucky"]["mu"] > by_id["steady"]["mu"]
    assert [row["entity_id"] for row in rows] == ["steady", "lucky", "other"]
    assert [row["rank"] for row in rows] == [1, 2, 3]
    for row in rows:
        assert set(row) == {"rank", "entity_type", "entity_id", "mu", "sigma", "n", "conservative"}
        assert row["entity_type"] == "agent"
        assert row["conservative"] == pytest.approx(row["mu"] - 3.0 * row["sigma"], rel=1e-15)
    assert by_id["steady"]["n"] == 30 and by_id["lucky"]["n"] == 1
    assert conservative_score(np.array([1.0]), np.array([0.5]), 3.0)[0] == pytest.approx(-0.5)


def test_leaderboard_breaks_exact_ties_by_id() -> None:
    model = SkillModel()
    for agent in ("b", "a", "c"):
        model.add_observation(agent, f"h-{agent}", 50.0)
    assert [row["entity_id"] for row in model.leaderboard("agent")] == ["a", "b", "c"]
    both = model.leaderboard()
    assert len(both) == 6
    assert [row["rank"] for row in both] == list(range(1, 7))


def test_adding_after_a_solve_gives_the_model_of_one_bulk_load_when_pairs_repeat() -> None:
    rng = np.random.default_rng(0)
    agents, humans, scores = rng.integers(0, 5, 200), rng.integers(0, 40, 200), rng.normal(size=200)
    bulk = SkillModel()
    bulk.add_observations(agents, humans, scores)
    staged = SkillModel()
    staged.add_observations(agents[:150], humans[:150], scores[:150])
    staged.leaderboard()
    staged.add_observations(agents[150:], humans[150:], scores[150:])
    staged.add_observation(int(agents[0]), int(humans[0]), float(scores[0]))
    bulk.add_observation(int(agents[0]), int(humans[0]), float(scores[0]))
    assert staged.to_state() == bulk.to_state()
    np.testing.assert_allclose(staged.posterior().mu_humans, bulk.posterior().mu_humans, rtol=0, atol=1e-12)


def test_rank_order_equals_a_two_key_lexsort_when_scores_and_means_tie() -> None:
    rng = np.random.default_rng(11)
    for _ in range(500):
        n = int(rng.integers(1, 40))
        cons = rng.integers(-3, 4, n).astype(float)
        cons[rng.random(n) < 0.2] = -0.0
        mu = rng.integers(0, 3, n).astype(float)
        assert np.array_equal(_rank_order(cons, mu), np.lexsort((-mu, -cons)))
    cons, mu = rng.normal(size=20_000), rng.normal(size=20_000)
    cons[::7] = 0.5
    assert np.array_equal(_rank_order(cons, mu), np.lexsort((-mu, -cons)))


def paper_like_model(seed: int = 3) -> SkillModel:
    rng = np.random.default_rng(seed)
    model = SkillModel(sigma0=5.0, beta=4.0)
    skills = {"A": 3.0, "B": 2.0, "C": 0.0}
    for i in range(12):
        for agent in rng.choice(list(skills), size=2, replace=False):
            model.add_observation(agent, f"h{i}", skills[agent] + rng.normal(0, 3))
    return model


def test_prob_greater_matches_monte_carlo_from_the_exact_joint_gaussian() -> None:
    model = paper_like_model()
    Lambda, eta = model.precision_matrix()
    cov = np.linalg.inv(Lambda.toarray())
    mean = np.linalg.solve(Lambda.toarray(), eta)
    samples = np.random.default_rng(0).multivariate_normal(mean, cov, size=200_000, method="cholesky")
    n_agents = len(model.agent_ids)
    position = {("agent", a): i for i, a in enumerate(model.agent_ids)}
    position |= {("human", h): n_agents + i for i, h in enumerate(model.human_ids)}
    for (a, a_type), (b, b_type) in [
        (("A", "agent"), ("B", "agent")),
        (("C", "agent"), ("A", "agent")),
        (("h0", "human"), ("h5", "human")),
        (("A", "agent"), ("h3", "human")),
    ]:
        i, j = position[(a_type, a)], position[(b_type, b)]
        empirical = np.mean(samples[:, i] > samples[:, j])
        assert model.prob_greater(a, b, a_type, b_type) == pytest.approx(empirical, abs=0.01)
        assert model.covariance(a, a_type, b, b_type) == pytest.approx(cov[i, j], rel=1e-10, abs=1e-12)


def test_pairwise_matrix_is_complementary_and_uses_the_joint_covariance() -> None:
    model = paper_like_model()
    ids, probs = model.pairwise_prob_matrix()
    assert list(ids) == model.agent_ids
    np.testing.assert_allclose(probs + probs.T, 1.0, atol=1e-12)
    np.testing.assert_allclose(np.diag(probs), 0.5)
    assert probs[0, 1] == pytest.approx(model.prob_greater(ids[0], ids[1]), rel=1e-12)
    _, cov = model.agent_covariance()
    independent = prob_greater_matrix(model.posterior().mu_agents, np.diag(np.diag(cov)))
    assert not np.allclose(independent, probs)  # the shared humans correlate the agents


def test_posterior_is_cached_until_the_next_mutation_and_cannot_be_modified() -> None:
    model = paper_like_model()
    first = model.posterior()
    assert model.posterior() is first
    with pytest.raises(ValueError):
        first.mu_agents[0] = 0.0
    model.add_observation("A", "h0", 1.0)
    assert model.posterior() is not first


def test_per_type_priors_apply_to_each_entity_type() -> None:
    config = RatingConfig(mu0=0.0, sigma0=1.0, agent_mu0=50.0, agent_sigma0=10.0, human_sigma0=2.0)
    obs = Observations(["a", "a", "b"], ["h", "g", "g"], [60.0, 55.0, 40.0], [1.0, 1.0, 2.0], config)
    assert config.prior("agent") == (50.0, 10.0)
    assert config.prior("human") == (0.0, 2.0)
    assert_same_posterior(model_values(build(obs)), dense_reference(obs))


# --------------------------------------------------------------------------------------------------------
# General sparse path
# --------------------------------------------------------------------------------------------------------


@given(observation_sets())
@PROPERTY
def test_general_sparse_path_equals_the_schur_path(obs: Observations) -> None:
    model = build(obs)
    schur, general = model.posterior(), model.posterior("general")
    assert general.method == "general"
    scale = max(1.0, float(np.abs(schur.mu_agents).max()))
    np.testing.assert_allclose(general.mu_agents, schur.mu_agents, rtol=1e-9, atol=1e-9 * scale)
    np.testing.assert_allclose(general.mu_humans, schur.mu_humans, rtol=1e-9, atol=1e-9 * scale)
    np.testing.assert_allclose(general.cov_agents, schur.cov_agents, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(general.sigma_humans, schur.sigma_humans, rtol=1e-9)


def test_hutchinson_estimate_is_close_to_the_exact_variances() -> None:
    rng = np.random.default_rng(5)
    model = SkillModel.from_arrays(rng.integers(0, 4, 600), rng.integers(0, 150, 600), rng.normal(70, 10, 600))
    exact = model.posterior()
    estimate = model.posterior("general", exact_diag_limit=10, probes=4000, seed=1)
    np.testing.assert_allclose(estimate.mu_humans, exact.mu_humans, rtol=1e-9)
    np.testing.assert_allclose(estimate.sigma_humans, exact.sigma_humans, rtol=0.05)
    again = model.posterior("general", exact_diag_limit=10, probes=4000, seed=1)
    np.testing.assert_array_equal(again.sigma_humans, estimate.sigma_humans)


def test_posterior_general_handles_a_non_bipartite_precision() -> None:
    # Agents, humans and tasks: y = s_A + s_H + s_T + noise couples all three, so no block is diagonal.
    rng = np.random.default_rng(2)
    n_a, n_h, n_t, n_obs = 3, 20, 6, 80
    n = n_a + n_h + n_t
    rows = np.stack(
        [rng.integers(0, n_a, n_obs), n_a + rng.integers(0, n_h, n_obs), n_a + n_h + rng.integers(0, n_t, n_obs)],
        axis=1,
    )
    design = scipy.sparse.csr_matrix(
        (np.ones(rows.size), (np.repeat(np.arange(n_obs), 3), rows.ravel())), shape=(n_obs, n)
    )
    Lambda = scipy.sparse.identity(n) + design.T @ design
    eta = design.T @ rng.normal(70, 10, n_obs)
    dense_inv = np.linalg.inv(Lambda.toarray())

    exact = posterior_general(Lambda, eta, cov_indices=[0, 1, 2])
    assert exact.variance_method == "exact"
    np.testing.assert_allclose(exact.mu, dense_inv @ eta, rtol=1e-10)
    np.testing.assert_allclose(exact.variance, np.diag(dense_inv), rtol=1e-10)
    np.testing.assert_allclose(exact.cov_block, dense_inv[:3, :3], rtol=1e-10)

    estimate = posterior_general(Lambda, eta, exact_diag_limit=0, probes=20_000, seed=0)
    assert estimate.variance_method == "hutchinson" and estimate.probes == 20_000
    np.testing.assert_allclose(estimate.variance, np.diag(dense_inv), rtol=0.05)


def test_posterior_general_rejects_a_matrix_that_is_not_positive_definite() -> None:
    indefinite = scipy.sparse.csr_matrix(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="positive definite"):
        posterior_general(indefinite, np.zeros(2))
    with pytest.raises(ValueError, match="symmetric"):
        posterior_general(scipy.sparse.csr_matrix(np.array([[2.0, 1.0], [0.0, 2.0]])), np.zeros(2))


def test_solve_bipartite_sums_repeated_pairs() -> None:
    ones = np.ones(2)
    repeated = solve_bipartite([0, 0], [0, 0], [1.0, 1.0], [3.0, 5.0], ones[:1], [0.0], ones[:1], [0.0])
    merged = solve_bipartite([0], [0], [2.0], [8.0], ones[:1], [0.0], ones[:1], [0.0])
    np.testing.assert_allclose(repeated.mu_agents, merged.mu_agents, rtol=1e-15)
    np.testing.assert_allclose(repeated.var_humans, merged.var_humans, rtol=1e-15)


# --------------------------------------------------------------------------------------------------------
# Input validation at the public boundary
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"score": math.nan}, "score"),
        ({"score": math.inf}, "score"),
        ({"score": "high"}, "score"),
        ({"weight": 0.0}, "weight"),
        ({"weight": -1.0}, "weight"),
        ({"weight": math.nan}, "weight"),
        ({"agent_id": ""}, "agent_id"),
        ({"agent_id": "   "}, "agent_id"),
        ({"agent_id": None}, "agent_id"),
        ({"human_id": ""}, "human_id"),
    ],
)
def test_bad_observation_is_rejected_naming_the_parameter(kwargs: dict, name: str) -> None:
    model = SkillModel()
    arguments = {"agent_id": "A", "human_id": "H", "score": 50.0, "weight": 1.0} | kwargs
    with pytest.raises(ValueError, match=name):
        model.add_observation(**arguments)
    assert model.n_observations == 0
    assert model.agent_ids == [] and model.human_ids == []


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"sigma0": 0.0}, "sigma0"),
        ({"sigma0": -1.0}, "sigma0"),
        ({"beta": 0.0}, "beta"),
        ({"beta": math.inf}, "beta"),
        ({"mu0": math.nan}, "mu0"),
        ({"k": -1.0}, "k"),
    ],
)
def test_bad_hyperparameters_are_rejected_naming_the_parameter(kwargs: dict, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        SkillModel(**kwargs)
    with pytest.raises(ValueError, match=name):
        RatingConfig(**kwargs)


def test_per_type_prior_and_conflicting_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="human_sigma0"):
        RatingConfig(human_sigma0=0.0)
    with pytest.raises(ValueError, match="agent_mu0"):
        RatingConfig(agent_mu0=math.inf)
    with pytest.raises(ValueError, match="config"):
        SkillModel(beta=2.0, config=RatingConfig())
    with pytest.raises(ValueError, match="unknown keys"):
        RatingConfig.from_dict({"mu0": 0.0, "tau": 1.0})


def test_vectorised_add_rejects_bad_rows_and_records_nothing() -> None:
    model = SkillModel()
    with pytest.raises(ValueError, match="scores"):
        model.add_observations(["a", "b"], ["h", "h"], [1.0, math.nan])
    with pytest.raises(ValueError, match="weights"):
        model.add_observations(["a", "b"], ["h", "h"], [1.0, 2.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="human_ids"):
        model.add_observations(["a", "b"], ["h"], [1.0, 2.0])
    with pytest.raises(ValueError, match="agent_ids"):
        model.add_observations(["a", ""], ["h", "h"], [1.0, 2.0])
    with pytest.raises(ValueError, match="agent_ids"):
        model.add_observations(np.array(["a", None], dtype=object), ["h", "h"], [1.0, 2.0])
    assert model.n_observations == 0 and model.agent_ids == []


def test_unknown_entities_are_named_in_the_error() -> None:
    model = paper_like_model()
    with pytest.raises(UnknownEntityError, match="nobody"):
        model.rate("nobody", "agent")
    with pytest.raises(KeyError):
        model.prob_greater("A", "nobody")
    with pytest.raises(ValueError, match="entity_type"):
        model.rate("A", "robot")
    with pytest.raises(ValueError, match="b_type"):
        model.prob_greater("A", "B", "agent", "robot")
    with pytest.raises(ValueError, match="itself"):
        model.prob_greater("A", "A")


def test_empty_model_has_an_empty_posterior() -> None:
    model = SkillModel()
    post = model.posterior()
    assert post.mu_agents.shape == (0,) and post.cov_agents.shape == (0, 0)
    assert model.leaderboard() == []
    assert SkillModel.from_state(model.to_state()).to_state() == model.to_state()


def _first_appearance_reference(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    code = np.empty(uniq.size, dtype=np.int64)
    code[order] = np.arange(uniq.size)
    return code[inverse.reshape(-1)], first[order]


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(1).integers(0, 50, 2_000),  # compact integers
        np.random.default_rng(2).integers(-(10**15), 10**15, 3_000),  # spread-out integers: hashed
        np.random.default_rng(3).integers(0, 40_000, 50_000).astype(np.uint32),
        np.char.add("h", np.random.default_rng(4).integers(0, 3_000, 20_000).astype(str)),  # one word
        np.char.add("participant-", np.random.default_rng(5).integers(0, 900, 5_000).astype(str)),  # hashed
        np.array(["a", "bb", "a", "ccc", "é", "bb", "日本", "x" * 20, "日本", "x" * 19]),  # non-Latin-1
    ],
)
def test_ids_are_coded_by_first_appearance_like_a_sort(values) -> None:
    from rating.arrays import first_appearance, id_words

    codes, first = first_appearance(id_words(values))
    expected_codes, expected_first = _first_appearance_reference(values)
    np.testing.assert_array_equal(codes, expected_codes)
    np.testing.assert_array_equal(first, expected_first)


def test_id_coding_stays_exact_when_every_hash_collides(monkeypatch) -> None:
    import rating.arrays as arrays

    values = np.char.add("participant-", np.random.default_rng(6).integers(0, 300, 2_000).astype(str))
    monkeypatch.setattr(arrays, "_hash_rows", lambda words: np.zeros(words.shape[0], dtype=np.uint64))
    codes, first = arrays.first_appearance(arrays.id_words(values))
    expected_codes, expected_first = _first_appearance_reference(values)
    np.testing.assert_array_equal(codes, expected_codes)
    np.testing.assert_array_equal(first, expected_first)


def test_integer_and_string_ids_register_the_same_entities_as_row_by_row_adds() -> None:
    rng = np.random.default_rng(7)
    agents = rng.integers(0, 6, 400)
    humans = rng.integers(10**12, 10**12 + 80, 400)
    scores = rng.normal(0.0, 1.0, 400)
    by_int = SkillModel()
    by_int.add_observations(agents[:150], humans[:150], scores[:150])
    by_int.add_observations(agents[150:], humans[150:], scores[150:])  # known and new ids mixed
    by_str = SkillModel()
    by_str.add_observations(agents.astype(str), humans.astype(str), scores)
    by_row = SkillModel()
    for a, h, y in zip(agents.tolist(), humans.tolist(), scores.tolist(), strict=True):
        by_row.add_observation(a, h, y)
    for model in (by_int, by_str):
        assert model.agent_ids == by_row.agent_ids and model.human_ids == by_row.human_ids
        for mine, theirs in zip(model.leaderboard(), by_row.leaderboard(), strict=True):
            assert (mine["entity_id"], mine["rank"], mine["n"]) == (theirs["entity_id"], theirs["rank"], theirs["n"])
            assert mine["mu"] == pytest.approx(theirs["mu"], abs=1e-12)
    with pytest.raises(ValueError, match=r"human_ids contains an empty id at index 2"):
        SkillModel().add_observations(["a", "b", "c"], np.array(["h", "g", "  "]), [1.0, 2.0, 3.0])
