"""Ranking stability building blocks for the CollabSkill rating model (paper §6, Tables 2-4).

The study's stability report itself is :func:`rating.fit.stability` (reached through
:func:`rating.selectors.study_stability_report`); this module holds what it is made of: the paper ranking,
the result tables, the paper-model bootstrap and the connectivity check.

Everything here takes plain observation arrays -- agent ids, human ids, scores, optional weights -- plus a
:class:`~rating.engine.RatingConfig`, and returns arrays or JSON-serialisable dicts.
Agents are ranked the way the paper ranks them: by the conservative score :math:`\\mu - k\\sigma`, with
ties broken by higher :math:`\\mu`, then by agent id.

The bootstrap solves many perturbed copies of the same model at once: a perturbation only re-weights
observations, so each round is a count vector ``c`` over observations, and every per-round quantity of the
Schur solve (:func:`rating.engine.solve_bipartite`) is a matrix product of the count matrix with fixed
incidence matrices. The agents x agents systems are then solved as one batch.

Pure numpy/scipy; no Django.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse
from scipy.sparse.csgraph import connected_components

from rating.engine import (
    RatingConfig,
    _finite_array,
    _id_array,
    _weight_array,
    conservative_score,
    solve_bipartite,
)

__all__ = [
    "BootstrapResult",
    "Connectivity",
    "LeaveOneOutResult",
    "bootstrap_rankings",
    "connectivity",
    "rank_agents",
]

ProgressCallback = Callable[[int, int], None]

# Floats per intermediate (rounds x columns) array in a batch: ~2 MB keeps a batch in cache, measured
# ~2x faster than 32 MB batches at paper scale.
_BATCH_ELEMENTS = 1 << 18


# --------------------------------------------------------------------------------------------------------
# Observation preparation
# --------------------------------------------------------------------------------------------------------


def _first_appearance_codes(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (codes, unique ids) numbering ids by first appearance, like :class:`SkillModel` does."""
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object)
    uniq, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    code_of_sorted = np.empty(uniq.size, dtype=np.int64)
    code_of_sorted[order] = np.arange(uniq.size)
    return code_of_sorted[inverse.reshape(-1)], uniq[order].astype(object)


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


def _reject_blank_ids(ids: np.ndarray, name: str) -> None:
    blank = np.flatnonzero(np.char.str_len(np.char.strip(ids)) == 0) if ids.size else ids
    if blank.size:
        raise ValueError(f"{name} contains an empty id at index {int(blank[0])}")


def _prepare(agent_ids: Any, human_ids: Any, scores: Any, weights: Any, config: RatingConfig | None) -> _Design:
    config = RatingConfig() if config is None else config
    if not isinstance(config, RatingConfig):
        raise ValueError(f"config must be a RatingConfig, got {type(config).__name__}")
    agents = _id_array(agent_ids, "agent_ids")
    n = agents.shape[0]
    humans = _id_array(human_ids, "human_ids")
    if humans.shape[0] != n:
        raise ValueError(f"human_ids has {humans.shape[0]} entries but agent_ids has {n}")
    if n == 0:
        raise ValueError("agent_ids: at least one observation is required")
    _reject_blank_ids(agents, "agent_ids")
    _reject_blank_ids(humans, "human_ids")
    y = _finite_array(scores, "scores", n)
    omega = _weight_array(weights, "weights", n)
    agent_idx, agent_uniq = _first_appearance_codes(agents)
    human_idx, human_uniq = _first_appearance_codes(humans)
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


# --------------------------------------------------------------------------------------------------------
# Ranking
# --------------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------------
# Batched agent posterior under re-weighted observations
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Incidence:
    """Fixed sparse maps from observations to entities and pairs, transposed for sparse @ dense products."""

    obs_to_agent_t: scipy.sparse.csr_matrix  # A x n
    obs_to_human_t: scipy.sparse.csr_matrix  # H x n
    obs_to_pair_t: scipy.sparse.csr_matrix  # P x n
    pair_human: np.ndarray  # P
    pair_to_agent_t: scipy.sparse.csr_matrix  # A x P
    # Pairs of pairs sharing a human (both orders, including a pair with itself): each contributes
    # b_p b_q / d_h to the Schur entry (agent(p), agent(q)).
    pp_first: np.ndarray
    pp_second: np.ndarray
    pp_human: np.ndarray
    pp_to_schur_t: scipy.sparse.csr_matrix  # A*A x Q


def _incidence(design: _Design) -> _Incidence:
    n, n_a, n_h = design.n_obs, design.n_agents, design.n_humans
    obs = np.arange(n)
    ones = np.ones(n)

    def transposed(cols: np.ndarray, size: int) -> scipy.sparse.csr_matrix:
        return scipy.sparse.csr_matrix((ones, (cols, obs)), shape=(size, n))

    pair_key = design.human_idx * n_a + design.agent_idx
    pair_keys, obs_pair = np.unique(pair_key, return_inverse=True)
    obs_pair = obs_pair.reshape(-1)
    n_pairs = pair_keys.shape[0]
    pair_human, pair_agent = pair_keys // n_a, pair_keys % n_a
    # pair_keys are sorted by human, so each human's pairs are one contiguous run.
    starts = np.searchsorted(pair_human, np.arange(n_h))
    sizes = np.bincount(pair_human, minlength=n_h)
    per_pair_size = sizes[pair_human]
    first = np.repeat(np.arange(n_pairs), per_pair_size)
    offsets = np.arange(first.shape[0]) - np.repeat(np.cumsum(per_pair_size) - per_pair_size, per_pair_size)
    second = starts[pair_human[first]] + offsets
    schur_cell = pair_agent[first] * n_a + pair_agent[second]
    n_q = first.shape[0]
    return _Incidence(
        obs_to_agent_t=transposed(design.agent_idx, n_a),
        obs_to_human_t=transposed(design.human_idx, n_h),
        obs_to_pair_t=transposed(obs_pair, n_pairs),
        pair_human=pair_human,
        pair_to_agent_t=scipy.sparse.csr_matrix(
            (np.ones(n_pairs), (pair_agent, np.arange(n_pairs))), shape=(n_a, n_pairs)
        ),
        pp_first=first,
        pp_second=second,
        pp_human=pair_human[first],
        pp_to_schur_t=scipy.sparse.csr_matrix((np.ones(n_q), (schur_cell, np.arange(n_q))), shape=(n_a * n_a, n_q)),
    )


def _batch_rows(design: _Design, inc: _Incidence) -> int:
    widest = max(design.n_obs, design.n_humans, inc.pp_first.shape[0], design.n_agents**2, 1)
    return max(1, _BATCH_ELEMENTS // widest)


def _batched_agent_posterior(counts: np.ndarray, design: _Design, inc: _Incidence) -> tuple[np.ndarray, np.ndarray]:
    """Return agent means and variances, one row per row of ``counts`` (observation multiplicities).

    Row ``r`` is the Schur solve of :func:`rating.engine.solve_bipartite` with weights
    :math:`c_{ro} w_o`:

    .. math::

        S_r = \\mathrm{diag}(\\Lambda_{AA,r}) - \\sum_h \\frac{b_{rh} b_{rh}^\\top}{d_{rh}}, \\qquad
        \\mu_{A,r} = S_r^{-1}\\Big(\\eta_{A,r} - \\sum_h \\frac{b_{rh}\\,\\eta_{H,rh}}{d_{rh}}\\Big), \\qquad
        \\sigma^2_{A,r} = \\mathrm{diag}(S_r^{-1}).
    """
    n_rows = counts.shape[0]
    n_a = design.n_agents
    cw = counts * design.w
    cwy = counts * design.wy
    # sparse (k x n) @ dense (n x R) is the cheap orientation; transpose back to rounds-major.
    lambda_a = design.prior_precision_agents + (inc.obs_to_agent_t @ cw.T).T
    eta_a = design.prior_eta_agents + (inc.obs_to_agent_t @ cwy.T).T
    inv_d = 1.0 / (design.prior_precision_humans + (inc.obs_to_human_t @ cw.T).T)
    eta_h = design.prior_eta_humans + (inc.obs_to_human_t @ cwy.T).T
    b = (inc.obs_to_pair_t @ cw.T).T  # R x P: pair couplings (Lambda_HA entries)
    contrib = b[:, inc.pp_first] * b[:, inc.pp_second] * inv_d[:, inc.pp_human]
    schur = -(inc.pp_to_schur_t @ contrib.T).T.reshape(n_rows, n_a, n_a)
    diag = np.arange(n_a)
    schur[:, diag, diag] += lambda_a
    rhs = eta_a - (inc.pair_to_agent_t @ (b * (eta_h * inv_d)[:, inc.pair_human]).T).T
    cov = np.linalg.inv(schur)
    mu = np.einsum("rij,rj->ri", cov, rhs)
    return mu, np.diagonal(cov, axis1=1, axis2=2).copy()


def _full_data_agents(design: _Design) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return (mu, sigma, cov, ranks) of the agents on the full data."""
    solution = solve_bipartite(
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
    sigma = np.sqrt(np.diag(solution.cov_agents))
    ranks = rank_agents(solution.mu_agents, sigma, design.k, design.id_order)[0]
    return solution.mu_agents, sigma, solution.cov_agents, ranks


# --------------------------------------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------------------------------------


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


def bootstrap_rankings(
    agent_ids: Any,
    human_ids: Any,
    scores: Any,
    weights: Any = None,
    config: RatingConfig | None = None,
    *,
    rounds: int = 10_000,
    seed: int = 0,
    progress: ProgressCallback | None = None,
    batch_rounds: int | None = None,
) -> BootstrapResult:
    """Resample observations with replacement and summarise how stable the agent ranking is.

    Each round draws ``n`` observations uniformly with replacement (a multinomial count vector) and recomputes
    the exact agent posterior -- means and :math:`\\sigma` from the diagonal of that round's :math:`S^{-1}` --
    then ranks agents by :math:`\\mu - k\\sigma` as the paper does (§6, Table 3: 10 000 rounds). An agent
    or human absent from a round keeps only its prior in that round. Rounds are solved in vectorised
    batches; results depend only on ``seed``, not on the batch size.

    Parameters
    ----------
    agent_ids, human_ids, scores, weights
        One entry per observation (weights optional, default 1).
    config
        Model hyperparameters (default :class:`RatingConfig`).
    rounds
        Number of bootstrap resamples.
    seed
        Seed of the resampling generator.
    progress
        Called as ``progress(done, total)`` after each batch of rounds.
    batch_rounds
        Rounds per batch (default: sized to keep each intermediate near 32 MB).
    """
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    design = _prepare(agent_ids, human_ids, scores, weights, config)
    inc = _incidence(design)
    _, _, _, full_rank = _full_data_agents(design)
    n, n_a = design.n_obs, design.n_agents
    batch = _batch_rows(design, inc) if batch_rounds is None else int(batch_rounds)
    if batch < 1:
        raise ValueError(f"batch_rounds must be >= 1, got {batch_rounds!r}")
    rng = np.random.default_rng(int(seed))
    rank_hist = np.zeros(n_a * n_a, dtype=np.int64)
    taus = np.empty(rounds)
    done = 0
    while done < rounds:
        size = min(batch, rounds - done)
        # Draw all indices of the batch in one call; the stream is consumed row by row, so any batching
        # of the same seed yields the same resamples.
        draws = rng.integers(0, n, size=(size, n))
        flat = (draws + (np.arange(size) * n)[:, None]).ravel()
        counts = np.bincount(flat, minlength=size * n).reshape(size, n).astype(np.float64)
        mu, var = _batched_agent_posterior(counts, design, inc)
        ranks = rank_agents(mu, np.sqrt(var), design.k, design.id_order)
        rank_hist += np.bincount((np.arange(n_a) * n_a + ranks - 1).ravel(), minlength=n_a * n_a)
        taus[done : done + size] = _kendall_tau_to(ranks, full_rank)
        done += size
        if progress is not None:
            progress(done, rounds)
    distribution = rank_hist.reshape(n_a, n_a) / rounds
    rank_values = np.arange(1, n_a + 1)
    if n_a >= 2:
        tau_q = tuple(float(v) for v in np.quantile(taus, [0.025, 0.5, 0.975]))
        mean_tau = float(taus.mean())
    else:
        tau_q, mean_tau = (math.nan, math.nan, math.nan), math.nan
    return BootstrapResult(
        agent_ids=design.agent_ids,
        rounds=int(rounds),
        seed=int(seed),
        full_rank=full_rank,
        mean_rank=distribution @ rank_values,
        p_rank1=distribution[:, 0].copy(),
        rank_low=_rank_quantile(distribution, 0.025),
        rank_high=_rank_quantile(distribution, 0.975),
        rank_distribution=distribution,
        mean_kendall_tau=mean_tau,
        kendall_tau_quantiles=tau_q,  # type: ignore[arg-type]
    )


# --------------------------------------------------------------------------------------------------------
# Leave one group out
# --------------------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Connectivity:
    """Components of the agent-human graph (paper §4: rankings need agents linked through shared humans).

    Attributes
    ----------
    n_components
        Number of connected components (each holds at least one agent).
    agent_component
        Component number of every agent id.
    components
        Agent ids per component, largest first.
    warning
        Plain-language warning when the agents are not all linked, else ``None``.
    """

    n_components: int
    agent_component: dict[str, int]
    components: list[list[str]]
    warning: str | None

    @property
    def connected(self) -> bool:
        """Return whether every agent is linked to every other through shared humans."""
        return self.n_components <= 1

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable summary."""
        return {
            "connected": self.connected,
            "n_components": self.n_components,
            "agent_component": dict(self.agent_component),
            "components": [list(c) for c in self.components],
            "warning": self.warning,
        }


def connectivity(agent_ids: Any, human_ids: Any) -> Connectivity:
    """Find which agents are compared through shared participants.

    Two agents are comparable when a chain agent - human - agent - ... links them; otherwise the model
    can only separate their skills through the priors, and their relative ranking says nothing.
    """
    agents = _id_array(agent_ids, "agent_ids")
    humans = _id_array(human_ids, "human_ids")
    if humans.shape[0] != agents.shape[0]:
        raise ValueError(f"human_ids has {humans.shape[0]} entries but agent_ids has {agents.shape[0]}")
    _reject_blank_ids(agents, "agent_ids")
    _reject_blank_ids(humans, "human_ids")
    a_idx, a_uniq = _first_appearance_codes(agents)
    h_idx, _ = _first_appearance_codes(humans)
    n_a = a_uniq.shape[0]
    n_nodes = n_a + (int(h_idx.max()) + 1 if h_idx.size else 0)
    graph = scipy.sparse.coo_matrix((np.ones(a_idx.shape[0]), (a_idx, n_a + h_idx)), shape=(n_nodes, n_nodes))
    _, labels = connected_components(graph, directed=False)
    agent_labels = labels[:n_a]
    members: dict[int, list[str]] = {}
    for agent, label in zip(a_uniq.tolist(), agent_labels.tolist(), strict=True):
        members.setdefault(label, []).append(str(agent))
    groups = sorted(members.values(), key=lambda g: (-len(g), g[0]))
    component_of = {agent: number for number, group in enumerate(groups) for agent in group}
    warning = None
    if len(groups) > 1:
        described = "; ".join("{" + ", ".join(group) + "}" for group in groups)
        first, second = groups[0][0], groups[1][0]
        warning = (
            f"The agents fall into {len(groups)} groups that share no participant: {described}. "
            f"For example, {first} and {second} never worked with the same person, even indirectly, so the "
            "model cannot tell their skills apart from the participants' skills; their relative ranking "
            "rests on the priors only. Pair participants across these groups before trusting the order."
        )
    return Connectivity(n_components=len(groups), agent_component=component_of, components=groups, warning=warning)
