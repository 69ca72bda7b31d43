r"""How much a study's agent ranking rests on its data: bootstrap and leave-one-out (paper §6, Tables 2-4).

:func:`stability` is the one stability path of the project (the dashboard job and ``rating_report`` reach it
through :func:`rating.services.analysis.study_stability_report`). It fits the study's model once
(:func:`rating.fit.fit_model`) and then, holding the variance components at the fit, recomputes the agents'
exact posterior for every resample: bootstrap rounds by observation or by participant, and leave-one-human-out
and leave-one-task-out tables by exact low-rank updates of the agents' Schur complement. Agents are ranked
the way the paper ranks them: by the conservative score :math:`\mu - k\sigma`, ties to higher :math:`\mu`,
then by agent id.

Pure numpy/scipy: no Django, no settings, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse
from threadpoolctl import threadpool_limits

from rating.arrays import finite_array, first_appearance_codes, id_array, reject_blank_ids, weight_array
from rating.connectivity import connectivity
from rating.engine import RatingConfig, conservative_score, solve_bipartite
from rating.fit import ModelSpec, checked_spec, code_ids, fit_model, json_safe

__all__ = ["BootstrapResult", "LeaveOneOutResult", "rank_agents", "stability"]

Progress = Callable[[int, int], None]


@dataclass(frozen=True, eq=False)
class _Design:
    """Observations indexed for batched solves, with the fixed incidence matrices they need."""

    agent_ids: np.ndarray
    human_ids: np.ndarray
    agent_idx: np.ndarray
    human_idx: np.ndarray
    w: np.ndarray  # observation precision weight / beta^2
    wy: np.ndarray  # w * score
    prior_precision_agents: np.ndarray
    prior_eta_agents: np.ndarray
    prior_precision_humans: np.ndarray
    prior_eta_humans: np.ndarray
    k: float
    id_order: np.ndarray  # rank of each agent id in sorted order, the last tie-breaker

    @property
    def n_agents(self) -> int:
        return self.agent_ids.shape[0]

    @property
    def n_humans(self) -> int:
        return self.human_ids.shape[0]

    @property
    def n_obs(self) -> int:
        return self.agent_idx.shape[0]


def _prepare(agent_ids: Any, human_ids: Any, scores: Any, weights: Any, config: RatingConfig | None) -> _Design:
    config = RatingConfig() if config is None else config
    if not isinstance(config, RatingConfig):
        raise ValueError(f"config must be a RatingConfig, got {type(config).__name__}")
    agents = id_array(agent_ids, "agent_ids")
    n = agents.shape[0]
    humans = id_array(human_ids, "human_ids")
    if humans.shape[0] != n:
        raise ValueError(f"human_ids has {humans.shape[0]} entries but agent_ids has {n}")
    if n == 0:
        raise ValueError("agent_ids: at least one observation is required")
    reject_blank_ids(agents, "agent_ids")
    reject_blank_ids(humans, "human_ids")
    y = finite_array(scores, "scores", n)
    omega = weight_array(weights, "weights", n)
    agent_idx, agent_uniq = first_appearance_codes(agents)
    human_idx, human_uniq = first_appearance_codes(humans)
    w = omega / config.beta**2
    mu_a, sigma_a = config.prior("agent")
    mu_h, sigma_h = config.prior("human")
    n_a, n_h = agent_uniq.shape[0], human_uniq.shape[0]
    id_order = np.empty(n_a, dtype=np.int64)
    id_order[np.argsort(agent_uniq.astype(str), kind="stable")] = np.arange(n_a)
    return _Design(
        agent_ids=agent_uniq,
        human_ids=human_uniq,
        agent_idx=agent_idx,
        human_idx=human_idx,
        w=w,
        wy=w * y,
        prior_precision_agents=np.full(n_a, 1.0 / sigma_a**2),
        prior_eta_agents=np.full(n_a, mu_a / sigma_a**2),
        prior_precision_humans=np.full(n_h, 1.0 / sigma_h**2),
        prior_eta_humans=np.full(n_h, mu_h / sigma_h**2),
        k=config.k,
        id_order=id_order,
    )



def rank_agents(mu: np.ndarray, sigma: np.ndarray, k: float, tie_break: np.ndarray | None = None) -> np.ndarray:
    """Return 1-based ranks by conservative score :math:`\\mu - k\\sigma`, row-wise for 2-D input.

    Ties fall back to higher ``mu`` and then to ``tie_break`` (ascending; default the agent position),
    so every ranking is a strict permutation.
    """
    mu = np.atleast_2d(np.asarray(mu, dtype=np.float64))
    sigma = np.atleast_2d(np.asarray(sigma, dtype=np.float64))
    n_rows, n_agents = mu.shape
    tie = np.arange(n_agents) if tie_break is None else np.asarray(tie_break)
    cons = conservative_score(mu, sigma, k)
    order = np.lexsort((np.broadcast_to(tie, mu.shape), -mu, -cons), axis=-1)
    ranks = np.empty((n_rows, n_agents), dtype=np.int64)
    np.put_along_axis(ranks, order, np.broadcast_to(np.arange(1, n_agents + 1), mu.shape), axis=-1)
    return ranks


def _kendall_tau_to(ranks: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Return Kendall's tau between each row of strict rankings and ``reference`` (no ties: tau-a = tau-b)."""
    n_agents = reference.shape[0]
    if n_agents < 2:
        return np.full(ranks.shape[0], np.nan)
    i, j = np.triu_indices(n_agents, 1)
    agreement = np.sign(ranks[:, i] - ranks[:, j]) * np.sign(reference[i] - reference[j])
    return agreement.sum(axis=1) / i.size


@dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Agent ranking stability under resampling observations with replacement (paper Table 3).

    Attributes
    ----------
    agent_ids
        Agents in first-appearance order; every array below is indexed the same way.
    rounds, seed
        Number of resamples and the seed that reproduces them.
    full_rank
        Ranks on the full data.
    mean_rank, p_rank1
        Mean rank and probability of ranking first across rounds.
    rank_low, rank_high
        2.5 % and 97.5 % quantiles of each agent's rank (inverted-CDF definition, so always a rank).
    rank_distribution
        ``[agent, r - 1]`` = fraction of rounds in which the agent had rank ``r``.
    mean_kendall_tau
        Mean Kendall's :math:`\\tau` between each round's ranking and the full-data ranking (NaN for fewer
        than two agents).
    kendall_tau_quantiles
        2.5 %, 50 % and 97.5 % quantiles of that :math:`\\tau`.
    """

    agent_ids: np.ndarray
    rounds: int
    seed: int
    full_rank: np.ndarray
    mean_rank: np.ndarray
    p_rank1: np.ndarray
    rank_low: np.ndarray
    rank_high: np.ndarray
    rank_distribution: np.ndarray
    mean_kendall_tau: float
    kendall_tau_quantiles: tuple[float, float, float]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable summary keyed by agent id."""
        return {
            "rounds": self.rounds,
            "seed": self.seed,
            "mean_kendall_tau": _json_float(self.mean_kendall_tau),
            "kendall_tau_quantiles": [_json_float(v) for v in self.kendall_tau_quantiles],
            "agents": [
                {
                    "agent_id": str(agent),
                    "full_rank": int(self.full_rank[i]),
                    "mean_rank": float(self.mean_rank[i]),
                    "p_rank1": float(self.p_rank1[i]),
                    "rank_interval": [int(self.rank_low[i]), int(self.rank_high[i])],
                    "rank_distribution": self.rank_distribution[i].tolist(),
                }
                for i, agent in enumerate(self.agent_ids)
            ],
        }


def _json_float(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _rank_quantile(distribution: np.ndarray, q: float) -> np.ndarray:
    """Return the smallest rank whose cumulative frequency reaches ``q`` (inverted-CDF quantile)."""
    cdf = np.cumsum(distribution, axis=1)
    return np.argmax(cdf >= q - 1e-12, axis=1) + 1



@dataclass(frozen=True, eq=False)
class LeaveOneOutResult:
    """Agent rankings recomputed with each group (a human, or a task) left out in turn (paper Table 4).

    Attributes
    ----------
    agent_ids, group_ids
        Agents and groups in first-appearance order.
    full_rank
        Ranks on the full data.
    ranks
        ``[g, a]``: rank of agent ``a`` with group ``g`` left out.
    mean_rank
        Mean of ``ranks`` over groups.
    changed_groups
        Groups whose removal changes the full-data ranking.
    """

    agent_ids: np.ndarray
    group_ids: np.ndarray
    full_rank: np.ndarray
    ranks: np.ndarray
    mean_rank: np.ndarray
    changed_groups: list[str]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable summary keyed by agent id."""
        return {
            "n_groups": int(self.group_ids.shape[0]),
            "changed_groups": list(self.changed_groups),
            "agents": [
                {
                    "agent_id": str(agent),
                    "full_rank": int(self.full_rank[i]),
                    "mean_rank": float(self.mean_rank[i]),
                    "min_rank": int(self.ranks[:, i].min()),
                    "max_rank": int(self.ranks[:, i].max()),
                }
                for i, agent in enumerate(self.agent_ids)
            ],
        }


# --------------------------------------------------------------------------------------------------------
# Connectivity
# --------------------------------------------------------------------------------------------------------



def _int_arg(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _leave_group_out(design: Any, group: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Return agent means and variances with each group's observations left out, by exact Schur updates.

    Leaving out a group changes the agents' Schur complement only through the humans it touches:

    .. math::

        S_{-g} = S - \\mathrm{diag}(\\Delta\\lambda_{A,g}) + \\sum_{h \\in g}\\Big(\\frac{b_h b_h^\\top}{d_h}
        - \\frac{b'_h b'^\\top_h}{d'_h}\\Big), \\qquad
        r_{-g} = r - \\Delta\\eta_{A,g} + \\sum_{h \\in g}\\Big(\\frac{b_h \\eta_h}{d_h}
        - \\frac{b'_h \\eta'_h}{d'_h}\\Big),

    with :math:`b'_h, d'_h, \\eta'_h` the human's coupling, precision and information without the group's
    observations. Each update has rank at most twice the agents the group touches; the small
    agents x agents systems are then solved as one batch -- one pass over the data in all, not one refit
    per group. Observations with group -1 are never left out.
    """
    n_a = design.n_agents
    sol = solve_bipartite(
        design.agent_idx,
        design.human_idx,
        design.w,
        design.wy,
        design.prior_precision_agents,
        design.prior_eta_agents,
        design.prior_precision_humans,
        design.prior_eta_humans,
        human_variance=False,
    )
    chol = sol.schur_cholesky
    schur = chol @ chol.T
    rhs = schur @ sol.mu_agents
    lambda_h = sol.lambda_humans
    eta_h = design.prior_eta_humans + np.bincount(design.human_idx, weights=design.wy, minlength=design.n_humans)
    dense_b = sol.couplings  # H x A
    keep = group >= 0
    g_o, h_o, a_o = group[keep], design.human_idx[keep], design.agent_idx[keep]
    w_o, wy_o = design.w[keep], design.wy[keep]
    # (group, human) pairs and their removed weight per agent.
    gh_key = g_o.astype(np.int64) * design.n_humans + h_o
    gh_uniq, gh_inv = np.unique(gh_key, return_inverse=True)
    gh_inv = gh_inv.reshape(-1)
    gh_group = gh_uniq // design.n_humans
    gh_human = gh_uniq % design.n_humans
    n_gh = gh_uniq.shape[0]
    removed_w = np.bincount(gh_inv, weights=w_o, minlength=n_gh)
    removed_wy = np.bincount(gh_inv, weights=wy_o, minlength=n_gh)
    delta_lambda = np.bincount(g_o * n_a + a_o, weights=w_o, minlength=n_groups * n_a).reshape(n_groups, n_a)
    delta_eta = np.bincount(g_o * n_a + a_o, weights=wy_o, minlength=n_groups * n_a).reshape(n_groups, n_a)
    mu = np.empty((n_groups, n_a))
    var = np.empty((n_groups, n_a))
    # gh pairs are sorted by group: process whole groups in chunks that keep the dense blocks small.
    bounds = np.searchsorted(gh_group, np.arange(n_groups + 1))
    per_chunk = max(1, (1 << 22) // max(n_a * n_a, 1))
    g_start = 0
    while g_start < n_groups:
        g_stop = g_start + 1
        while g_stop < n_groups and bounds[g_stop + 1] - bounds[g_start] <= per_chunk:
            g_stop += 1
        lo, hi = bounds[g_start], bounds[g_stop]
        sel = slice(lo, hi)
        humans = gh_human[sel]
        b = dense_b[humans].toarray()
        # Removed coupling per (gh pair, agent).
        rows = (gh_inv >= lo) & (gh_inv < hi)
        b_removed = np.zeros((hi - lo) * n_a)
        np.add.at(b_removed, (gh_inv[rows] - lo) * n_a + a_o[rows], w_o[rows])
        b_new = b - b_removed.reshape(hi - lo, n_a)
        d_old = lambda_h[humans]
        d_new = d_old - removed_w[sel]
        e_old = eta_h[humans]
        e_new = e_old - removed_wy[sel]
        contrib = np.einsum("pi,pj->pij", b, b / d_old[:, None])
        contrib -= np.einsum("pi,pj->pij", b_new, b_new / d_new[:, None])
        rhs_contrib = b * (e_old / d_old)[:, None] - b_new * (e_new / d_new)[:, None]
        local = gh_group[sel] - g_start
        n_local = g_stop - g_start
        delta_s = np.zeros((n_local, n_a, n_a))
        np.add.at(delta_s, local, contrib)
        delta_r = np.zeros((n_local, n_a))
        np.add.at(delta_r, local, rhs_contrib)
        systems = schur[None] + delta_s
        diag = np.arange(n_a)
        systems[:, diag, diag] -= delta_lambda[g_start:g_stop]
        rhs_g = rhs[None] - delta_eta[g_start:g_stop] + delta_r
        inv = np.linalg.inv(systems)
        mu[g_start:g_stop] = np.einsum("gij,gj->gi", inv, rhs_g)
        var[g_start:g_stop] = np.diagonal(inv, axis1=1, axis2=2)
        g_start = g_stop
    return mu, var


class _TaskRounds:
    """The agents' exact posterior of the task model under re-weighted observations, hyperparameters fixed.

    The task model is no longer bipartite, but the participants still form a diagonal block: for observation
    multipliers :math:`m` (a bootstrap count, or 0 for an observation left out) every sum is linear in
    :math:`m_o w_o`, so a batch of rounds is a few sparse products with fixed incidence matrices:
    the core (agents + tasks) Gram, the per-(participant, core column) couplings :math:`b_h`, and
    :math:`\\sum_h b_h b_h^\\top/d_h` gathered over each participant's pairs of core columns. The core
    systems :math:`S = G + \\mathrm{diag}(\\text{prior}) - \\sum_h b_h b_h^\\top/d_h` are then solved as one
    batch for the agents' block of :math:`S^{-1}` and their means. Units are the score scale: ``design.w``
    is :math:`\\omega/\\hat\\beta^2`, participants have precision :math:`1/\\hat\\sigma_H^2`, tasks
    :math:`1/\\hat\\sigma_T^2`, agents the flat prior of ``fit.config``.
    """

    def __init__(self, design: Any, task_code: np.ndarray, n_tasks: int, sigma_task: float) -> None:
        n, n_a, n_h = design.n_obs, design.n_agents, design.n_humans
        k = n_a + n_tasks
        self.design, self.n, self.k = design, n, k
        agent = design.agent_idx.astype(np.int64)
        human = design.human_idx.astype(np.int64)
        has_task = task_code >= 0
        task_col = np.where(has_task, task_code + n_a, -1)
        obs = np.arange(n)
        t_obs, t_col = obs[has_task], task_col[has_task]
        t_agent = agent[has_task]
        ones = np.ones
        # Core Gram cells per observation: (a, a), and (a, t), (t, a), (t, t) when it names a task.
        g_rows = np.concatenate([obs, t_obs, t_obs, t_obs])
        g_cols = np.concatenate([agent * k + agent, t_agent * k + t_col, t_col * k + t_agent, t_col * k + t_col])
        self.gram_map = scipy.sparse.csr_matrix((ones(g_rows.shape[0]), (g_cols, g_rows)), shape=(k * k, n))
        c_rows = np.concatenate([obs, t_obs])
        c_cols = np.concatenate([agent, t_col])
        self.core_map = scipy.sparse.csr_matrix((ones(c_rows.shape[0]), (c_cols, c_rows)), shape=(k, n))
        self.human_map = scipy.sparse.csr_matrix((ones(n), (human, obs)), shape=(n_h, n))
        # (participant, core column) pairs, sorted by participant.
        pair_key = human[c_rows] * k + c_cols
        keys, pair_of_entry = np.unique(pair_key, return_inverse=True)
        pair_of_entry = pair_of_entry.reshape(-1)
        n_pairs = keys.shape[0]
        self.pair_map = scipy.sparse.csr_matrix((ones(c_rows.shape[0]), (pair_of_entry, c_rows)), shape=(n_pairs, n))
        pair_human, pair_col = keys // k, keys % k
        self.pair_human = pair_human
        self.pair_to_core = scipy.sparse.csr_matrix((ones(n_pairs), (pair_col, np.arange(n_pairs))), shape=(k, n_pairs))
        # All ordered pairs of a participant's pairs: sum_h b_h b_h^T / d_h gathered cell by cell.
        sizes = np.bincount(pair_human, minlength=n_h)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        reps = sizes[pair_human]
        first = np.repeat(np.arange(n_pairs), reps)
        offsets = np.arange(first.shape[0]) - np.repeat(np.cumsum(reps) - reps, reps)
        second = starts[pair_human[first]] + offsets
        self.pp_first, self.pp_second, self.pp_human = first, second, pair_human[first]
        self.pp_to_cell = scipy.sparse.csr_matrix(
            (ones(first.shape[0]), (pair_col[first] * k + pair_col[second], np.arange(first.shape[0]))),
            shape=(k * k, first.shape[0]),
        )
        prior = np.empty(k)
        prior[:n_a] = design.prior_precision_agents
        prior[n_a:] = 1.0 / sigma_task**2
        self.prior = prior
        self.prior_eta = np.concatenate([design.prior_eta_agents, np.zeros(n_tasks)])
        width = max(n, first.shape[0], k * k, 1)
        self.batch = max(1, (1 << 22) // width)

    def solve(self, mult: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return agent means and variances for rounds of observation multipliers (one row per round)."""
        design, k, n_a = self.design, self.k, self.design.n_agents
        rounds = mult.shape[0]
        u = (mult * design.w).T
        uy = (mult * design.wy).T
        gram = (self.gram_map @ u).T
        r = (self.core_map @ uy).T
        d = design.prior_precision_humans + (self.human_map @ u).T
        eta_h = design.prior_eta_humans + (self.human_map @ uy).T
        bw = (self.pair_map @ u).T
        vals = bw[:, self.pp_first] * bw[:, self.pp_second] / d[:, self.pp_human]
        schur = (gram - (self.pp_to_cell @ vals.T).T).reshape(rounds, k, k)
        diag = np.arange(k)
        schur[:, diag, diag] += self.prior
        rhs = r + self.prior_eta - (self.pair_to_core @ (bw * (eta_h / d)[:, self.pair_human]).T).T
        targets = np.zeros((rounds, k, n_a + 1))
        targets[:, np.arange(n_a), np.arange(n_a)] = 1.0
        targets[:, :, n_a] = rhs
        sol = np.linalg.solve(schur, targets)
        return sol[:, :n_a, n_a], np.diagonal(sol[:, :n_a, :n_a], axis1=1, axis2=2).copy()

    def leave_out(self, group: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
        """Return agent means and variances with each group's observations left out (group -1: never)."""
        n_a = self.design.n_agents
        mu = np.empty((n_groups, n_a))
        var = np.empty((n_groups, n_a))
        keep = np.flatnonzero(group >= 0)
        order = keep[np.argsort(group[keep], kind="stable")]
        bounds = np.searchsorted(group[order], np.arange(n_groups + 1))
        for start in range(0, n_groups, self.batch):
            stop = min(start + self.batch, n_groups)
            mult = np.ones((stop - start, self.n))
            rows = order[bounds[start] : bounds[stop]]
            mult[group[rows] - start, rows] = 0.0
            mu[start:stop], var[start:stop] = self.solve(mult)
        return mu, var


def _loo_result(
    design: Any,
    group: np.ndarray,
    group_ids: np.ndarray,
    full_rank: np.ndarray,
    task_rounds: _TaskRounds | None = None,
) -> Any:
    n_groups = group_ids.shape[0]
    if n_groups == 0:
        ranks = np.zeros((0, design.n_agents), dtype=np.int64)
    else:
        if task_rounds is None:
            mu, var = _leave_group_out(design, group, n_groups)
        else:
            mu, var = task_rounds.leave_out(group, n_groups)
        ranks = rank_agents(mu, np.sqrt(np.clip(var, 0.0, None)), design.k, design.id_order)
    changed = np.flatnonzero(np.any(ranks != full_rank, axis=1)) if n_groups else np.zeros(0, dtype=np.int64)
    return LeaveOneOutResult(
        agent_ids=design.agent_ids,
        group_ids=group_ids,
        full_rank=full_rank,
        ranks=ranks,
        mean_rank=ranks.mean(axis=0) if n_groups else np.full(design.n_agents, np.nan),
        changed_groups=[str(group_ids[g]) for g in changed],
    )


class _ObservationRounds:
    """Batched Schur systems of the bipartite model for rounds of observation draws (the plain bootstrap).

    A round only needs, per (participant, agent) pair, the count-weighted sums of ``w`` and ``w y``; the
    observations are laid out sorted by (participant, agent) once, and each round is one compiled pass
    (:func:`rating.resample_kernels.observation_round_systems`) from its draws to the agents' system.
    """

    def __init__(self, design: Any, batch: int) -> None:
        n, n_a, n_h = design.n_obs, design.n_agents, design.n_humans
        self.design, self.n, self.n_a, self.n_h = design, n, n_a, n_h
        human = design.human_idx.astype(np.int64)
        agent = design.agent_idx.astype(np.int64)
        pair_keys, obs_pair = np.unique(human * n_a + agent, return_inverse=True)
        pair_human, pair_agent = pair_keys // n_a, pair_keys % n_a
        # Pairs ordered by (participant's number of pairs, participant, agent): the compiled loop's trip
        # counts then change rarely, which the branch predictor rewards.
        pairs_of_human = np.bincount(pair_human, minlength=n_h)
        order = np.lexsort((pair_agent, pair_human, pairs_of_human[pair_human]))
        rank = np.empty(order.shape[0], dtype=np.int64)
        rank[order] = np.arange(order.shape[0])
        small = np.int32 if max(order.shape[0], n) < 2**31 else np.int64
        self.obs_pair = rank[obs_pair.reshape(-1)].astype(small)
        self.obs_w_wy = np.ascontiguousarray(np.stack([design.w, design.wy], axis=1), dtype=np.float64)
        self.pair_agent = pair_agent[order].astype(small)
        humans_in_order = pair_human[order]
        first = np.flatnonzero(np.r_[True, humans_in_order[1:] != humans_in_order[:-1]]) if n else np.zeros(0, int)
        self.human_pair_start = np.append(first, order.shape[0]).astype(np.int64)
        who = humans_in_order[first]  # participants without observations add only their prior: left out
        prior_h = np.broadcast_to(design.prior_precision_humans, (n_h,))[who]
        eta_h = np.broadcast_to(design.prior_eta_humans, (n_h,))[who]
        self.prior_h = np.ascontiguousarray(prior_h, dtype=np.float64)
        self.eta_h = np.ascontiguousarray(eta_h, dtype=np.float64)
        self.batch = batch

    def systems(self, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return the agents' Schur complements and right-hand sides for rows of observation draws."""
        from rating.resample_kernels import observation_round_systems

        design, n_a = self.design, self.n_a
        size = draws.shape[0]
        schur = np.empty((size, n_a, n_a))
        rhs = np.empty((size, n_a))
        observation_round_systems(
            np.ascontiguousarray(draws), self.obs_pair, self.obs_w_wy, self.pair_agent, self.human_pair_start,
            self.prior_h, self.eta_h, schur, rhs,
        )
        diag = np.arange(n_a)
        schur[:, diag, diag] += design.prior_precision_agents
        rhs += design.prior_eta_agents
        return schur, rhs


_OBS_BATCH = 16


def _count_rows(draws: np.ndarray, units: int) -> np.ndarray:
    """Return float counts (rows x units) of each row of draws.

    One :func:`numpy.bincount` per row keeps the histogram in cache (several times faster than one
    bincount over offset keys of the whole batch).
    """
    out = np.empty((draws.shape[0], units))
    for r in range(draws.shape[0]):
        out[r] = np.bincount(draws[r], minlength=units)
    return out


def _bootstrap(
    design: Any,
    full_rank: np.ndarray,
    *,
    rounds: int,
    seed: int,
    cluster: str | None,
    progress: Progress | None,
    task_rounds: _TaskRounds | None = None,
) -> Any:
    """Resample observations (or whole participants with ``cluster="human"``) and re-rank the agents.

    Each round is a count vector over observations; a participant drawn ``c`` times contributes every one
    of their observations ``c`` times. A round re-weights the per-(participant, agent) sums, so a batch of
    rounds is a dense (rounds x participants x agents) coupling tensor (:class:`_ObservationRounds`); its
    Schur complements :math:`\\mathrm{diag}(\\lambda_A) - B^\\top D^{-1} B` are batched matrix products.
    The small agent systems of all rounds are kept and solved, ranked and compared at the end in a few
    large batches. An agent or participant absent from a round keeps only its prior there.
    With ``task_rounds`` (the task model) each round's counts become observation multipliers for
    :meth:`_TaskRounds.solve`; the draws are the same for a given seed.
    """
    n, n_a, n_h = design.n_obs, design.n_agents, design.n_humans
    units = n if cluster is None else n_h
    obs_rounds = None
    if task_rounds is not None:
        batch = max(1, min(rounds, task_rounds.batch))
    elif cluster is None:
        batch = max(1, min(rounds, _OBS_BATCH))
        obs_rounds = _ObservationRounds(design, batch)
    else:
        pair_key = design.human_idx.astype(np.int64) * n_a + design.agent_idx
        b0 = np.bincount(pair_key, weights=design.w, minlength=n_h * n_a).reshape(n_h, n_a)
        e0 = np.bincount(pair_key, weights=design.wy, minlength=n_h * n_a).reshape(n_h, n_a)
        outer_flat = np.einsum("hi,hj->hij", b0, b0).reshape(n_h, n_a * n_a)
        human_w = b0.sum(axis=1)
        human_wy = e0.sum(axis=1)
        batch = max(1, min(rounds, (1 << 21) // max(n_h * max(n_a, 4), 1)))
    rng = np.random.default_rng(seed)
    rank_hist = np.zeros(n_a * n_a, dtype=np.int64)
    taus = np.empty(rounds)
    diag = np.arange(n_a)
    # Rounds whose agent systems wait to be solved and ranked in one batch (bounded to ~16 MB).
    pending = max(batch, (1 << 21) // max(n_a * n_a, 1))
    schur = np.empty((pending, n_a, n_a))
    rhs = np.empty((pending, n_a))
    mu = np.empty((pending, n_a))
    var = np.empty((pending, n_a))
    flushed = done = 0

    def flush() -> None:
        m = done - flushed
        if task_rounds is None:
            cov = np.linalg.inv(schur[:m])
            mu[:m] = np.einsum("rij,rj->ri", cov, rhs[:m])
            var[:m] = np.diagonal(cov, axis1=1, axis2=2)
        ranks = rank_agents(mu[:m], np.sqrt(var[:m]), design.k, design.id_order)
        rank_hist[:] += np.bincount((np.arange(n_a) * n_a + ranks - 1).ravel(), minlength=n_a * n_a)
        taus[flushed:done] = _kendall_tau_to(ranks, full_rank)

    while done < rounds:
        size = min(batch, rounds - done, flushed + pending - done)
        # int32 draws are the same numbers as the int64 default for the same seed, and count faster.
        draws = rng.integers(0, units, size=(size, units), dtype=np.int32 if units < 2**31 else np.int64)
        part = slice(done - flushed, done - flushed + size)
        if task_rounds is not None:
            counts = _count_rows(draws, units)
            mu[part], var[part] = task_rounds.solve(counts if cluster is None else counts[:, design.human_idx])
        elif obs_rounds is not None:
            schur[part], rhs[part] = obs_rounds.systems(draws)
        else:
            # A participant drawn c times scales all their sums by c: every round is a few dense products
            # with fixed per-participant matrices, S = diag(prior + C B0) - (C^2 / D) M with M_h = b_h b_h^T.
            counts = _count_rows(draws, units)
            d = design.prior_precision_humans + counts * human_w
            coef = counts / d
            eta_h = design.prior_eta_humans + counts * human_wy
            sch = -((counts * coef) @ outer_flat).reshape(size, n_a, n_a)
            sch[:, diag, diag] += design.prior_precision_agents + counts @ b0
            schur[part] = sch
            rhs[part] = design.prior_eta_agents + counts @ e0 - (coef * eta_h) @ b0
        done += size
        if done == rounds or done - flushed == pending:
            flush()
            flushed = done
        if progress is not None:
            progress(done, rounds)
    return _bootstrap_result(design, full_rank, rounds, seed, rank_hist, taus)


def _bootstrap_result(
    design: Any, full_rank: np.ndarray, rounds: int, seed: int, rank_hist: np.ndarray, taus: np.ndarray
) -> BootstrapResult:
    """Summarise the rounds' rank histogram and Kendall taus to the full-data ranking."""
    n_a = design.n_agents
    distribution = rank_hist.reshape(n_a, n_a) / rounds
    if n_a >= 2:
        tau_q = tuple(float(v) for v in np.quantile(taus, [0.025, 0.5, 0.975]))
        mean_tau = float(taus.mean())
    else:
        tau_q, mean_tau = (math.nan, math.nan, math.nan), math.nan
    return BootstrapResult(
        agent_ids=design.agent_ids,
        rounds=rounds,
        seed=seed,
        full_rank=full_rank,
        mean_rank=distribution @ np.arange(1, n_a + 1),
        p_rank1=distribution[:, 0].copy(),
        rank_low=_rank_quantile(distribution, 0.025),
        rank_high=_rank_quantile(distribution, 0.975),
        rank_distribution=distribution,
        mean_kendall_tau=mean_tau,
        kendall_tau_quantiles=tau_q,  # type: ignore[arg-type]
    )


def _full_rank(design: _Design, task_rounds: _TaskRounds | None) -> np.ndarray:
    """Return the agents' ranks under the model the resampling runs (variance components held at the fit)."""
    if task_rounds is not None:
        full_mu, full_var = task_rounds.solve(np.ones((1, design.n_obs)))
        return rank_agents(full_mu, np.sqrt(full_var), design.k, design.id_order)[0]
    full = solve_bipartite(
        design.agent_idx, design.human_idx, design.w, design.wy,
        design.prior_precision_agents, design.prior_eta_agents,
        design.prior_precision_humans, design.prior_eta_humans,
        human_variance=False,
    )  # fmt: skip
    return rank_agents(full.mu_agents, np.sqrt(np.diag(full.cov_agents)), design.k, design.id_order)[0]


def _leaderboard_rows(
    fit: Any, spec: ModelSpec, design: _Design, boot: Any, loo_human: Any, loo_task: Any
) -> list[dict[str, Any]]:
    """Return the fitted leaderboard, best first, with each agent's resampled and leave-one-out ranks."""
    sigma = fit.agent_sigma()
    cons = fit.conservative()
    fit_rank = rank_agents(fit.agent_mu, sigma, spec.k, design.id_order)[0]
    rows = []
    for i in np.argsort(fit_rank, kind="stable").tolist():
        rows.append(
            {
                "rank": int(fit_rank[i]),
                "agent_id": str(fit.agent_ids[i]),
                "mu": float(fit.agent_mu[i]),
                "sigma": float(sigma[i]),
                "conservative": float(cons[i]),
                "n": int(fit.agent_n[i]),
                "bootstrap_mean_rank": float(boot.mean_rank[i]),
                "bootstrap_p_rank1": float(boot.p_rank1[i]),
                "bootstrap_rank_interval": [int(boot.rank_low[i]), int(boot.rank_high[i])],
                "loo_human_mean_rank": float(loo_human.mean_rank[i]),
                "loo_task_mean_rank": None if loo_task is None else float(loo_task.mean_rank[i]),
            }
        )
    return rows


def stability(
    agent_ids: Any,
    human_ids: Any,
    scores: Any,
    task_ids: Any = None,
    weights: Any = None,
    *,
    spec: ModelSpec,
    rounds: int = 10_000,
    seed: int = 0,
    cluster: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Return the agent leaderboard of ``spec`` with its stability checks (paper Tables 2-4 shapes).

    The model is fitted once (:func:`fit_model`); the resampling analyses then hold its variance components
    at the fitted values (``fit.config``) and recompute the agents' exact posterior:

    * bootstrap: ``rounds`` resamples of the observations, or of whole participants with
      ``cluster="human"`` (sessions are clustered by worker, so this is the honest resampling unit);
    * leave-one-human-out and leave-one-task-out through exact low-rank updates of the agents' Schur
      complement (:func:`_leave_group_out`). Observations without a task stay in every leave-one-task-out
      fit and never form a "task" of their own; ``task_ids=None`` (or no observation with a task) skips it.

    The ``calibrated_task`` model is resampled exactly with its task effects (:class:`_TaskRounds`).

    ``progress(done, total)`` is called after each bootstrap batch. The output (strict JSON) holds ``model``,
    ``hyper``, ``config``, the counts, ``leaderboard``, ``bootstrap``, ``leave_one_human_out``,
    ``leave_one_task_out``, ``pairwise`` and ``connectivity``.
    """
    spec = checked_spec(spec)
    rounds = _int_arg(rounds, "rounds", 1)
    seed = _int_arg(seed, "seed", 0)
    if cluster not in (None, "human"):
        raise ValueError(f"cluster must be None or 'human', got {cluster!r}")
    fit = fit_model(agent_ids, human_ids, scores, task_ids, spec=spec, weights=weights)
    design = _prepare(agent_ids, human_ids, scores, weights, fit.config)
    n = design.n_obs
    if task_ids is not None:
        task_code, task_uniq = code_ids(task_ids, "task_ids", n, optional=True)
    else:
        task_code, task_uniq = None, None
    # The task model's variance components held at the fit; a task spread estimated at zero leaves the
    # calibrated model's bipartite structure, resampled as such.
    task_rounds = None
    if spec.kind == "calibrated_task" and task_code is not None and task_uniq is not None:
        sigma_task = float(fit.hyper["sigma_task"]["estimate"])
        if sigma_task > 0 and not fit.hyper["sigma_task"]["at_zero"]:
            task_rounds = _TaskRounds(design, task_code, int(task_uniq.size), sigma_task)
    full_rank = _full_rank(design, task_rounds)
    # Every BLAS call of the resampling works on small or skinny matrices, where extra threads mostly wait on
    # each other (measured 3x slower with two threads on a busy two-core machine).
    with threadpool_limits(limits=1, user_api="blas"):
        boot = _bootstrap(
            design, full_rank, rounds=rounds, seed=seed, cluster=cluster, progress=progress, task_rounds=task_rounds
        )
        loo_human = _loo_result(design, design.human_idx, design.human_ids.astype(str), full_rank, task_rounds)
        loo_task = None
        if task_code is not None and task_uniq is not None and task_uniq.size:
            loo_task = _loo_result(design, task_code, task_uniq, full_rank, task_rounds)
    rows = _leaderboard_rows(fit, spec, design, boot, loo_human, loo_task)
    report = {
        "model": spec.to_dict(),
        "hyper": fit.hyper,
        "config": fit.config.to_dict(),
        "n_observations": n,
        "n_agents": design.n_agents,
        "n_humans": design.n_humans,
        "n_tasks": None if task_uniq is None else int(task_uniq.size),
        "leaderboard": rows,
        "bootstrap": dict(boot.to_dict(), cluster=cluster),
        "leave_one_human_out": loo_human.to_dict(),
        "leave_one_task_out": None if loo_task is None else loo_task.to_dict(),
        "pairwise": {
            "agent_ids": [str(a) for a in fit.agent_ids],
            "prob_greater": fit.prob_greater().tolist(),
        },
        "connectivity": connectivity(agent_ids, human_ids).to_dict(),
    }
    return json_safe(report)
