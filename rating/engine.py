"""Exact Gaussian skill rating for human-agent collaboration (paper §4, App. E).

Every scored episode is an observation :math:`(A, H, y)` of an agent and a human working together:

.. math::

    y = s_A + s_H + \\epsilon, \\qquad \\epsilon \\sim \\mathcal{N}(0, \\beta^2 / \\omega),
    \\qquad s_i \\sim \\mathcal{N}(\\mu_{0,i}, \\sigma_{0,i}^2)

(paper Eq. 1-2; :math:`\\omega` is an optional observation weight, 1 in the paper). The posterior is kept in
information form (paper Eq. 15-17): :math:`\\Lambda` and :math:`\\eta` are sums over observations, so adding
and retracting observations is exact and order-free. Because each observation touches one agent and one
human, :math:`\\Lambda` is bipartite: the agent and human blocks are diagonal. Eliminating the humans leaves
a small dense agents x agents Schur complement, which gives every mean, the agents' joint covariance and
every human's marginal variance exactly in :math:`O(\\mathrm{nnz} \\cdot A + A^3)` -- where the paper used a
stochastic diagonal estimator and the reference implementation a dense inverse.

This module is pure numpy/scipy: no Django, no settings, no I/O, no module-level state.
"""

from __future__ import annotations

import dataclasses
import gc
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg
from scipy.stats import norm

from rating.arrays import (
    coded_ids,
    finite_array,
    index_array,
    normalise_id,
    weight_array,
)
from rating.linalg import eliminated_block, row_quadratic_forms

__all__ = [
    "ENTITY_TYPES",
    "BipartiteSolution",
    "GeneralPosterior",
    "Posterior",
    "RatingConfig",
    "SkillModel",
    "UnknownEntityError",
    "conservative_score",
    "posterior_general",
    "prob_greater_matrix",
    "solve_bipartite",
]

ENTITY_TYPES: tuple[str, str] = ("agent", "human")
STATE_FORMAT = "collabskill.rating-state"
STATE_VERSION = 1


class UnknownEntityError(KeyError, ValueError):
    """Raised when an id names no agent or human the model has observed.

    Subclasses both ``KeyError`` (a failed lookup) and ``ValueError`` (a bad argument) so callers can catch
    either.
    """

    def __str__(self) -> str:
        # KeyError quotes its message; show it plainly instead.
        return str(self.args[0]) if self.args else ""


# --------------------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RatingConfig:
    """Hyperparameters of the rating model (paper §4: :math:`\\mu_0 = 0, \\sigma_0 = 1, \\beta = 1, k = 3`).

    Parameters
    ----------
    mu0, sigma0
        Prior mean and standard deviation of every skill (paper Eq. 2).
    beta
        Observation noise standard deviation (paper Eq. 1), in score units.
    k
        Multiplier of the conservative score :math:`\\mu - k\\sigma` used for ranking.
    agent_mu0, agent_sigma0, human_mu0, human_sigma0
        Optional per-entity-type priors; ``None`` falls back to ``mu0`` / ``sigma0``.
    """

    mu0: float = 0.0
    sigma0: float = 1.0
    beta: float = 1.0
    k: float = 3.0
    agent_mu0: float | None = None
    agent_sigma0: float | None = None
    human_mu0: float | None = None
    human_sigma0: float | None = None

    def __post_init__(self) -> None:
        optional = {"agent_mu0", "agent_sigma0", "human_mu0", "human_sigma0"}
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            if value is None and spec.name in optional:
                continue
            object.__setattr__(self, spec.name, _finite_scalar(value, spec.name))
        for name in ("sigma0", "beta", "agent_sigma0", "human_sigma0"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        if self.k < 0:
            raise ValueError(f"k must be >= 0 (the score is a lower bound mu - k*sigma), got {self.k!r}")

    def prior(self, entity_type: str) -> tuple[float, float]:
        """Return ``(mu0, sigma0)`` for ``entity_type``, honouring the per-type overrides."""
        kind = _check_entity_type(entity_type)
        mu = getattr(self, f"{kind}_mu0")
        sigma = getattr(self, f"{kind}_sigma0")
        return (self.mu0 if mu is None else mu, self.sigma0 if sigma is None else sigma)

    def to_dict(self) -> dict[str, float | None]:
        """Return the configuration as a JSON-serialisable dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RatingConfig:
        """Build a configuration from :meth:`to_dict` output; unknown keys are an error."""
        if not isinstance(data, dict):
            raise ValueError(f"config must be a dict, got {type(data).__name__}")
        known = {spec.name for spec in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"config has unknown keys: {', '.join(unknown)}")
        return cls(**data)


@overload
def conservative_score(mu: np.ndarray, sigma: np.ndarray | float, k: float) -> np.ndarray: ...
@overload
def conservative_score(mu: float, sigma: float, k: float) -> float: ...
def conservative_score(mu: np.ndarray | float, sigma: np.ndarray | float, k: float) -> np.ndarray | float:
    """Return the CollabSkill score :math:`\\mu - k\\sigma` (paper §4; the 0.13 % lower quantile at k = 3)."""
    return mu - k * sigma


# --------------------------------------------------------------------------------------------------------
# Validation helpers (public boundary only)
# --------------------------------------------------------------------------------------------------------


def _finite_scalar(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return result


def _positive_scalar(value: Any, name: str) -> float:
    result = _finite_scalar(value, name)
    if result <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")
    return result


def _check_entity_type(entity_type: Any, name: str = "entity_type") -> str:
    if entity_type not in ENTITY_TYPES:
        raise ValueError(f"{name} must be 'agent' or 'human', got {entity_type!r}")
    return str(entity_type)


# --------------------------------------------------------------------------------------------------------
# Exact bipartite solve (Schur complement on the agent block)
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class BipartiteSolution:
    """The exact posterior of a bipartite information form, plus what covariance queries need.

    Attributes
    ----------
    mu_agents, cov_agents
        Agent means and their exact joint covariance :math:`S^{-1}`.
    mu_humans, var_humans
        Human means and exact marginal variances (``None`` when not requested).
    schur_cholesky
        Lower Cholesky factor :math:`R` of the Schur complement, :math:`S = R R^\\top`.
    couplings
        :math:`\\Lambda_{HA}` as CSR (humans x agents).
    lambda_humans
        Diagonal of :math:`\\Lambda_{HH}`.
    """

    mu_agents: np.ndarray
    cov_agents: np.ndarray
    mu_humans: np.ndarray
    var_humans: np.ndarray | None
    schur_cholesky: np.ndarray
    couplings: scipy.sparse.csr_matrix
    lambda_humans: np.ndarray


def _schur_solve(
    couplings: scipy.sparse.csr_matrix,
    lambda_agents: np.ndarray,
    lambda_humans: np.ndarray,
    eta_agents: np.ndarray,
    eta_humans: np.ndarray,
    *,
    human_variance: bool = True,
) -> BipartiteSolution:
    """Solve the bipartite information form exactly by eliminating the humans (see :func:`solve_bipartite`)."""
    n_agents = lambda_agents.shape[0]
    inv_d = 1.0 / lambda_humans
    if n_agents == 0:
        return BipartiteSolution(
            mu_agents=np.zeros(0),
            cov_agents=np.zeros((0, 0)),
            mu_humans=eta_humans * inv_d,
            var_humans=inv_d.copy() if human_variance else None,
            schur_cholesky=np.zeros((0, 0)),
            couplings=couplings,
            lambda_humans=lambda_humans,
        )
    schur = np.diag(lambda_agents) - eliminated_block(couplings, inv_d)
    try:
        chol = scipy.linalg.cholesky(schur, lower=True, check_finite=False)
    except np.linalg.LinAlgError as exc:
        raise ValueError(f"the precision matrix Lambda is not positive definite: {exc}")
    rhs = eta_agents - couplings.T @ (eta_humans * inv_d)
    mu_agents = scipy.linalg.cho_solve((chol, True), rhs, check_finite=False)
    cov_agents = scipy.linalg.cho_solve((chol, True), np.eye(n_agents), check_finite=False)
    cov_agents = 0.5 * (cov_agents + cov_agents.T)
    mu_humans = (eta_humans - couplings @ mu_agents) * inv_d
    var_humans = None
    if human_variance:
        # b^T S^{-1} b = ||R^{-1} b||^2, so project every row onto R^{-T} once.
        inv_chol_t = scipy.linalg.solve_triangular(chol, np.eye(n_agents), lower=True, check_finite=False).T
        var_humans = inv_d + inv_d**2 * row_quadratic_forms(couplings, inv_chol_t)
    return BipartiteSolution(
        mu_agents=mu_agents,
        cov_agents=cov_agents,
        mu_humans=mu_humans,
        var_humans=var_humans,
        schur_cholesky=chol,
        couplings=couplings,
        lambda_humans=lambda_humans,
    )


def solve_bipartite(
    agent_idx: Any,
    human_idx: Any,
    w: Any,
    wy: Any,
    prior_precision_agents: Any,
    prior_eta_agents: Any,
    prior_precision_humans: Any,
    prior_eta_humans: Any,
    *,
    human_variance: bool = True,
) -> BipartiteSolution:
    """Return the exact posterior of observations linking agents and humans.

    Each row ``o`` contributes precision ``w[o]`` (:math:`\\omega_o / \\beta^2`) and ``wy[o]``
    (:math:`w_o y_o`) to its agent and human; rows may repeat a pair (they are summed). The information
    form (paper Eq. 16-17) is

    .. math::

        \\Lambda = \\begin{pmatrix} \\Lambda_{AA} & \\Lambda_{AH} \\\\ \\Lambda_{HA} & \\Lambda_{HH}
        \\end{pmatrix}, \\quad
        \\Lambda_{AA} = \\mathrm{diag}(\\sigma_{0,A}^{-2} + \\textstyle\\sum w), \\quad
        \\Lambda_{HH} = \\mathrm{diag}(d), \\quad (\\Lambda_{HA})_{ha} = \\textstyle\\sum_{o: (a, h)} w_o,

    and eliminating the diagonal human block gives, exactly,

    .. math::

        S = \\Lambda_{AA} - \\Lambda_{AH}\\Lambda_{HH}^{-1}\\Lambda_{HA}, \\qquad
        \\mu_A = S^{-1}(\\eta_A - \\Lambda_{AH}\\Lambda_{HH}^{-1}\\eta_H), \\qquad
        \\mu_H = \\Lambda_{HH}^{-1}(\\eta_H - \\Lambda_{HA}\\mu_A),

    .. math::

        \\mathrm{Cov}(s_A) = S^{-1}, \\qquad
        \\sigma_h^2 = (\\Lambda^{-1})_{hh} = \\frac{1}{d_h} + \\frac{1}{d_h^2} b_h^\\top S^{-1} b_h,

    with :math:`b_h` the human's row of :math:`\\Lambda_{HA}`. These are the paper's
    :math:`\\mu = \\Lambda^{-1}\\eta` and :math:`\\sigma_i^2 = (\\Lambda^{-1})_{ii}` (App. E.2) without a
    stochastic estimator. Cost :math:`O(\\mathrm{nnz} \\cdot A + A^3)`.

    Parameters
    ----------
    agent_idx, human_idx
        Integer entity indices per row.
    w, wy
        Precision weights (``>= 0``) and precision-weighted scores per row.
    prior_precision_agents, prior_eta_agents
        :math:`1/\\sigma_0^2` and :math:`\\mu_0/\\sigma_0^2` per agent; their length sets the agent count.
    prior_precision_humans, prior_eta_humans
        The same per human.
    human_variance
        Compute the humans' marginal variances (skip when only agents matter).

    Returns
    -------
    BipartiteSolution
    """
    prec_a = np.asarray(prior_precision_agents, dtype=np.float64)
    prec_h = np.asarray(prior_precision_humans, dtype=np.float64)
    n_agents, n_humans = prec_a.shape[0], prec_h.shape[0]
    eta0_a = finite_array(prior_eta_agents, "prior_eta_agents", n_agents)
    eta0_h = finite_array(prior_eta_humans, "prior_eta_humans", n_humans)
    for name, prec in (("prior_precision_agents", prec_a), ("prior_precision_humans", prec_h)):
        if prec.ndim != 1 or not np.all(np.isfinite(prec)) or np.any(prec <= 0):
            raise ValueError(f"{name} must be a 1-D array of finite values > 0")
    a = np.asarray(agent_idx)
    n_obs = a.shape[0] if a.ndim == 1 else -1
    a = index_array(a, "agent_idx", n_obs, n_agents)
    h = index_array(human_idx, "human_idx", n_obs, n_humans)
    w_arr = finite_array(w, "w", n_obs)
    if np.any(w_arr < 0):
        raise ValueError("w must be >= 0")
    wy_arr = finite_array(wy, "wy", n_obs)
    couplings = scipy.sparse.coo_matrix((w_arr, (h, a)), shape=(n_humans, n_agents)).tocsr()
    couplings.sum_duplicates()
    lambda_agents = prec_a + np.bincount(a, weights=w_arr, minlength=n_agents)
    lambda_humans = prec_h + np.bincount(h, weights=w_arr, minlength=n_humans)
    eta_agents = eta0_a + np.bincount(a, weights=wy_arr, minlength=n_agents)
    eta_humans = eta0_h + np.bincount(h, weights=wy_arr, minlength=n_humans)
    return _schur_solve(couplings, lambda_agents, lambda_humans, eta_agents, eta_humans, human_variance=human_variance)


def prob_greater_matrix(mu: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """Return :math:`P_{ij} = P(s_i > s_j)` for jointly Gaussian skills (diagonal set to 0.5).

    .. math::

        P(s_i > s_j) = \\Phi\\!\\left(\\frac{\\mu_i - \\mu_j}{\\sqrt{\\Sigma_{ii} + \\Sigma_{jj} - 2\\Sigma_{ij}}}
        \\right)

    (paper §6.1, footnote 4, here with the exact joint covariance instead of independent marginals).
    """
    mu = np.asarray(mu, dtype=np.float64)
    cov = np.asarray(cov, dtype=np.float64)
    diag = np.diag(cov)
    var_diff = diag[:, None] + diag[None, :] - 2.0 * cov
    np.fill_diagonal(var_diff, 1.0)
    probs = norm.cdf((mu[:, None] - mu[None, :]) / np.sqrt(np.maximum(var_diff, np.finfo(float).tiny)))
    np.fill_diagonal(probs, 0.5)
    return probs


# --------------------------------------------------------------------------------------------------------
# General sparse path (any SPD precision, e.g. with task difficulty as a third entity type)
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class GeneralPosterior:
    """Solution of a general sparse Gaussian information form.

    Attributes
    ----------
    mu
        Posterior means :math:`\\Lambda^{-1}\\eta`.
    variance
        Marginal variances :math:`(\\Lambda^{-1})_{ii}`, exact or Hutchinson estimates (may dip below zero
        for few probes; callers clip).
    variance_method
        ``"exact"`` or ``"hutchinson"``.
    probes
        Number of Hutchinson probe vectors (0 when exact).
    cov_block
        Exact :math:`\\Lambda^{-1}` restricted to ``cov_indices`` (``None`` when not requested).
    """

    mu: np.ndarray
    variance: np.ndarray
    variance_method: Literal["exact", "hutchinson"]
    probes: int
    cov_block: np.ndarray | None


def _solve_columns(lu: scipy.sparse.linalg.SuperLU, rhs_columns: np.ndarray) -> np.ndarray:
    return lu.solve(np.asfortranarray(rhs_columns))


def _checked_precision(
    Lambda: Any, eta: Any, exact_diag_limit: int, probes: int, block_size: int  # noqa: N803
) -> tuple[scipy.sparse.csc_matrix, np.ndarray]:
    """Return :func:`posterior_general`'s precision (CSC) and information vector, refusing bad inputs."""
    matrix = scipy.sparse.csc_matrix(Lambda, dtype=np.float64)
    n = matrix.shape[0]
    if matrix.shape != (n, n):
        raise ValueError(f"Lambda must be square, got shape {matrix.shape}")
    eta_arr = finite_array(eta, "eta", n)
    if not np.all(np.isfinite(matrix.data)):
        raise ValueError("Lambda must be finite")
    asym = abs(matrix - matrix.T)
    scale = abs(matrix).max() if matrix.nnz else 0.0
    if asym.nnz and asym.max() > 1e-10 * max(scale, 1.0):
        raise ValueError("Lambda must be symmetric")
    if int(exact_diag_limit) < 0:
        raise ValueError(f"exact_diag_limit must be >= 0, got {exact_diag_limit!r}")
    if int(probes) < 1:
        raise ValueError(f"probes must be >= 1, got {probes!r}")
    if int(block_size) < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size!r}")
    return matrix, eta_arr


def _marginal_variances(
    lu: Any, n: int, exact_diag_limit: int, probes: int, seed: int, block_size: int
) -> tuple[Literal["exact", "hutchinson"], int, np.ndarray]:
    """Return (method, probes used, diag of the inverse): exact by unit-vector blocks, else Hutchinson's."""
    if n <= int(exact_diag_limit):
        variance = np.empty(n)
        for start in range(0, n, block_size):
            cols = np.arange(start, min(start + block_size, n))
            unit = np.zeros((n, cols.size))
            unit[cols, np.arange(cols.size)] = 1.0
            variance[cols] = _solve_columns(lu, unit)[cols, np.arange(cols.size)]
        return "exact", 0, variance
    n_probes = int(probes)
    rng = np.random.default_rng(seed)
    accum = np.zeros(n)
    for start in range(0, n_probes, block_size):
        m = min(block_size, n_probes - start)
        z = rng.integers(0, 2, size=(n, m)).astype(np.float64) * 2.0 - 1.0
        accum += np.einsum("ij,ij->i", z, _solve_columns(lu, z))
    return "hutchinson", n_probes, accum / n_probes


def posterior_general(
    Lambda: Any,  # noqa: N803 - the paper's symbol
    eta: Any,
    *,
    exact_diag_limit: int = 2000,
    probes: int = 256,
    seed: int = 0,
    cov_indices: Sequence[int] | np.ndarray | None = None,
    block_size: int = 256,
) -> GeneralPosterior:
    """Solve :math:`\\Lambda\\mu = \\eta` for any sparse SPD precision and return marginal variances.

    The mean solves the sparse system (paper App. E.2) through a sparse LU of :math:`\\Lambda` with a
    symmetric fill-reducing ordering and no pivoting -- a Cholesky in all but name, and its positive pivots
    certify positive definiteness. Marginal variances :math:`(\\Lambda^{-1})_{ii}` are exact (solve against
    unit vectors in blocks) when :math:`n \\le` ``exact_diag_limit``; otherwise Hutchinson's diagonal
    estimator (paper App. E.2; Bekas et al. 2007) is used,

    .. math::

        \\mathrm{diag}(\\Lambda^{-1}) \\approx \\frac{1}{m}\\sum_{j=1}^{m} z_j \\odot \\Lambda^{-1} z_j,
        \\qquad z_j \\in \\{-1, +1\\}^n \\text{ Rademacher},

    whose error per entry shrinks as :math:`1/\\sqrt{m}`. Use this path only for models that break the
    bipartite structure; :func:`solve_bipartite` is exact and far faster when it applies.

    Parameters
    ----------
    Lambda
        Symmetric positive definite precision matrix (scipy.sparse or dense), ``n x n``.
    eta
        Information vector, length ``n``.
    exact_diag_limit
        Largest ``n`` for which the diagonal is computed exactly.
    probes
        Number of Rademacher probes :math:`m` for Hutchinson's estimator.
    seed
        Seed of the probe generator; a given seed and ``block_size`` reproduce the estimate exactly.
    cov_indices
        Indices whose full covariance block should be returned exactly (e.g. the agents).
    block_size
        Right-hand sides solved per call.
    """
    matrix, eta_arr = _checked_precision(Lambda, eta, exact_diag_limit, probes, block_size)
    n = matrix.shape[0]
    if n == 0:
        empty_block = None if cov_indices is None else np.zeros((0, 0))
        return GeneralPosterior(np.zeros(0), np.zeros(0), "exact", 0, empty_block)
    lu = scipy.sparse.linalg.splu(
        matrix,
        permc_spec="MMD_AT_PLUS_A",
        diag_pivot_thresh=0.0,
        options={"SymmetricMode": True},
    )
    pivots = lu.U.diagonal()
    if not np.all(pivots > 0) or not np.array_equal(lu.perm_r, lu.perm_c):
        raise ValueError("the precision matrix Lambda is not positive definite")
    mu = lu.solve(eta_arr)

    method, n_probes, variance = _marginal_variances(lu, n, exact_diag_limit, probes, seed, block_size)

    cov_block = None
    if cov_indices is not None:
        idx = np.asarray(cov_indices, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"cov_indices must lie in [0, {n})")
        unit = np.zeros((n, idx.size))
        unit[idx, np.arange(idx.size)] = 1.0
        columns = _solve_columns(lu, unit) if idx.size else unit
        cov_block = columns[idx, :]
        cov_block = 0.5 * (cov_block + cov_block.T)
    return GeneralPosterior(mu, variance, method, n_probes, cov_block)


# --------------------------------------------------------------------------------------------------------
# The stateful model
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Posterior:
    """Posterior marginals of every entity, in the model's entity order (first appearance).

    Attributes
    ----------
    agent_ids, human_ids
        Entity ids (object arrays of ``str``).
    mu_agents, sigma_agents, cov_agents
        Agent means, standard deviations and exact joint covariance.
    mu_humans, sigma_humans
        Human means and standard deviations.
    n_agents, n_humans
        Observation counts per entity.
    method
        ``"schur"`` or ``"general"``.
    """

    agent_ids: np.ndarray
    human_ids: np.ndarray
    mu_agents: np.ndarray
    sigma_agents: np.ndarray
    cov_agents: np.ndarray
    mu_humans: np.ndarray
    sigma_humans: np.ndarray
    n_agents: np.ndarray
    n_humans: np.ndarray
    method: str = "schur"

    def __post_init__(self) -> None:
        # Posteriors are cached and shared; freeze the arrays so no caller can corrupt the cache.
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, np.ndarray):
                value.setflags(write=False)


class SkillModel:
    """Incremental, exact CollabSkill rating model over agents and humans (paper §4, App. E.2).

    The model stores only sufficient statistics per (agent, human) pair -- the summed weights
    :math:`\\sum \\omega` and weighted scores :math:`\\sum \\omega y` -- so the information form is rebuilt
    exactly whatever the order of additions and retractions. An entity exists while it has at least one
    observation: retracting its last observation removes it (and its prior) entirely, so a withdrawn
    participant leaves no trace and the model equals one that never saw them.

    Parameters
    ----------
    mu0, sigma0, beta, k
        Hyperparameters (paper defaults 0, 1, 1, 3); ignored when ``config`` is given.
    config
        A :class:`RatingConfig`, for per-entity-type priors. Pass either this or the scalars.
    """

    def __init__(
        self,
        mu0: float = 0.0,
        sigma0: float = 1.0,
        beta: float = 1.0,
        k: float = 3.0,
        *,
        config: RatingConfig | None = None,
    ) -> None:
        if config is None:
            config = RatingConfig(mu0=mu0, sigma0=sigma0, beta=beta, k=k)
        elif not isinstance(config, RatingConfig):
            raise ValueError(f"config must be a RatingConfig, got {type(config).__name__}")
        elif (mu0, sigma0, beta, k) != (0.0, 1.0, 1.0, 3.0):
            raise ValueError("config: pass either config or mu0/sigma0/beta/k, not both")
        self._config = config
        self._ids: dict[str, list[str]] = {"agent": [], "human": []}
        self._index: dict[str, dict[str, int]] = {"agent": {}, "human": {}}
        # Consolidated pair statistics as a canonical CSR pattern (humans x agents, sorted, no duplicates).
        self._indptr = np.zeros(1, dtype=np.int64)
        self._pair_agent = np.zeros(0, dtype=np.int64)
        self._wsum = np.zeros(0)
        self._wysum = np.zeros(0)
        self._count = np.zeros(0, dtype=np.int64)
        # Additions not yet merged: scalar rows and whole array batches (agent, human, weight, weight*score).
        self._pending_rows: list[tuple[int, int, float, float]] = []
        self._pending_batches: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._cache: dict[tuple[Any, ...], Posterior] = {}
        self._solution: BipartiteSolution | None = None

    # ---- introspection -------------------------------------------------------------------------------

    @property
    def config(self) -> RatingConfig:
        """Return the model's hyperparameters."""
        return self._config

    @property
    def agent_ids(self) -> list[str]:
        """Return the agent ids in model order."""
        return list(self._ids["agent"])

    @property
    def human_ids(self) -> list[str]:
        """Return the human ids in model order."""
        return list(self._ids["human"])

    @property
    def n_observations(self) -> int:
        """Return the number of observations currently held."""
        pending = len(self._pending_rows) + sum(batch[0].shape[0] for batch in self._pending_batches)
        return int(self._count.sum()) + pending

    def __repr__(self) -> str:
        return (
            f"SkillModel(agents={len(self._ids['agent'])}, humans={len(self._ids['human'])}, "
            f"observations={self.n_observations}, config={self._config!r})"
        )

    # ---- entity bookkeeping --------------------------------------------------------------------------

    def _register(self, entity_type: str, entity_id: str) -> int:
        index = self._index[entity_type]
        position = index.get(entity_id)
        if position is None:
            position = len(self._ids[entity_type])
            index[entity_id] = position
            self._ids[entity_type].append(entity_id)
        return position

    def _lookup(self, entity_type: str, entity_id: Any, name: str) -> int:
        kind = _check_entity_type(entity_type, name.replace("_id", "_type"))
        key = normalise_id(entity_id, name)
        position = self._index[kind].get(key)
        if position is None:
            raise UnknownEntityError(f"{name}: unknown {kind} {key!r}")
        return position

    def _invalidate(self) -> None:
        self._cache.clear()
        self._solution = None

    def _register_batch(self, entity_type: str, keys: list[str], codes: np.ndarray) -> np.ndarray:
        """Map coded ids (``keys[code]``, in order of first appearance) to model positions.

        Only ids new to the model go into the index; known ones are looked up once per distinct id.
        """
        index, ids = self._index[entity_type], self._ids[entity_type]
        if index:
            get = index.get
            position = np.fromiter((get(key, -1) for key in keys), dtype=np.int64, count=len(keys))
        else:
            position = np.full(len(keys), -1, dtype=np.int64)
        new = np.flatnonzero(position < 0)
        if new.size:
            start = len(ids)
            new_keys = keys if new.size == len(keys) else [keys[i] for i in new.tolist()]
            position[new] = np.arange(start, start + new.size)
            index.update(zip(new_keys, range(start, start + new.size), strict=True))
            ids.extend(new_keys)
        if len(ids) < np.iinfo(np.int32).max:
            # int32 positions: the pair aggregation works on int32 indices, so this spares it a conversion
            # pass (and half the memory) per observation.
            position = position.astype(np.int32)
        return position[codes]

    # ---- adding and retracting observations ----------------------------------------------------------

    def add_observation(self, agent_id: Any, human_id: Any, score: float, weight: float = 1.0) -> None:
        """Record one scored episode (paper Eq. 16): :math:`\\Lambda \\mathrel{+}= w x x^\\top`,
        :math:`\\eta \\mathrel{+}= w y x` with :math:`w = \\omega / \\beta^2`.

        A new entity gets its prior once (paper Eq. 17). Raises ``ValueError`` naming the bad argument.
        """
        agent = normalise_id(agent_id, "agent_id")
        human = normalise_id(human_id, "human_id")
        y = _finite_scalar(score, "score")
        omega = _positive_scalar(weight, "weight")
        a = self._register("agent", agent)
        h = self._register("human", human)
        self._pending_rows.append((a, h, omega, omega * y))
        self._invalidate()

    def add_observations(self, agent_ids: Any, human_ids: Any, scores: Any, weights: Any = None) -> None:
        """Record many episodes at once; equivalent to :meth:`add_observation` row by row, but vectorised.

        Nothing is recorded if any row is invalid.
        """
        agent_codes, agent_keys = coded_ids(agent_ids, "agent_ids", None)
        n = agent_codes.shape[0]
        human_codes, human_keys = coded_ids(human_ids, "human_ids", n)
        y = finite_array(scores, "scores", n)
        omega = weight_array(weights, "weights", n)
        if n == 0:
            return
        a = self._register_batch("agent", agent_keys, agent_codes)
        h = self._register_batch("human", human_keys, human_codes)
        self._pending_batches.append((a, h, omega, omega * y))
        self._invalidate()

    def remove_observation(self, agent_id: Any, human_id: Any, score: float, weight: float = 1.0) -> None:
        """Retract one previously added episode exactly (the information form is additive).

        Pass the same score and weight that were added; the model keeps only per-pair sums, so it can verify
        them only when the pair's last observation goes. When an entity loses its last observation it is
        removed together with its prior, giving exactly the model that never saw it.

        Raises
        ------
        UnknownEntityError
            If either id is unknown.
        ValueError
            If the pair has no observation left, or the weight/score do not fit what was recorded.
        """
        y = _finite_scalar(score, "score")
        omega = _positive_scalar(weight, "weight")
        a = self._lookup("agent", agent_id, "agent_id")
        h = self._lookup("human", human_id, "human_id")
        self._flush()
        lo, hi = int(self._indptr[h]), int(self._indptr[h + 1])
        j = lo + int(np.searchsorted(self._pair_agent[lo:hi], a))
        if j >= hi or self._pair_agent[j] != a:
            raise ValueError(
                f"agent_id {self._ids['agent'][a]!r} and human_id {self._ids['human'][h]!r} "
                "have no observation to remove"
            )
        wy = omega * y
        if self._count[j] == 1:
            tol = 1e-8
            if abs(self._wsum[j] - omega) > tol * max(1.0, omega):
                raise ValueError(f"weight {omega!r} does not match the pair's recorded weight {self._wsum[j]!r}")
            if abs(self._wysum[j] - wy) > tol * max(1.0, abs(wy), abs(self._wysum[j])):
                raise ValueError(
                    f"score {y!r} does not match the pair's last recorded score {self._wysum[j] / omega!r}"
                )
            self._delete_pair(j, a, h)
        else:
            remaining = self._wsum[j] - omega
            if remaining <= 1e-12 * self._wsum[j]:
                raise ValueError(f"weight {omega!r} exceeds the pair's recorded weight {self._wsum[j]!r}")
            self._count[j] -= 1
            self._wsum[j] = remaining
            self._wysum[j] -= wy
        self._invalidate()

    def _delete_pair(self, slot: int, a: int, h: int) -> None:
        self._pair_agent = np.delete(self._pair_agent, slot)
        self._wsum = np.delete(self._wsum, slot)
        self._wysum = np.delete(self._wysum, slot)
        self._count = np.delete(self._count, slot)
        self._indptr[h + 1 :] -= 1
        if self._indptr[h] == self._indptr[h + 1]:
            self._indptr = np.delete(self._indptr, h + 1)
            self._drop_entity("human", h)
        if not np.any(self._pair_agent == a):
            self._pair_agent[self._pair_agent > a] -= 1
            self._drop_entity("agent", a)

    def _drop_entity(self, entity_type: str, position: int) -> None:
        del self._ids[entity_type][position]
        self._index[entity_type] = {key: i for i, key in enumerate(self._ids[entity_type])}

    def _flush(self) -> None:
        """Merge pending additions into the canonical pair statistics."""
        if not self._pending_rows and not self._pending_batches:
            return
        n_humans, n_agents = len(self._ids["human"]), len(self._ids["agent"])
        rows = [np.repeat(np.arange(self._indptr.shape[0] - 1), np.diff(self._indptr))]
        cols, wsum, wysum, count = [self._pair_agent], [self._wsum], [self._wysum], [self._count]
        if self._pending_rows:
            a, h, w, wy = (np.asarray(col) for col in zip(*self._pending_rows, strict=True))
            self._pending_batches.append((a, h, w, wy))
        for a, h, w, wy in self._pending_batches:
            rows.append(h)
            cols.append(a)
            wsum.append(w)
            wysum.append(wy)
        # Unit weights everywhere (the common case): each pair's weight sum is its count, exactly (sums of
        # ones are exact below 2^53), which spares the counting pass over every observation.
        # The shortcut needs every row to be one unit-weight observation: pairs already summed count only if
        # each holds a single one (else their weight sums would be read as 1 and their counts lost).
        unit = bool(np.all(self._count == 1)) and all(bool(np.all(w == 1.0)) for w in wsum)
        if not unit:
            count.extend(np.ones(w.shape[0], dtype=np.int64) for w in wsum[1:])
        self._indptr, self._pair_agent, self._wsum, self._wysum, self._count = _aggregate_pairs(
            _joined(rows),
            _joined(cols),
            None if unit else _joined(wsum),
            _joined(wysum),
            n_humans,
            n_agents,
            count=None if unit else _joined(count),
        )
        self._pending_rows.clear()
        self._pending_batches.clear()

    @classmethod
    def from_arrays(
        cls,
        agent_idx: Any,
        human_idx: Any,
        scores: Any,
        weights: Any = None,
        *,
        agent_ids: Sequence[Any] | None = None,
        human_ids: Sequence[Any] | None = None,
        config: RatingConfig | None = None,
    ) -> SkillModel:
        """Build a model from pre-indexed observations, the fast path for bulk loads (no per-row lookups).

        Parameters
        ----------
        agent_idx, human_idx
            Integer indices into ``agent_ids`` / ``human_ids`` per observation (int32 is fine).
        scores, weights
            Scores and optional positive weights per observation.
        agent_ids, human_ids
            Ids for each index; default ``"0", "1", ...``. Ids without observations are not kept.
        config
            Hyperparameters (default :class:`RatingConfig`).
        """
        model = cls(config=config if config is not None else RatingConfig())
        a_raw = np.asarray(agent_idx)
        if a_raw.ndim != 1:
            raise ValueError(f"agent_idx must be one-dimensional, got shape {a_raw.shape}")
        n = a_raw.shape[0]
        h_raw = np.asarray(human_idx)
        id_lists: list[list[str]] = []
        for name, raw, given in (("agent", a_raw, agent_ids), ("human", h_raw, human_ids)):
            if given is None:
                index_array(raw, f"{name}_idx", n, np.iinfo(np.int64).max)
                # Generated ids are valid by construction; skip per-id validation on bulk loads.
                id_lists.append(list(map(str, range(int(raw.max()) + 1 if n else 0))))
            else:
                id_lists.append([normalise_id(v, f"{name}_ids") for v in given])
        agent_list, human_list = id_lists
        a = index_array(a_raw, "agent_idx", n, len(agent_list))
        h = index_array(h_raw, "human_idx", n, len(human_list))
        y = finite_array(scores, "scores", n)
        omega = None if weights is None else weight_array(weights, "weights", n)
        indptr, pair_agent, wsum, wysum, count = _aggregate_pairs(
            h, a, omega, y if omega is None else omega * y, len(human_list), len(agent_list)
        )
        # Ids without observations are not entities (see the class docstring): drop them.
        row_used = np.diff(indptr) > 0
        if not row_used.all():
            indptr = np.concatenate([indptr[:1], indptr[1:][row_used]])
            human_list = [key for key, keep in zip(human_list, row_used.tolist(), strict=True) if keep]
        col_used = np.bincount(pair_agent, minlength=len(agent_list)) > 0
        if not col_used.all():
            pair_agent = (np.cumsum(col_used) - 1)[pair_agent]
            agent_list = [key for key, keep in zip(agent_list, col_used.tolist(), strict=True) if keep]
        for kind, ids in (("agent", agent_list), ("human", human_list)):
            index = dict(zip(ids, range(len(ids)), strict=True))
            if len(index) != len(ids):
                raise ValueError(f"{kind}_ids must be unique")
            model._ids[kind], model._index[kind] = ids, index
        model._indptr, model._pair_agent, model._wsum, model._wysum, model._count = (
            indptr,
            pair_agent,
            wsum,
            wysum,
            count,
        )
        return model

    # ---- information form ----------------------------------------------------------------------------

    def _blocks(self) -> tuple[scipy.sparse.csr_matrix, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Return :math:`\\Lambda_{HA}`, diag :math:`\\Lambda_{AA}`, diag :math:`\\Lambda_{HH}`, :math:`\\eta_A`,
        :math:`\\eta_H` (paper Eq. 16-17)."""
        self._flush()
        cfg = self._config
        n_agents, n_humans = len(self._ids["agent"]), len(self._ids["human"])
        inv_beta2 = 1.0 / cfg.beta**2
        mu_a, sigma_a = cfg.prior("agent")
        mu_h, sigma_h = cfg.prior("human")
        # At the paper's beta = 1 the pair sums are already precisions; skip a pass over every pair.
        data = self._wsum if inv_beta2 == 1.0 else self._wsum * inv_beta2
        couplings = scipy.sparse.csr_matrix((data, self._pair_agent, self._indptr), shape=(n_humans, n_agents))
        lambda_agents = 1.0 / sigma_a**2 + np.bincount(self._pair_agent, self._wsum, n_agents) * inv_beta2
        eta_agents = mu_a / sigma_a**2 + np.bincount(self._pair_agent, self._wysum, n_agents) * inv_beta2
        lambda_humans = 1.0 / sigma_h**2 + _row_sums(self._indptr, self._wsum) * inv_beta2
        eta_humans = mu_h / sigma_h**2 + _row_sums(self._indptr, self._wysum) * inv_beta2
        return couplings, lambda_agents, lambda_humans, eta_agents, eta_humans

    def precision_matrix(self) -> tuple[scipy.sparse.csr_matrix, np.ndarray]:
        """Return the full sparse :math:`\\Lambda` and :math:`\\eta` (paper Eq. 15-17), agents first then humans,
        in model order."""
        couplings, lambda_agents, lambda_humans, eta_agents, eta_humans = self._blocks()
        n_agents, n_humans = lambda_agents.shape[0], lambda_humans.shape[0]
        if n_agents + n_humans == 0:
            return scipy.sparse.csr_matrix((0, 0)), np.zeros(0)
        Lambda = scipy.sparse.bmat(  # noqa: N806 - the paper's symbol
            [
                [scipy.sparse.diags(lambda_agents), couplings.T],
                [couplings, scipy.sparse.diags(lambda_humans)],
            ],
            format="csr",
        )
        return Lambda, np.concatenate([eta_agents, eta_humans])

    # ---- posterior -----------------------------------------------------------------------------------

    def _counts(self) -> tuple[np.ndarray, np.ndarray]:
        n_agents = len(self._ids["agent"])
        n_agent_obs = np.bincount(self._pair_agent, weights=self._count, minlength=n_agents).astype(np.int64)
        return n_agent_obs, _row_sums(self._indptr, self._count).astype(np.int64)

    def _schur(self) -> BipartiteSolution:
        if self._solution is None:
            self._solution = _schur_solve(*self._blocks())
        return self._solution

    def posterior(
        self,
        method: Literal["schur", "general"] = "schur",
        *,
        exact_diag_limit: int = 2000,
        probes: int = 256,
        seed: int = 0,
    ) -> Posterior:
        """Return the exact posterior of every entity (cached until the next mutation).

        ``method="schur"`` (default) eliminates the humans exactly (:func:`solve_bipartite`).
        ``method="general"`` factorises the full sparse :math:`\\Lambda` (:func:`posterior_general`): agent
        covariances are exact, human variances exact up to ``exact_diag_limit`` entities and Hutchinson
        estimates beyond. It exists to cross-check the Schur path and for non-bipartite extensions.
        """
        if method not in ("schur", "general"):
            raise ValueError(f"method must be 'schur' or 'general', got {method!r}")
        key: tuple[Any, ...] = (method,) if method == "schur" else (method, exact_diag_limit, probes, seed)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        self._flush()
        n_agent_obs, n_human_obs = self._counts()
        agent_ids = np.array(self._ids["agent"], dtype=object)
        human_ids = np.array(self._ids["human"], dtype=object)
        if method == "schur":
            solution = self._schur()
            assert solution.var_humans is not None
            result = Posterior(
                agent_ids=agent_ids,
                human_ids=human_ids,
                mu_agents=solution.mu_agents.copy(),
                sigma_agents=np.sqrt(np.diag(solution.cov_agents)),
                cov_agents=solution.cov_agents.copy(),
                mu_humans=solution.mu_humans.copy(),
                sigma_humans=np.sqrt(solution.var_humans),
                n_agents=n_agent_obs,
                n_humans=n_human_obs,
                method="schur",
            )
        else:
            Lambda, eta = self.precision_matrix()  # noqa: N806 - the paper's symbol
            n_agents = len(agent_ids)
            general = posterior_general(
                Lambda,
                eta,
                exact_diag_limit=exact_diag_limit,
                probes=probes,
                seed=seed,
                cov_indices=np.arange(n_agents),
            )
            assert general.cov_block is not None
            result = Posterior(
                agent_ids=agent_ids,
                human_ids=human_ids,
                mu_agents=general.mu[:n_agents],
                sigma_agents=np.sqrt(np.diag(general.cov_block)),
                cov_agents=general.cov_block,
                mu_humans=general.mu[n_agents:],
                sigma_humans=np.sqrt(np.clip(general.variance[n_agents:], 0.0, None)),
                n_agents=n_agent_obs,
                n_humans=n_human_obs,
                method="general",
            )
        self._cache[key] = result
        return result

    def rate(self, entity_id: Any, entity_type: str) -> tuple[float, float]:
        """Return ``(mu, sigma)`` of one agent or human."""
        position = self._lookup(entity_type, entity_id, "entity_id")
        post = self.posterior()
        if entity_type == "agent":
            return float(post.mu_agents[position]), float(post.sigma_agents[position])
        return float(post.mu_humans[position]), float(post.sigma_humans[position])

    def leaderboard(self, entity_type: str | None = None) -> list[dict[str, Any]]:
        """Rank entities by the conservative score :math:`\\mu - k\\sigma`, best first.

        Rows have exactly the keys ``rank, entity_type, entity_id, mu, sigma, n, conservative`` (the shape
        of the public reference implementation). Ties fall back to higher ``mu``, then entity type and id,
        so the order is deterministic. ``entity_type=None`` ranks agents and humans together.
        """
        kinds = ENTITY_TYPES if entity_type is None else (_check_entity_type(entity_type),)
        post = self.posterior()
        columns: dict[str, list[np.ndarray]] = {"type": [], "id": [], "mu": [], "sigma": [], "n": []}
        for kind in kinds:
            ids = post.agent_ids if kind == "agent" else post.human_ids
            # fill() shares the one str; np.full(..., dtype=object) would cast a new str per row (20x slower).
            kind_column = np.empty(len(ids), dtype=object)
            kind_column.fill(kind)
            columns["type"].append(kind_column)
            columns["id"].append(ids)
            columns["mu"].append(post.mu_agents if kind == "agent" else post.mu_humans)
            columns["sigma"].append(post.sigma_agents if kind == "agent" else post.sigma_humans)
            columns["n"].append(post.n_agents if kind == "agent" else post.n_humans)
        types, ids, mu, sigma, counts = (np.concatenate(columns[c]) for c in ("type", "id", "mu", "sigma", "n"))
        if ids.size == 0:
            return []
        cons = conservative_score(mu, sigma, self._config.k)
        order = _rank_order(cons, mu)
        # Exact ties in (conservative, mu) fall back to type and id: sort just those runs by text.
        c_sorted, m_sorted = cons[order], mu[order]
        tied = np.flatnonzero((c_sorted[1:] == c_sorted[:-1]) & (m_sorted[1:] == m_sorted[:-1]))
        if tied.size:
            starts = tied[np.concatenate([[True], np.diff(tied) > 1])]
            ends = tied[np.concatenate([np.diff(tied) > 1, [True]])] + 2
            for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
                run = order[lo:hi].tolist()
                run.sort(key=lambda i: (str(types[i]), str(ids[i])))
                order[lo:hi] = run
        # A million row dicts hold no cycles, yet their allocation would trigger repeated full collections
        # over every live object (about a quarter of the build time at 10^6 rows): pause the collector.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._leaderboard_rows(order, types, ids, mu, sigma, counts, cons)
        finally:
            if collecting:
                gc.enable()

    @staticmethod
    def _leaderboard_rows(
        order: np.ndarray,
        types: np.ndarray,
        ids: np.ndarray,
        mu: np.ndarray,
        sigma: np.ndarray,
        counts: np.ndarray,
        cons: np.ndarray,
    ) -> list[dict[str, Any]]:
        return [
            {
                "rank": rank,
                "entity_type": kind,
                "entity_id": key,
                "mu": m,
                "sigma": sd,
                "n": count,
                "conservative": c,
            }
            for rank, kind, key, m, sd, count, c in zip(
                range(1, order.shape[0] + 1),
                types[order].tolist(),
                ids[order].tolist(),
                mu[order].tolist(),
                sigma[order].tolist(),
                counts[order].tolist(),
                cons[order].tolist(),
                strict=True,
            )
        ]

    # ---- joint uncertainty ---------------------------------------------------------------------------

    def covariance(self, a_id: Any, a_type: str, b_id: Any, b_type: str) -> float:
        """Return the exact posterior covariance :math:`(\\Lambda^{-1})_{ab}` of any two entities.

        .. math::

            \\mathrm{Cov}(a, a') = (S^{-1})_{aa'}, \\quad
            \\mathrm{Cov}(a, h) = -\\frac{(S^{-1} b_h)_a}{d_h}, \\quad
            \\mathrm{Cov}(h, h') = \\frac{\\delta_{hh'}}{d_h} + \\frac{b_h^\\top S^{-1} b_{h'}}{d_h d_{h'}}

        (block inverse of the bipartite :math:`\\Lambda`, see :func:`solve_bipartite`).
        """
        i = self._lookup(a_type, a_id, "a_id")
        j = self._lookup(b_type, b_id, "b_id")
        sol = self._schur()
        if a_type == "agent" and b_type == "agent":
            return float(sol.cov_agents[i, j])
        if a_type == "human" and b_type == "human":
            b_i = sol.couplings[i].toarray().ravel()
            b_j = sol.couplings[j].toarray().ravel()
            d_i, d_j = sol.lambda_humans[i], sol.lambda_humans[j]
            shared = float(b_i @ sol.cov_agents @ b_j) / (d_i * d_j)
            return shared + (1.0 / d_i if i == j else 0.0)
        agent, human = (i, j) if a_type == "agent" else (j, i)
        b_h = sol.couplings[human].toarray().ravel()
        return float(-(sol.cov_agents[agent] @ b_h) / sol.lambda_humans[human])

    def prob_greater(self, a_id: Any, b_id: Any, a_type: str = "agent", b_type: str | None = None) -> float:
        """Return :math:`P(s_a > s_b)` under the exact joint posterior (paper §6.1, footnote 4).

        .. math::

            P(s_a > s_b) = \\Phi\\!\\left(\\frac{\\mu_a - \\mu_b}{\\sqrt{\\Sigma_{aa} + \\Sigma_{bb} - 2\\Sigma_{ab}}}
            \\right)

        Works for two agents, two humans, or an agent and a human (``b_type`` defaults to ``a_type``).
        """
        b_type = a_type if b_type is None else b_type
        i = self._lookup(a_type, a_id, "a_id")
        j = self._lookup(b_type, b_id, "b_id")
        if a_type == b_type and i == j:
            raise ValueError(f"b_id: cannot compare {a_type} {a_id!r} with itself")
        mu_a, _ = self.rate(a_id, a_type)
        mu_b, _ = self.rate(b_id, b_type)
        var = (
            self.covariance(a_id, a_type, a_id, a_type)
            + self.covariance(b_id, b_type, b_id, b_type)
            - 2.0 * self.covariance(a_id, a_type, b_id, b_type)
        )
        return float(norm.cdf((mu_a - mu_b) / math.sqrt(max(var, np.finfo(float).tiny))))

    def agent_covariance(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(agent_ids, Sigma)``: the agents' exact joint posterior covariance :math:`S^{-1}`."""
        post = self.posterior()
        return post.agent_ids.copy(), np.array(post.cov_agents)

    def pairwise_prob_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(agent_ids, P)`` with :math:`P_{ij} = P(s_i > s_j)` for every pair of agents."""
        post = self.posterior()
        return post.agent_ids.copy(), prob_greater_matrix(post.mu_agents, post.cov_agents)

    # ---- persistence ---------------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        """Return a JSON-serialisable snapshot of the sufficient statistics; :meth:`from_state` restores it
        exactly (floats survive a JSON round trip unchanged)."""
        self._flush()
        n_agent_obs, n_human_obs = self._counts()
        pair_human = np.repeat(np.arange(self._indptr.shape[0] - 1), np.diff(self._indptr))
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "config": self._config.to_dict(),
            "agent_ids": list(self._ids["agent"]),
            "human_ids": list(self._ids["human"]),
            "pairs": {
                "human": pair_human.tolist(),
                "agent": self._pair_agent.tolist(),
                "weight_sum": self._wsum.tolist(),
                "weighted_score_sum": self._wysum.tolist(),
                "count": self._count.tolist(),
            },
            "agent_counts": n_agent_obs.tolist(),
            "human_counts": n_human_obs.tolist(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> SkillModel:
        """Rebuild a model from :meth:`to_state` output, validating it."""
        if not isinstance(state, dict):
            raise ValueError(f"state must be a dict, got {type(state).__name__}")
        if state.get("format") != STATE_FORMAT or state.get("version") != STATE_VERSION:
            raise ValueError(
                f"state: expected format {STATE_FORMAT!r} version {STATE_VERSION}, "
                f"got {state.get('format')!r} version {state.get('version')!r}"
            )
        model = cls(config=RatingConfig.from_dict(state["config"]))
        for kind in ENTITY_TYPES:
            ids = [normalise_id(v, f"{kind}_ids") for v in state[f"{kind}_ids"]]
            index = {key: i for i, key in enumerate(ids)}
            if len(index) != len(ids):
                raise ValueError(f"state: {kind}_ids must be unique")
            model._ids[kind], model._index[kind] = ids, index
        n_agents, n_humans = len(model._ids["agent"]), len(model._ids["human"])
        pairs = state["pairs"]
        n_pairs = len(pairs["agent"])
        human = index_array(np.asarray(pairs["human"], dtype=np.int64), "state.pairs.human", n_pairs, n_humans)
        agent = index_array(np.asarray(pairs["agent"], dtype=np.int64), "state.pairs.agent", n_pairs, n_agents)
        wsum = weight_array(pairs["weight_sum"], "state.pairs.weight_sum", n_pairs)
        wysum = finite_array(pairs["weighted_score_sum"], "state.pairs.weighted_score_sum", n_pairs)
        count = np.asarray(pairs["count"], dtype=np.int64)
        if count.shape != (n_pairs,) or np.any(count < 1):
            raise ValueError("state.pairs.count must hold one positive count per pair")
        keys = human * max(n_agents, 1) + agent
        if np.any(np.diff(keys) <= 0):
            raise ValueError("state.pairs must be sorted by (human, agent) without duplicates")
        model._indptr = np.concatenate([[0], np.cumsum(np.bincount(human, minlength=n_humans))]).astype(np.int64)
        model._pair_agent, model._wsum, model._wysum, model._count = agent, wsum, wysum, count
        n_agent_obs, n_human_obs = model._counts()
        if n_agent_obs.tolist() != list(state["agent_counts"]) or n_human_obs.tolist() != list(state["human_counts"]):
            raise ValueError("state: agent_counts/human_counts disagree with the pair counts")
        if np.any(n_agent_obs == 0) or np.any(n_human_obs == 0):
            raise ValueError("state: every entity must have at least one observation")
        return model


def _rank_order(cons: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Return ``np.lexsort((-mu, -cons))`` (higher conservative, then higher mu, then lower index) faster.

    One argsort on the conservative score, then only the runs of equal scores (rare with real posteriors)
    are re-sorted by ``(-mu, index)``; a two-key lexsort of a million entries costs about three times more.
    """
    order = np.argsort(-cons)
    c_sorted = cons[order]
    tied = np.flatnonzero(c_sorted[1:] == c_sorted[:-1])
    if tied.size:
        # Every position in a tie run; runs already sit in score order, so the score key keeps them in place.
        members = np.unique(np.concatenate([tied, tied + 1]))
        sub = order[members]
        order[members] = sub[np.lexsort((sub, -mu[sub], -cons[sub]))]
    return order


def _joined(pieces: list[np.ndarray]) -> np.ndarray:
    """Concatenate ``pieces``, returning the only non-empty one as is (a first bulk load copies nothing)."""
    filled = [piece for piece in pieces if piece.shape[0]]
    return filled[0] if len(filled) == 1 else np.concatenate(pieces)


def _row_sums(indptr: np.ndarray, data: np.ndarray) -> np.ndarray:
    """Sum ``data`` per CSR row; every row must be non-empty (entities exist only through observations)."""
    if indptr.shape[0] <= 1:
        return np.zeros(0, dtype=data.dtype)
    return np.add.reduceat(data, indptr[:-1])


def _aggregate_pairs(
    human: np.ndarray,
    agent: np.ndarray,
    w: np.ndarray | None,
    wy: np.ndarray,
    n_humans: int,
    n_agents: int,
    *,
    count: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sum rows per (human, agent) pair into a canonical CSR pattern: ``indptr, agent, w, wy, count``.

    ``w=None`` means unit weights: the weight sums are then exact observation counts, which spares a pass
    (this is the bulk-load path). The weight and weighted-score sums travel together as one complex array:
    a pair's weight is always > 0, so no entry can cancel to zero and the pattern always equals that of the
    counts.
    """
    shape = (n_humans, n_agents)
    if max(n_humans, n_agents, human.shape[0]) < np.iinfo(np.int32).max:
        # scipy converts and range-checks int64 indices, and its int32 kernels run about twice as fast:
        # at 10^7 rows the conversion here plus the int32 build take half the time of the int64 build. The
        # pattern stays int32 (half the memory, and the couplings matrix of every solve reuses it as is).
        human, agent = human.astype(np.int32, copy=False), agent.astype(np.int32, copy=False)
    packed = np.empty(wy.shape[0], dtype=np.complex128)
    packed.real = 1.0 if w is None else w
    packed.imag = wy
    summed = scipy.sparse.coo_matrix((packed, (human, agent)), shape=shape).tocsr()
    del packed
    summed.sum_duplicates()
    wsum = np.ascontiguousarray(summed.data.real)
    wysum = np.ascontiguousarray(summed.data.imag)
    if w is None and count is None:
        pair_count = np.rint(wsum).astype(np.int64)
    else:
        ones = np.ones(human.shape[0], dtype=np.int64) if count is None else count
        counted = scipy.sparse.coo_matrix((ones, (human, agent)), shape=shape).tocsr()
        counted.sum_duplicates()
        if not (np.array_equal(counted.indptr, summed.indptr) and np.array_equal(counted.indices, summed.indices)):
            raise RuntimeError("pair patterns of counts and sums differ")  # unreachable: both have all pairs
        pair_count = counted.data.astype(np.int64)
    return summed.indptr, summed.indices, wsum, wysum, pair_count
