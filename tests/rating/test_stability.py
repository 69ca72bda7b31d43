"""Behaviour of the ranking stability analyses (rating/stability.py; paper §6, Tables 2-4): the bootstrap and
the leave-one-out tables against dense solves of every resampled system; no database, no Django."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import kendalltau

from rating.engine import RatingConfig, SkillModel, solve_bipartite
from rating.fit import RATING_MODELS, ModelSpec, code_ids, compare_models, fit_model, heldout_coverage
from rating.stability import _kendall_tau_to, _leave_group_out, _prepare, rank_agents, stability
from tests.rating.simulated import simulate


def test_downdated_leave_one_out_equals_refits() -> None:
    data = simulate(np.random.default_rng(13), n_humans=30, n_obs=120, n_tasks=7)
    config = RatingConfig(beta=12.0, agent_sigma0=1e3, human_sigma0=6.0)
    design = _prepare(data["agent"], data["human"], data["y"], None, config)
    for codes in (design.human_idx, np.where(np.arange(120) % 5 == 0, -1, data["task"])):
        n_groups = int(codes.max()) + 1
        mu, var = _leave_group_out(design, codes, n_groups)
        for g in range(n_groups):
            w = np.where(codes == g, 0.0, design.w)
            sol = solve_bipartite(
                design.agent_idx, design.human_idx, w, w * data["y"],
                design.prior_precision_agents, design.prior_eta_agents,
                design.prior_precision_humans, design.prior_eta_humans,
                human_variance=False,
            )  # fmt: skip
            np.testing.assert_allclose(mu[g], sol.mu_agents, rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(var[g], np.diag(sol.cov_agents), rtol=1e-9)


def test_stability_keeps_taskless_observations_in_every_leave_one_task_out_fit() -> None:
    data = simulate(np.random.default_rng(14), n_humans=40, n_obs=200, n_tasks=6)
    tasks = data["task"].astype(str).astype(object)
    tasks[::4] = None
    report = stability(data["agent"], data["human"], data["y"], tasks, spec=ModelSpec(), rounds=50, seed=1)
    assert report["n_tasks"] == 6
    assert report["leave_one_task_out"]["n_groups"] == 6
    assert report["model"]["kind"] == "calibrated"
    assert set(report["hyper"]) == {"beta", "sigma_human"}
    assert [row["rank"] for row in report["leaderboard"]] == list(range(1, 6))
    json.dumps(report)


def test_cluster_bootstrap_resamples_whole_participants() -> None:
    data = simulate(np.random.default_rng(15), n_humans=40, n_obs=200)
    args = (data["agent"], data["human"], data["y"], None)
    by_obs = stability(*args, spec=ModelSpec(), rounds=200, seed=3)
    by_human = stability(*args, spec=ModelSpec(), rounds=200, seed=3, cluster="human")
    assert by_human["bootstrap"]["cluster"] == "human"
    assert by_obs["bootstrap"]["cluster"] is None
    assert by_obs["leave_one_task_out"] is None
    again = stability(*args, spec=ModelSpec(), rounds=200, seed=3, cluster="human")
    assert again["bootstrap"] == by_human["bootstrap"]
    with pytest.raises(ValueError, match="cluster"):
        stability(*args, spec=ModelSpec(), rounds=10, cluster="task")


def test_compiled_observation_rounds_equal_a_dense_build_of_each_resampled_system() -> None:
    from rating.stability import _ObservationRounds

    data = simulate(np.random.default_rng(21), n_agents=6, n_humans=25, n_obs=160)
    weights = np.random.default_rng(22).uniform(0.2, 3.0, 160)
    design = _prepare(data["agent"], data["human"], data["y"], weights, RatingConfig(sigma0=7.0, beta=4.0))
    n, n_a, n_h = design.n_obs, design.n_agents, design.n_humans
    draws = np.random.default_rng(23).integers(0, n, size=(9, n), dtype=np.int32)
    draws[0] = draws[0] % 40  # a round where most participants and maybe agents are never drawn
    schur, rhs = _ObservationRounds(design, 9).systems(draws)
    for r in range(draws.shape[0]):
        c = np.bincount(draws[r], minlength=n).astype(float)
        b = np.zeros((n_h, n_a))
        e = np.zeros((n_h, n_a))
        np.add.at(b, (design.human_idx, design.agent_idx), c * design.w)
        np.add.at(e, (design.human_idx, design.agent_idx), c * design.wy)
        d = design.prior_precision_humans + b.sum(axis=1)
        eta = design.prior_eta_humans + e.sum(axis=1)
        expected = np.diag(design.prior_precision_agents + b.sum(axis=0)) - b.T @ (b / d[:, None])
        np.testing.assert_allclose(schur[r], expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(rhs[r], design.prior_eta_agents + e.sum(axis=0) - b.T @ (eta / d), rtol=1e-12)


def test_participant_bootstrap_rounds_equal_observation_rounds_with_the_expanded_counts() -> None:
    from rating.stability import _bootstrap

    data = simulate(np.random.default_rng(16), n_humans=30, n_obs=150)
    fit = fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec())
    design = _prepare(data["agent"], data["human"], data["y"], None, fit.config)
    full_rank = np.arange(1, design.n_agents + 1)
    by_human = _bootstrap(design, full_rank, rounds=64, seed=4, cluster="human", progress=None)
    # The same participant draws, expanded to observation counts, through the observation path.
    rng = np.random.default_rng(4)
    draws = rng.integers(0, design.n_humans, size=(64, design.n_humans))
    counts = np.stack([np.bincount(row, minlength=design.n_humans) for row in draws]).astype(float)
    mult = counts[:, design.human_idx]
    ranks = np.empty((64, design.n_agents), dtype=np.int64)
    for r in range(64):  # each round's re-weighted system solved on its own
        sol = solve_bipartite(
            design.agent_idx, design.human_idx, mult[r] * design.w, mult[r] * design.wy,
            design.prior_precision_agents, design.prior_eta_agents,
            design.prior_precision_humans, design.prior_eta_humans, human_variance=False,
        )
        sigma = np.sqrt(np.diag(sol.cov_agents))
        ranks[r] = rank_agents(sol.mu_agents[None, :], sigma[None, :], design.k, design.id_order)[0]
    expected = np.stack([np.bincount(ranks[:, a] - 1, minlength=design.n_agents) for a in range(design.n_agents)])
    np.testing.assert_allclose(by_human.rank_distribution, expected / 64)


def _task_design(seed: int):
    """A small task-model study (every fifth observation without a task), its fit, design and task codes."""

    data = simulate(np.random.default_rng(seed), n_humans=30, n_obs=200, n_tasks=8, task_sd=6.0)
    tasks = data["task"].astype(str).astype(object)
    tasks[::5] = None
    fit = fit_model(data["agent"], data["human"], data["y"], tasks, spec=ModelSpec(kind="calibrated_task"))
    design = _prepare(data["agent"], data["human"], data["y"], None, fit.config)
    task_code, task_ids = code_ids(tasks, "task_ids", design.n_obs, optional=True)
    return data, tasks, fit, design, task_code, task_ids


def _dense_task_posterior(design, task_code, n_tasks, sigma_task, rows, mult=None):
    """Agents' posterior mean and variance from the full mixed-model matrix on ``rows`` (dense inverse)."""
    n_a, n_h = design.n_agents, design.n_humans
    rows = np.asarray(rows)
    m = n_a + n_tasks + n_h
    x = np.zeros((rows.shape[0], m))
    x[np.arange(rows.shape[0]), design.agent_idx[rows]] = 1.0
    task = task_code[rows]
    x[np.flatnonzero(task >= 0), n_a + task[task >= 0]] = 1.0
    x[np.arange(rows.shape[0]), n_a + n_tasks + design.human_idx[rows]] = 1.0
    mult = np.ones(rows.shape[0]) if mult is None else mult[rows]
    prior = np.concatenate(
        [design.prior_precision_agents, np.full(n_tasks, 1.0 / sigma_task**2), design.prior_precision_humans]
    )
    prior_eta = np.concatenate([design.prior_eta_agents, np.zeros(n_tasks), design.prior_eta_humans])
    cov = np.linalg.inv(x.T @ ((mult * design.w[rows])[:, None] * x) + np.diag(prior))
    mean = cov @ (x.T @ (mult * design.wy[rows]) + prior_eta)
    return mean[:n_a], np.diag(cov)[:n_a]


def test_task_model_resampled_posteriors_equal_a_dense_solve_of_the_mixed_model_equations() -> None:
    from rating.stability import _TaskRounds

    data, tasks, fit, design, task_code, task_ids = _task_design(21)
    sigma_task = fit.hyper["sigma_task"]["estimate"]
    rounds = _TaskRounds(design, task_code, task_ids.size, sigma_task)
    everything = np.arange(design.n_obs)
    # The unperturbed system is the fit's plug-in posterior.
    plug_in = fit_model(
        data["agent"], data["human"], data["y"], tasks, spec=ModelSpec(kind="calibrated_task", integrate_hyper=False)
    )
    mu, var = rounds.solve(np.ones((1, design.n_obs)))
    np.testing.assert_allclose(mu[0], plug_in.agent_mu, rtol=1e-9)
    np.testing.assert_allclose(var[0], np.diag(plug_in.agent_cov), rtol=1e-9)
    # Observation bootstrap counts and participant-cluster counts expanded to observations.
    rng = np.random.default_rng(5)
    obs_counts = rng.multinomial(design.n_obs, np.full(design.n_obs, 1.0 / design.n_obs), size=3).astype(float)
    human_counts = rng.multinomial(design.n_humans, np.full(design.n_humans, 1.0 / design.n_humans), size=3)
    mult = np.vstack([obs_counts, human_counts[:, design.human_idx].astype(float)])
    mu, var = rounds.solve(mult)
    for r in range(mult.shape[0]):
        dense_mu, dense_var = _dense_task_posterior(design, task_code, task_ids.size, sigma_task, everything, mult[r])
        np.testing.assert_allclose(mu[r], dense_mu, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(var[r], dense_var, rtol=1e-9)


@pytest.mark.parametrize("unit", ["human", "task"])
def test_task_model_leave_one_out_equals_refits_without_each_group(unit) -> None:
    from rating.stability import _TaskRounds

    _, _, fit, design, task_code, task_ids = _task_design(22)
    sigma_task = fit.hyper["sigma_task"]["estimate"]
    rounds = _TaskRounds(design, task_code, task_ids.size, sigma_task)
    group, n_groups = (design.human_idx, design.n_humans) if unit == "human" else (task_code, task_ids.size)
    mu, var = rounds.leave_out(group, n_groups)
    for g in range(n_groups):
        kept = np.flatnonzero(group != g)  # task-less observations stay in every leave-one-task-out fit
        dense_mu, dense_var = _dense_task_posterior(design, task_code, task_ids.size, sigma_task, kept)
        np.testing.assert_allclose(mu[g], dense_mu, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(var[g], dense_var, rtol=1e-9)


@pytest.mark.parametrize("cluster", [None, "human"])
def test_task_model_stability_ranks_are_those_of_dense_solves(cluster) -> None:
    data, tasks, fit, design, task_code, task_ids = _task_design(23)
    spec = ModelSpec(kind="calibrated_task")
    report = stability(data["agent"], data["human"], data["y"], tasks, spec=spec, rounds=40, seed=7, cluster=cluster)
    json.dumps(report, allow_nan=False)
    assert report["model"]["kind"] == "calibrated_task" and "sigma_task" in report["hyper"]
    assert report["n_tasks"] == task_ids.size
    assert [row["agent_id"] for row in report["leaderboard"]] == [
        str(fit.agent_ids[i]) for i in np.argsort(-fit.conservative(), kind="stable")
    ]
    sigma_task = fit.hyper["sigma_task"]["estimate"]

    def ranks(rows, mult=None):
        mu, var = _dense_task_posterior(design, task_code, task_ids.size, sigma_task, rows, mult)
        return rank_agents(mu, np.sqrt(var), design.k, design.id_order)[0]

    everything = np.arange(design.n_obs)
    full_rank = ranks(everything)
    agent_pos = {str(a): i for i, a in enumerate(design.agent_ids)}

    def column(rows, key):
        out = np.empty(len(rows))
        for row in rows:
            out[agent_pos[row["agent_id"]]] = row[key]
        return out

    assert column(report["leave_one_human_out"]["agents"], "full_rank").tolist() == full_rank.tolist()
    for table, group in (("leave_one_human_out", design.human_idx), ("leave_one_task_out", task_code)):
        expected = np.array([ranks(np.flatnonzero(group != g)) for g in range(group.max() + 1)])
        assert report[table]["n_groups"] == expected.shape[0]
        np.testing.assert_allclose(column(report[table]["agents"], "mean_rank"), expected.mean(axis=0), atol=1e-12)
    # The bootstrap: the same draws for the seed, each round solved densely.
    rng = np.random.default_rng(7)
    units = design.n_obs if cluster is None else design.n_humans
    draws = rng.integers(0, units, size=(40, units))
    counts = np.stack([np.bincount(row, minlength=units) for row in draws]).astype(float)
    mult = counts if cluster is None else counts[:, design.human_idx]
    boot = np.array([ranks(everything, mult[r]) for r in range(40)])
    np.testing.assert_allclose(column(report["bootstrap"]["agents"], "p_rank1"), (boot == 1).mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(column(report["bootstrap"]["agents"], "mean_rank"), boot.mean(axis=0), atol=1e-12)


@pytest.mark.parametrize("kind", [kind for kind in RATING_MODELS if kind != "judge_aware"])  # graded: own tests
def test_public_outputs_are_strict_json_with_non_finite_values_as_null(kind) -> None:
    data = simulate(np.random.default_rng(24), n_agents=1, n_humans=20, n_obs=80, n_tasks=5)
    args = (data["agent"], data["human"], data["y"], data["task"].astype(str))
    spec = ModelSpec(kind=kind)
    report = stability(*args, spec=spec, rounds=20, seed=1)
    json.dumps(report, allow_nan=False)
    # One agent: no ranking to correlate (Kendall tau undefined); the paper model has no standard errors.
    assert report["bootstrap"]["mean_kendall_tau"] is None
    if kind == "paper":
        assert report["hyper"]["beta"]["se"] is None
    fit = fit_model(*args, spec=spec)
    json.dumps(fit.to_dict(), allow_nan=False)
    json.dumps(heldout_coverage(*args, spec=spec, folds=2), allow_nan=False)
    json.dumps(compare_models(*args), allow_nan=False)




# --------------------------------------------------------------------------------------------------------
# The paper model's ranking and its bootstrap (paper Table 3)
# --------------------------------------------------------------------------------------------------------

PAPER_SKILLS = {"Cowork": 82.0, "Code": 77.0, "Codex": 72.0, "Manus": 67.0, "Gemini": 62.0}


def _paper_study(*, skills: dict[str, float], n_humans: int, n_obs: int, seed: int, human_sd: float = 10.0,
                 noise_sd: float = 10.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw (agent, human, score) rows from y = s_A + s_H + noise with random pairing."""
    rng = np.random.default_rng(seed)
    names = np.array(list(skills))
    true = np.array(list(skills.values()))
    offsets = rng.normal(0.0, human_sd, n_humans)
    a = rng.integers(0, len(names), n_obs)
    h = rng.integers(0, n_humans, n_obs)
    rng.integers(0, 165, n_obs)  # task draws, unused here; kept so the seeded studies stay the ones pinned below
    y = true[a] + offsets[h] + rng.normal(0.0, noise_sd, n_obs)
    return names[a], np.array([f"worker-{i}" for i in h]), y


@pytest.fixture(scope="module")
def paper_scale() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # Paper scale (§3): 5 agents, 93 humans, 386 sessions; skills 5 points apart around 72, human offsets
    # N(0, 10^2), noise sd 10. At this noise the exact order comes back for about 95 % of seeds (75 % with
    # 3-point spacing), so the order test pins one seed.
    return _paper_study(skills=PAPER_SKILLS, n_humans=93, n_obs=386, seed=11)


def _paper(config: RatingConfig | None = None) -> ModelSpec:
    return ModelSpec(kind="paper", paper=config or RatingConfig())


def _by_agent(report: dict) -> dict[str, dict]:
    return {row["agent_id"]: row for row in report["bootstrap"]["agents"]}


def test_the_paper_model_recovers_the_true_agent_order_at_paper_scale(paper_scale) -> None:
    agents, humans, scores = paper_scale
    model = SkillModel()  # the paper's mu0 = 0, sigma0 = 1, beta = 1 on raw scores
    model.add_observations(agents, humans, scores)
    assert [row["entity_id"] for row in model.leaderboard("agent")] == list(PAPER_SKILLS)


def test_bootstrap_summarises_the_ranking_at_paper_scale(paper_scale) -> None:
    agents, humans, scores = paper_scale
    boot = _by_agent(stability(agents, humans, scores, spec=_paper(), rounds=2000, seed=0))
    best, worst = boot["Cowork"], boot["Gemini"]
    assert best["full_rank"] == 1 and worst["full_rank"] == 5
    assert best["p_rank1"] == max(row["p_rank1"] for row in boot.values()) > 0.5
    assert best["mean_rank"] == min(row["mean_rank"] for row in boot.values())
    assert worst["mean_rank"] == max(row["mean_rank"] for row in boot.values())
    distribution = np.array([row["rank_distribution"] for row in boot.values()])
    np.testing.assert_allclose(distribution.sum(axis=1), 1.0)
    np.testing.assert_allclose(distribution.sum(axis=0), 1.0)  # each rank goes to one agent
    np.testing.assert_allclose(sum(row["mean_rank"] for row in boot.values()), 15.0)
    assert all(row["rank_interval"][0] <= row["full_rank"] <= row["rank_interval"][1] for row in boot.values())


def test_bootstrap_is_reproducible_with_a_seed(paper_scale) -> None:
    agents, humans, scores = paper_scale
    first = stability(agents, humans, scores, spec=_paper(), rounds=300, seed=7)["bootstrap"]
    again = stability(agents, humans, scores, spec=_paper(), rounds=300, seed=7)["bootstrap"]
    other = stability(agents, humans, scores, spec=_paper(), rounds=300, seed=8)["bootstrap"]
    assert first == again
    assert first["agents"] != other["agents"]


def test_a_bootstrap_round_ranks_by_the_exact_posterior_of_the_resampled_observations() -> None:
    agents, humans, scores = _paper_study(skills={"x": 60.0, "y": 61.0, "z": 59.0}, n_humans=12, n_obs=40, seed=4)
    config = RatingConfig(sigma0=5.0, beta=3.0)
    for seed in range(5):
        # One round draws n indices with replacement from the seeded generator.
        draws = np.random.default_rng(seed).integers(0, len(scores), size=(1, len(scores)))[0]
        model = SkillModel(config=config)
        for agent in dict.fromkeys(agents):  # agents absent from the resample keep their prior
            model.add_observation(agent, "prior-only", 0.0, weight=1e-300)
        model.add_observations(agents[draws], humans[draws], scores[draws])
        expected = [row["entity_id"] for row in model.leaderboard("agent")]
        boot = _by_agent(stability(agents, humans, scores, spec=_paper(config), rounds=1, seed=seed))
        assert sorted(boot, key=lambda a: int(np.argmax(boot[a]["rank_distribution"]))) == expected


def test_bootstrap_of_a_clear_ordering_is_certain() -> None:
    agents, humans, scores = _paper_study(
        skills={"low": 30.0, "high": 90.0, "mid": 60.0}, n_humans=30, n_obs=300, seed=1, noise_sd=2.0
    )
    report = stability(agents, humans, scores, spec=_paper(), rounds=500, seed=3)
    boot = _by_agent(report)
    assert [boot[a]["mean_rank"] for a in ("high", "mid", "low")] == [1.0, 2.0, 3.0]
    assert boot["high"]["p_rank1"] == 1.0
    assert all(row["rank_interval"] == [row["full_rank"]] * 2 for row in boot.values())
    assert report["bootstrap"]["mean_kendall_tau"] == 1.0


def test_bootstrap_ranks_by_the_conservative_score(paper_scale) -> None:
    # An agent with one brilliant episode has the highest mean but a wide posterior.
    agents, humans, scores = paper_scale
    agents = np.append(agents, "Newcomer")
    humans = np.append(humans, humans[0])
    scores = np.append(scores, 120.0)  # mean near 90, sigma near 10: first by mu, far down by mu - 3 sigma
    config = RatingConfig(sigma0=20.0, beta=10.0)
    model = SkillModel(config=config)
    model.add_observations(agents, humans, scores)
    leaderboard = model.leaderboard("agent")
    assert max(leaderboard, key=lambda row: row["mu"])["entity_id"] == "Newcomer"
    boot = _by_agent(stability(agents, humans, scores, spec=_paper(config), rounds=50, seed=0))
    assert {a: row["full_rank"] for a, row in boot.items()} == {row["entity_id"]: row["rank"] for row in leaderboard}
    assert boot["Newcomer"]["full_rank"] != 1


def test_vectorised_kendall_tau_equals_scipy() -> None:
    rng = np.random.default_rng(0)
    reference = rng.permutation(6) + 1
    ranks = np.array([rng.permutation(6) + 1 for _ in range(50)])
    expected = [kendalltau(row, reference).statistic for row in ranks]
    np.testing.assert_allclose(_kendall_tau_to(ranks, reference), expected, atol=1e-12)


def test_rank_agents_orders_by_conservative_score_then_mean_then_tie_break() -> None:
    mu = np.array([[10.0, 12.0, 10.0, 9.0]])
    sigma = np.array([[1.0, 2.0, 1.0, 0.0]])  # conservative (k=1): 9, 10, 9, 9
    assert rank_agents(mu, sigma, 1.0).tolist() == [[2, 1, 3, 4]]
    assert rank_agents(mu, sigma, 1.0, tie_break=np.array([3, 0, 2, 1])).tolist() == [[3, 1, 2, 4]]


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: stability(["a"], ["h"], [1.0], spec=ModelSpec(kind="paper"), rounds=0), "rounds"),
        (lambda: stability(["a"], ["h", "g"], [1.0], spec=ModelSpec(kind="paper")), "human_ids"),
        (lambda: stability(["a"], ["h"], [math.nan], spec=ModelSpec(kind="paper")), "scores"),
        (lambda: stability(["a"], ["h"], [1.0], None, [-1.0], spec=ModelSpec(kind="paper")), "weights"),
        (lambda: stability([], [], [], spec=ModelSpec(kind="paper")), "agent_ids"),
        (lambda: stability(["a", ""], ["h", "h"], [1, 2], spec=ModelSpec(kind="paper")), "agent_ids"),
        (lambda: stability(["a"], ["h"], [1.0], spec="paper"), "spec"),
    ],
)
def test_bad_inputs_are_rejected_naming_the_parameter(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()
