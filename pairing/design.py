"""Adaptive pairing and the stopping rule: which agent a worker's next task goes to, and how many more
sessions a study needs before its agent ranking is settled.

The model is the calibrated one (``y = s_A + h_H + eps``): agents' skills ``s`` with a joint Gaussian posterior
``N(mu, Sigma)``, a worker effect ``h ~ N(0, tau_h^2)`` and noise ``eps ~ N(0, sigma^2)``. Everything here is
Gaussian-linear, so what a planned task teaches about the agents does not depend on its (unknown) score.

**Assignment.** A worker's tasks share one unknown worker effect. Augmenting the agents' posterior with that
effect, ``C = blockdiag(Sigma, tau_h^2)`` conditioned on the worker's earlier tasks of the session, a task on
agent ``j`` (design vector ``x_j = e_j + e_h``) shrinks ``C`` by the rank-one term ``C x xᵀ C / (xᵀ C x +
sigma^2)``. The uncertainty that matters is that of the pairwise orders among agents still in contention:
``U(C) = sum_{p<q} w_pq Var(s_p - s_q) = tr(L C)`` with ``L`` the Laplacian of contention weights ``w``.
Its expected reduction is

.. math::

    \\Delta_j = \\frac{g_j^\\top L\\, g_j}{x_j^\\top C x_j + \\sigma^2}, \\qquad g_j = C x_j,

and the next agent is drawn with ``p_j = f / K + (1 - f) \\Delta_j / \\sum_k \\Delta_k`` over the ``K``
eligible agents: the floor ``f / K`` keeps every eligible agent's chance real, and the probability is stored
with the episode so analyses can weight by it. Weights: ``top`` -- ``w_pq = pi_p pi_q`` with ``pi`` the
posterior probability of being the best agent; ``ranking`` -- ``w_pq = min(P(s_p > s_q), P(s_q > s_p))``;
``adjacent`` -- the same, only for neighbours in the current order.

**Stopping rule.** Draw the truth from the current posterior, simulate future workers (arriving one at a
time, ``tasks_per_worker`` tasks each) under a design, update the posterior exactly after each worker and
count the sessions (one session = one task done with one agent) until the criterion -- ``P(the top agent is
identified)``, ``P(the full order is right)`` or ``min P(adjacent pair in the right order)`` -- reaches the
target. Planning starts the same simulation from the prior of assumed spreads.

Pure numpy/scipy (and threadpoolctl, to keep BLAS on one thread in the simulation): no Django, no settings,
no I/O.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import ndtr
from threadpoolctl import threadpool_limits

__all__ = [
    "DESIGN_MODES",
    "GOALS",
    "DesignSummary",
    "Plan",
    "SimulationResult",
    "assignment_probabilities",
    "criterion",
    "design_summary",
    "draw_index",
    "eligible_mask",
    "information_gains",
    "plan_study",
    "prior_state",
    "simulate_sessions",
    "sessions_to_target",
]

DESIGN_MODES: tuple[str, str, str] = ("uniform", "balanced", "adaptive")
GOALS: tuple[str, str, str] = ("top", "ranking", "adjacent")
DEFAULT_FLOOR = 0.25
# Stacks of at least this many cells are split in two halves run on two threads (LAPACK and ufunc loops release
# the GIL; every row is independent, so the result is the same bit for bit).
_SPLIT_CELLS = 200_000
_POOL: ThreadPoolExecutor | None = None
# Designs simulated side by side hold about six (studies x agents x agents) float arrays each: batch them up to
# this many cells per array (~64 MB), one design at a time beyond.
_BATCH_CELLS = 8_000_000


def _check_choice(value: Any, choices: Sequence[str], name: str) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return str(value)


def _check_positive(value: Any, name: str) -> float:
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a positive finite number; got {value!r}")
    return number


def _check_floor(floor: Any) -> float:
    number = float(floor)
    if not 0.0 < number <= 1.0:
        raise ValueError(f"floor must be in (0, 1]; got {floor!r}")
    return number


# --------------------------------------------------------------------------------------------------------
# Contention weights and the ranking criteria (batched over a leading axis)
# --------------------------------------------------------------------------------------------------------


def _pairwise_prob(mu: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """Return P(s_p > s_q) for a stack of posteriors, shape (R, A, A).

    The batched form of ``rating.engine.prob_greater_matrix``, which takes one posterior at a time.
    """
    diag = np.diagonal(cov, axis1=-2, axis2=-1)
    var = diag[..., :, None] + diag[..., None, :] - 2.0 * cov
    var = np.maximum(var, 1e-300)
    probs = ndtr((mu[..., :, None] - mu[..., None, :]) / np.sqrt(var))
    idx = np.arange(mu.shape[-1])
    probs[..., idx, idx] = 0.5
    return probs


def _by_halves(fn: Callable[..., np.ndarray], *stacks: np.ndarray) -> np.ndarray:
    """Return ``fn(*stacks)`` for row-independent ``fn``, computed on two threads for large stacks."""
    global _POOL
    rows = stacks[0].shape[0]
    if rows < 2 or stacks[-1].size < _SPLIT_CELLS or (os.cpu_count() or 1) < 2:
        return fn(*stacks)
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="design")
    half = rows // 2
    first = _POOL.submit(fn, *(s[:half] for s in stacks))
    second = fn(*(s[half:] for s in stacks))
    return np.concatenate([first.result(), second])


def _samples(mu: np.ndarray, cov: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Return posterior draws mu + z Lᵀ for a stack of posteriors, shape (R, M, A)."""
    a = mu.shape[-1]
    chol = np.linalg.cholesky(cov + 1e-10 * np.eye(a) * np.maximum(1.0, np.abs(cov).max()))
    # One BLAS product over the whole stack: (M, A) x (A, R*A), far faster than a batched tiny matmul.
    return mu[:, None, :] + np.tensordot(z, chol, axes=([1], [2])).transpose(1, 0, 2)


def _contention(mu: np.ndarray, cov: np.ndarray, p: np.ndarray | None = None) -> np.ndarray:
    """Return a sampling-free stand-in for P(agent is best): prod_q P(s_p > s_q), normalised, shape (R, A).

    It only shapes the assignment weights (the floor keeps the design sound whatever they are), so a
    deterministic O(A^2) figure that a web request can afford beats a Monte-Carlo one.
    """
    p = _pairwise_prob(mu, cov) if p is None else p.copy()
    idx = np.arange(mu.shape[-1])
    p[..., idx, idx] = 1.0
    log_pi = np.log(np.maximum(p, 1e-300)).sum(axis=-1)
    pi = np.exp(log_pi - log_pi.max(axis=-1, keepdims=True))
    return pi / pi.sum(axis=-1, keepdims=True)


def _weights(mu: np.ndarray, cov: np.ndarray, goal: str, p: np.ndarray | None = None) -> np.ndarray:
    """Return contention weights w_pq (zero diagonal) for a stack of posteriors, shape (R, A, A).

    ``p``, if given, is ``_pairwise_prob(mu, cov)`` already computed (it is not modified).
    """
    a = mu.shape[-1]
    if goal == "top":
        pi = _contention(mu, cov, p)
        w = pi[:, :, None] * pi[:, None, :]
    else:
        p = _pairwise_prob(mu, cov) if p is None else p
        w = np.minimum(p, 1.0 - p)
        if goal == "adjacent":
            order = np.argsort(-mu, axis=-1, kind="stable")
            rank = np.argsort(order, axis=-1)
            w = w * (np.abs(rank[:, :, None] - rank[:, None, :]) == 1)
    idx = np.arange(a)
    w[:, idx, idx] = 0.0
    return w


def _criterion(mu: np.ndarray, cov: np.ndarray, goal: str, z: np.ndarray, target: float | None = None,
               p: np.ndarray | None = None) -> np.ndarray:
    """Return the goal's probability for a stack of posteriors, shape (R,).

    With ``target`` given, rows that provably miss it (a pairwise bound) get that bound instead of a Monte-Carlo
    figure, which is all a stopping check needs and skips most of the sampling. ``p``, if given, is
    ``_pairwise_prob(mu, cov)`` already computed (it is not modified).
    """
    r, a = mu.shape
    if a == 1:
        return np.ones(r)
    p = _pairwise_prob(mu, cov) if p is None else p
    order = np.argsort(-mu, axis=-1, kind="stable")
    rows = np.arange(r)[:, None]
    adjacent = p[rows, order[:, :-1], order[:, 1:]]
    if goal == "adjacent":
        return adjacent.min(axis=-1)
    leader = order[:, 0]
    # P(leader is best) <= min_q P(leader > q); P(order right) <= min over adjacent pairs.
    bound = p[np.arange(r), leader].copy()
    bound[np.arange(r), leader] = 1.0
    bound = bound.min(axis=-1) if goal == "top" else adjacent.min(axis=-1)
    out = bound.copy()
    todo = np.ones(r, dtype=bool) if target is None else bound >= target
    if todo.any():
        draws = _samples(mu[todo], cov[todo], z)
        if goal == "top":
            m = int(todo.sum())
            best = draws.argmax(axis=-1) + a * np.arange(m)[:, None]
            out[todo] = (np.bincount(best.ravel(), minlength=m * a).reshape(m, a) / z.shape[0]).max(axis=-1)
        else:
            ordered = np.take_along_axis(draws, order[todo][:, None, :], axis=-1)
            out[todo] = (np.diff(ordered, axis=-1) < 0).all(axis=-1).mean(axis=-1)
    return out


def _normal_draws(n_draws: int, n_agents: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n_draws, n_agents))


def criterion(mu: Any, cov: Any, *, goal: str = "top", draws: int = 4000, seed: int = 0) -> float:
    """Return P(top agent identified) / P(full order right) / min P(adjacent pair right) for one posterior."""
    goal = _check_choice(goal, GOALS, "goal")
    mu_arr, cov_arr = _check_posterior(mu, cov)
    z = _normal_draws(int(draws), mu_arr.size, seed)
    return float(_criterion(mu_arr[None], cov_arr[None], goal, z)[0])


def _check_posterior(mu: Any, cov: Any) -> tuple[np.ndarray, np.ndarray]:
    mu_arr = np.asarray(mu, dtype=np.float64)
    cov_arr = np.asarray(cov, dtype=np.float64)
    if mu_arr.ndim != 1 or mu_arr.size == 0:
        raise ValueError("mu must be a non-empty vector")
    if cov_arr.shape != (mu_arr.size, mu_arr.size):
        raise ValueError(f"cov must be {mu_arr.size} x {mu_arr.size}; got shape {cov_arr.shape}")
    if not (np.isfinite(mu_arr).all() and np.isfinite(cov_arr).all()):
        raise ValueError("mu and cov must be finite")
    if not np.allclose(cov_arr, cov_arr.T, rtol=1e-8, atol=1e-10):
        raise ValueError("cov must be symmetric")
    return mu_arr, (cov_arr + cov_arr.T) / 2.0


# --------------------------------------------------------------------------------------------------------
# The precomputed summary a web request uses, and one assignment
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class DesignSummary:
    """What a request needs to choose an agent, computed once per posterior snapshot (never in the request)."""

    agent_ids: tuple[str, ...]
    mu: np.ndarray
    cov: np.ndarray
    weights: np.ndarray
    human_sd: float
    noise_sd: float
    goal: str = "top"

    def index(self) -> dict[str, int]:
        return {agent_id: i for i, agent_id in enumerate(self.agent_ids)}

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent_ids": list(self.agent_ids), "mu": self.mu.tolist(), "cov": self.cov.tolist(),
            "weights": self.weights.tolist(), "human_sd": self.human_sd, "noise_sd": self.noise_sd,
            "goal": self.goal,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DesignSummary:
        try:
            return cls(
                agent_ids=tuple(str(a) for a in data["agent_ids"]), mu=np.asarray(data["mu"], dtype=float),
                cov=np.asarray(data["cov"], dtype=float), weights=np.asarray(data["weights"], dtype=float),
                human_sd=float(data["human_sd"]), noise_sd=float(data["noise_sd"]), goal=str(data["goal"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"design summary is malformed: {exc}") from exc


def design_summary(
    agent_ids: Sequence[Any], mu: Any, cov: Any, *, human_sd: float, noise_sd: float, goal: str = "top",
) -> DesignSummary:
    """Return the assignment summary of one posterior (contention weights included), for caching."""
    goal = _check_choice(goal, GOALS, "goal")
    mu_arr, cov_arr = _check_posterior(mu, cov)
    ids = tuple(str(a) for a in agent_ids)
    if len(ids) != mu_arr.size or len(set(ids)) != len(ids):
        raise ValueError("agent_ids must be distinct and match mu")
    weights = _weights(mu_arr[None], cov_arr[None], goal)[0]
    return DesignSummary(ids, mu_arr, cov_arr, weights, _check_positive(human_sd, "human_sd"),
                         _check_positive(noise_sd, "noise_sd"), goal)


def _laplacian(w: np.ndarray) -> np.ndarray:
    lap = -w.copy()
    idx = np.arange(w.shape[-1])
    lap[..., idx, idx] = w.sum(axis=-1)
    return lap


def _augmented(cov: np.ndarray, human_var: float) -> np.ndarray:
    """Return blockdiag(cov, human_var) for a stack of covariances, shape (R, A+1, A+1)."""
    r, a, _ = cov.shape
    c = np.zeros((r, a + 1, a + 1))
    c[:, :a, :a] = cov
    c[:, a, a] = human_var
    return c


def _condition(c: np.ndarray, agent: np.ndarray, noise_var: float) -> np.ndarray:
    """Condition the augmented covariance on one planned task per row (rank-one, score not needed)."""
    rows = np.arange(c.shape[0])
    g = c[rows, :, agent] + c[:, :, -1]
    denom = g[rows, agent] + g[:, -1] + noise_var
    return c - g[:, :, None] * g[:, None, :] / denom[:, None, None]


def _gains(c: np.ndarray, lap: np.ndarray, noise_var: float) -> np.ndarray:
    """Return the expected reduction of tr(L Sigma) from one more task on each agent, shape (R, A)."""
    a = lap.shape[-1]
    g = c[:, :a, :a] + c[:, :a, a][:, :, None]          # column j: C x_j restricted to the agents
    denom = np.diagonal(c[:, :a, :a], axis1=1, axis2=2) + 2.0 * c[:, :a, a] + c[:, a, a][:, None] + noise_var
    return np.maximum((g * (lap @ g)).sum(axis=1), 0.0) / denom


class _WorkerState:
    """A stack of workers' sessions: the cached posterior ``C0 = blockdiag(K0, tau_h^2)`` minus the low-rank
    term ``V Vᵀ`` of the session's planned tasks (``t <= tasks_per_worker`` rows of ``v_a``, ``v_h``).

    With ``w_s = v_a,s + v_h,s 1`` the gain numerators are ``diag(K0 L K0) - 2 sum_s w_s * m_s + sum_su w_s *
    w_u N_su``, ``m_s = v_a,sᵀ L K0`` and ``N = V_aᵀ L V_a``. ``K0 L K0`` comes once per posterior refresh;
    each new ``v_a`` is a row of ``K0`` minus earlier ones, so its ``m`` and ``L v_a`` follow from the cached
    products by the same recursion, and the numerators and denominators are kept as running sums: a task
    costs O(A t) per row, no matrix-vector product, and a gain query O(A).
    """

    def __init__(self, cov: np.ndarray, cov_lap: np.ndarray, klk: np.ndarray, human_var: float,
                 noise_var: float, tasks: int) -> None:
        r, a, _ = cov.shape
        # Rows, not columns, are gathered per task (contiguous): K0 is symmetric and K0 L is (L K0)ᵀ.
        self.k0, self.kl, self.klk = cov, cov_lap, klk
        self.human_var, self.noise_var = human_var, noise_var
        self.numer = np.diagonal(klk, axis1=1, axis2=2).copy()
        self.denom = np.diagonal(cov, axis1=1, axis2=2) + (human_var + noise_var)
        self.v_a = np.zeros((r, tasks, a))
        self.v_h = np.zeros((r, tasks))
        self.w = np.zeros((r, tasks, a))
        self.lv = np.zeros((r, tasks, a))      # rows of L V_a
        self.m = np.zeros((r, tasks, a))       # rows of V_aᵀ L K0
        self.t = 0

    def gains(self) -> np.ndarray:
        return np.maximum(self.numer, 0.0) / self.denom

    def condition(self, agent: np.ndarray) -> None:
        t = self.t
        rows = np.arange(self.k0.shape[0])
        v_a, v_h = self.v_a[:, :t], self.v_h[:, :t]
        x_proj = v_a[rows, :, agent] + v_h                              # Vᵀ x for x = e_agent + e_h
        xp = x_proj[:, None, :]
        col = self.k0[rows, agent] - (xp @ v_a)[:, 0]
        col_h = self.human_var - (v_h * x_proj).sum(axis=1)
        d = np.sqrt(col[rows, agent] + col_h + self.noise_var)
        vt = col / d[:, None]
        vh = col_h / d
        lvt = (self.kl[rows, agent] - (xp @ self.lv[:, :t])[:, 0]) / d[:, None]
        mt = (self.klk[rows, agent] - (xp @ self.m[:, :t])[:, 0]) / d[:, None]
        wt = vt + vh[:, None]
        n_col = (v_a @ lvt[:, :, None])[:, :, 0]                        # N_st, s < t
        cross = (n_col[:, None, :] @ self.w[:, :t])[:, 0]               # sum_s N_st w_s
        n_tt = (vt * lvt).sum(axis=1)
        self.numer += wt * (2.0 * (cross - mt) + n_tt[:, None] * wt)
        self.denom -= vt * (vt + 2.0 * vh[:, None]) + (vh ** 2)[:, None]
        self.v_a[:, t], self.v_h[:, t], self.w[:, t], self.lv[:, t], self.m[:, t] = vt, vh, wt, lvt, mt
        self.t = t + 1


def information_gains(summary: DesignSummary, worker_agents: Sequence[int]) -> np.ndarray:
    """Return each agent's expected reduction of contention-weighted order uncertainty for a worker's next task.

    ``worker_agents`` are the summary indices of the agents of the worker's earlier tasks in this session:
    they carry what is known of this worker (their shared worker effect makes a contrast within the worker
    far cheaper than one across workers).
    """
    c = _augmented(summary.cov[None], summary.human_sd ** 2)
    noise_var = summary.noise_sd ** 2
    for agent in worker_agents:
        c = _condition(c, np.asarray([int(agent)]), noise_var)
    return _gains(c, _laplacian(summary.weights)[None], noise_var)[0]


def eligible_mask(used: Any, *, max_per_worker: int = 1) -> np.ndarray:
    """Return which agents may take the worker's next task.

    ``max_per_worker=1`` is the house rule "a worker's own agents not repeated where possible": only the
    agents this worker has used least. A larger value lets an agent return up to that many times.
    """
    used_arr = np.asarray(used, dtype=np.int64)
    if used_arr.ndim != 1 or used_arr.size == 0:
        raise ValueError("used must be a non-empty vector of counts")
    if int(max_per_worker) < 1:
        raise ValueError(f"max_per_worker must be at least 1; got {max_per_worker!r}")
    return used_arr < max(int(max_per_worker), int(used_arr.min()) + 1)


def _probabilities(mode: str, eligible: np.ndarray, study_counts: np.ndarray, gains: np.ndarray | None,
                   floor: float) -> np.ndarray:
    """Batched assignment probabilities, shape (R, A); rows of ``eligible`` must not be empty."""
    k = eligible.sum(axis=-1, keepdims=True)
    if mode == "uniform":
        return eligible / k
    if mode == "balanced":
        masked = np.where(eligible, study_counts, np.iinfo(np.int64).max)
        ties = eligible & (masked == masked.min(axis=-1, keepdims=True))
        return ties / ties.sum(axis=-1, keepdims=True)
    assert gains is not None
    g = np.where(eligible, gains, 0.0)
    total = g.sum(axis=-1, keepdims=True)
    share = np.where(total > 0, g / np.where(total > 0, total, 1.0), eligible / k)
    return np.where(eligible, floor / k + (1.0 - floor) * share, 0.0)


def assignment_probabilities(
    *, mode: str, used: Any, study_counts: Any = None, gains: Any = None, floor: float = DEFAULT_FLOOR,
    max_per_worker: int = 1,
) -> np.ndarray:
    """Return the probability of each agent taking the worker's next task under a design mode.

    ``uniform``: equal over the eligible agents (the paper). ``balanced``: equal over the eligible agents
    with the fewest study episodes (least-used-first; usually a single agent, probability 1). ``adaptive``:
    ``floor / K`` each plus ``1 - floor`` shared in proportion to the information gains.
    """
    mode = _check_choice(mode, DESIGN_MODES, "mode")
    eligible = eligible_mask(used, max_per_worker=max_per_worker)
    a = eligible.size
    counts = np.zeros(a, dtype=np.int64) if study_counts is None else np.asarray(study_counts, dtype=np.int64)
    if counts.shape != (a,):
        raise ValueError("study_counts must have one count per agent")
    gain_arr = None
    if mode == "adaptive":
        if gains is None:
            raise ValueError("adaptive mode needs the information gains")
        gain_arr = np.asarray(gains, dtype=np.float64)
        if gain_arr.shape != (a,) or not np.isfinite(gain_arr).all():
            raise ValueError("gains must be one finite number per agent")
        gain_arr = gain_arr[None]
    return _probabilities(mode, eligible[None], counts[None], gain_arr, _check_floor(floor))[0]


def draw_index(probabilities: Any, u: float) -> int:
    """Return the index drawn by inverse CDF from one uniform number ``u`` in [0, 1)."""
    p = np.asarray(probabilities, dtype=np.float64)
    cdf = np.cumsum(p)
    index = int(np.searchsorted(cdf, u * cdf[-1], side="right"))
    index = min(index, p.size - 1)
    while p[index] <= 0:            # guard against rounding at the upper end of the CDF
        index -= 1
    return index


# --------------------------------------------------------------------------------------------------------
# Simulating future sessions
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SimulationResult:
    """Per simulated study: sessions until the target (``-1`` if not reached by ``max_sessions``), and the
    state at that moment (or at the cap)."""

    sessions: np.ndarray            # (R,) sessions needed, -1 when censored
    reached: np.ndarray             # (R,) bool
    declared: np.ndarray            # (R,) the agent declared best at the stop
    mu: np.ndarray                  # (R, A) posterior mean at the stop
    sd: np.ndarray                  # (R, A) posterior sd at the stop
    ipw: np.ndarray                 # (R, A) inverse-probability-weighted (Hajek) mean score per agent at the stop
    naive: np.ndarray               # (R, A) plain mean score per agent at the stop
    min_probability: float          # the smallest assignment probability drawn
    max_sessions: int
    extras: dict[str, Any] = field(default_factory=dict)


def prior_state(n_agents: int, *, agent_sd: float, level_mean: float = 50.0, level_sd: float = 20.0
                ) -> tuple[np.ndarray, np.ndarray]:
    """Return the prior (mu, cov) of agents' skills: a common unknown level plus independent agent spreads."""
    if int(n_agents) < 1:
        raise ValueError("n_agents must be at least 1")
    a = int(n_agents)
    cov = _check_positive(agent_sd, "agent_sd") ** 2 * np.eye(a) + _check_positive(level_sd, "level_sd") ** 2
    return np.full(a, float(level_mean)), cov


def simulate_sessions(
    *, mu0: Any, cov0: Any, truth: Any, human_sd: float, noise_sd: float, mode: str, goal: str = "top",
    target: float = 0.95, tasks_per_worker: int = 5, max_per_worker: int = 1, floor: float = DEFAULT_FLOOR,
    max_sessions: int = 10_000, refresh_every: int = 1, draws: int = 1000, seed: int = 0,
    study_counts0: Any = None, progress: Callable[[float], None] | None = None,
) -> SimulationResult:
    """Simulate studies that start at the posterior ``N(mu0, cov0)`` with true skills ``truth`` (R x A).

    Workers arrive one at a time and do ``tasks_per_worker`` tasks, each paired with an agent under ``mode``
    (the worker's effect and the noise are drawn from ``human_sd`` and ``noise_sd``). The posterior used to
    choose agents and to check the stop is refreshed every ``refresh_every`` workers, as snapshots are; the
    worker's own earlier tasks always count. Workers' effects and noise come from a stream that depends only
    on ``seed`` and the worker's number, so designs compared with the same seed face the same people.
    """
    run = _Run(_check_choice(mode, DESIGN_MODES, "mode"), _check_choice(goal, GOALS, "goal"), (goal,),
               int(max_per_worker))
    return _simulate(
        mu0=mu0, cov0=cov0, truth=truth, human_sd=human_sd, noise_sd=noise_sd, runs=[run], target=target,
        tasks_per_worker=tasks_per_worker, floor=floor, max_sessions=max_sessions, refresh_every=refresh_every,
        draws=draws, seed=seed, study_counts0=study_counts0, progress=progress,
    )[0][goal]


@dataclass(frozen=True)
class _Run:
    """One simulated design: its mode, the goal that shapes adaptive weights, the goals whose stop is checked."""

    mode: str
    design_goal: str
    goals: tuple[str, ...]
    max_per_worker: int


def _spans(labels: Sequence[str], size: int) -> list[tuple[str, slice]]:
    """Return (label, rows) for each stretch of equal consecutive labels, each label covering ``size`` rows."""
    out: list[tuple[str, slice]] = []
    for b, label in enumerate(labels):
        if out and out[-1][0] == label:
            out[-1] = (label, slice(out[-1][1].start, (b + 1) * size))
        else:
            out.append((label, slice(b * size, (b + 1) * size)))
    return out


# Every BLAS call here works on a stack of small matrices (A x A per study), where extra threads only wait on
# each other: one thread is faster in wall time and far cheaper in CPU on a shared machine.
@threadpool_limits.wrap(limits=1, user_api="blas")
def _simulate(
    *, mu0: Any, cov0: Any, truth: Any, human_sd: float, noise_sd: float, runs: Sequence[_Run], target: float,
    tasks_per_worker: int, floor: float, max_sessions: int, refresh_every: int, draws: int, seed: int,
    study_counts0: Any, progress: Callable[[float], None] | None,
) -> list[dict[str, SimulationResult]]:
    """Simulate several designs side by side, each ``run`` a block of rows with the same truths and people.

    Per run, every goal of ``run.goals`` gets its own stop and state at the stop; ``run.design_goal`` shapes
    adaptive weights. Each run's result equals that of its own :func:`simulate_sessions` call (each run draws
    its pairings from its own copy of the seeded stream, and all face the same people): batching only shares
    the per-step numpy calls, which cost more than the arithmetic at study sizes.
    """
    if not runs:
        return []
    mu_arr, cov_arr = _check_posterior(mu0, cov0)
    truth_arr = np.atleast_2d(np.asarray(truth, dtype=np.float64))
    r0, a = truth_arr.shape
    if a != mu_arr.size:
        raise ValueError("truth must have one column per agent")
    if not 0.0 < target < 1.0:
        raise ValueError(f"target must be in (0, 1); got {target!r}")
    for run in runs:
        _check_choice(run.mode, DESIGN_MODES, "mode")
        for g in (run.design_goal, *run.goals):
            _check_choice(g, GOALS, "goal")
        if run.max_per_worker < 1:
            raise ValueError(f"max_per_worker must be at least 1; got {run.max_per_worker!r}")
    human_var = _check_positive(human_sd, "human_sd") ** 2
    noise_var = _check_positive(noise_sd, "noise_sd") ** 2
    floor = _check_floor(floor)
    tasks = int(tasks_per_worker)
    if tasks < 1:
        raise ValueError("tasks_per_worker must be at least 1")
    refresh = max(1, int(refresh_every))
    n_runs = len(runs)
    r = r0 * n_runs
    blocks = [slice(b * r0, (b + 1) * r0) for b in range(n_runs)]
    mode_spans = _spans([run.mode for run in runs], r0)
    adaptive = [b for b, run in enumerate(runs) if run.mode == "adaptive"]
    ad_rows = np.concatenate([np.arange(blocks[b].start, blocks[b].stop) for b in adaptive]) if adaptive else None
    ad_sel: slice | np.ndarray | None = ad_rows
    if ad_rows is not None and ad_rows.size == ad_rows[-1] - ad_rows[0] + 1:
        ad_sel = slice(int(ad_rows[0]), int(ad_rows[-1]) + 1)    # contiguous: views, not copies
    limit = np.repeat(np.array([run.max_per_worker for run in runs], dtype=np.int64), r0)[:, None]

    precision = np.broadcast_to(np.linalg.inv(cov_arr), (r, a, a)).copy()
    eta = np.broadcast_to(precision[0] @ mu_arr, (r, a)).copy()
    cov = np.broadcast_to(cov_arr, (r, a, a)).copy()
    mu = np.broadcast_to(mu_arr, (r, a)).copy()
    counts = np.zeros((r, a), dtype=np.int64)
    if study_counts0 is not None:
        counts += np.asarray(study_counts0, dtype=np.int64)
    z = _normal_draws(int(draws), a, seed + 1)
    design_rngs = [np.random.default_rng([seed, 2]) for _ in runs]
    sum_wy, sum_w = np.zeros((r, a)), np.zeros((r, a))
    sum_y, n_y = np.zeros((r, a)), np.zeros((r, a))
    # Flat views of the per-(study, agent) tallies: a task touches one cell per study.
    row_base = np.arange(r) * a
    study_of_row = np.arange(r) % r0       # every run faces the same simulated studies and people
    study_base = study_of_row * a
    truth_flat = np.ascontiguousarray(truth_arr).ravel()[(study_base[:, None] + np.arange(a)).ravel()]
    counts_flat, sum_wy_flat, sum_w_flat = counts.ravel(), sum_wy.ravel(), sum_w.ravel()
    sum_y_flat, n_y_flat = sum_y.ravel(), n_y.ravel()

    tracks = [{g: _StopTrack(r0, a, mu[blk], cov[blk]) for g in dict.fromkeys(run.goals)}
              for run, blk in zip(runs, blocks, strict=True)]
    min_p = np.ones(n_runs)
    c_block = human_var / (noise_var + tasks * human_var)
    max_workers = max(1, -(-int(max_sessions) // tasks))
    rows = np.arange(r)
    chosen = np.zeros((tasks, r), dtype=np.intp)
    precision_flat = precision.reshape(-1)      # a view: precision is updated in place
    prec_base = rows * (a * a)
    diag_idx = np.arange(a)
    cov_lap: np.ndarray | None = None
    klk: np.ndarray | None = None
    # The weights and the stop checks share the pairwise probabilities (adaptive, or several goals).
    share_pairwise = bool(adaptive) or any(len(t) > 1 for t in tracks)
    pairwise: np.ndarray | None = None

    def refresh_weights() -> None:
        nonlocal cov_lap, klk
        assert pairwise is not None and ad_rows is not None
        lap = np.empty((ad_rows.size, a, a))
        for i, b in enumerate(adaptive):
            blk = blocks[b]
            lap[i * r0:(i + 1) * r0] = _laplacian(_weights(mu[blk], cov[blk], runs[b].design_goal, pairwise[blk]))
        cov_ad = cov[ad_sel]
        cov_lap = _by_halves(np.matmul, cov_ad, lap)                      # K0 L = (L K0)ᵀ
        klk = _by_halves(np.matmul, cov_lap, cov_ad)                      # K0 L K0

    def stop_check(done: int) -> None:
        for blk, goal_tracks in zip(blocks, tracks, strict=True):
            for g, track in goal_tracks.items():
                live = ~track.reached
                if not live.any():
                    continue
                value = _criterion(mu[blk][live], cov[blk][live], g, z, target,
                                   None if pairwise is None else pairwise[blk][live])
                hit = np.flatnonzero(live)[value >= target]
                track.sessions[hit] = done
                track.reached[hit] = True
                track.record(hit, mu[blk], cov[blk], sum_wy[blk], sum_w[blk], sum_y[blk], n_y[blk])

    def all_reached() -> bool:
        return all(bool(track.reached.all()) for goal_tracks in tracks for track in goal_tracks.values())

    if share_pairwise:
        pairwise = _by_halves(_pairwise_prob, mu, cov)
    if adaptive:
        refresh_weights()
    stop_check(0)
    worker = 0
    gains = np.zeros((r, a))
    p = np.empty((r, a))
    while worker < max_workers and not all_reached():
        people = np.random.default_rng([seed, 1, worker])
        h = np.asarray(people.normal(0.0, math.sqrt(human_var), r0))[study_of_row]
        # Noise indexed by (agent, k-th use by this worker), not by slot: designs that give a worker the same
        # agents see the same scores, which keeps the comparison between designs paired.
        eps_flat = people.normal(0.0, math.sqrt(noise_var), (r0, a, tasks)).ravel()
        used = np.zeros((r, a), dtype=np.int64)
        used_flat = used.ravel()
        state = None
        if ad_sel is not None and cov_lap is not None and klk is not None:
            state = _WorkerState(cov[ad_sel], cov_lap, klk, human_var, noise_var, tasks)
        y_sum = np.zeros((r, a))
        y_sum_flat = y_sum.ravel()
        for task in range(tasks):
            eligible = used < np.maximum(limit, used.min(axis=1, keepdims=True) + 1)
            if state is not None:
                gains[ad_sel] = state.gains()
            for mode, span in mode_spans:
                p[span] = _probabilities(mode, eligible[span], counts[span], gains[span], floor)
            cdf = np.cumsum(p, axis=1)
            u = np.concatenate([rng.random((r0,)) for rng in design_rngs])[:, None] * cdf[:, -1:]
            choice = np.minimum((cdf <= u).sum(axis=1), a - 1)
            while True:     # rounding at the top of the CDF must never pick an ineligible agent
                bad = p[rows, choice] <= 0
                if not bad.any():
                    break
                choice[bad] -= 1
            flat = row_base + choice      # (row, choice) as flat indices: one gather/scatter per array
            prob = p.ravel()[flat]
            np.minimum(min_p, prob.reshape(n_runs, r0).min(axis=1), out=min_p)
            k_th = used_flat[flat]
            y = truth_flat[flat] + h + eps_flat[(study_base + choice) * tasks + k_th]
            used_flat[flat] = k_th + 1
            counts_flat[flat] += 1
            y_sum_flat[flat] += y
            sum_wy_flat[flat] += y / prob
            sum_w_flat[flat] += 1.0 / prob
            sum_y_flat[flat] += y
            n_y_flat[flat] += 1
            chosen[task] = choice
            if state is not None:
                state.condition(choice[ad_sel])
        # The worker block with the worker effect integrated out: V^-1 = (I - c 11ᵀ) / sigma^2, i.e. precision
        # -= (c / sigma^2) n nᵀ, written only where n is non-zero (the worker's own agents): a repeated index
        # pair is written once with the same value, which is the dense update exactly.
        n = used.astype(float)
        n_chosen = n.ravel()[row_base + chosen]
        cells = prec_base + chosen[:, None, :] * a + chosen[None, :, :]
        precision_flat[cells] -= (n_chosen[:, None, :] * n_chosen[None, :, :]) * (c_block / noise_var)
        precision[:, diag_idx, diag_idx] += n / noise_var
        eta += (y_sum - c_block * n * y_sum.sum(axis=1, keepdims=True)) / noise_var
        worker += 1
        if worker % refresh == 0 or worker == max_workers:
            cov = _by_halves(np.linalg.inv, precision)
            cov = (cov + np.swapaxes(cov, 1, 2)) / 2.0
            mu = (cov @ eta[:, :, None])[:, :, 0]
            if share_pairwise:
                pairwise = _by_halves(_pairwise_prob, mu, cov)
            if adaptive:
                refresh_weights()
            stop_check(worker * tasks)
            if progress is not None:
                progress(min(1.0, worker / max_workers))
    results = []
    for b, (blk, goal_tracks) in enumerate(zip(blocks, tracks, strict=True)):
        out = {}
        for g, track in goal_tracks.items():
            censored = np.flatnonzero(~track.reached)
            if censored.size:
                track.record(censored, mu[blk], cov[blk], sum_wy[blk], sum_w[blk], sum_y[blk], n_y[blk])
            out[g] = SimulationResult(track.sessions, track.reached, track.declared, track.mu, track.sd, track.ipw,
                                      track.naive, float(min_p[b]), max_workers * tasks, {"workers": worker})
        results.append(out)
    return results


class _StopTrack:
    """One goal's stop in a simulation: per study, the sessions at the stop and the state recorded then."""

    def __init__(self, r: int, a: int, mu: np.ndarray, cov: np.ndarray) -> None:
        self.sessions = np.full(r, -1, dtype=np.int64)
        self.reached = np.zeros(r, dtype=bool)
        self.mu, self.sd = mu.copy(), np.sqrt(np.diagonal(cov, axis1=1, axis2=2)).copy()
        self.ipw, self.naive = np.full((r, a), np.nan), np.full((r, a), np.nan)
        self.declared = np.argmax(mu, axis=1)

    def record(self, idx: np.ndarray, mu: np.ndarray, cov: np.ndarray, sum_wy: np.ndarray, sum_w: np.ndarray,
               sum_y: np.ndarray, n_y: np.ndarray) -> None:
        self.mu[idx] = mu[idx]
        self.sd[idx] = np.sqrt(np.diagonal(cov[idx], axis1=1, axis2=2))
        with np.errstate(invalid="ignore", divide="ignore"):
            self.ipw[idx] = sum_wy[idx] / sum_w[idx]
            self.naive[idx] = sum_y[idx] / n_y[idx]
        self.declared[idx] = np.argmax(mu[idx], axis=1)


def _quantiles(sessions: np.ndarray, reached: np.ndarray, max_sessions: int) -> dict[str, Any]:
    """Return the 10/50/90 % quantiles of sessions needed; censored runs count as 'more than the cap'."""
    filled = np.where(reached, sessions, np.iinfo(np.int64).max)
    out: dict[str, Any] = {"n": int(sessions.size), "reached_share": float(reached.mean())}
    for name, q in (("low", 0.10), ("median", 0.50), ("high", 0.90)):
        value = np.quantile(filled, q, method="inverted_cdf")
        out[name] = None if value == np.iinfo(np.int64).max else int(value)
    out["max_sessions"] = int(max_sessions)
    return out


def sessions_to_target(
    mu: Any, cov: Any, *, human_sd: float, noise_sd: float, modes: Sequence[str] = DESIGN_MODES,
    goals: Sequence[str] = ("top",), target: float = 0.95, tasks_per_worker: int = 5, max_per_worker: int = 1,
    floor: float = DEFAULT_FLOOR, futures: int = 100, max_sessions: int = 5_000, refresh_every: int = 1,
    draws: int = 1000, seed: int = 0, study_counts: Any = None,
    progress: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Return, per goal and design mode, how many more sessions (10/50/90 % quantiles over simulated futures)
    until the goal's probability reaches ``target``, starting from the current posterior ``N(mu, cov)``.

    A quantile is ``None`` when that share of futures has not reached the target within ``max_sessions``
    (shown as "more than max_sessions"). Every mode faces the same drawn truths and people.
    ``max_per_worker`` (the study's repeat limit) applies to adaptive mode only, as in live pairing: uniform and
    balanced never repeat an agent while another is unused, and simulating them with repeats would compare the
    adaptive design against a weaker baseline than the one the study would actually run.
    """
    mu_arr, cov_arr = _check_posterior(mu, cov)
    modes = [_check_choice(m, DESIGN_MODES, "mode") for m in modes]
    goals = list(dict.fromkeys(_check_choice(g, GOALS, "goal") for g in goals))
    futures = int(futures)
    if futures < 1:
        raise ValueError("futures must be at least 1")
    z = np.random.default_rng([seed, 0]).standard_normal((futures, mu_arr.size))
    a = mu_arr.size
    chol = np.linalg.cholesky(cov_arr + 1e-10 * np.eye(a) * max(1.0, float(np.abs(cov_arr).max())))
    truth = mu_arr + z @ chol.T
    now = {goal: float(_criterion(mu_arr[None], cov_arr[None], goal, _normal_draws(4 * draws, a, seed + 1))[0])
           for goal in goals}
    result: dict[str, Any] = {"target": target, "futures": futures, "now": now, "goals": {g: {} for g in goals}}
    open_goals = [g for g in goals if now[g] < target]
    for goal in goals:
        if goal not in open_goals:
            for mode in modes:
                result["goals"][goal][mode] = {"n": futures, "reached_share": 1.0, "low": 0, "median": 0, "high": 0,
                                               "max_sessions": int(max_sessions)}
    # One simulated path per (mode, design goal): uniform and balanced pairing ignore the goal, so one path
    # checks every goal's stop; adaptive pairing is shaped by its goal and runs once per goal.
    runs: list[_Run] = []
    for mode in dict.fromkeys(modes) if open_goals else ():
        limit = int(max_per_worker) if mode == "adaptive" else 1
        if mode == "adaptive":
            runs.extend(_Run(mode, g, (g,), limit) for g in open_goals)
        else:
            runs.append(_Run(mode, open_goals[0], tuple(open_goals), limit))
    # Runs are simulated side by side in chunks that keep the per-study matrices within a memory budget.
    per_run = futures * a * a
    size = max(1, _BATCH_CELLS // max(per_run, 1))
    chunks = [runs[i:i + size] for i in range(0, len(runs), size)]
    done = 0
    for chunk in chunks:

        def _progress(fraction: float, done: int = done, width: int = len(chunk)) -> None:
            if progress is not None:
                progress((done + fraction * width) / len(runs))

        sims = _simulate(
            mu0=mu_arr, cov0=cov_arr, truth=truth, human_sd=human_sd, noise_sd=noise_sd, runs=chunk,
            target=target, tasks_per_worker=tasks_per_worker, floor=floor, max_sessions=max_sessions,
            refresh_every=refresh_every, draws=draws, seed=seed, study_counts0=study_counts, progress=_progress,
        )
        for run, by_goal in zip(chunk, sims, strict=True):
            for goal, sim in by_goal.items():
                result["goals"][goal][run.mode] = _quantiles(sim.sessions, sim.reached, sim.max_sessions)
        done += len(chunk)
    result["goals"] = {g: {mode: result["goals"][g][mode] for mode in modes} for g in goals}
    return result


@dataclass(frozen=True)
class Plan:
    """Sessions and workers a new study needs, per design mode (10/50/90 % quantiles)."""

    settings: dict[str, Any]
    modes: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {"settings": self.settings, "modes": self.modes}


def plan_study(
    *, n_agents: int, agent_sd: float, human_sd: float, noise_sd: float, goal: str = "top", target: float = 0.95,
    tasks_per_worker: int = 5, level_mean: float = 50.0, level_sd: float = 20.0, modes: Sequence[str] = DESIGN_MODES,
    max_per_worker: int = 1, floor: float = DEFAULT_FLOOR, studies: int = 100, max_sessions: int = 20_000,
    refresh_every: int = 1, seed: int = 0, progress: Callable[[float], None] | None = None,
) -> Plan:
    """Return the sessions and workers needed before a study starts, from assumed spreads and noise.

    The truth of every simulated study is drawn from the same prior the analysis starts from, so the
    figures are what a study team should expect on average over plausible agent line-ups.
    """
    mu0, cov0 = prior_state(n_agents, agent_sd=agent_sd, level_mean=level_mean, level_sd=level_sd)
    futures = sessions_to_target(
        mu0, cov0, human_sd=human_sd, noise_sd=noise_sd, modes=modes, goals=(goal,), target=target,
        tasks_per_worker=tasks_per_worker, max_per_worker=max_per_worker, floor=floor, futures=studies,
        max_sessions=max_sessions, refresh_every=refresh_every, seed=seed, progress=progress,
    )
    modes_out: dict[str, dict[str, Any]] = {}
    for mode, q in futures["goals"][goal].items():
        workers = {k: (None if q[k] is None else -(-q[k] // int(tasks_per_worker))) for k in ("low", "median", "high")}
        modes_out[mode] = {"sessions": q, "workers": workers}
    settings = {"n_agents": int(n_agents), "agent_sd": agent_sd, "human_sd": human_sd, "noise_sd": noise_sd,
                "goal": goal, "target": target, "tasks_per_worker": int(tasks_per_worker), "studies": int(studies)}
    return Plan(settings, modes_out)
