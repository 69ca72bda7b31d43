"""The task model on its block core (rating/task_blocks.py) equals the dense core and an independent REML."""

from __future__ import annotations

import numpy as np
import pytest

from rating import fit as fit_module
from rating import task_blocks as task_blocks_module
from rating.fit import ModelSpec, _fit_calibrated, _observations, _structure, fit_model
from rating.task_blocks import factorise
from tests.rating.test_fit import dense_reml


def clustered(
    rng: np.random.Generator,
    *,
    n_agents: int,
    n_humans: int,
    n_tasks: int,
    n_obs: int,
    n_groups: int,
    untasked: float = 0.0,
) -> dict[str, np.ndarray]:
    """Participants rate the tasks of one group each (lecturers of a department), known truth."""
    group_of = rng.integers(0, n_groups, n_humans)
    human = np.concatenate([np.arange(n_humans), rng.integers(0, n_humans, n_obs - n_humans)])
    rng.shuffle(human)
    per = n_tasks // n_groups
    task = group_of[human] * per + rng.integers(0, per, n_obs)
    agent = rng.integers(0, n_agents, n_obs)
    y = (
        70.0
        + rng.normal(0.0, 3.0, n_agents)[agent]
        + rng.normal(0.0, 6.0, n_humans)[human]
        + rng.normal(0.0, 4.0, n_tasks)[task]
        + rng.normal(0.0, 10.0, n_obs)
    )
    if untasked:
        task = np.where(rng.random(n_obs) < untasked, -1, task)
    return {"agent": agent, "human": human, "task": task, "y": y}


def connected(
    rng: np.random.Generator, *, n_agents: int, n_humans: int, n_tasks: int, n_obs: int
) -> dict[str, np.ndarray]:
    """InstEval's shape: tasks (lecturers) nested in agents (departments), participants rating mostly their home
    agent's tasks and some of any other, so the participant x task graph is one connected block."""
    dept = np.arange(n_tasks) % n_agents
    home = rng.integers(0, n_agents, n_humans)
    human = np.concatenate([np.arange(n_humans), rng.integers(0, n_humans, n_obs - n_humans)])
    rng.shuffle(human)
    task = rng.integers(0, n_tasks, n_obs)
    own = rng.random(n_obs) < 0.7
    task[own] = home[human[own]] + n_agents * rng.integers(0, n_tasks // n_agents, int(own.sum()))
    agent = dept[task]
    y = (
        3.2
        + rng.normal(0.0, 0.3, n_agents)[agent]
        + rng.normal(0.0, 0.33, n_humans)[human]
        + rng.normal(0.0, 0.5, n_tasks)[task]
        + rng.normal(0.0, 1.2, n_obs)
    )
    return {"agent": agent, "human": human, "task": task, "y": y}


def both_cores(data: dict[str, np.ndarray], spec: ModelSpec, weights: np.ndarray | None = None, monkeypatch=None):
    task = np.where(data["task"] >= 0, data["task"], None) if (data["task"] < 0).any() else data["task"]
    obs = _observations(data["agent"], data["human"], data["y"], task, weights)
    fits = {}
    original = fit_module._structure
    for blocks in (False, True):
        monkeypatch.setattr(
            fit_module,
            "_structure",
            lambda o, *, tasks, random_agents=False, blocks=None, _b=blocks: original(
                o, tasks=tasks, random_agents=random_agents, blocks=_b
            ),
        )
        fits[blocks] = _fit_calibrated(obs, spec)
    monkeypatch.setattr(fit_module, "_structure", original)
    return fits[False], fits[True]


CASES = [
    # (agents, humans, tasks, observations, groups, share without a task, weighted)
    (4, 80, 24, 500, 4, 0.0, False),
    (3, 60, 12, 400, 1, 0.0, False),  # one connected block: the border-only elimination
    (5, 150, 60, 900, 3, 0.1, True),  # observations without a task, unequal weights
    (2, 300, 120, 2400, 2, 0.0, False),  # blocks of 60 tasks: factorised one by one with LAPACK
    (4, 200, 64, 1500, 0, 0.0, False),  # InstEval's shape: tasks nested in agents, one connected block of 64
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("integrate", [False, True])
def test_block_core_equals_the_dense_core(case, integrate, monkeypatch) -> None:
    n_a, n_h, n_t, n, groups, untasked, weighted = case
    rng = np.random.default_rng(n_h + n_t)
    if groups == 0:
        data = connected(rng, n_agents=n_a, n_humans=n_h, n_tasks=n_t, n_obs=n)
    else:
        data = clustered(rng, n_agents=n_a, n_humans=n_h, n_tasks=n_t, n_obs=n, n_groups=groups, untasked=untasked)
    weights = rng.uniform(0.5, 2.0, n) if weighted else None
    spec = ModelSpec(kind="calibrated_task", integrate_hyper=integrate)
    dense, block = both_cores(data, spec, weights, monkeypatch)
    assert dense.diagnostics.get("task_blocks") is None
    assert block.diagnostics["task_blocks"]["blocks"] == max(groups, 1)
    for name in ("agent_mu", "agent_cov", "human_mu", "human_sigma", "task_mu", "task_sigma", "residuals"):
        np.testing.assert_allclose(getattr(block, name), getattr(dense, name), rtol=0, atol=1e-10, err_msg=name)
    np.testing.assert_allclose(block.standardized_residuals, dense.standardized_residuals, rtol=0, atol=1e-10)
    assert block.log_likelihood == pytest.approx(dense.log_likelihood, rel=0, abs=1e-10)
    for key, value in dense.hyper.items():
        for field, number in value.items():
            assert block.hyper[key][field] == pytest.approx(number, rel=1e-10, abs=1e-12, nan_ok=True)
    np.testing.assert_allclose(block.prob_greater(), dense.prob_greater(), atol=1e-10)


def test_block_core_reml_equals_an_independent_dense_reml() -> None:
    rng = np.random.default_rng(5)
    data = clustered(rng, n_agents=3, n_humans=40, n_tasks=12, n_obs=160, n_groups=3)
    obs = _observations(data["agent"], data["human"], data["y"], data["task"], None)
    assert _structure(obs, tasks=True, blocks=True).blocks is not None
    # Force the block core through the public entry point: every core is "large".
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fit_module, "_DENSE_CORE", 0)
        fit = fit_model(
            data["agent"], data["human"], data["y"], data["task"],
            spec=ModelSpec(kind="calibrated_task", integrate_hyper=False),
        )  # fmt: skip
    assert fit.diagnostics["task_blocks"]["blocks"] == 3
    sds, loglik = dense_reml(data["agent"], data["human"], data["y"], data["task"])
    assert fit.hyper["beta"]["estimate"] == pytest.approx(sds[0], rel=1e-6)
    assert fit.hyper["sigma_human"]["estimate"] == pytest.approx(sds[1], rel=1e-6)
    assert fit.hyper["sigma_task"]["estimate"] == pytest.approx(sds[2], rel=1e-6)
    assert fit.log_likelihood == pytest.approx(loglik, rel=1e-10)


@pytest.mark.parametrize("loop_block", [1, 48])
def test_connected_block_core_equals_an_independent_reml_and_a_dense_solve(loop_block) -> None:
    # One connected block (InstEval's shape), through the batched and the one-by-one (LAPACK) factorisation:
    # the variance components and REML criterion against an independent dense REML, the estimates and their
    # posterior variances against a dense solve and inverse of the mixed-model equations at those components.
    rng = np.random.default_rng(11)
    data = connected(rng, n_agents=3, n_humans=40, n_tasks=12, n_obs=200)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fit_module, "_DENSE_CORE", 0)
        patch.setattr(task_blocks_module, "_LOOP_BLOCK", loop_block)
        fit = fit_model(
            data["agent"], data["human"], data["y"], data["task"],
            spec=ModelSpec(kind="calibrated_task", integrate_hyper=False),
        )  # fmt: skip
    assert fit.diagnostics["task_blocks"] == {"blocks": 1, "largest": 12}
    sds, loglik = dense_reml(data["agent"], data["human"], data["y"], data["task"])
    beta, sigma_h, sigma_t = (fit.hyper[k]["estimate"] for k in ("beta", "sigma_human", "sigma_task"))
    np.testing.assert_allclose([beta, sigma_h, sigma_t], sds, rtol=1e-6)
    assert fit.log_likelihood == pytest.approx(loglik, rel=1e-10)
    # Henderson's equations at the fitted components, dense: [X Z]'[X Z] + diag(0, beta^2 / sigma^2).
    n_a, n_h, n_t = 3, 40, 12
    design = np.hstack([np.eye(n_a)[data["agent"]], np.eye(n_h)[data["human"]], np.eye(n_t)[data["task"]]])
    prior = np.r_[np.zeros(n_a), np.full(n_h, (beta / sigma_h) ** 2), np.full(n_t, (beta / sigma_t) ** 2)]
    inverse = np.linalg.inv(design.T @ design + np.diag(prior))
    effects = inverse @ (design.T @ data["y"])
    agents, humans, tasks = (ids.astype(int) for ids in (fit.agent_ids, fit.human_ids, fit.task_ids))
    np.testing.assert_allclose(fit.agent_mu, effects[agents], rtol=0, atol=1e-9)
    np.testing.assert_allclose(fit.human_mu, effects[n_a + humans], rtol=0, atol=1e-9)
    np.testing.assert_allclose(fit.task_mu, effects[n_a + n_h + tasks], rtol=0, atol=1e-9)
    np.testing.assert_allclose(fit.agent_cov, beta**2 * inverse[np.ix_(agents, agents)], rtol=1e-9, atol=1e-12)
    variances = beta**2 * np.diag(inverse)
    np.testing.assert_allclose(fit.human_sigma, np.sqrt(variances[n_a + humans]), rtol=1e-9)
    np.testing.assert_allclose(fit.task_sigma, np.sqrt(variances[n_a + n_h + tasks]), rtol=1e-9)


def test_block_factor_solves_and_inverts_the_assembled_schur_complement() -> None:
    rng = np.random.default_rng(9)
    data = clustered(rng, n_agents=3, n_humans=50, n_tasks=15, n_obs=300, n_groups=3)
    obs = _observations(data["agent"], data["human"], data["y"], data["task"], None)
    st = _structure(obs, tasks=True, blocks=True)
    dense_st = _structure(obs, tasks=True, blocks=False)
    gamma_h, gamma_t = 0.4, 0.2
    d = dense_st.n_human + 1.0 / gamma_h
    c = dense_st.couplings.toarray()
    schur = dense_st.gram_core + np.diag(np.r_[np.zeros(3), np.full(15, 1.0 / gamma_t)]) - c.T @ (c / d[:, None])
    factor = factorise(st.blocks, 1.0 / (st.blocks.group_weight + 1.0 / gamma_h), 1.0 / gamma_t)
    inverse = np.linalg.inv(schur)
    rhs = rng.normal(size=(18, 2))
    np.testing.assert_allclose(factor.solve(rhs), inverse @ rhs, atol=1e-12)
    np.testing.assert_allclose(factor.inverse_diagonal(), np.diag(inverse), atol=1e-12)
    np.testing.assert_allclose(factor.m_inv, inverse[:3, :3], atol=1e-12)
    assert factor.logdet == pytest.approx(np.linalg.slogdet(schur)[1], abs=1e-10)
    weights = 1.0 / d**2
    assert factor.trace_weighted_gram(1.0 / (st.blocks.group_weight + 1.0 / gamma_h) ** 2) == pytest.approx(
        float(np.trace(inverse @ (c.T @ (c * weights[:, None])))), rel=1e-12
    )


def test_disjoint_groups_of_agents_participants_and_tasks_fit_block_by_block() -> None:
    # Each agent is seen only in its own group of participants and tasks: two blocks, both identified
    # (the agents are fixed effects, so each block's level goes to its agent).
    agent = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    human = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    task = np.array([0, 1, 0, 1, 2, 3, 2, 3])
    y = np.array([1.0, 2.0, 1.5, 2.5, 3.0, 4.0, 3.5, 4.5])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fit_module, "_DENSE_CORE", 0)
        fit = fit_model(agent, human, y, task, spec=ModelSpec(kind="calibrated_task", integrate_hyper=False))
    assert fit.diagnostics["task_blocks"]["blocks"] == 2
    assert np.all(np.isfinite(fit.agent_mu))


def _product_pair_sums(left, right, group, n_groups, row_base, col_offset, size, lower=None):
    """The pair sums as a sparse product: the left factor spread over the groups times the right one."""
    import scipy.sparse

    n_rows, n_left = left.shape
    coo = left.tocoo()
    spread = scipy.sparse.csr_matrix(
        (coo.data, (group[coo.row].astype(np.int64) * n_left + coo.col, coo.row)), shape=(n_groups * n_left, n_rows)
    )
    product = spread @ right
    rows = np.repeat(np.arange(n_groups * n_left, dtype=np.int64), np.diff(product.indptr))
    first, g, cols, values = rows % n_left, (rows // n_left).astype(np.int32), product.indices, product.data
    if lower is not None:
        keep = lower[first] >= lower[cols]
        first, g, cols, values = first[keep], g[keep], cols[keep], values[keep]
    return scipy.sparse.csr_matrix((values, (row_base[first] + col_offset[cols], g)), shape=(size, n_groups))


@pytest.mark.parametrize("shape", ["clustered", "connected", "weighted"])
def test_pair_operators_equal_the_sparse_product_and_the_per_group_sums(shape) -> None:
    rng = np.random.default_rng(21)
    if shape == "connected":
        data = connected(rng, n_agents=4, n_humans=120, n_tasks=40, n_obs=900)
    else:
        data = clustered(rng, n_agents=3, n_humans=150, n_tasks=30, n_obs=1000, n_groups=3)
    weights = rng.uniform(0.5, 2.0, data["y"].shape[0]) if shape == "weighted" else None
    obs = _observations(data["agent"], data["human"], data["y"], data["task"], weights)
    b = _structure(obs, tasks=True, blocks=True).blocks
    c_agent, c_task, n_groups = b.couplings_agent, b.couplings_task, b.group_weight.shape[0]
    p, n_t = b.n_agents, b.n_tasks
    agents, tasks = np.arange(p, dtype=np.int64), np.arange(n_t, dtype=np.int64)
    row_base = b.task_dest + b.task_local * b.task_size
    references = {
        "elim_aa": _product_pair_sums(c_agent, c_agent, b.group, n_groups, agents * p, agents, p * p),
        "elim_ta": _product_pair_sums(c_task, c_agent, b.group, n_groups, tasks * p, agents, n_t * p),
        "elim_tt": _product_pair_sums(
            c_task, c_task, b.group, n_groups, row_base, b.task_local, b.storage, lower=b.task_local
        ),
    }
    for name, reference in references.items():
        matrix = getattr(b, name).matrix
        # The same sums in the same order: bit for bit, entry for entry.
        assert np.array_equal(matrix.indptr, reference.indptr), name
        assert np.array_equal(matrix.indices, reference.indices), name
        assert np.array_equal(matrix.data, reference.data), name
    # And the per-group sums of outer products, written out densely.
    ca, ct = c_agent.toarray(), c_task.toarray()
    for g in range(n_groups):
        members = b.group == g
        aa = ca[members].T @ ca[members]
        ta = ct[members].T @ ca[members]
        tt = ct[members].T @ ct[members]
        np.testing.assert_allclose(b.elim_aa.matrix[:, [g]].toarray().reshape(p, p), aa, rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(b.elim_ta.matrix[:, [g]].toarray().reshape(n_t, p), ta, rtol=1e-13, atol=1e-12)
        stored = b.elim_tt.matrix[:, [g]].toarray().ravel()
        i, j = np.nonzero(b.same_block(tasks[:, None], tasks[None, :]) & (b.task_local[:, None] >= b.task_local))
        np.testing.assert_allclose(stored[b.dest(i, j)], tt[i, j], rtol=1e-13, atol=1e-12)
