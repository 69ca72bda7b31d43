"""Fitting the rating models: the paper's fixed-prior model and calibrated mixed models fitted by REML.

Three models share one entry point, :func:`fit_model`:

``paper``
    The paper's model exactly (paper Eq. 1-2, App. E.2): :math:`y = s_A + s_H + \\epsilon` with fixed priors
    :math:`s \\sim \\mathcal{N}(\\mu_0, \\sigma_0^2)` and fixed noise :math:`\\beta`, solved by
    :func:`rating.engine.solve_bipartite`.
``calibrated``
    A linear mixed model :math:`y = a_A + h_H + \\epsilon` with one fixed effect per agent (the agent's
    expected score with an average participant, on the score scale; no shrinkage to any prior), random
    participant effects :math:`h \\sim \\mathcal{N}(0, \\sigma_H^2)` and noise
    :math:`\\epsilon \\sim \\mathcal{N}(0, \\beta^2/\\omega)`, with :math:`\\sigma_H, \\beta` estimated by
    restricted maximum likelihood (REML).
``calibrated_task``
    The same plus random task effects :math:`t_T \\sim \\mathcal{N}(0, \\sigma_T^2)` (observations without a
    task carry no task term).

Why agents are fixed effects, how REML is evaluated exactly on the Schur structure, and how the uncertainty
of the variance components is carried into the agents' intervals and :math:`P(A > B)` is written up in
``docs/rating-models.md``.

Pure numpy/scipy: no Django, no settings, no I/O, no module-level state.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse
from scipy.stats import chi2, norm
from threadpoolctl import threadpool_limits

from rating.arrays import finite_array, first_appearance, id_array, id_words, weight_array
from rating.engine import RatingConfig, prob_greater_matrix, solve_bipartite
from rating.linalg import chol_inverse, eliminated_block, inv_lower, row_quadratic_forms
from rating.reml import (
    BOUNDARY_TOL,
    FLAT_SIGMA,
    GH_NODES,
    GH_WEIGHTS,
    THETA_BOUNDS,
    Mixture,
    residual_diagnostics,
    variance_summary,
)
from rating.task_blocks import (
    BlockFactor,
    SingularSystem,
    TaskBlocks,
    factorise,
    observation_forms,
    participant_forms,
    task_blocks,
)

__all__ = [
    "RATING_MODELS",
    "FitResult",
    "ModelSpec",
    "compare_models",
    "fit_model",
    "heldout_coverage",
    # shared with the judge-aware model (rating/grader_fit.py)
    "code_ids",
    "json_safe",
    "row_forms",
]

# "judge_aware" needs every grade with its episode, grader and families: it is fitted by
# rating.grader_fit.fit_graded, not by fit_model.
RATING_MODELS: tuple[str, ...] = ("paper", "calibrated", "calibrated_task", "judge_aware")

# Beyond this many core columns (agents + tasks) per-human quantities gather over sparse rows.
_DENSE_CORE = 256
# Largest grouped-Gram workspace (groups x K x K floats) before falling back to per-human products.
_GROUPED_LIMIT = 1 << 24


# --------------------------------------------------------------------------------------------------------
# Model specification
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """Which rating model to fit, and how to report it.

    Parameters
    ----------
    kind
        One of :data:`RATING_MODELS`.
    k
        Multiplier of the conservative score :math:`\\mu - k\\sigma`.
    paper
        Priors and noise of the paper model (used only when ``kind == "paper"``).
    integrate_hyper
        Integrate the agents' posterior over the uncertainty of the estimated variance components (calibrated
        models); ``False`` plugs in the REML point estimate.
    """

    kind: str = "calibrated"
    k: float = 3.0
    paper: RatingConfig = RatingConfig()
    integrate_hyper: bool = True

    def __post_init__(self) -> None:
        if self.kind not in RATING_MODELS:
            raise ValueError(f"kind must be one of {', '.join(RATING_MODELS)}; got {self.kind!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, (int, float, np.integer, np.floating)):
            raise ValueError(f"k must be a real number, got {self.k!r}")
        if not math.isfinite(float(self.k)) or float(self.k) < 0:
            raise ValueError(f"k must be finite and >= 0, got {self.k!r}")
        object.__setattr__(self, "k", float(self.k))
        if not isinstance(self.paper, RatingConfig):
            raise ValueError(f"paper must be a RatingConfig, got {type(self.paper).__name__}")
        if not isinstance(self.integrate_hyper, bool):
            raise ValueError(f"integrate_hyper must be true or false, got {self.integrate_hyper!r}")

    def to_dict(self) -> dict[str, Any]:
        """Return the spec as JSON-safe data; :meth:`from_dict` restores it exactly."""
        return {
            "kind": self.kind,
            "k": self.k,
            "paper": self.paper.to_dict(),
            "integrate_hyper": self.integrate_hyper,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSpec:
        """Build a spec from :meth:`to_dict` output; missing keys take their defaults, unknown keys fail."""
        if not isinstance(data, dict):
            raise ValueError(f"model spec must be a dict, got {type(data).__name__}")
        known = {spec.name for spec in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"model spec has unknown keys: {', '.join(map(str, unknown))}")
        values = dict(data)
        if "paper" in values and not isinstance(values["paper"], RatingConfig):
            try:
                values["paper"] = RatingConfig.from_dict(values["paper"])
            except (TypeError, ValueError) as exc:
                raise ValueError(f"paper: {exc}")
        return cls(**values)


# --------------------------------------------------------------------------------------------------------
# Observations
# --------------------------------------------------------------------------------------------------------


def code_ids(values: Any, name: str, n: int | None, *, optional: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(codes, ids)`` numbering ids by first appearance (ids as ``str``).

    Integer arrays are coded on the integers (only the distinct values become strings), which keeps bulk
    loads fast. With ``optional`` a missing id (``None`` or blank) gets code -1 and forms no group.
    """
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries but there are {n} observations")
    if arr.dtype.kind == "b":
        raise ValueError(f"{name} must hold ids, not booleans")
    present = np.ones(arr.shape[0], dtype=bool)
    if arr.dtype.kind not in "iu":
        if arr.dtype == object and arr.size:
            # numpy's stubs reject None as a ufunc operand; equal() compares it elementwise on object arrays.
            missing = np.equal(arr, None)  # type: ignore[call-overload]
            if missing.any():
                if not optional:
                    raise ValueError(f"{name} contains None at index {int(np.flatnonzero(missing)[0])}")
                present &= ~missing
                arr = np.where(missing, "", arr)
        arr = id_array(arr, name)
        if arr.size:
            blank = np.char.str_len(np.char.strip(arr)) == 0
            if blank.any():
                if not optional:
                    raise ValueError(f"{name} contains an empty id at index {int(np.flatnonzero(blank)[0])}")
                present &= ~blank
    complete = bool(present.all())
    kept = arr if complete else arr[present]
    if kept.size == 0:
        return np.full(arr.shape[0], -1, dtype=np.int64), np.zeros(0, dtype=str)
    # Coded by a vectorised hash table (rating.engine), not a sort of every id.
    kept_codes, first = first_appearance(id_words(kept))
    if complete:  # every id present: the codes as they are, no masked copy of 10^7 entries
        return kept_codes, kept[first].astype(str)
    codes = np.full(arr.shape[0], -1, dtype=np.int64)
    codes[present] = kept_codes
    return codes, kept[first].astype(str)


@dataclass(frozen=True, eq=False)
class _Obs:
    """Observations coded by first appearance; ``task`` is -1 where an observation names no task."""

    agent: np.ndarray
    human: np.ndarray
    task: np.ndarray | None
    y: np.ndarray
    omega: np.ndarray
    agent_ids: np.ndarray
    human_ids: np.ndarray
    task_ids: np.ndarray | None
    # The human ids as the integers they were given as (None when they were not integers): the caller that
    # gave primary keys gets them back without parsing a million strings.
    human_keys: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.y.shape[0])

    @property
    def n_agents(self) -> int:
        return int(self.agent_ids.shape[0])

    @property
    def n_humans(self) -> int:
        return int(self.human_ids.shape[0])

    @property
    def n_tasks(self) -> int:
        return 0 if self.task_ids is None else int(self.task_ids.shape[0])

    def subset(self, rows: np.ndarray) -> _Obs:
        """Return the observations ``rows`` re-coded so every entity present has a contiguous code."""
        agent, agent_ids = _recode(self.agent[rows], self.agent_ids)
        human, human_ids = _recode(self.human[rows], self.human_ids)
        task, task_ids = (
            (None, None) if self.task is None or self.task_ids is None else _recode(self.task[rows], self.task_ids)
        )
        return _Obs(agent, human, task, self.y[rows], self.omega[rows], agent_ids, human_ids, task_ids)


def _recode(codes: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    present = codes >= 0
    if not present.any():
        return np.full(codes.shape[0], -1, dtype=np.int64), np.zeros(0, dtype=str)
    used, first, inverse = np.unique(codes[present], return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    remap = np.empty(used.size, dtype=np.int64)
    remap[order] = np.arange(used.size)
    out = np.full(codes.shape[0], -1, dtype=np.int64)
    out[present] = remap[inverse.reshape(-1)]
    return out, ids[used[order]]


def _observations(agent_ids: Any, human_ids: Any, scores: Any, task_ids: Any, weights: Any) -> _Obs:
    agent, agents = code_ids(agent_ids, "agent_ids", None)
    n = agent.shape[0]
    if n == 0:
        raise ValueError("agent_ids: at least one observation is required")
    human, humans = code_ids(human_ids, "human_ids", n)
    y = finite_array(scores, "scores", n)
    omega = weight_array(weights, "weights", n)
    task, tasks = (None, None) if task_ids is None else code_ids(task_ids, "task_ids", n, optional=True)
    given = np.asarray(human_ids)
    keys = None
    if given.dtype.kind in "iu":  # every row of a code holds the same id: a scatter numbers them exactly
        keys = np.empty(humans.shape[0], dtype=np.int64)
        keys[human] = given
    return _Obs(agent, human, task, y, omega, agents, humans, tasks, keys)


# --------------------------------------------------------------------------------------------------------
# Mixed-model equations on the Schur structure
# --------------------------------------------------------------------------------------------------------
#
# The "core" holds the columns that stay after the humans are eliminated: the agents (fixed effects, or an
# intercept plus random agents) and the tasks (random). Every quantity below is in units of beta = 1:
# C0 = [X Z]^T W [X Z] + blockdiag(0, Gamma^{-1}) with Gamma the variance ratios sigma^2 / beta^2, so the
# noise variance factors out of the restricted likelihood and is profiled analytically.


@dataclass(frozen=True, eq=False)
class _Structure:
    """Sufficient statistics of a design for the mixed-model equations (fixed across hyperparameters)."""

    n: int
    n_fixed: int  # p, the number of fixed-effect columns (they come first in the core)
    n_core: int  # K
    components: tuple[str, ...]  # random components, in theta order; "human" first
    component_cols: dict[str, np.ndarray]  # core columns of each core random component
    n_levels: dict[str, int]
    core_cols: tuple[np.ndarray, ...]  # per observation, the core columns it loads on (-1 = none)
    human: np.ndarray
    y: np.ndarray
    omega: np.ndarray
    gram_core: np.ndarray  # sum w x_c x_c^T (K x K)
    r_core: np.ndarray  # sum w y x_c
    couplings: scipy.sparse.csr_matrix  # H x K, sum w e_h x_c^T
    n_human: np.ndarray  # sum w per human
    r_human: np.ndarray  # sum w y per human
    ywy: float
    sum_log_omega: float
    grouped: _GroupedHumans | None
    # The task model with many tasks: the core system in connected task blocks (rating.task_blocks); then
    # gram_core is empty and every core solve goes through the block factor.
    blocks: TaskBlocks | None = None
    # Per core column array (the rows of ``core_cols``) and observation, its entry in ``couplings`` (-1: none).
    entries: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class _GroupedHumans:
    """Per-human sums pooled over humans with the same total weight (their elimination factor is shared)."""

    n_value: np.ndarray  # G distinct per-human weight totals
    count: np.ndarray  # humans per group
    gram: np.ndarray  # G x K x K: sum b_h b_h^T
    b_r: np.ndarray  # G x K: sum b_h r_h
    r2: np.ndarray  # G: sum r_h^2


def _structure(obs: _Obs, *, tasks: bool, random_agents: bool = False, blocks: bool | None = None) -> _Structure:
    """Return the design's sufficient statistics.

    ``blocks`` chooses the task-block core (:mod:`rating.task_blocks`) over the dense one; by default the
    task model takes it once agents + tasks pass ``_DENSE_CORE``. Both give the same fit.
    """
    n, n_a, n_h = obs.n, obs.n_agents, obs.n_humans
    n_t = obs.n_tasks if tasks else 0
    offset = 1 if random_agents else 0
    cols: list[np.ndarray] = []
    if random_agents:
        cols.append(np.zeros(n, dtype=np.int64))
    cols.append(obs.agent + offset)
    component_cols: dict[str, np.ndarray] = {}
    components = ["human"]
    n_levels = {"human": n_h}
    if tasks:
        if obs.task is None or n_t == 0:
            raise ValueError("task_ids: the task model needs at least one observation with a task")
        cols.append(np.where(obs.task >= 0, obs.task + offset + n_a, -1))
        components.append("task")
        component_cols["task"] = np.arange(offset + n_a, offset + n_a + n_t)
        n_levels["task"] = n_t
    if random_agents:
        components.append("agent")
        component_cols["agent"] = np.arange(1, 1 + n_a)
        n_levels["agent"] = n_a
    n_core = offset + n_a + n_t
    use_blocks = tasks and not random_agents and (n_core > _DENSE_CORE if blocks is None else blocks)
    w, wy = obs.omega, obs.omega * obs.y
    gram = np.zeros(0 if use_blocks else n_core * n_core)
    r_core = np.zeros(n_core)
    complete = [ci.size == 0 or int(ci.min()) >= 0 for ci in cols]  # no -1 codes: use them unmasked
    for i, ci in enumerate(cols):
        has_i: slice | np.ndarray = slice(None) if complete[i] else ci >= 0
        r_core += np.bincount(ci[has_i], weights=wy[has_i], minlength=n_core)
        for j, cj in enumerate(cols[i:], start=i):
            if use_blocks:
                break
            if complete[i] and complete[j]:
                cell = np.bincount(ci * n_core + cj, weights=w, minlength=n_core * n_core)
            else:
                both = (ci >= 0) & (cj >= 0)
                cell = np.bincount(ci[both] * n_core + cj[both], weights=w[both], minlength=n_core * n_core)
            gram += cell
            if cj is not ci:
                gram += cell.reshape(n_core, n_core).T.ravel()
    # Imported here: numba loads only in the processes that fit.
    from rating.design_kernels import coupling_entries

    stacked = cols[0][None, :] if len(cols) == 1 else np.stack(cols)  # one column: a view, no copy
    indptr, indices, data, entries = coupling_entries(obs.human, stacked, w, n_h, n_core)
    couplings = scipy.sparse.csr_matrix((data, indices, indptr), shape=(n_h, n_core))
    n_human = np.bincount(obs.human, weights=w, minlength=n_h)
    r_human = np.bincount(obs.human, weights=wy, minlength=n_h)
    layout = None
    if use_blocks:
        assert obs.task is not None
        layout = task_blocks(couplings, n_a, n_human, obs.agent, obs.task, w)
    return _Structure(
        n=n,
        n_fixed=1 if random_agents else n_a,
        n_core=n_core,
        components=tuple(components),
        component_cols=component_cols,
        n_levels=n_levels,
        core_cols=tuple(cols),
        human=obs.human,
        y=obs.y,
        omega=obs.omega,
        gram_core=gram.reshape((0, 0) if use_blocks else (n_core, n_core)),
        r_core=r_core,
        couplings=couplings,
        n_human=n_human,
        r_human=r_human,
        ywy=float(np.dot(wy, obs.y)),
        sum_log_omega=float(np.log(obs.omega).sum()),
        grouped=None if use_blocks else _group_humans(couplings, n_human, r_human),
        blocks=layout,
        entries=entries,
    )


def _group_humans(
    couplings: scipy.sparse.csr_matrix, n_human: np.ndarray, r_human: np.ndarray
) -> _GroupedHumans | None:
    """Pool humans by total weight when that makes every likelihood evaluation independent of their number.

    A human's elimination factor :math:`1/d_h = 1/(n_h + 1/\\gamma_H)` depends on the human only through
    :math:`n_h`; with unit weights :math:`n_h` is a count and takes few values, so
    :math:`\\sum_h b_h b_h^\\top / d_h = \\sum_g (\\sum_{h \\in g} b_h b_h^\\top) / d_g` is exact and costs
    :math:`O(G K^2)` per evaluation after one pass over the data.
    """
    n_h, n_core = couplings.shape
    values, group = np.unique(n_human, return_inverse=True)
    n_groups = values.shape[0]
    if n_groups * n_core * n_core > _GROUPED_LIMIT or 4 * n_groups > n_h:
        return None
    group = group.reshape(-1)
    # Imported here: numba loads only in the processes that fit.
    from rating.design_kernels import grouped_outer_sums

    gram, b_r = grouped_outer_sums(
        couplings.indptr, couplings.indices, couplings.data, r_human, group, n_groups, n_core
    )
    # In the column-major layout the sparse product used to return: einsum's order of summation follows the
    # strides, and this keeps the fit's numbers as they were, to the last bit.
    gram = np.asfortranarray(gram.reshape(n_groups * n_core, n_core)).reshape(n_groups, n_core, n_core)
    return _GroupedHumans(
        n_value=values,
        count=np.bincount(group, minlength=n_groups).astype(np.float64),
        gram=gram,
        b_r=b_r,
        r2=np.bincount(group, weights=r_human**2, minlength=n_groups),
    )


@dataclass(frozen=True, eq=False)
class _Evaluation:
    """The mixed-model equations solved at one set of variance ratios (beta = 1 units)."""

    theta: np.ndarray
    gamma: dict[str, float]
    d: np.ndarray  # n_h + 1/gamma_H per human
    chol: np.ndarray | None  # lower Cholesky factor of the core Schur complement S (None: see factor)
    core_mu: np.ndarray  # fixed effects and core random effects
    q: float  # y^T P0 y
    logdet_c: float  # log |C0|
    log_gamma_sum: float  # sum_j n_j theta_j = log |Gamma|
    dfe: int  # n - p
    s_inv: np.ndarray | None = None  # S^{-1}, filled in when a gradient needs it (dense core only)
    factor: BlockFactor | None = None  # the task-block factor of S (when the structure has blocks)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """Return :math:`S^{-1} r` for a core vector or (core x m) matrix."""
        if self.factor is not None:
            return self.factor.solve(rhs)
        return scipy.linalg.cho_solve((self.chol, True), rhs, check_finite=False)

    def profile_loglik(self, sum_log_omega: float) -> float:
        tau = math.log(self.q / self.dfe)
        return self.loglik(tau, sum_log_omega)

    def loglik(self, tau: float, sum_log_omega: float) -> float:
        """Return the restricted log-likelihood at noise variance :math:`e^\\tau` (see :func:`_evaluate`)."""
        return -0.5 * (
            self.dfe * (math.log(2.0 * math.pi) + tau)
            - sum_log_omega
            + self.log_gamma_sum
            + self.logdet_c
            + self.q * math.exp(-tau)
        )


def _core_prior(st: _Structure, gamma: dict[str, float]) -> np.ndarray:
    prior = np.zeros(st.n_core)
    for name, cols in st.component_cols.items():
        prior[cols] = 1.0 / gamma[name]
    return prior


def _weighted_gram(st: _Structure, c: np.ndarray) -> np.ndarray:
    """Return :math:`\\sum_h c_h b_h b_h^\\top` (dense K x K)."""
    if st.n_core <= _DENSE_CORE:
        return eliminated_block(st.couplings, c)
    scaled = scipy.sparse.diags(c) @ st.couplings
    gram = (st.couplings.T @ scaled).toarray()
    return 0.5 * (gram + gram.T)


def _evaluate(st: _Structure, theta: np.ndarray, *, gradient: bool = False) -> tuple[_Evaluation, np.ndarray | None]:
    """Solve the mixed-model equations at log variance ratios ``theta`` and return the likelihood pieces.

    With :math:`C_0` the mixed-model matrix in units of :math:`\\beta = 1`, Henderson's identity gives the
    restricted log-likelihood at noise variance :math:`\\beta^2 = e^\\tau`

    .. math::

        \\ell_R = -\\tfrac12\\Big[(n-p)(\\log 2\\pi + \\tau) - \\textstyle\\sum_o \\log\\omega_o
        + \\log|\\Gamma| + \\log|C_0| + e^{-\\tau}\\, y^\\top P_0 y\\Big],

    with :math:`\\log|C_0| = \\sum_h \\log d_h + \\log|S|` (humans eliminated, :math:`S` the core Schur
    complement) and :math:`y^\\top P_0 y = y^\\top W y - \\hat b^\\top r`. With ``gradient`` also return, per
    component :math:`j`, the pair :math:`(\\partial(\\log|\\Gamma| + \\log|C_0|)/\\partial\\theta_j,\\;
    \\partial q / \\partial\\theta_j)` using :math:`\\partial \\log|C_0|/\\partial\\theta_j =
    -\\mathrm{tr}_j(C_0^{-1})/\\gamma_j` and
    :math:`\\partial q/\\partial\\theta_j = -\\lVert\\hat u_j\\rVert^2/\\gamma_j`.
    """
    gamma = {name: math.exp(float(t)) for name, t in zip(st.components, theta, strict=True)}
    d = st.n_human + 1.0 / gamma["human"]
    if st.blocks is not None:
        return _evaluate_blocks(st, theta, gamma, d, gradient)
    grouped = st.grouped
    if grouped is not None:
        d_g = grouped.n_value + 1.0 / gamma["human"]
        eliminated = np.einsum("g,gij->ij", 1.0 / d_g, grouped.gram)
        rhs_elim = (grouped.b_r / d_g[:, None]).sum(axis=0)
        r2_over_d = float((grouped.r2 / d_g).sum())
    else:
        inv_d = 1.0 / d
        eliminated = _weighted_gram(st, inv_d)
        rhs_elim = st.couplings.T @ (st.r_human * inv_d)
        r2_over_d = float(np.dot(st.r_human, st.r_human * inv_d))
    schur = st.gram_core + np.diag(_core_prior(st, gamma)) - eliminated
    try:
        chol = scipy.linalg.cholesky(schur, lower=True, check_finite=False)
    except np.linalg.LinAlgError as exc:
        raise ValueError(f"the model is not identified by these observations (singular system): {exc}")
    rhs = st.r_core - rhs_elim
    core_mu = scipy.linalg.cho_solve((chol, True), rhs, check_finite=False)
    # b^T r = core_mu . r_core + u_H . r_H, with u_H = (r_H - B core_mu) / d.
    if grouped is not None:
        u_dot_r = r2_over_d - float(core_mu @ (grouped.b_r / d_g[:, None]).sum(axis=0))
    else:
        u_h = (st.r_human - st.couplings @ core_mu) / d
        u_dot_r = float(np.dot(u_h, st.r_human))
    q = st.ywy - float(core_mu @ st.r_core) - u_dot_r
    dfe = st.n - st.n_fixed
    if dfe <= 0:
        raise ValueError(f"the model needs more observations than fixed effects ({st.n} <= {st.n_fixed})")
    # Below the rounding error of y'Wy the residual sum of squares is zero (scores fitted exactly, e.g. all
    # equal): floor it there, not at the smallest float, or beta^2 ~ 1e-308 overflows every information entry.
    q = max(q, np.finfo(float).eps * st.ywy, np.finfo(float).tiny)
    log_gamma_sum = float(sum(st.n_levels[name] * math.log(gamma[name]) for name in st.components))
    logdet_c = float(np.log(d).sum() + 2.0 * np.log(np.diag(chol)).sum())
    evaluation = _Evaluation(
        theta=np.asarray(theta, dtype=np.float64).copy(),
        gamma=gamma,
        d=d,
        chol=chol,
        core_mu=core_mu,
        q=q,
        logdet_c=logdet_c,
        log_gamma_sum=log_gamma_sum,
        dfe=dfe,
    )
    if not gradient:
        return evaluation, None
    return evaluation, _gradient(st, evaluation)


def _evaluate_blocks(
    st: _Structure, theta: np.ndarray, gamma: dict[str, float], d: np.ndarray, gradient: bool
) -> tuple[_Evaluation, np.ndarray | None]:
    """:func:`_evaluate` on the task-block core: the same quantities, with S factorised in blocks."""
    blocks = st.blocks
    assert blocks is not None
    inv_d_g = 1.0 / (blocks.group_weight + 1.0 / gamma["human"])
    try:
        factor = factorise(blocks, inv_d_g, 1.0 / gamma["task"])
    except SingularSystem as exc:
        raise ValueError(str(exc))
    inv_d = 1.0 / d
    rhs = st.r_core - st.couplings.T @ (st.r_human * inv_d)
    core_mu = factor.solve(rhs)
    u_h = (st.r_human - st.couplings @ core_mu) * inv_d
    q = st.ywy - float(core_mu @ st.r_core) - float(np.dot(u_h, st.r_human))
    dfe = st.n - st.n_fixed
    if dfe <= 0:
        raise ValueError(f"the model needs more observations than fixed effects ({st.n} <= {st.n_fixed})")
    q = max(q, np.finfo(float).eps * st.ywy, np.finfo(float).tiny)
    log_gamma_sum = float(sum(st.n_levels[name] * math.log(gamma[name]) for name in st.components))
    evaluation = _Evaluation(
        theta=np.asarray(theta, dtype=np.float64).copy(),
        gamma=gamma,
        d=d,
        chol=None,
        core_mu=core_mu,
        q=q,
        logdet_c=float(np.log(d).sum()) + factor.logdet,
        log_gamma_sum=log_gamma_sum,
        dfe=dfe,
        factor=factor,
    )
    if not gradient:
        return evaluation, None
    return evaluation, _gradient(st, evaluation)


def _gradient_blocks(st: _Structure, ev: _Evaluation) -> np.ndarray:
    """:func:`_gradient` on the task-block core (traces of S^{-1} from the block factor)."""
    blocks, factor = st.blocks, ev.factor
    assert blocks is not None and factor is not None
    grads = np.empty((len(st.components), 2))
    for j, name in enumerate(st.components):
        g = ev.gamma[name]
        if name == "human":
            inv_d_g = 1.0 / (blocks.group_weight + 1.0 / g)
            trace = float(np.dot(blocks.group_count, inv_d_g)) + factor.trace_weighted_gram(inv_d_g**2)
            u_h = (st.r_human - st.couplings @ ev.core_mu) / ev.d
            u2 = float(np.dot(u_h, u_h))
        else:
            cols = st.component_cols[name]
            trace = float(factor.inverse_diagonal()[cols].sum())
            u2 = float(np.dot(ev.core_mu[cols], ev.core_mu[cols]))
        grads[j, 0] = st.n_levels[name] - trace / g
        grads[j, 1] = -u2 / g
    return grads


def _gradient(st: _Structure, ev: _Evaluation) -> np.ndarray:
    """Return per component the pair (d(log|Gamma| + log|C0|)/d theta_j, d q / d theta_j) (see _evaluate).

    Needs :math:`S^{-1}` (kept on the evaluation for later use).
    """
    if ev.factor is not None:
        return _gradient_blocks(st, ev)
    assert ev.chol is not None
    if ev.s_inv is None:
        object.__setattr__(ev, "s_inv", chol_inverse(ev.chol))
    s_inv = ev.s_inv
    assert s_inv is not None
    grouped, core_mu = st.grouped, ev.core_mu
    grads = np.empty((len(st.components), 2))
    for j, name in enumerate(st.components):
        g = ev.gamma[name]
        if name == "human":
            if grouped is not None:
                d_g = grouped.n_value + 1.0 / g
                gram2 = np.einsum("g,gij->ij", 1.0 / d_g**2, grouped.gram)
                trace = float((grouped.count / d_g).sum()) + float(np.sum(s_inv * gram2))
                # ||u_H||^2 = sum_g (r2 - 2 mu.b_r + mu^T gram mu) / d_g^2
                quad = np.einsum("i,gij,j->g", core_mu, grouped.gram, core_mu)
                u2 = float(((grouped.r2 - 2.0 * grouped.b_r @ core_mu + quad) / d_g**2).sum())
            else:
                inv_d = 1.0 / ev.d
                trace = float(inv_d.sum()) + float(np.sum(s_inv * _weighted_gram(st, inv_d**2)))
                u_h = (st.r_human - st.couplings @ core_mu) * inv_d
                u2 = float(np.dot(u_h, u_h))
        else:
            cols = st.component_cols[name]
            trace = float(np.diag(s_inv)[cols].sum())
            u2 = float(np.dot(core_mu[cols], core_mu[cols]))
        grads[j, 0] = st.n_levels[name] - trace / g
        grads[j, 1] = -u2 / g
    return grads


def _profile_gradient(ev: _Evaluation, grads: np.ndarray) -> np.ndarray:
    """Return :math:`\\partial \\ell_p / \\partial\\theta` (envelope theorem at :math:`\\hat\\tau(\\theta)`)."""
    return -0.5 * (grads[:, 0] + grads[:, 1] * ev.dfe / ev.q)


@dataclass(frozen=True, eq=False)
class _Reml:
    """A REML fit: the optimum, the curvature there, and which components sit at zero."""

    evaluation: _Evaluation
    tau: float
    loglik: float
    cov: np.ndarray  # inverse observed information in (tau, theta_free...) order
    free: np.ndarray  # bool per component: estimated in the interior
    converged: bool


def _fitted(st: _Structure, u_h: np.ndarray, core: np.ndarray) -> np.ndarray:
    """Return each observation's fitted value :math:`u_h + \\sum_c \\mathrm{core}_c` (-1 columns add nothing)."""
    fitted = np.take(u_h, st.human)
    padded = np.append(core, 0.0)  # code -1 reads the appended zero
    for ci in st.core_cols:
        fitted += np.take(padded, ci)
    return fitted


def _core_sums(st: _Structure, values: np.ndarray) -> np.ndarray:
    """Return :math:`\\sum_o x_{oc} v_o` per core column (observations loading on no column add nothing)."""
    total = np.zeros(st.n_core)
    for ci in st.core_cols:
        total += np.bincount(ci + 1, weights=values, minlength=st.n_core + 1)[1:]
    return total


def _average_information(st: _Structure, ev: _Evaluation) -> np.ndarray:
    """Return the average-information matrix of :math:`\\ell_R` in :math:`(\\tau, \\theta)` coordinates.

    In log variances :math:`\\phi = (\\log\\beta^2, \\log\\sigma_j^2)` it is
    :math:`\\mathcal{I}_{ij} = \\tfrac12 (V_i P y)^\\top P (V_j P y)\\,\\sigma^2_i\\sigma^2_j`, the mean of the
    observed and expected information (Gilmour, Thompson & Cullis 1995). The working vectors are the
    conditional residuals :math:`e` and each component's fitted contribution :math:`Z_j\\hat u_j`, so
    :math:`\\mathcal{I}_\\phi = A^\\top P_0 A/(2\\beta^2)` with :math:`P_0 v = W(v - [X\\,Z]\\hat b(v))`.

    Only the residuals are formed per observation (for :math:`e^\\top W e`). A component's vector is constant
    per human (``a``) or per core column (``b``), so its weighted sums per human and per column, which are all
    the mixed-model equations read, come from the sufficient statistics, and
    :math:`v_i^\\top P_0 v_j = v_i^\\top W v_j - r_h(v_i)^\\top u(v_j) - r_c(v_i)^\\top c(v_j)`: one solve
    per parameter and no pass over the observations but the residuals'.
    """
    core = ev.core_mu
    coupled = st.couplings @ core
    u_h = (st.r_human - coupled) / ev.d
    # The residuals' weighted sums per human and column, r - (their fitted part), and e^T W e: on the dense
    # core from the sufficient statistics, with e = y - u_h - x_c^T core expanded (no pass over the
    # observations); the block core keeps no dense gram: sum them over the observations.
    if st.blocks is None:
        sums_h = [st.r_human - st.n_human * u_h - coupled]
        sums_c = [st.r_core - st.gram_core @ core - st.couplings.T @ u_h]
        e_w_e = (
            st.ywy
            - 2.0 * (float(u_h @ st.r_human) + float(core @ st.r_core))
            + float((st.n_human * u_h) @ u_h)
            + float(core @ (st.gram_core @ core))
            + 2.0 * float(u_h @ coupled)
        )
        if e_w_e < 1e-6 * st.ywy:  # the expansion cancels to noise when the fit is nearly exact: sum it directly
            residual = st.y - _fitted(st, u_h, core)
            e_w_e = float(np.dot(st.omega * residual, residual))
    else:
        residual = st.y - _fitted(st, u_h, core)
        w_e = st.omega * residual
        sums_h = [np.bincount(st.human, weights=w_e, minlength=st.n_human.shape[0])]
        sums_c = [_core_sums(st, w_e)]
        e_w_e = float(np.dot(w_e, residual))
    parts: list[tuple[np.ndarray | None, np.ndarray | None]] = []
    for name in st.components:
        if name == "human":
            parts.append((u_h, None))
            sums_h.append(st.n_human * u_h)
            sums_c.append(st.couplings.T @ u_h)
            continue
        b = np.zeros(st.n_core)
        cols = st.component_cols[name]
        b[cols] = ev.core_mu[cols]
        if st.blocks is None:
            gram_b = st.gram_core @ b
        else:  # the task-block core keeps no dense gram: sum the vector over the observations
            gram_b = _core_sums(st, st.omega * _fitted(st, np.zeros(st.n_human.shape[0]), b))
        parts.append((None, b))
        sums_h.append(st.couplings @ b)
        sums_c.append(gram_b)
    m = 1 + len(parts)
    gram = np.empty((m, m))
    gram[0, 0] = e_w_e
    for j, (a, b) in enumerate(parts, start=1):
        for i in range(m):
            # v_i^T W v_j with v_j = a[human] + b[core]: the sums of v_i per human and column, weighted.
            gram[i, j] = (float(a @ sums_h[i]) if a is not None else 0.0) + (
                float(b @ sums_c[i]) if b is not None else 0.0
            )
    gram[1:, 0] = gram[0, 1:]
    info_phi = np.empty((m, m))
    for j in range(m):
        core = ev.solve(sums_c[j] - st.couplings.T @ (sums_h[j] / ev.d))
        u = (sums_h[j] - st.couplings @ core) / ev.d
        for i in range(m):
            info_phi[i, j] = gram[i, j] - float(sums_h[i] @ u) - float(sums_c[i] @ core)
    beta2 = ev.q / ev.dfe
    info_phi = info_phi / (2.0 * beta2)
    info_phi = 0.5 * (info_phi + info_phi.T)
    # phi = M (tau, theta) with M = [[1, 0], [1, I]].
    mm = np.eye(m)
    mm[1:, 0] = 1.0
    return mm.T @ info_phi @ mm


def _reml(st: _Structure) -> _Reml:
    """Maximise the restricted likelihood over the log variance ratios by average-information Newton steps.

    The noise variance is profiled out analytically; the gradient in the ratios is exact
    (:func:`_evaluate`) and the curvature is the average information (:func:`_average_information`), reduced
    to the profiled coordinates by a Schur complement. Steps are capped and halved until the likelihood
    does not fall, so the iteration converges to a zero of the exact gradient (to ~1e-10 in the log ratios).
    A component whose ratio runs into the lower bound with the gradient pointing outwards is estimated at
    zero and held there. The covariance of :math:`(\\tau, \\theta_{free})` is the inverse average information.
    """
    n_comp = len(st.components)
    lo, hi = THETA_BOUNDS
    # Start where each component's variance is a fifth of the noise: typical of scored episodes, and the
    # line search makes the start matter only for the number of steps.
    theta = np.full(n_comp, math.log(0.2))
    ev, grads = _evaluate(st, theta, gradient=True)
    assert grads is not None
    value = ev.profile_loglik(st.sum_log_omega)
    converged = False
    # The average information seeds the curvature; secant (BFGS) updates from the exact gradients refine it,
    # so the costly information is recomputed only when the set of free components changes.
    profiled: np.ndarray | None = None
    profiled_free: np.ndarray | None = None
    last: tuple[np.ndarray, np.ndarray] | None = None
    for _ in range(200):
        grad = _profile_gradient(ev, grads)
        free = (theta > lo + BOUNDARY_TOL) | (grad > 0)
        if not free.any():
            converged = True
            break
        idx = np.flatnonzero(free)
        if profiled is None or profiled_free is None or not np.array_equal(profiled_free, free):
            info = _average_information(st, ev)
            sub = np.concatenate([[0], 1 + idx])
            info = info[np.ix_(sub, sub)]
            # Profile out tau: the information about theta left once tau is estimated.
            profiled = info[1:, 1:] - np.outer(info[1:, 0], info[0, 1:]) / info[0, 0]
            profiled_free = free
        elif last is not None:
            s_k = theta[idx] - last[0][idx]
            y_k = last[1][idx] - grad[idx]
            if float(y_k @ s_k) > 1e-12 * float(np.linalg.norm(y_k) * np.linalg.norm(s_k)):
                bs = profiled @ s_k
                profiled = profiled + np.outer(y_k, y_k) / float(y_k @ s_k) - np.outer(bs, bs) / float(s_k @ bs)
        try:
            step = np.linalg.solve(profiled, grad[idx])
        except np.linalg.LinAlgError:
            step = grad[idx]
        largest = float(np.max(np.abs(step)))
        if largest < 1e-10 and np.all((theta[idx] > lo + BOUNDARY_TOL) | (step > 0)):
            # The next point is within the tolerance of this one: converged without another solve.
            converged = True
            break
        if largest > 2.0:
            step *= 2.0 / largest
        accepted = False
        shrink = 1.0
        for _ in range(50):
            new = theta.copy()
            new[idx] = np.clip(theta[idx] + shrink * step, lo, hi)
            ev_new, _ = _evaluate(st, new)
            value_new = ev_new.profile_loglik(st.sum_log_omega)
            if value_new >= value - 1e-13 * abs(value):
                accepted = True
                grads_new = _gradient(st, ev_new)
                break
            shrink *= 0.5
        if not accepted:
            converged = bool(np.max(np.abs(grad[idx])) < 1e-6 * max(1.0, abs(value)))
            break
        moved = float(np.max(np.abs(new - theta)))
        last = (theta, grad)
        theta, ev, grads, value = new, ev_new, grads_new, value_new
        if moved < 1e-10:
            converged = True
            break
    return _reml_result(st, ev, converged)


def _reml_result(st: _Structure, ev: _Evaluation, converged: bool) -> _Reml:
    """Return the fit at the optimum ``ev``: the profiled noise variance and the inverse average information."""
    free = ev.theta > THETA_BOUNDS[0] + BOUNDARY_TOL
    tau = math.log(ev.q / ev.dfe)
    sub = np.concatenate([[0], 1 + np.flatnonzero(free)])
    info = _average_information(st, ev)[np.ix_(sub, sub)]
    try:
        cov = np.linalg.inv(info)
        if not np.all(np.linalg.eigvalsh(0.5 * (cov + cov.T)) > 0):
            raise np.linalg.LinAlgError("information not positive definite")
    except np.linalg.LinAlgError:
        cov = np.full_like(info, np.nan)
    return _Reml(
        evaluation=ev,
        tau=tau,
        loglik=ev.loglik(tau, st.sum_log_omega),
        cov=0.5 * (cov + cov.T),
        free=free,
        converged=converged,
    )


# --------------------------------------------------------------------------------------------------------
# Posterior of a fitted structure
# --------------------------------------------------------------------------------------------------------


def _agent_map(st: _Structure, n_agents: int) -> np.ndarray:
    """Return the linear map from core effects to agent skills (fixed: identity; random: mu + a_A)."""
    out = np.zeros((n_agents, st.n_core))
    if st.n_fixed == n_agents and "agent" not in st.component_cols:
        out[:, :n_agents] = np.eye(n_agents)
    else:
        out[:, 0] = 1.0
        out[:, 1 : 1 + n_agents] = np.eye(n_agents)
    return out


def _agent_moments(st: _Structure, ev: _Evaluation, lmap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if ev.factor is not None:
        # Fixed agents come first in the core: their block of S^{-1} is M^{-1}.
        n_a = lmap.shape[0]
        return ev.core_mu[:n_a].copy(), ev.factor.m_inv.copy()
    cols = ev.solve(lmap.T)
    cov0 = lmap @ cols
    return lmap @ ev.core_mu, 0.5 * (cov0 + cov0.T)


def _mixture(st: _Structure, reml: _Reml, lmap: np.ndarray, integrate: bool) -> tuple[Mixture, bool, list[np.ndarray]]:
    """Build the quadrature over the variance components (Laplace approximation in log variances); return it,
    whether it integrates, and the log variance ratios of its nodes (the REML estimate first).

    The log variance ratios of the interior components take sigma-point nodes of their approximate
    posterior :math:`\\mathcal{N}(\\hat\\theta, \\Sigma_{\\theta\\theta})` (a node per axis and sign at
    :math:`\\pm\\sqrt{3}` standard deviations plus the centre: exact for quadratics); at each node the log noise
    variance takes three Gauss-Hermite nodes of its conditional normal. Each node costs one solve.
    """
    ev = reml.evaluation
    mean0, cov0 = _agent_moments(st, ev, lmap)
    cov = reml.cov
    if not integrate or not np.all(np.isfinite(cov)):
        return (
            Mixture(np.ones(1), mean0[None], cov0[None], np.array([[math.exp(reml.tau)]]), np.ones((1, 1))),
            False,
            [ev.theta],
        )
    n_free = cov.shape[0] - 1
    var_tau = cov[0, 0]
    thetas = [ev.theta]
    weights = [1.0 - n_free / 3.0]
    gain = np.zeros(n_free)
    cond_var = var_tau
    if n_free:
        cov_tt = cov[1:, 1:]
        cov_tau_t = cov[0, 1:]
        gain = np.linalg.solve(cov_tt, cov_tau_t)
        cond_var = max(var_tau - float(cov_tau_t @ gain), 0.0)
        evals, evecs = np.linalg.eigh(cov_tt)
        free_idx = np.flatnonzero(reml.free)
        for axis in range(n_free):
            direction = evecs[:, axis] * math.sqrt(max(evals[axis], 0.0) * 3.0)
            for sign in (1.0, -1.0):
                theta = ev.theta.copy()
                theta[free_idx] = np.clip(theta[free_idx] + sign * direction, *THETA_BOUNDS)
                thetas.append(theta)
                weights.append(1.0 / 6.0)
    means, covs, beta2, beta2_w = [], [], [], []
    free_idx = np.flatnonzero(reml.free)
    for theta in thetas:
        if theta is ev.theta:
            m, c = mean0, cov0
        else:
            m, c = _agent_moments(st, _evaluate(st, theta)[0], lmap)
        means.append(m)
        covs.append(c)
        tau_mean = reml.tau + (float(gain @ (theta[free_idx] - ev.theta[free_idx])) if n_free else 0.0)
        beta2.append(np.exp(tau_mean + math.sqrt(cond_var) * GH_NODES))
        beta2_w.append(GH_WEIGHTS)
    return (
        Mixture(np.asarray(weights), np.asarray(means), np.asarray(covs), np.asarray(beta2), np.asarray(beta2_w)),
        True,
        thetas,
    )


# --------------------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------------------


def json_safe(value: Any) -> Any:
    """Return ``value`` with numpy scalars/arrays made plain and non-finite floats as ``None``."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    return value


@dataclass(frozen=True, eq=False)
class VarianceNodes:
    """The two-factor calibrated model's variance components as fitted, for live updates (`rating.live`).

    ``gammas[j]`` is the participant variance ratio at quadrature node ``j`` (the REML estimate first), with the
    node's weight and noise variances as the agents' mixture uses them; ``cov`` is the inverse information of
    ``(tau, theta)`` (``theta`` only when ``free``).
    """

    gammas: np.ndarray
    node_weights: np.ndarray
    beta2: np.ndarray
    beta2_weights: np.ndarray
    tau: float
    cov: np.ndarray
    free: bool
    integrated: bool
    # The participants' summed terms at each node (rating.live.Terms fields), when the fit had them pooled by
    # participant weight (unit weights): then the live state costs no second pass over the ledger.
    pooled_terms: dict[str, Any] | None = None


@dataclass(frozen=True, eq=False)
class FitResult:
    """A fitted rating model: the agents' joint posterior, per-participant effects and model checks.

    ``agent_mu`` is on the score scale: for ``paper`` the posterior mean :math:`s_A`; for the calibrated
    models the agent's expected score with an average participant (and an average task). ``human_mu`` is
    the participant's skill: for ``paper`` :math:`s_H`; for the calibrated models the participant effect
    :math:`h_H`, which averages zero over participants. ``agent_cov`` includes the uncertainty of the
    variance components when ``spec.integrate_hyper`` (see :meth:`prob_greater`).
    """

    spec: ModelSpec
    agent_ids: np.ndarray
    agent_mu: np.ndarray
    agent_cov: np.ndarray
    agent_n: np.ndarray
    human_ids: np.ndarray
    human_mu: np.ndarray
    human_sigma: np.ndarray
    human_n: np.ndarray
    task_ids: np.ndarray | None
    task_mu: np.ndarray | None
    task_sigma: np.ndarray | None
    level: float | None
    hyper: dict[str, dict[str, float]]
    log_likelihood: float | None
    aic: float | None
    diagnostics: dict[str, Any]
    residuals: np.ndarray
    standardized_residuals: np.ndarray
    config: RatingConfig
    _mixture: Mixture | None = field(default=None, repr=False)
    # The calibrated two-factor model only: what a live update holds fixed.
    variance_nodes: VarianceNodes | None = field(default=None, repr=False)

    def agent_sigma(self) -> np.ndarray:
        """Return the agents' posterior standard deviations."""
        return np.sqrt(np.clip(np.diag(self.agent_cov), 0.0, None))

    def conservative(self) -> np.ndarray:
        """Return the conservative scores :math:`\\mu - k\\sigma` used for ranking."""
        return self.agent_mu - self.spec.k * self.agent_sigma()

    def prob_greater(self) -> np.ndarray:
        """Return :math:`P_{ij} = P(s_i > s_j)` (diagonal 0.5), variance-component uncertainty included."""
        if self._mixture is not None:
            return self._mixture.prob_greater()
        return prob_greater_matrix(self.agent_mu, self.agent_cov)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-safe summary for snapshots and reports (no per-observation arrays)."""
        sigma = self.agent_sigma()
        cons = self.conservative()
        agents = [
            {
                "agent_id": str(agent),
                "mu": float(self.agent_mu[i]),
                "sigma": float(sigma[i]),
                "conservative": float(cons[i]),
                "n": int(self.agent_n[i]),
            }
            for i, agent in enumerate(self.agent_ids)
        ]
        tasks = None
        if self.task_ids is not None and self.task_mu is not None and self.task_sigma is not None:
            tasks = [
                {"task_id": str(t), "mu": float(self.task_mu[i]), "sigma": float(self.task_sigma[i])}
                for i, t in enumerate(self.task_ids)
            ]
        return json_safe(
            {
                "model": self.spec.to_dict(),
                "config": self.config.to_dict(),
                "level": self.level,
                "hyper": self.hyper,
                "log_likelihood": self.log_likelihood,
                "aic": self.aic,
                "n_observations": int(self.residuals.shape[0]),
                "n_agents": int(self.agent_ids.shape[0]),
                "n_humans": int(self.human_ids.shape[0]),
                "n_tasks": None if self.task_ids is None else int(self.task_ids.shape[0]),
                "agents": agents,
                "agent_cov": self.agent_cov,
                "prob_greater": self.prob_greater(),
                "tasks": tasks,
                "diagnostics": self.diagnostics,
            }
        )


def _counts(codes: np.ndarray, size: int) -> np.ndarray:
    return np.bincount(codes[codes >= 0], minlength=size).astype(np.int64)


def _fit_paper(obs: _Obs, spec: ModelSpec) -> FitResult:
    config = dataclasses.replace(spec.paper, k=spec.k)
    mu_a, sigma_a = config.prior("agent")
    mu_h, sigma_h = config.prior("human")
    w = obs.omega / config.beta**2
    sol = solve_bipartite(
        obs.agent,
        obs.human,
        w,
        w * obs.y,
        np.full(obs.n_agents, 1.0 / sigma_a**2),
        np.full(obs.n_agents, mu_a / sigma_a**2),
        np.full(obs.n_humans, 1.0 / sigma_h**2),
        np.full(obs.n_humans, mu_h / sigma_h**2),
    )
    assert sol.var_humans is not None
    residuals = obs.y - sol.mu_agents[obs.agent] - sol.mu_humans[obs.human]
    # Standardised against the model's own noise claim beta / sqrt(omega): the check is whether it holds.
    diagnostics, standardized = residual_diagnostics(residuals, config.beta, obs.omega, None)
    diagnostics["standardization"] = "residual / (beta / sqrt(omega)) with the paper's fixed beta"
    return FitResult(
        spec=spec,
        agent_ids=obs.agent_ids,
        agent_mu=sol.mu_agents,
        agent_cov=sol.cov_agents,
        agent_n=_counts(obs.agent, obs.n_agents),
        human_ids=obs.human_ids,
        human_mu=sol.mu_humans,
        human_sigma=np.sqrt(sol.var_humans),
        human_n=_counts(obs.human, obs.n_humans),
        task_ids=None,
        task_mu=None,
        task_sigma=None,
        level=None,
        hyper={
            "beta": {"estimate": config.beta, "se": math.nan},
            "sigma_agent": {"estimate": sigma_a, "se": math.nan},
            "sigma_human": {"estimate": sigma_h, "se": math.nan},
        },
        log_likelihood=None,
        aic=None,
        diagnostics=diagnostics,
        residuals=residuals,
        standardized_residuals=standardized,
        config=config,
    )


def _gather_rows(couplings: scipy.sparse.csr_matrix) -> bool:
    """Return whether gathering over each row's entry pairs beats dense projections (nnz_h^2 vs nnz_h * K)."""
    sizes = np.diff(couplings.indptr).astype(np.int64)
    return couplings.shape[1] > _DENSE_CORE or 4 * int((sizes**2).sum()) < couplings.nnz * couplings.shape[1]


def row_forms(couplings: scipy.sparse.csr_matrix, chol: np.ndarray, s_inv: np.ndarray) -> np.ndarray:
    """Return :math:`b_h^\\top S^{-1} b_h` for every row of ``couplings``.

    Few core columns: project every row on :math:`L^{-\\top}` in dense blocks. Many (the task model): a
    human touches few of them, so gather :math:`S^{-1}` at the pairs of the row's entries instead.
    """
    n_rows, n_core = couplings.shape
    if not _gather_rows(couplings):
        return row_quadratic_forms(couplings, inv_lower(chol).T)
    indptr, indices, data = couplings.indptr, couplings.indices, couplings.data
    sizes = np.diff(indptr).astype(np.int64)
    out = np.zeros(n_rows)
    cum = np.cumsum(sizes**2)
    start = 0
    while start < n_rows:
        base = cum[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(cum, base + (1 << 22), side="right")))
        stop = min(stop, n_rows)
        sz = sizes[start:stop]
        entry_row = np.repeat(np.arange(start, stop), sz)
        entries = np.arange(indptr[start], indptr[stop])
        reps = sizes[entry_row]
        first = np.repeat(entries, reps)
        pair_row = np.repeat(entry_row, reps)
        offsets = np.arange(first.shape[0]) - np.repeat(np.cumsum(reps) - reps, reps)
        second = indptr[pair_row] + offsets
        vals = data[first] * data[second] * s_inv[indices[first], indices[second]]
        out[start:stop] = np.bincount(pair_row - start, weights=vals, minlength=stop - start)
        start = stop
    return out


@dataclass(frozen=True, eq=False)
class ParticipantRatings:
    """The participants' posterior (ids as in :attr:`FitResult.human_ids`), handed over as soon as it is final:
    the per-observation leverages and residual diagnostics that follow it take a second at 10^7 observations,
    in which a caller can already store it."""

    ids: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    n: np.ndarray
    keys: np.ndarray | None = None  # the ids as integers, when they were given as integers


ParticipantsReady = Callable[[ParticipantRatings], None]


def _fit_calibrated(
    obs: _Obs, spec: ModelSpec, *, random_agents: bool = False, on_participants: ParticipantsReady | None = None
) -> FitResult:
    tasks = spec.kind == "calibrated_task"
    # One BLAS thread: on a shared machine threaded factorisations of a few thousand columns measured up to
    # ten times slower than one thread (the task model at 2 000 tasks: 84-102 s against 8-11 s at load
    # 13-18; the two-factor model at 2 x 10^6 observations 2.0-2.3 s against 1.3-1.6 s at load 12).
    with threadpool_limits(limits=1, user_api="blas"):
        st = _structure(obs, tasks=tasks, random_agents=random_agents)
        return _fit_structure(obs, spec, st, on_participants)


def _fit_structure(
    obs: _Obs, spec: ModelSpec, st: _Structure, on_participants: ParticipantsReady | None = None
) -> FitResult:
    tasks = spec.kind == "calibrated_task"
    reml = _reml(st)
    ev = reml.evaluation
    beta2 = math.exp(reml.tau)
    beta = math.sqrt(beta2)
    lmap = _agent_map(st, obs.n_agents)
    mixture, integrated, node_thetas = _mixture(st, reml, lmap, spec.integrate_hyper)
    agent_mu, agent_cov = mixture.moments()

    u_h = (st.r_human - st.couplings @ ev.core_mu) / ev.d
    if ev.factor is not None:
        assert obs.task is not None
        b_s_b, tbt, z, e = participant_forms(ev.factor)
        var_h = beta2 * (1.0 / ev.d + b_s_b / ev.d**2)
    else:
        assert ev.chol is not None
        s_inv = ev.s_inv if ev.s_inv is not None else chol_inverse(ev.chol)
        var_h, reads, b_s_b = _dense_participant_forms(st, ev, beta2, s_inv)
    human_sigma, human_n = np.sqrt(var_h), _counts(obs.human, obs.n_humans)
    if on_participants is not None:
        on_participants(ParticipantRatings(obs.human_ids, u_h, human_sigma, human_n, obs.human_keys))
    residuals = obs.y - _fitted(st, u_h, ev.core_mu)
    if ev.factor is not None:
        assert obs.task is not None
        assert st.entries is not None  # rows: the agent, then the task column
        leverage = obs.omega * observation_forms(
            ev.factor, ev.d, st.human, obs.agent, obs.task, tbt, z, e, st.entries[1]
        )
        del tbt, z, e
        core_var = ev.factor.inverse_diagonal()
    else:
        leverage = _dense_leverages(st, ev, s_inv, reads, b_s_b, obs.omega)
        core_var = np.diag(s_inv).copy()
    diagnostics, standardized = residual_diagnostics(residuals, beta, obs.omega, leverage)
    diagnostics["leverage_mean"] = float(leverage.mean())
    diagnostics["standardization"] = "exact residual variance beta^2 (1/omega - x^T C^-1 x)"

    hyper = _hyper_summary(st, reml)
    n_params = 1 + int(reml.free.sum())
    task_ids = task_mu = task_sigma = None
    if tasks:
        cols = st.component_cols["task"]
        task_ids, task_mu = obs.task_ids, ev.core_mu[cols].copy()
        task_sigma = np.sqrt(beta2 * core_var[cols])
    sigma_h = math.sqrt(beta2 * ev.gamma["human"])
    level = float(agent_mu.mean())
    config = RatingConfig(
        mu0=0.0,
        sigma0=1.0,
        beta=beta,
        k=spec.k,
        agent_mu0=level,
        agent_sigma0=FLAT_SIGMA,
        human_mu0=0.0,
        human_sigma0=max(sigma_h, 1e-12 * max(beta, 1.0)),
    )
    diagnostics["reml_converged"] = bool(reml.converged)
    diagnostics["hyper_integrated"] = bool(integrated)
    if st.blocks is not None:
        diagnostics["task_blocks"] = {"blocks": st.blocks.n_blocks, "largest": st.blocks.largest}
    loglik = reml.loglik
    return FitResult(
        spec=spec,
        agent_ids=obs.agent_ids,
        agent_mu=agent_mu,
        agent_cov=agent_cov,
        agent_n=_counts(obs.agent, obs.n_agents),
        human_ids=obs.human_ids,
        human_mu=u_h,
        human_sigma=human_sigma,
        human_n=human_n,
        task_ids=task_ids,
        task_mu=task_mu,
        task_sigma=task_sigma,
        level=level,
        hyper=hyper,
        log_likelihood=loglik,
        aic=-2.0 * loglik + 2.0 * n_params,
        diagnostics=diagnostics,
        residuals=residuals,
        standardized_residuals=standardized,
        config=config,
        _mixture=mixture if integrated else None,
        variance_nodes=_variance_nodes(st, reml, mixture, integrated, node_thetas),
    )


def _variance_nodes(
    st: _Structure, reml: _Reml, mixture: Mixture, integrated: bool, thetas: list[np.ndarray]
) -> VarianceNodes | None:
    """Return the fitted variance components of a two-factor fit (agents fixed, participants random), else None."""
    if st.components != ("human",) or st.blocks is not None or "agent" in st.component_cols:
        return None
    gammas = np.exp(np.array([float(theta[0]) for theta in thetas]))
    return VarianceNodes(
        gammas=gammas,
        node_weights=mixture.weights.copy(),
        beta2=mixture.beta2.copy(),
        beta2_weights=mixture.beta2_weights.copy(),
        tau=float(reml.tau),
        cov=reml.cov.copy(),
        free=bool(reml.free[0]),
        integrated=bool(integrated),
        pooled_terms=_pooled_terms(st, gammas),
    )


def _pooled_terms(st: _Structure, gammas: np.ndarray) -> dict[str, Any] | None:
    """Return the participants' summed terms of a two-factor fit from its pooled sums (O(groups x agents^2))."""
    grouped = st.grouped
    if grouped is None:
        return None
    inv_d = [1.0 / (grouped.n_value + 1.0 / g) for g in gammas]
    sq = inv_d[0] ** 2
    agent_n = np.bincount(st.core_cols[0], minlength=st.n_core).astype(np.int64)
    return {
        "schur": np.stack([st.gram_core - np.einsum("g,gij->ij", w, grouped.gram) for w in inv_d]),
        "rhs": np.stack([st.r_core - (grouped.b_r * w[:, None]).sum(axis=0) for w in inv_d]),
        "agent_n": agent_n,
        "n": int(st.n),
        "n_humans": int(st.n_levels["human"]),
        "ywy": float(st.ywy),
        "sum_log_omega": float(st.sum_log_omega),
        "s2d": float(np.dot(grouped.r2, inv_d[0])),
        "q0": float(np.dot(grouped.r2, sq)),
        "q1": (grouped.b_r * sq[:, None]).sum(axis=0),
        "q2": np.einsum("g,gij->ij", sq, grouped.gram),
        "sum_inv_d": float(np.dot(grouped.count, inv_d[0])),
    }


def _dense_participant_forms(
    st: _Structure, ev: _Evaluation, beta2: float, s_inv: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the participants' variances on the dense core, with :math:`S^{-1} b_h` read at each coupling entry
    and :math:`b_h^\\top S^{-1} b_h` (which the leverages reuse).

    :math:`S^{-1} b_h` is read only at the participant's own coupling entries (a handful per participant): no
    participants x core product.
    """
    from rating.design_kernels import entry_row_products

    couplings = st.couplings
    reads, b_s_b = entry_row_products(couplings.indptr, couplings.indices, couplings.data, s_inv)
    return beta2 * (1.0 / ev.d + b_s_b / ev.d**2), reads, b_s_b


def _dense_leverages(
    st: _Structure, ev: _Evaluation, s_inv: np.ndarray, reads: np.ndarray, b_s_b: np.ndarray, omega: np.ndarray
) -> np.ndarray:
    """Return the leverages on the dense core: each observation's :math:`x_c^\\top S^{-1} b_h` is the read at its
    own coupling entry (``st.entries``), so no observation walks its participant's row."""
    from rating.design_kernels import in_parts, observation_leverages

    assert st.entries is not None
    entries = st.entries
    stacked = st.core_cols[0][None, :] if len(st.core_cols) == 1 else np.stack(st.core_cols)
    leverage = np.empty(st.n)

    def part(lo: int, hi: int) -> None:
        observation_leverages(
            st.human[lo:hi],
            stacked[:, lo:hi],
            entries[:, lo:hi],
            reads,
            ev.d,
            b_s_b,
            s_inv,
            omega[lo:hi],
            leverage[lo:hi],
        )

    in_parts(part, st.n)
    return leverage


def _hyper_summary(st: _Structure, reml: _Reml) -> dict[str, dict[str, float]]:
    """Return each standard deviation with its standard error and 95 % interval (delta method, log scale)."""
    return variance_summary(st.components, reml.evaluation.theta, reml.tau, reml.cov, reml.free, z=1.96)


# --------------------------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------------------------


def checked_spec(spec: Any) -> ModelSpec:
    """Return ``spec`` when it is a :class:`ModelSpec`; raise naming the parameter otherwise."""
    if not isinstance(spec, ModelSpec):
        raise ValueError(f"spec must be a ModelSpec, got {type(spec).__name__}")
    if spec.kind == "judge_aware":
        raise ValueError(
            "spec: the judge_aware model is fitted to individual grades (episode, grader, families), not to one "
            "score per episode; use rating.grader_fit.fit_graded"
        )
    return spec


def fit_model(
    agent_ids: Any,
    human_ids: Any,
    scores: Any,
    task_ids: Any = None,
    *,
    spec: ModelSpec,
    weights: Any = None,
    on_participants: ParticipantsReady | None = None,
) -> FitResult:
    """Fit the rating model ``spec.kind`` to scored episodes and return the agents' posterior.

    Parameters
    ----------
    agent_ids, human_ids, scores
        One entry per observation; ids may be strings or integers (integers are fastest).
    task_ids
        Optional task id per observation (``None`` or blank where an episode has no task); required by
        ``calibrated_task``, ignored by the other models.
    spec
        The model (:class:`ModelSpec`).
    weights
        Optional positive observation weights :math:`\\omega` (noise variance :math:`\\beta^2/\\omega`).
    on_participants
        Called once, from the fitting thread, with the participants' posterior as soon as it is final (the
        calibrated models; the paper model never calls it): the caller may store it while the fit finishes.
    """
    spec = checked_spec(spec)
    if spec.kind == "calibrated_task" and task_ids is None:
        raise ValueError("task_ids: the calibrated_task model needs the episodes' task ids")
    obs = _observations(agent_ids, human_ids, scores, task_ids if spec.kind == "calibrated_task" else None, weights)
    if spec.kind == "paper":
        return _fit_paper(obs, spec)
    if obs.n <= obs.n_agents:
        raise ValueError(f"scores: the calibrated models need more observations ({obs.n}) than agents ({obs.n_agents})")
    return _fit_calibrated(obs, spec, on_participants=on_participants)


Progress = Callable[[int, int], None]


def compare_models(
    agent_ids: Any, human_ids: Any, scores: Any, task_ids: Any, *, weights: Any = None
) -> list[dict[str, Any]]:
    """Compare ``calibrated`` with ``calibrated_task`` on the same episodes.

    Both models have the same fixed effects (one per agent), so their restricted likelihoods are comparable:
    the rows give each model's restricted log-likelihood, AIC and number of variance parameters, and the
    task model's row the likelihood-ratio statistic with its p-value. The variance of the task effects sits
    on the boundary of its space under the null, so the p-value uses the 50:50 mixture of
    :math:`\\chi^2_0` and :math:`\\chi^2_1` (Self & Liang 1987).
    """
    rows: list[dict[str, Any]] = []
    fits = {}
    for kind in ("calibrated", "calibrated_task"):
        spec = ModelSpec(kind=kind, integrate_hyper=False)
        fit = fit_model(agent_ids, human_ids, scores, task_ids, spec=spec, weights=weights)
        fits[kind] = fit
        n_params = 1 + sum(1 for name, h in fit.hyper.items() if name != "beta" and not h.get("at_zero"))
        rows.append(
            {
                "model": kind,
                "log_likelihood": fit.log_likelihood,
                "aic": fit.aic,
                "n_variance_params": n_params,
                "hyper": fit.hyper,
            }
        )
    base, task = fits["calibrated"], fits["calibrated_task"]
    assert base.log_likelihood is not None and task.log_likelihood is not None
    stat = max(0.0, 2.0 * (task.log_likelihood - base.log_likelihood))
    p_value = 0.5 * float(chi2.sf(stat, 1)) if stat > 0 else 1.0
    rows[0].update({"lr_statistic": None, "p_value": None})
    rows[1].update({"lr_statistic": stat, "p_value": p_value})
    best = min(rows, key=lambda r: r["aic"])["model"]
    for row in rows:
        row["preferred_by_aic"] = row["model"] == best
    return json_safe(rows)


def heldout_coverage(
    agent_ids: Any,
    human_ids: Any,
    scores: Any,
    task_ids: Any = None,
    *,
    spec: ModelSpec,
    folds: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    """Return the k-fold share of held-out scores inside the model's 95 % predictive interval.

    Observations are split at random into ``folds`` folds; each fold is predicted by the model fitted to the
    others. The predictive distribution of a held-out score is normal with mean
    :math:`x^\\top\\hat b` and variance :math:`\\beta^2/\\omega + \\beta^2 x^\\top C^{-1} x` (the model's noise
    plus the uncertainty of the fitted effects; a participant or task unseen in training contributes its
    prior variance). A calibrated model covers about 95 %; an overconfident one much less.
    """
    spec = checked_spec(spec)
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise ValueError(f"folds must be an integer >= 2, got {folds!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    if spec.kind == "calibrated_task" and task_ids is None:
        raise ValueError("task_ids: the calibrated_task model needs the episodes' task ids")
    obs = _observations(agent_ids, human_ids, scores, task_ids if spec.kind == "calibrated_task" else None, None)
    if obs.n < folds:
        raise ValueError(f"folds: {folds} folds need at least as many observations, got {obs.n}")
    rng = np.random.default_rng(int(seed))
    fold_of = rng.permutation(obs.n) % int(folds)
    inside = np.zeros(obs.n, dtype=bool)
    z = np.zeros(obs.n)
    evaluated = np.zeros(obs.n, dtype=bool)
    q = norm.ppf(0.975)
    for f in range(int(folds)):
        test = np.flatnonzero(fold_of == f)
        train = np.flatnonzero(fold_of != f)
        mean, var, ok = _predict(obs, train, test, spec)
        z[test[ok]] = (obs.y[test[ok]] - mean[ok]) / np.sqrt(var[ok])
        inside[test[ok]] = np.abs(z[test[ok]]) <= q
        evaluated[test[ok]] = True
    n_eval = int(evaluated.sum())
    return json_safe(
        {
            "model": spec.to_dict(),
            "folds": int(folds),
            "seed": int(seed),
            "n": int(obs.n),
            "n_predicted": n_eval,
            "n_skipped": int(obs.n - n_eval),
            "nominal": 0.95,
            "coverage": float(inside[evaluated].mean()) if n_eval else math.nan,
            "mean_z": float(z[evaluated].mean()) if n_eval else math.nan,
            "sd_z": float(z[evaluated].std()) if n_eval else math.nan,
        }
    )


def _predict(obs: _Obs, train: np.ndarray, test: np.ndarray, spec: ModelSpec) -> tuple[np.ndarray, ...]:
    """Return predictive mean, variance and a usable mask for ``test`` rows from a fit on ``train`` rows.

    A held-out episode whose agent never appears in training cannot be predicted (an agent is a fixed effect
    in the calibrated models) and is skipped.
    """
    sub = obs.subset(train)

    # Map test rows' entities to training codes (-1 when unseen).
    def lookup(codes_full: np.ndarray, ids_sub: np.ndarray, ids_full: np.ndarray, rows: np.ndarray) -> np.ndarray:
        position = {key: i for i, key in enumerate(ids_sub.tolist())}
        table = np.array([position.get(key, -1) for key in ids_full.tolist()], dtype=np.int64)
        codes = codes_full[rows]
        out = np.full(rows.shape[0], -1, dtype=np.int64)
        out[codes >= 0] = table[codes[codes >= 0]]
        return out

    agent = lookup(obs.agent, sub.agent_ids, obs.agent_ids, test)
    human = lookup(obs.human, sub.human_ids, obs.human_ids, test)
    task = (
        None
        if obs.task is None or obs.task_ids is None or sub.task_ids is None
        else lookup(obs.task, sub.task_ids, obs.task_ids, test)
    )
    ok = agent >= 0
    omega = obs.omega[test]
    if spec.kind == "paper":
        config = dataclasses.replace(spec.paper, k=spec.k)
        mu_a0, sigma_a = config.prior("agent")
        mu_h0, sigma_h = config.prior("human")
        w = sub.omega / config.beta**2
        sol = solve_bipartite(
            sub.agent, sub.human, w, w * sub.y,
            np.full(sub.n_agents, 1.0 / sigma_a**2), np.full(sub.n_agents, mu_a0 / sigma_a**2),
            np.full(sub.n_humans, 1.0 / sigma_h**2), np.full(sub.n_humans, mu_h0 / sigma_h**2),
        )  # fmt: skip
        beta2, scale = config.beta**2, 1.0
        couplings, d, chol, s_inv, core_mu = (
            sol.couplings, sol.lambda_humans, sol.schur_cholesky, sol.cov_agents, sol.mu_agents
        )  # fmt: skip
        u_h, prior_h_mean, prior_h_var = sol.mu_humans, mu_h0, sigma_h**2
        core_cols: list[np.ndarray] = [np.where(ok, agent, 0)]
        task_var: np.ndarray | float = 0.0
    else:
        # Held-out prediction reads S^{-1} densely: the dense core.
        st = _structure(sub, tasks=spec.kind == "calibrated_task", blocks=False)
        reml = _reml(st)
        ev = reml.evaluation
        assert ev.chol is not None
        beta2, scale = math.exp(reml.tau), math.exp(reml.tau)
        couplings, d, chol, core_mu = st.couplings, ev.d, ev.chol, ev.core_mu
        s_inv = chol_inverse(chol)
        u_h = (st.r_human - st.couplings @ core_mu) / d
        prior_h_mean, prior_h_var = 0.0, ev.gamma["human"]
        core_cols = [np.where(ok, agent, 0)]
        task_var = 0.0
        if task is not None and obs.task is not None:
            n_a = sub.n_agents
            seen = task >= 0
            core_cols.append(np.where(seen, task + n_a, -1))
            unseen_task = (task < 0) & (obs.task[test] >= 0)
            task_var = np.where(unseen_task, ev.gamma["task"], 0.0)
    # Variance of x^T b_hat in units of `scale`, with the human part exact for seen humans.
    seen_h = human >= 0
    mean = np.zeros(test.shape[0])
    for ci in core_cols:
        has = ci >= 0
        mean[has] += core_mu[ci[has]]
    mean[seen_h] += u_h[human[seen_h]]
    mean[~seen_h] += prior_h_mean
    var_eff = np.zeros(test.shape[0])
    x_s_x = np.zeros(test.shape[0])
    for i, ci in enumerate(core_cols):
        for cj in core_cols[i:]:
            both = (ci >= 0) & (cj >= 0)
            term = np.zeros(test.shape[0])
            term[both] = s_inv[ci[both], cj[both]]
            x_s_x += term if cj is ci else 2.0 * term
    var_eff += x_s_x
    if seen_h.any():
        hs = human[seen_h]
        rows = couplings[hs]
        s_inv_b = rows @ s_inv  # (m x K)
        inv_chol_t = inv_lower(chol).T
        b_s_b = row_quadratic_forms(rows.tocsr(), inv_chol_t)
        cross = np.zeros(hs.shape[0])
        idx = np.flatnonzero(seen_h)
        for ci in core_cols:
            c = ci[seen_h]
            has = c >= 0
            cross[has] += s_inv_b[np.flatnonzero(has), c[has]]
        dh = d[hs]
        var_eff[idx] += 1.0 / dh - 2.0 * cross / dh + b_s_b / dh**2
    var_eff[~seen_h] += prior_h_var
    # The paper model's system is in score units already (scale 1); the calibrated ones in units of beta^2.
    total = scale * (var_eff + task_var) + beta2 / omega
    return mean, total, ok
