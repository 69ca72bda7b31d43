"""The judge-aware rating model: every grade of an episode is an observation.

An episode's score comes from graders -- LLM judges of different model families and experts -- each with its
own level and, for a judge, a possible preference for work of its own family's agent. Averaging a panel
hides both. The judge-aware model keeps one row per grade (a judge run or an expert grade):

.. math::

    y_{e,g} = a_A + h_H\\,(+\\,t_T) + q_e + b_g + s_g\\,[F(g) = F(A)] + \\epsilon,

with agents :math:`a_A` fixed, participants :math:`h_H \\sim \\mathcal{N}(0, \\sigma_H^2)`, the episode's
own quality :math:`q_e \\sim \\mathcal{N}(0, \\sigma_Q^2)` shared by its graders, optional tasks
:math:`t_T \\sim \\mathcal{N}(0, \\sigma_T^2)`, a fixed leniency :math:`b_g` per grader, a fixed
self-preference :math:`s_g` per judge whose family is some agent's family (where the design identifies it)
and grade noise :math:`\\epsilon \\sim \\mathcal{N}(0, \\beta^2/\\omega)`. The leniencies sum to zero over a
reference set of graders, so :math:`a_A` is what a neutral grader of that set would give. Variance
components by exact REML on the nested structure (grades in episodes in participants). The write-up is
``docs/rating-models.md`` §6.

Pure numpy/scipy: no Django, no settings, no I/O, no module-level state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse
from scipy.stats import norm

from rating.arrays import finite_array, weight_array
from rating.engine import RatingConfig
from rating.fit import FitResult, ModelSpec, code_ids, json_safe, row_forms
from rating.linalg import chol_inverse, eliminated_block, inv_lower
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

__all__ = ["REFERENCES", "REFERENCE_WEIGHTING", "REFERENCE_WEIGHTINGS", "fit_graded", "reference_statement"]

REFERENCES: tuple[str, ...] = ("panel", "experts")
# How the reference graders' leniencies are averaged: by their number of grades (the default) or equally.
REFERENCE_WEIGHTINGS: tuple[str, ...] = ("grades", "equal")
REFERENCE_WEIGHTING = "grades"

# Beyond this many core columns (fixed effects + tasks) dense (K x K) work per grade gives way to gathers.
_DENSE_CORE = 256
# Largest pooled participant-group workspace (floats) before each evaluation runs over the episodes instead.
_POOL_LIMIT = 1 << 22
# Relative eigenvalue below which a direction of X^T W X is taken as a null direction.
_NULL_TOL = 1e-9
# Squared weight of a coefficient in the null space above which it is not estimable.
_ESTIMABLE_TOL = 1e-8
# Step of the central differences of the exact gradient that give the observed information.
_HESSIAN_STEP = 1e-4
_Z95 = float(norm.ppf(0.975))


# --------------------------------------------------------------------------------------------------------
# Grades
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Grades:
    """Grades coded by first appearance, with each episode's agent, participant and task."""

    agent: np.ndarray
    grader: np.ndarray
    episode: np.ndarray
    y: np.ndarray
    omega: np.ndarray
    agent_ids: np.ndarray
    human_ids: np.ndarray
    episode_ids: np.ndarray
    grader_ids: np.ndarray
    task_ids: np.ndarray | None
    agent_family: np.ndarray  # per agent, "" for none
    grader_family: np.ndarray  # per grader, "" for an expert
    ep_agent: np.ndarray
    ep_human: np.ndarray
    ep_task: np.ndarray | None  # -1 where the episode names no task

    @property
    def n(self) -> int:
        return int(self.y.shape[0])


def _constant_within(
    group: np.ndarray,
    n_groups: int,
    values: np.ndarray,
    group_ids: np.ndarray,
    name: str,
    what: tuple[str, str],
    value_ids: Any,
) -> np.ndarray:
    """Return the value of each group, raising when a group holds two different values.

    ``what`` is ``(group noun, value noun plural)``, e.g. ``("episode", "agents")``.
    """
    per = np.full(n_groups, -2, dtype=np.int64)
    per[group[::-1]] = values[::-1]  # the first row of a group wins
    bad = np.flatnonzero(per[group] != values)
    if bad.size:
        row = int(bad[0])
        first, second = value_ids(int(per[group[row]])), value_ids(int(values[row]))
        group_id = str(group_ids[group[row]])
        raise ValueError(f"{name}: {what[0]} {group_id!r} has two {what[1]} ({first!r} and {second!r})")
    return per


def _families(values: Any, codes: np.ndarray, ids: np.ndarray, name: str, what: str) -> np.ndarray:
    """Return one family per entity ("" for none) from a mapping id -> family or one family per grade.

    Families are compared stripped and lower-cased (as the models store them), so ``" Claude "`` is
    ``"claude"``: a spelling difference never silently drops a self-preference term.
    """
    n = codes.shape[0]
    if isinstance(values, Mapping):
        table = {str(key): "" if value is None else str(value).strip().lower() for key, value in values.items()}
        missing = [i for i in ids.tolist() if i not in table]
        if missing:
            raise ValueError(f"{name} names no family for {what} {missing[0]!r}")
        return np.array([table[i] for i in ids.tolist()], dtype=str) if ids.size else np.zeros(0, dtype=str)
    fam_codes, fam_ids = code_ids(values, name, n, optional=True)
    fam_ids = np.char.lower(np.char.strip(fam_ids.astype(str))) if fam_ids.size else fam_ids

    def family(code: int) -> str:
        return "" if code < 0 else str(fam_ids[code])

    per = _constant_within(codes, ids.shape[0], fam_codes, ids, name, (what, "families"), family)
    return np.array([family(int(c)) for c in per], dtype=str) if ids.size else np.zeros(0, dtype=str)


def _grades(
    agent: Any,
    human: Any,
    scores: Any,
    task: Any,
    episode: Any,
    grader: Any,
    agent_family: Any,
    grader_family: Any,
    weights: Any,
) -> _Grades:
    agent_codes, agent_ids = code_ids(agent, "agent", None)
    n = agent_codes.shape[0]
    if n == 0:
        raise ValueError("agent: at least one grade is required")
    human_codes, human_ids = code_ids(human, "human", n)
    y = finite_array(scores, "scores", n)
    omega = weight_array(weights, "weights", n)
    ep, ep_ids = code_ids(episode, "episode", n)
    gr, gr_ids = code_ids(grader, "grader", n)
    n_ep = ep_ids.shape[0]
    ep_agent = _constant_within(
        ep, n_ep, agent_codes, ep_ids, "episode", ("episode", "agents"), lambda c: str(agent_ids[c])
    )
    ep_human = _constant_within(
        ep, n_ep, human_codes, ep_ids, "episode", ("episode", "participants"), lambda c: str(human_ids[c])
    )
    ep_task = None
    task_ids = None
    if task is not None:
        task_codes, task_ids = code_ids(task, "task", n, optional=True)
        if task_ids.size == 0:
            raise ValueError("task: no grade names a task (pass task=None for the model without tasks)")
        ep_task = _constant_within(
            ep, n_ep, task_codes, ep_ids, "task", ("episode", "tasks"), lambda c: None if c < 0 else str(task_ids[c])
        )
    return _Grades(
        agent=agent_codes,
        grader=gr,
        episode=ep,
        y=y,
        omega=omega,
        agent_ids=agent_ids,
        human_ids=human_ids,
        episode_ids=ep_ids,
        grader_ids=gr_ids,
        task_ids=task_ids,
        agent_family=_families(agent_family, agent_codes, agent_ids, "agent_family", "agent"),
        grader_family=_families(grader_family, gr, gr_ids, "grader_family", "grader"),
        ep_agent=ep_agent,
        ep_human=ep_human,
        ep_task=ep_task,
    )


def _reference(g: _Grades, reference: Any, reference_graders: Any) -> np.ndarray:
    """Return the codes of the reference graders (their leniencies average zero)."""
    if reference not in REFERENCES:
        raise ValueError(f"reference must be one of {', '.join(REFERENCES)}; got {reference!r}")
    expert = g.grader_family == ""
    want_expert = reference == "experts"
    if reference_graders is None:
        chosen = np.flatnonzero(expert == want_expert)
        if chosen.size == 0:
            kind = "expert (a grader with no family)" if want_expert else "LLM judge (a grader with a family)"
            raise ValueError(f"reference: {reference!r} needs at least one {kind} among the graders")
        return chosen
    if isinstance(reference_graders, (str, bytes)) or not hasattr(reference_graders, "__iter__"):
        raise ValueError(f"reference_graders must be a list of grader ids, got {reference_graders!r}")
    position = {gid: i for i, gid in enumerate(g.grader_ids.tolist())}
    chosen_list: list[int] = []
    for gid in reference_graders:
        key = str(gid)
        if key not in position:
            raise ValueError(f"reference_graders: {key!r} graded none of these episodes")
        code = position[key]
        if code in chosen_list:
            raise ValueError(f"reference_graders: {key!r} is listed twice")
        if bool(expert[code]) != want_expert:
            role = "an expert (no family)" if expert[code] else f"an LLM judge ({g.grader_family[code]})"
            raise ValueError(f"reference_graders: {key!r} is {role}, but reference={reference!r}")
        chosen_list.append(code)
    if not chosen_list:
        raise ValueError("reference_graders: the list is empty")
    return np.asarray(chosen_list, dtype=np.int64)


# --------------------------------------------------------------------------------------------------------
# The fixed-effect design: agents, graders' leniency (sum to zero over the reference), self-preference
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Terms:
    """Self-preference candidates: one per judge whose family is some agent's family."""

    grader: np.ndarray  # grader code of each candidate
    family: np.ndarray  # its family


def _candidates(g: _Grades) -> _Terms:
    agent_families = {f for f in g.agent_family.tolist() if f}
    chosen = [i for i, f in enumerate(g.grader_family.tolist()) if f and f in agent_families]
    return _Terms(np.asarray(chosen, dtype=np.int64), g.grader_family[chosen] if chosen else np.zeros(0, dtype=str))


def _reference_weights(g: _Grades, ref: np.ndarray, weighting: str) -> np.ndarray:
    """Return each reference grader's weight in the reference (summing to 1).

    ``"grades"`` weights a grader by its number of grades, so a judge that graded a handful of episodes moves
    the reference -- and with it every agent's interval -- by its share of the grades, not by one in n;
    ``"equal"`` weights every reference grader alike.
    """
    if weighting not in REFERENCE_WEIGHTINGS:
        raise ValueError(f"reference_weighting must be one of {', '.join(REFERENCE_WEIGHTINGS)}; got {weighting!r}")
    if weighting == "equal":
        use = np.ones(ref.shape[0])
    else:
        use = np.bincount(g.grader, minlength=g.grader_ids.shape[0])[ref].astype(np.float64)
    return use / use.sum()


def _grader_map(n_graders: int, reference: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Return T (graders x (graders - 1)): leniency b = T beta_b with sum over the reference of w b equal to 0.

    Every grader but the last reference grader has its own column; the last reference grader's leniency is
    minus the weighted sum of the other reference graders' over its own weight (minus their sum when the
    weights are equal, which keeps equal-weight fits exactly as they were).
    """
    last = int(reference[-1])
    ratio = np.ones(reference.shape[0]) if weights is None else weights / weights[-1]
    cols = [i for i in range(n_graders) if i != last]
    out = np.zeros((n_graders, len(cols)))
    for j, i in enumerate(cols):
        out[i, j] = 1.0
    for r, w in zip(reference[:-1].tolist(), ratio[:-1].tolist(), strict=True):
        out[last, cols.index(int(r))] = -1.0 * w
    return out


def _pair_design(
    pair_agent: np.ndarray,
    pair_grader: np.ndarray,
    n_agents: int,
    tmap: np.ndarray,
    term_grader: np.ndarray,
    own: np.ndarray,
) -> np.ndarray:
    """Return the fixed-effect row of each (agent, grader) pair: agent indicator, T[grader], self-preference."""
    n_pairs = pair_agent.shape[0]
    n_terms = term_grader.shape[0]
    out = np.zeros((n_pairs, n_agents + tmap.shape[1] + n_terms))
    out[np.arange(n_pairs), pair_agent] = 1.0
    out[:, n_agents : n_agents + tmap.shape[1]] = tmap[pair_grader]
    for j, gr in enumerate(term_grader.tolist()):
        out[:, n_agents + tmap.shape[1] + j] = (pair_grader == gr) & own
    return out


def _null_space(gram: np.ndarray) -> np.ndarray:
    """Return an orthonormal basis (columns) of the null space of a PSD matrix, scale-free in its columns.

    A coefficient whose Gram column is all zero is a null direction of its own: after scaling, its unit vector
    is an exact eigenvector of eigenvalue zero, so it is already among the eigenvectors below. Adding it again
    and orthonormalising the (then rank-deficient) set by QR would invent a direction; the basis is therefore
    the span of both sets, read off their singular values.
    """
    p = gram.shape[0]
    if p == 0:
        return np.zeros((0, 0))
    scale = np.sqrt(np.diag(gram))
    zero = scale <= 0
    safe = np.where(zero, 1.0, scale)
    scaled = gram / safe[:, None] / safe[None, :]
    scaled[zero, :] = 0.0
    scaled[:, zero] = 0.0
    evals, evecs = np.linalg.eigh(0.5 * (scaled + scaled.T))
    top = max(float(evals[-1]), 1.0)
    null = evecs[:, evals <= _NULL_TOL * top]
    # The null space of X D^-1/2 is D^1/2 null(X): the same zero pattern, so estimability reads off either.
    basis = np.hstack([null, np.eye(p)[:, zero]])
    if not basis.shape[1]:
        return basis
    left, singular, _ = np.linalg.svd(basis, full_matrices=False)
    # The columns are unit vectors, each either in the span of the others or not: singular values are ~0 or
    # at least ~1, nothing in between.
    return left[:, singular > 1e-6]


def _not_estimable(gram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (mask of non-estimable coefficients, null-space basis) of a fixed-effect Gram matrix.

    A coefficient :math:`\\beta_j` is estimable iff :math:`e_j` lies in the row space of :math:`X`, i.e. is
    orthogonal to :math:`\\mathrm{null}(X^\\top W X)`.
    """
    basis = _null_space(gram)
    weight = (basis**2).sum(axis=1) if basis.size else np.zeros(gram.shape[0])
    return weight > _ESTIMABLE_TOL, basis


# --------------------------------------------------------------------------------------------------------
# The mixed-model equations with grades eliminated per episode and episodes per participant
# --------------------------------------------------------------------------------------------------------
#
# Unknowns, in units of beta = 1: episode effects q (one per episode), participant effects h, and the "core"
# (fixed effects, then task effects). Each grade belongs to one episode and each episode to one
# participant, so the episode block of the mixed-model matrix C0 is diagonal (d_e = nu_e + 1/gamma_Q), and
# after eliminating it the participant block is diagonal too:
#     dt_h = sum_{e in h} kappa_e nu_e + 1/gamma_H,  kappa_e = 1/(1 + gamma_Q nu_e),
# coupled to the core by c_h = sum_{e in h} kappa_e b_e (b_e = sum_{o in e} w_o x_o). The core is left with
#     S = X^T W X + Gamma_T^{-1} - sum_e b_e b_e^T / d_e - sum_h c_h c_h^T / dt_h,
# and log|C0| = sum_e log d_e + sum_h log dt_h + log|S|.


@dataclass(frozen=True, eq=False)
class _Eliminated:
    """What eliminating episodes and participants removes from the core at given variance ratios.

    ``gram``, ``rhs`` and ``r2`` are subtracted from :math:`S`, the core right-hand side and :math:`y^\\top W y`;
    ``pivots`` is the log-determinant of the eliminated blocks. The ``d_*`` arrays hold their derivatives in
    the log ratios (episode first when present, then participant).
    """

    gram: np.ndarray
    rhs: np.ndarray
    r2: float
    pivots: float
    d_gram: np.ndarray | None = None
    d_rhs: np.ndarray | None = None
    d_r2: np.ndarray | None = None
    d_pivots: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class _Episodes:
    """Per-episode sums and the pattern of the participants' couplings."""

    b: scipy.sparse.csr_matrix  # E x K: sum of w x over the episode's grades
    b_row: np.ndarray  # row of each stored entry of b
    r: np.ndarray  # sum of w y per episode
    nu: np.ndarray  # sum of w per episode
    human: np.ndarray  # participant of each episode
    n_humans: int
    c_indptr: np.ndarray  # CSR pattern of the participants' couplings (H x K)
    c_indices: np.ndarray
    c_map: np.ndarray  # position in that pattern of each stored entry of b


def _episodes(b: scipy.sparse.csr_matrix, r: np.ndarray, nu: np.ndarray, human: np.ndarray, n_h: int) -> _Episodes:
    b.sum_duplicates()
    b.sort_indices()
    b_row = np.repeat(np.arange(b.shape[0]), np.diff(b.indptr))
    key = human[b_row].astype(np.int64) * b.shape[1] + b.indices
    uniq, c_map = np.unique(key, return_inverse=True)
    c_rows = uniq // b.shape[1]
    c_indptr = np.zeros(n_h + 1, dtype=np.int64)
    np.cumsum(np.bincount(c_rows, minlength=n_h), out=c_indptr[1:])
    return _Episodes(
        b=b,
        b_row=b_row,
        r=r,
        nu=nu,
        human=human,
        n_humans=n_h,
        c_indptr=c_indptr,
        c_indices=(uniq % b.shape[1]).astype(np.int64),
        c_map=c_map.reshape(-1),
    )


def _couplings(ep: _Episodes, kappa: np.ndarray) -> scipy.sparse.csr_matrix:
    """Return :math:`c_h = \\sum_{e \\in h} \\kappa_e b_e` for every participant (sparse H x K)."""
    data = np.bincount(ep.c_map, weights=ep.b.data * kappa[ep.b_row], minlength=ep.c_indices.shape[0])
    return scipy.sparse.csr_matrix((data, ep.c_indices, ep.c_indptr), shape=(ep.n_humans, ep.b.shape[1]))


def _gram(m: scipy.sparse.csr_matrix, w: np.ndarray) -> np.ndarray:
    """Return :math:`M^\\top \\mathrm{diag}(w) M` (dense)."""
    if m.shape[1] <= _DENSE_CORE:
        return eliminated_block(m, w)
    out = (m.T @ (scipy.sparse.diags(w) @ m)).toarray()
    return 0.5 * (out + out.T)


def _cross(m1: scipy.sparse.csr_matrix, m2: scipy.sparse.csr_matrix, w: np.ndarray) -> np.ndarray:
    """Return :math:`M_1^\\top \\mathrm{diag}(w) M_2 + (\\cdot)^\\top` (dense)."""
    out = (m1.T @ (scipy.sparse.diags(w) @ m2)).toarray()
    return out + out.T


class _EpisodeSums:
    """Elimination by passes over the episodes and participants (any weights, any number of tasks)."""

    def __init__(self, ep: _Episodes, episode_effect: bool) -> None:
        self.ep = ep
        self.episode_effect = episode_effect

    def eliminate(self, gamma_q: float, gamma_h: float, gradient: bool) -> _Eliminated:
        ep = self.ep
        nu, r = ep.nu, ep.r
        if self.episode_effect:
            kappa = 1.0 / (1.0 + gamma_q * nu)
            f = gamma_q * kappa  # 1 / d_e
        else:
            kappa = np.ones_like(nu)
            f = np.zeros_like(nu)
        c = _couplings(ep, kappa)
        rho = np.bincount(ep.human, weights=kappa * r, minlength=ep.n_humans)
        dt = np.bincount(ep.human, weights=kappa * nu, minlength=ep.n_humans) + 1.0 / gamma_h
        gram = _gram(c, 1.0 / dt)
        rhs = c.T @ (rho / dt)
        r2 = float(np.dot(rho, rho / dt))
        pivots = float(np.log(dt).sum())
        if self.episode_effect:
            gram += _gram(ep.b, f)
            rhs = rhs + ep.b.T @ (f * r)
            r2 += float(np.dot(f * r, r))
            pivots += float(np.log(nu + 1.0 / gamma_q).sum())
        if not gradient:
            return _Eliminated(gram, rhs, r2, pivots)
        d_gram, d_rhs, d_r2, d_piv = [], [], [], []
        if self.episode_effect:
            d_kappa = -gamma_q * nu * kappa**2
            d_f = gamma_q * kappa**2
            dc = _couplings(ep, d_kappa)
            d_rho = np.bincount(ep.human, weights=d_kappa * r, minlength=ep.n_humans)
            d_dt = np.bincount(ep.human, weights=d_kappa * nu, minlength=ep.n_humans)
            d_gram.append(_gram(ep.b, d_f) + _cross(dc, c, 1.0 / dt) - _gram(c, d_dt / dt**2))
            d_rhs.append(ep.b.T @ (d_f * r) + dc.T @ (rho / dt) + c.T @ ((d_rho - rho * d_dt / dt) / dt))
            d_r2.append(float(np.dot(d_f * r, r) + 2.0 * np.dot(rho, d_rho / dt) - np.dot(rho**2, d_dt / dt**2)))
            d_piv.append(float(-kappa.sum() + (d_dt / dt).sum()))
        inv_h = 1.0 / gamma_h
        d_gram.append(_gram(c, inv_h / dt**2))
        d_rhs.append(c.T @ (rho * inv_h / dt**2))
        d_r2.append(float(np.dot(rho**2, inv_h / dt**2)))
        d_piv.append(float(-(inv_h / dt).sum()))
        return _Eliminated(
            gram, rhs, r2, pivots, np.asarray(d_gram), np.asarray(d_rhs), np.asarray(d_r2), np.asarray(d_piv)
        )


class _PooledSums:
    """Elimination pooled over episodes of equal total weight and participants of equal episode make-up.

    An episode's pivot depends on it only through :math:`\\nu_e` and a participant's only through how many
    episodes of each :math:`\\nu` it has. With unit weights :math:`\\nu_e` is the number of grades, which takes
    few values; grouping by them,
    :math:`\\sum_h c_h c_h^\\top/\\tilde d_h = \\sum_g \\sum_{k,l} \\kappa_k\\kappa_l/\\tilde d_g \\sum_{h \\in g}
    B_{hk} B_{hl}^\\top` with :math:`B_{hk}` the sum of :math:`b_e` over the participant's episodes of class
    :math:`k`. The pooled matrices are built once; each evaluation then costs :math:`O(G K_e^2 K^2)`,
    independent of the number of grades.
    """

    def __init__(
        self,
        ep: _Episodes,
        episode_effect: bool,
        nu: np.ndarray,
        ep_class: np.ndarray,
        group: np.ndarray,
        m: np.ndarray,
    ) -> None:
        self.episode_effect = episode_effect
        n_k, n_core = nu.shape[0], ep.b.shape[1]
        n_g = m.shape[0]
        coo = ep.b.tocoo()
        self.nu = nu
        self.n_ep = np.bincount(ep_class, minlength=n_k).astype(np.float64)
        expand = scipy.sparse.csr_matrix(
            (coo.data, (coo.row, ep_class[coo.row] * n_core + coo.col)), shape=(ep.b.shape[0], n_k * n_core)
        )
        self.gram = (expand.T @ ep.b).toarray().reshape(n_k, n_core, n_core)
        self.br = (expand.T @ ep.r).reshape(n_k, n_core)
        self.r2 = np.bincount(ep_class, weights=ep.r**2, minlength=n_k)
        h_of = ep.human[coo.row]
        bh = scipy.sparse.csr_matrix(
            (coo.data, (h_of, ep_class[coo.row] * n_core + coo.col)), shape=(ep.n_humans, n_k * n_core)
        )
        bh.sum_duplicates()
        rh = np.bincount(ep.human * n_k + ep_class, weights=ep.r, minlength=ep.n_humans * n_k)
        rh = rh.reshape(ep.n_humans, n_k)
        bh_coo = bh.tocoo()
        expand_h = scipy.sparse.csr_matrix(
            (bh_coo.data, (bh_coo.row, group[bh_coo.row] * (n_k * n_core) + bh_coo.col)),
            shape=(ep.n_humans, n_g * n_k * n_core),
        )
        self.m = m.astype(np.float64)
        self.count = np.bincount(group, minlength=n_g).astype(np.float64)
        h_gram = (expand_h.T @ bh).toarray().reshape(n_g, n_k, n_core, n_k, n_core)
        self.h_gram = np.ascontiguousarray(h_gram.transpose(0, 1, 3, 2, 4))
        h_br = np.asarray(expand_h.T @ rh).reshape(n_g, n_k, n_core, n_k)
        self.h_br = np.ascontiguousarray(h_br.transpose(0, 1, 3, 2))
        self.h_r2 = np.zeros((n_g, n_k, n_k))
        for k in range(n_k):
            for kk in range(n_k):
                self.h_r2[:, k, kk] = np.bincount(group, weights=rh[:, k] * rh[:, kk], minlength=n_g)

    @staticmethod
    def size(n_classes: int, n_groups: int, n_core: int) -> int:
        return n_groups * n_classes * n_classes * n_core * n_core

    def _apply(self, f: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        gram = np.einsum("k,kij->ij", f, self.gram) + np.einsum("gkl,gklij->ij", w, self.h_gram)
        rhs = f @ self.br + np.einsum("gkl,gkli->i", w, self.h_br)
        r2 = float(f @ self.r2 + np.sum(w * self.h_r2))
        return 0.5 * (gram + gram.T), rhs, r2

    def eliminate(self, gamma_q: float, gamma_h: float, gradient: bool) -> _Eliminated:
        nu = self.nu
        if self.episode_effect:
            kappa = 1.0 / (1.0 + gamma_q * nu)
            f = gamma_q * kappa
        else:
            kappa = np.ones_like(nu)
            f = np.zeros_like(nu)
        dt = self.m @ (kappa * nu) + 1.0 / gamma_h
        w = kappa[None, :, None] * kappa[None, None, :] / dt[:, None, None]
        gram, rhs, r2 = self._apply(f, w)
        pivots = float(self.count @ np.log(dt))
        if self.episode_effect:
            pivots += float(self.n_ep @ np.log(nu + 1.0 / gamma_q))
        if not gradient:
            return _Eliminated(gram, rhs, r2, pivots)
        d_gram, d_rhs, d_r2, d_piv = [], [], [], []
        if self.episode_effect:
            d_kappa = -gamma_q * nu * kappa**2
            d_f = gamma_q * kappa**2
            d_dt = self.m @ (d_kappa * nu)
            d_w = (
                d_kappa[None, :, None] * kappa[None, None, :] + kappa[None, :, None] * d_kappa[None, None, :]
            ) / dt[:, None, None] - w * (d_dt / dt)[:, None, None]
            parts = self._apply(d_f, d_w)
            d_gram.append(parts[0])
            d_rhs.append(parts[1])
            d_r2.append(parts[2])
            d_piv.append(float(-(self.n_ep @ kappa) + self.count @ (d_dt / dt)))
        inv_h = 1.0 / gamma_h
        parts = self._apply(np.zeros_like(f), w * (inv_h / dt)[:, None, None])
        d_gram.append(parts[0])
        d_rhs.append(parts[1])
        d_r2.append(parts[2])
        d_piv.append(float(-(self.count @ (inv_h / dt))))
        return _Eliminated(
            gram, rhs, r2, pivots, np.asarray(d_gram), np.asarray(d_rhs), np.asarray(d_r2), np.asarray(d_piv)
        )


@dataclass(frozen=True, eq=False)
class _Model:
    """A judge-aware design: everything the restricted likelihood needs, fixed across variance ratios."""

    n: int
    p: int  # fixed-effect columns (first in the core)
    n_core: int
    components: tuple[str, ...]  # in theta order: "episode" (when estimated), "human", "task" (when given)
    n_levels: dict[str, int]
    task_cols: np.ndarray
    gram: np.ndarray  # X_c^T W X_c over the core columns
    rhs: np.ndarray  # X_c^T W y
    ywy: float
    sum_log_omega: float
    episodes: _Episodes
    sums: _EpisodeSums | _PooledSums

    @property
    def dfe(self) -> int:
        return self.n - self.p


@dataclass(frozen=True, eq=False)
class _Evaluation:
    """The mixed-model equations solved at one set of log variance ratios (beta = 1 units)."""

    theta: np.ndarray
    gamma: dict[str, float]
    chol: np.ndarray
    core_mu: np.ndarray
    q: float  # y^T P0 y
    logdet_c: float
    log_gamma: float
    d_logdet: np.ndarray | None  # d(log|Gamma| + log|C0|)/d theta_j
    d_q: np.ndarray | None  # d q / d theta_j

    def loglik(self, model: _Model, tau: float) -> float:
        """Return the restricted log-likelihood at noise variance :math:`e^\\tau`."""
        return -0.5 * (
            model.dfe * (math.log(2.0 * math.pi) + tau)
            - model.sum_log_omega
            + self.log_gamma
            + self.logdet_c
            + self.q * math.exp(-tau)
        )

    def profile_loglik(self, model: _Model) -> float:
        return self.loglik(model, math.log(self.q / model.dfe))

    def profile_gradient(self, model: _Model) -> np.ndarray:
        assert self.d_logdet is not None and self.d_q is not None
        return -0.5 * (self.d_logdet + model.dfe * self.d_q / self.q)


def _evaluate(model: _Model, theta: np.ndarray, *, gradient: bool = False) -> _Evaluation:
    """Solve the mixed-model equations at log variance ratios ``theta``; return the likelihood pieces.

    .. math::

        \\ell_R = -\\tfrac12\\Big[(n-p)(\\log 2\\pi + \\tau) - \\textstyle\\sum_o \\log\\omega_o
        + \\log|\\Gamma| + \\log|C_0| + e^{-\\tau}\\, y^\\top P_0 y\\Big],

    :math:`\\log|C_0| = \\sum_e \\log d_e + \\sum_h \\log \\tilde d_h + \\log|S|` and
    :math:`y^\\top P_0 y = y^\\top W y - \\sum_e r_e^2/d_e - \\sum_h \\rho_h^2/\\tilde d_h - r_S^\\top S^{-1} r_S`
    (Gaussian elimination of the episode and participant blocks). The gradient is exact: every eliminated
    quantity is a smooth function of the ratios, :math:`\\partial\\log|S| = \\mathrm{tr}(S^{-1}\\partial S)` and
    :math:`\\partial(r^\\top S^{-1} r) = 2\\hat b^\\top\\partial r - \\hat b^\\top \\partial S\\, \\hat b`.
    """
    theta = np.asarray(theta, dtype=np.float64)
    gamma = {name: math.exp(float(t)) for name, t in zip(model.components, theta, strict=True)}
    el = model.sums.eliminate(gamma.get("episode", 0.0), gamma["human"], gradient)
    schur = model.gram - el.gram
    task_prior = 0.0
    if "task" in gamma:
        task_prior = 1.0 / gamma["task"]
        schur[model.task_cols, model.task_cols] += task_prior
    try:
        chol = scipy.linalg.cholesky(schur, lower=True, check_finite=False)
    except (np.linalg.LinAlgError, ValueError) as exc:
        raise ValueError(f"the model is not identified by these grades (singular system): {exc}")
    rhs = model.rhs - el.rhs
    core_mu = scipy.linalg.cho_solve((chol, True), rhs, check_finite=False)
    q = model.ywy - el.r2 - float(core_mu @ rhs)
    # Below the rounding error of y'Wy the residual sum of squares is zero (scores fitted exactly).
    q = max(q, np.finfo(float).eps * model.ywy, np.finfo(float).tiny)
    logdet_c = el.pivots + 2.0 * float(np.log(np.diag(chol)).sum())
    log_gamma = float(sum(model.n_levels[name] * math.log(gamma[name]) for name in model.components))
    d_logdet = d_q = None
    if gradient:
        assert el.d_gram is not None and el.d_rhs is not None and el.d_r2 is not None and el.d_pivots is not None
        s_inv = chol_inverse(chol)
        d_logdet = np.empty(len(model.components))
        d_q = np.empty(len(model.components))
        for j, name in enumerate(model.components):
            if name == "task":
                cols = model.task_cols
                d_logdet[j] = model.n_levels[name] - task_prior * float(np.diag(s_inv)[cols].sum())
                d_q[j] = -task_prior * float(core_mu[cols] @ core_mu[cols])
                continue
            d_s = -el.d_gram[j]
            d_r = -el.d_rhs[j]
            d_logdet[j] = model.n_levels[name] + el.d_pivots[j] + float(np.sum(s_inv * d_s))
            d_q[j] = -el.d_r2[j] - 2.0 * float(core_mu @ d_r) + float(core_mu @ d_s @ core_mu)
    return _Evaluation(theta.copy(), gamma, chol, core_mu, q, logdet_c, log_gamma, d_logdet, d_q)


def _full_gradient(model: _Model, ev: _Evaluation, tau: float) -> np.ndarray:
    """Return :math:`\\partial\\ell_R/\\partial(\\tau, \\theta)` at noise variance :math:`e^\\tau`."""
    assert ev.d_logdet is not None and ev.d_q is not None
    scale = math.exp(-tau)
    return np.concatenate(
        [[-0.5 * (model.dfe - ev.q * scale)], -0.5 * (ev.d_logdet + scale * ev.d_q)]
    )


@dataclass(frozen=True, eq=False)
class _Reml:
    evaluation: _Evaluation
    tau: float
    loglik: float
    cov: np.ndarray  # inverse observed information in (tau, theta_free...) order
    free: np.ndarray
    converged: bool


def _information(model: _Model, theta: np.ndarray, tau: float, free: np.ndarray) -> np.ndarray:
    """Return the observed information of :math:`\\ell_R` in :math:`(\\tau, \\theta_{free})`.

    The :math:`\\tau` rows are exact; the :math:`\\theta` block is the central difference of the exact gradient.
    """
    idx = np.flatnonzero(free)
    ev = _evaluate(model, theta, gradient=True)
    assert ev.d_q is not None
    scale = math.exp(-tau)
    k = idx.shape[0]
    hess = np.zeros((k + 1, k + 1))
    hess[0, 0] = -0.5 * ev.q * scale
    hess[0, 1:] = hess[1:, 0] = 0.5 * scale * ev.d_q[idx]
    for a, j in enumerate(idx.tolist()):
        cols = []
        for sign in (1.0, -1.0):
            shifted = theta.copy()
            shifted[j] += sign * _HESSIAN_STEP
            cols.append(_full_gradient(model, _evaluate(model, shifted, gradient=True), tau)[1:][idx])
        hess[1 + a, 1:] = (cols[0] - cols[1]) / (2.0 * _HESSIAN_STEP)
    hess[1:, 1:] = 0.5 * (hess[1:, 1:] + hess[1:, 1:].T)
    return -hess


def _reml(model: _Model) -> _Reml:
    """Maximise the restricted likelihood over the log variance ratios (noise variance profiled out).

    L-BFGS-B with the exact gradient within :data:`rating.fit._THETA_BOUNDS`, then Newton steps on the observed
    information of the free ratios. A ratio that runs into the lower bound with the likelihood still rising
    towards it is estimated at zero and held there.
    """
    lo, hi = THETA_BOUNDS
    n_comp = len(model.components)
    cache: dict[bytes, _Evaluation] = {}

    def evaluate(theta: np.ndarray) -> _Evaluation:
        key = np.asarray(theta, dtype=np.float64).tobytes()
        if key not in cache:
            cache.clear()
            cache[key] = _evaluate(model, theta, gradient=True)
        return cache[key]

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        ev = evaluate(theta)
        return -ev.profile_loglik(model), -ev.profile_gradient(model)

    best: scipy.optimize.OptimizeResult | None = None
    for start in (0.0, math.log(0.1)):
        result = scipy.optimize.minimize(
            objective,
            np.full(n_comp, start),
            jac=True,
            method="L-BFGS-B",
            bounds=[(lo, hi)] * n_comp,
            options={"maxiter": 500, "ftol": 1e-15, "gtol": 1e-10},
        )
        if best is None or result.fun < best.fun - 1e-9 * abs(best.fun):
            best = result
        if result.success:
            break
    assert best is not None
    theta = np.asarray(best.x, dtype=np.float64)
    converged = bool(best.success)
    ev = _evaluate(model, theta, gradient=True)
    value = ev.profile_loglik(model)
    # Components that ran into the bound (their ratio is then ~1e-8 of the noise) stay there if the likelihood
    # does not fall; the others are polished by Newton steps on the observed information.
    for j in range(n_comp):
        if theta[j] < lo + 6.0 and theta[j] > lo:
            trial = theta.copy()
            trial[j] = lo
            ev_trial = _evaluate(model, trial, gradient=True)
            if ev_trial.profile_loglik(model) >= value - 1e-10 * abs(value):
                theta, ev, value = trial, ev_trial, ev_trial.profile_loglik(model)
    free = theta > lo + BOUNDARY_TOL
    for _ in range(8):
        idx = np.flatnonzero(free)
        if idx.size == 0:
            break
        grad = ev.profile_gradient(model)[idx]
        if float(np.max(np.abs(grad))) < 1e-9 * max(1.0, abs(value)):
            converged = True
            break
        tau = math.log(ev.q / model.dfe)
        info = _information(model, theta, tau, free)
        profiled = info[1:, 1:] - np.outer(info[1:, 0], info[0, 1:]) / info[0, 0]
        try:
            step = np.linalg.solve(profiled, grad)
        except np.linalg.LinAlgError:
            break
        moved = False
        for shrink in (1.0, 0.5, 0.25, 0.125):
            trial = theta.copy()
            trial[idx] = np.clip(theta[idx] + shrink * step, lo, hi)
            ev_trial = _evaluate(model, trial, gradient=True)
            value_trial = ev_trial.profile_loglik(model)
            if value_trial >= value - 1e-13 * abs(value):
                theta, ev, value, moved = trial, ev_trial, value_trial, True
                break
        if not moved or float(np.max(np.abs(step))) < 1e-10:
            converged = converged or moved
            break
    free = theta > lo + BOUNDARY_TOL
    tau = math.log(ev.q / model.dfe)
    info = _information(model, theta, tau, free)
    try:
        cov = np.linalg.inv(info)
        if not np.all(np.linalg.eigvalsh(0.5 * (cov + cov.T)) > 0):
            raise np.linalg.LinAlgError("information not positive definite")
    except np.linalg.LinAlgError:
        cov = np.full_like(info, np.nan)
    return _Reml(ev, tau, ev.loglik(model, tau), 0.5 * (cov + cov.T), free, converged)


# --------------------------------------------------------------------------------------------------------
# Posterior of the fixed effects over the variance components
# --------------------------------------------------------------------------------------------------------


def _fixed_moments(model: _Model, ev: _Evaluation) -> tuple[np.ndarray, np.ndarray]:
    """Return the fixed effects and their unit-noise covariance :math:`(S^{-1})_{[p,p]}`."""
    unit = np.zeros((model.n_core, model.p))
    unit[np.arange(model.p), np.arange(model.p)] = 1.0
    cols = scipy.linalg.cho_solve((ev.chol, True), unit, check_finite=False)
    cov0 = cols[: model.p]
    return ev.core_mu[: model.p].copy(), 0.5 * (cov0 + cov0.T)


def _mixture(model: _Model, reml: _Reml, integrate: bool) -> tuple[Mixture, bool]:
    """Return the fixed effects' posterior as a quadrature mixture over the variance components.

    The same rule as the calibrated models (:func:`rating.fit._mixture`): sigma points of the Laplace
    approximation :math:`\\mathcal{N}(\\hat\\theta, \\Sigma_{\\theta\\theta})` of the free log ratios (the centre
    and :math:`\\pm\\sqrt3` standard deviations along each principal axis), each with three Gauss-Hermite nodes
    of the conditional log noise variance.
    """
    ev = reml.evaluation
    mean0, cov0 = _fixed_moments(model, ev)
    cov = reml.cov
    if not integrate or not np.all(np.isfinite(cov)):
        single = Mixture(np.ones(1), mean0[None], cov0[None], np.array([[math.exp(reml.tau)]]), np.ones((1, 1)))
        return single, False
    free_idx = np.flatnonzero(reml.free)
    n_free = free_idx.shape[0]
    thetas: list[np.ndarray] = [ev.theta]
    weights = [1.0 - n_free / 3.0]
    gain = np.zeros(n_free)
    cond_var = float(cov[0, 0])
    if n_free:
        cov_tt, cov_tau_t = cov[1:, 1:], cov[0, 1:]
        gain = np.linalg.solve(cov_tt, cov_tau_t)
        cond_var = max(cond_var - float(cov_tau_t @ gain), 0.0)
        evals, evecs = np.linalg.eigh(cov_tt)
        for axis in range(n_free):
            direction = evecs[:, axis] * math.sqrt(max(float(evals[axis]), 0.0) * 3.0)
            for sign in (1.0, -1.0):
                theta = ev.theta.copy()
                theta[free_idx] = np.clip(theta[free_idx] + sign * direction, *THETA_BOUNDS)
                thetas.append(theta)
                weights.append(1.0 / 6.0)
    means, covs, beta2 = [], [], []
    for theta in thetas:
        m, c = (mean0, cov0) if theta is ev.theta else _fixed_moments(model, _evaluate(model, theta))
        means.append(m)
        covs.append(c)
        shift = float(gain @ (theta[free_idx] - ev.theta[free_idx])) if n_free else 0.0
        beta2.append(np.exp(reml.tau + shift + math.sqrt(cond_var) * GH_NODES))
    mixture = Mixture(
        np.asarray(weights), np.asarray(means), np.asarray(covs), np.asarray(beta2),
        np.tile(GH_WEIGHTS, (len(thetas), 1)),
    )  # fmt: skip
    return mixture, True


def _hyper(model: _Model, reml: _Reml) -> dict[str, dict[str, float]]:
    """Return each standard deviation with its standard error and 95 % interval (delta method, log scale).

    The same fields as the calibrated models' ``hyper``; ``beta`` is the noise of one grade.
    """
    return variance_summary(model.components, reml.evaluation.theta, reml.tau, reml.cov, reml.free, z=_Z95)


# --------------------------------------------------------------------------------------------------------
# Per-grade quantities
# --------------------------------------------------------------------------------------------------------


def _leverages(
    model: _Model,
    ev: _Evaluation,
    x_core: scipy.sparse.csr_matrix,
    episode: np.ndarray,
    omega: np.ndarray,
    g_ep: scipy.sparse.csr_matrix,
    base: np.ndarray,
) -> np.ndarray:
    """Return each grade's leverage :math:`\\omega_o x_o^\\top C_0^{-1} x_o` from the eliminated blocks.

    With episodes and participants eliminated,
    :math:`x^\\top C_0^{-1} x = 1/d_e + \\kappa_e^2/\\tilde d_h + v^\\top S^{-1} v` with
    :math:`v = x_c - b_e/d_e - \\kappa_e c_h/\\tilde d_h` (``base`` holds the first two terms per grade and
    ``g_ep`` the subtracted core vector per episode).
    """
    n = x_core.shape[0]
    out = np.empty(n)
    if model.n_core <= _DENSE_CORE:
        factor = inv_lower(ev.chol).T  # S^{-1} = F F^T
        g_proj = np.asarray(g_ep @ factor)
        step = max(1, (1 << 22) // max(model.n_core, 1))
        for start in range(0, n, step):
            stop = min(n, start + step)
            proj = np.asarray(x_core[start:stop] @ factor) - g_proj[episode[start:stop]]
            out[start:stop] = np.einsum("ij,ij->i", proj, proj)
    else:
        s_inv = chol_inverse(ev.chol)
        step = 1 << 16
        for start in range(0, n, step):
            stop = min(n, start + step)
            v = (x_core[start:stop] - g_ep[episode[start:stop]]).tocsr()
            v.eliminate_zeros()
            out[start:stop] = row_forms(v, ev.chol, s_inv)
    return omega * (base + out)


# --------------------------------------------------------------------------------------------------------
# Identification report
# --------------------------------------------------------------------------------------------------------


def _term_reason(
    j: int,
    g: _Grades,
    terms: _Terms,
    own_grades: np.ndarray,
    basis: np.ndarray,
    term_offset: int,
) -> str:
    """Return why self-preference term ``j`` is not identified, in a study coordinator's words."""
    gid = str(g.grader_ids[terms.grader[j]])
    fam = str(terms.family[j])
    if own_grades[j] == 0:
        return f"grader {gid!r} graded no episode of a {fam} agent"
    rows_f = g.agent_family[g.agent] == fam
    graders_f = np.unique(g.grader[rows_f])
    neutral = [int(x) for x in graders_f.tolist() if g.grader_family[x] != fam]
    if not neutral:
        return (
            f"every grader of the {fam} agents has a stake in them and no expert grades them, so their level "
            "cannot be told apart from the graders' preference"
        )
    if not np.any(~rows_f & (g.grader == terms.grader[j])):
        return f"grader {gid!r} grades only {fam} agents, so its leniency cannot be told apart from its preference"
    col = term_offset + j
    involved = np.abs(basis[col]) > 1e-6
    partners = []
    for k in range(terms.grader.shape[0]):
        if k != j and basis.shape[1] and np.any(np.abs(basis[term_offset + k]) * involved > 1e-6):
            partners.append(f"{str(g.grader_ids[terms.grader[k]])!r} ({terms.family[k]})")
    if partners:
        return (
            f"the neutral graders of the {fam} agents are compared with {gid!r} only through agents on which "
            f"they have a stake themselves: only a combination with the self-preference of "
            f"{', '.join(partners)} is estimable"
        )
    return "the design does not separate it from the agents' levels and the graders' leniency"


def _unidentified_message(names: list[str], mask: np.ndarray) -> str:
    involved = [names[i] for i in np.flatnonzero(mask)]
    return (
        "agent: these grades do not identify "
        + ", ".join(involved)
        + " (they are linked to the other agents and graders by no shared agent or grader; add grades that "
        "connect them, or drop them)"
    )


# --------------------------------------------------------------------------------------------------------
# The fit's steps, in order: design, identification, core, components, REML, per-grade, report, result
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _FixedDesign:
    """The fixed-effect design on the observed (agent, grader) pairs, every self-preference candidate in it."""

    pair_of: np.ndarray  # pair of each grade
    pair_agent: np.ndarray
    pair_grader: np.ndarray
    pair_w: np.ndarray  # summed grade weight of each pair
    own: np.ndarray  # the pair is a judge grading an agent of its own family
    tmap: np.ndarray  # leniency contrasts, see _grader_map
    terms: _Terms
    design: np.ndarray  # pairs x (agents | leniency contrasts | candidate terms)

    @property
    def term_offset(self) -> int:
        return self.design.shape[1] - self.terms.grader.shape[0]


def _fixed_design(g: _Grades, ref: np.ndarray, ref_weights: np.ndarray) -> _FixedDesign:
    n_g = g.grader_ids.shape[0]
    pair = g.agent.astype(np.int64) * n_g + g.grader
    pair_keys, pair_of = np.unique(pair, return_inverse=True)
    pair_of = pair_of.reshape(-1)
    pair_agent, pair_grader = pair_keys // n_g, pair_keys % n_g
    pair_w = np.bincount(pair_of, weights=g.omega, minlength=pair_keys.shape[0])
    own = (g.grader_family[pair_grader] != "") & (g.grader_family[pair_grader] == g.agent_family[pair_agent])
    tmap = _grader_map(n_g, ref, ref_weights)
    terms = _candidates(g)
    design = _pair_design(pair_agent, pair_grader, g.agent_ids.shape[0], tmap, terms.grader, own)
    return _FixedDesign(pair_of, pair_agent, pair_grader, pair_w, own, tmap, terms, design)


@dataclass(frozen=True, eq=False)
class _Identification:
    """Which self-preference candidates the design identifies, and why the others are not."""

    identified: np.ndarray  # per candidate
    reasons: list[str | None]  # per candidate, None where identified
    own_grades: np.ndarray  # per candidate: its grades of its own family's agents
    kept: np.ndarray  # candidates kept in the model
    keep_cols: np.ndarray  # columns of the fixed design kept


def _identification(g: _Grades, fd: _FixedDesign, ref: np.ndarray) -> _Identification:
    """Keep every self-preference term the grades identify; refuse a design that identifies no agent level.

    A term is identified when its unit vector is orthogonal to the null space of :math:`X^\\top W X` over the
    full design (every candidate in). A candidate that never grades its own family's agent has a zero column,
    which is one null direction of its own and touches no other term.
    """
    gram = fd.design.T @ (fd.pair_w[:, None] * fd.design)
    bad, basis = _not_estimable(gram)
    offset = fd.term_offset
    terms = fd.terms
    pair_n = np.bincount(fd.pair_of, minlength=fd.pair_agent.shape[0])
    own_grades = np.array(
        [int(pair_n[(fd.pair_grader == gr) & fd.own].sum()) for gr in terms.grader.tolist()], dtype=np.int64
    )
    identified = ~bad[offset:]
    reasons = [
        None if identified[j] else _term_reason(j, g, terms, own_grades, basis, offset)
        for j in range(terms.grader.shape[0])
    ]
    kept = np.flatnonzero(identified)
    keep_cols = np.concatenate([np.arange(offset), offset + kept]).astype(np.int64)
    bad, _ = _not_estimable(gram[np.ix_(keep_cols, keep_cols)])
    if bad.any():
        names = [f"agent {a!r}" for a in g.agent_ids.tolist()]
        names += [f"grader {str(g.grader_ids[i])!r}" for i in range(g.grader_ids.shape[0]) if i != int(ref[-1])]
        names += [f"self-preference of {str(g.grader_ids[terms.grader[j]])!r}" for j in kept.tolist()]
        raise ValueError(_unidentified_message(names, bad))
    return _Identification(identified, reasons, own_grades, kept, keep_cols)


@dataclass(frozen=True, eq=False)
class _Core:
    """The grades' rows over the core columns (kept fixed effects, then tasks) and the episodes' sums."""

    p: int
    n_t: int
    x_core: scipy.sparse.csr_matrix
    b: scipy.sparse.csr_matrix
    nu: np.ndarray
    r: np.ndarray
    gram: np.ndarray
    rhs: np.ndarray


def _core(g: _Grades, fd: _FixedDesign, ident: _Identification) -> _Core:
    design = fd.design[:, ident.keep_cols]
    p = design.shape[1]
    n, n_ep, n_pairs = g.n, g.episode_ids.shape[0], fd.pair_agent.shape[0]
    n_t = 0 if g.task_ids is None else g.task_ids.shape[0]
    n_core = p + n_t
    has_task = np.zeros(n, dtype=bool) if g.ep_task is None else g.ep_task[g.episode] >= 0
    task_col = np.full(n, -1, dtype=np.int64)
    if g.ep_task is not None:
        task_col[has_task] = p + g.ep_task[g.episode][has_task]
    pattern = scipy.sparse.csr_matrix(design)
    incidence = scipy.sparse.csr_matrix((g.omega, (g.episode, fd.pair_of)), shape=(n_ep, n_pairs))
    b_fixed = incidence @ pattern
    nu = np.bincount(g.episode, weights=g.omega, minlength=n_ep)
    r = np.bincount(g.episode, weights=g.omega * g.y, minlength=n_ep)
    if n_t:
        assert g.ep_task is not None
        with_task = np.flatnonzero(g.ep_task >= 0)
        b_task = scipy.sparse.csr_matrix((nu[with_task], (with_task, g.ep_task[with_task])), shape=(n_ep, n_t))
        b = scipy.sparse.hstack([b_fixed, b_task], format="csr")
    else:
        b = scipy.sparse.csr_matrix(b_fixed)
    # Per-grade core rows: the pair's fixed row plus its episode's task column.
    pair_rows = scipy.sparse.csr_matrix((np.ones(n), (np.arange(n), fd.pair_of)), shape=(n, n_pairs))
    x_core = pair_rows @ scipy.sparse.csr_matrix(
        (pattern.data, pattern.indices, pattern.indptr), shape=(pattern.shape[0], n_core)
    )
    if n_t:
        x_core = (x_core + scipy.sparse.csr_matrix(
            (np.ones(int(has_task.sum())), (np.flatnonzero(has_task), task_col[has_task])), shape=(n, n_core)
        )).tocsr()  # fmt: skip
    wx = scipy.sparse.diags(g.omega) @ x_core
    gram = (x_core.T @ wx).toarray()
    gram = 0.5 * (gram + gram.T)
    rhs = np.asarray(wx.T @ g.y).reshape(-1)
    return _Core(p, n_t, x_core, b, nu, r, gram, rhs)


def _components(g: _Grades, n_t: int) -> tuple[tuple[str, ...], dict[str, str]]:
    """Return the random components the design can tell apart, and why any other is left out."""
    n_ep, n_h = g.episode_ids.shape[0], g.human_ids.shape[0]
    grades_per_ep = np.bincount(g.episode, minlength=n_ep)
    eps_per_human = np.bincount(g.ep_human, minlength=n_h)
    episode_effect = bool(np.any(grades_per_ep >= 2)) and bool(np.any(eps_per_human >= 2))
    component_notes: dict[str, str] = {}
    if not np.any(grades_per_ep >= 2):
        component_notes["episode"] = (
            "every episode has one grade: its own quality cannot be told apart from the grade noise and is part "
            "of beta"
        )
    elif not np.any(eps_per_human >= 2):
        component_notes["episode"] = (
            "every participant has one episode: the episode effect is the participant effect (sigma_human)"
        )
    components = (("episode",) if episode_effect else ()) + ("human",) + (("task",) if n_t else ())
    return components, component_notes


def _model(g: _Grades, core: _Core, components: tuple[str, ...]) -> _Model:
    """Return the design the restricted likelihood is maximised over, with its elimination backend."""
    n_ep, n_h = g.episode_ids.shape[0], g.human_ids.shape[0]
    n_core = core.p + core.n_t
    ep = _episodes(core.b, core.r, core.nu, g.ep_human, n_h)
    episode_effect = "episode" in components
    nu_vals, ep_class = np.unique(core.nu, return_inverse=True)
    ep_class = ep_class.reshape(-1)
    counts = np.bincount(g.ep_human * nu_vals.shape[0] + ep_class, minlength=n_h * nu_vals.shape[0])
    counts = counts.reshape(n_h, nu_vals.shape[0])
    sums: _EpisodeSums | _PooledSums = _EpisodeSums(ep, episode_effect)
    if nu_vals.shape[0] <= 16:
        groups, group = np.unique(counts, axis=0, return_inverse=True)
        if _PooledSums.size(nu_vals.shape[0], groups.shape[0], n_core) <= _POOL_LIMIT:
            sums = _PooledSums(ep, episode_effect, nu_vals, ep_class, group.reshape(-1), groups)
    if g.n <= core.p:
        raise ValueError(f"scores: the model needs more grades ({g.n}) than fixed effects ({core.p})")
    n_levels = {"episode": n_ep, "human": n_h, "task": core.n_t}
    return _Model(
        n=g.n,
        p=core.p,
        n_core=n_core,
        components=components,
        n_levels={name: n_levels[name] for name in components},
        task_cols=np.arange(core.p, n_core),
        gram=core.gram,
        rhs=core.rhs,
        ywy=float(np.dot(g.omega * g.y, g.y)),
        sum_log_omega=float(np.log(g.omega).sum()),
        episodes=ep,
        sums=sums,
    )


@dataclass(frozen=True, eq=False)
class _Participants:
    """Participants' effects at the REML point, and every grade's residual."""

    u_h: np.ndarray
    var_h: np.ndarray
    residuals: np.ndarray
    standardized: np.ndarray
    diagnostics: dict[str, Any]
    s_inv: np.ndarray


def _participants(g: _Grades, core: _Core, model: _Model, reml: _Reml) -> _Participants:
    """Return the participants' posterior and the residual diagnostics of the grades at the REML point."""
    ev, ep = reml.evaluation, model.episodes
    beta2 = math.exp(reml.tau)
    gamma_q = ev.gamma.get("episode", 0.0)
    gamma_h = ev.gamma["human"]
    n_h = g.human_ids.shape[0]
    nu, r, b = core.nu, core.r, core.b
    kappa = 1.0 / (1.0 + gamma_q * nu)
    f = gamma_q * kappa
    c = _couplings(ep, kappa)
    rho = np.bincount(ep.human, weights=kappa * r, minlength=n_h)
    dt = np.bincount(ep.human, weights=kappa * nu, minlength=n_h) + 1.0 / gamma_h
    u_h = (rho - c @ ev.core_mu) / dt
    s_inv = chol_inverse(ev.chol)
    var_h = beta2 * (1.0 / dt + row_forms(c, ev.chol, s_inv) / dt**2)
    u_e = f * (r - b @ ev.core_mu - nu * u_h[ep.human])
    fitted = core.x_core @ ev.core_mu + u_e[g.episode] + u_h[g.ep_human[g.episode]]
    residuals = g.y - fitted
    g_ep = (scipy.sparse.diags(f) @ b + scipy.sparse.diags(kappa / dt[ep.human]) @ c[ep.human]).tocsr()
    e_of = g.episode
    base = f[e_of] + kappa[e_of] ** 2 / dt[g.ep_human[e_of]]
    leverage = _leverages(model, ev, core.x_core, e_of, g.omega, g_ep, base)
    diagnostics, standardized = residual_diagnostics(residuals, math.sqrt(beta2), g.omega, leverage)
    diagnostics["leverage_mean"] = float(leverage.mean())
    diagnostics["standardization"] = "exact residual variance beta^2 (1/omega - x^T C^-1 x) of each grade"
    return _Participants(u_h, var_h, residuals, standardized, diagnostics, s_inv)


def _leniency_rows(
    g: _Grades, fd: _FixedDesign, ref: np.ndarray, fixed_mu: np.ndarray, fixed_cov: np.ndarray
) -> list[dict[str, Any]]:
    """Return each grader's leniency relative to the reference, with its interval."""
    n_a, n_g, offset = g.agent_ids.shape[0], g.grader_ids.shape[0], fd.term_offset
    tmap = fd.tmap
    n_b = tmap.shape[1]
    lenient = tmap @ fixed_mu[n_a:offset] if n_b else np.zeros(n_g)
    lenient_cov = tmap @ fixed_cov[n_a:offset, n_a:offset] @ tmap.T if n_b else np.zeros((n_g, n_g))
    grades_of = np.bincount(g.grader, minlength=n_g)
    episodes_of = np.bincount(np.unique(g.episode.astype(np.int64) * n_g + g.grader) % n_g, minlength=n_g)
    in_ref = np.zeros(n_g, dtype=bool)
    in_ref[ref] = True
    rows = []
    estimable = n_g > 1
    for i in range(n_g):
        se = math.sqrt(max(float(lenient_cov[i, i]), 0.0))
        rows.append(
            {
                "grader": str(g.grader_ids[i]),
                "family": str(g.grader_family[i]),
                "expert": bool(g.grader_family[i] == ""),
                "reference": bool(in_ref[i]),
                "n_grades": int(grades_of[i]),
                "n_episodes": int(episodes_of[i]),
                "leniency": float(lenient[i]) if estimable else None,
                "se": se if estimable else None,
                "ci_low": float(lenient[i]) - _Z95 * se if estimable else None,
                "ci_high": float(lenient[i]) + _Z95 * se if estimable else None,
            }
        )
    return rows


def _preference_rows(
    g: _Grades, fd: _FixedDesign, ident: _Identification, fixed_mu: np.ndarray, fixed_sd: np.ndarray
) -> list[dict[str, Any]]:
    """Return each self-preference candidate with its Wald test, or the reason it is not identified."""
    terms, offset = fd.terms, fd.term_offset
    rows = []
    for j in range(terms.grader.shape[0]):
        row: dict[str, Any] = {
            "grader": str(g.grader_ids[terms.grader[j]]),
            "family": str(terms.family[j]),
            "n_own_grades": int(ident.own_grades[j]),
            "identifiable": bool(ident.identified[j]),
            "reason": ident.reasons[j],
            "estimate": None,
            "se": None,
            "ci_low": None,
            "ci_high": None,
            "z": None,
            "p_value": None,
        }
        if ident.identified[j]:
            col = offset + int(np.searchsorted(ident.kept, j))
            est, se = float(fixed_mu[col]), float(fixed_sd[col])
            z = est / se if se > 0 else math.nan
            row.update(
                estimate=est,
                se=se,
                ci_low=est - _Z95 * se,
                ci_high=est + _Z95 * se,
                z=z,
                p_value=float(2.0 * norm.sf(abs(z))) if math.isfinite(z) else None,
            )
        rows.append(row)
    return rows


def _design_notes(g: _Grades, reference: str, preference_rows: list[dict[str, Any]]) -> list[str]:
    """Plain statements about what the grades could not estimate, or measure only indirectly."""
    notes = [
        f"self-preference of {row['grader']!r} ({row['family']}) not identifiable: {row['reason']}"
        for row in preference_rows
        if not row["identifiable"]
    ]
    is_expert = g.grader_family == ""
    for i in np.flatnonzero(is_expert).tolist():
        agents_graded = np.unique(g.agent[g.grader == i])
        if agents_graded.shape[0] == 1:
            only = str(g.agent_ids[agents_graded[0]])
            notes.append(
                f"expert {str(g.grader_ids[i])!r} graded only agent {only!r}: its leniency is measured on that "
                "agent's episodes alone"
            )
    if reference == "experts":
        expert_eps = np.zeros(g.episode_ids.shape[0], dtype=bool)
        expert_eps[g.episode[is_expert[g.grader]]] = True
        for i in np.flatnonzero(~is_expert).tolist():
            if not expert_eps[g.episode[g.grader == i]].any():
                notes.append(
                    f"judge {str(g.grader_ids[i])!r} shares no episode with an expert: its leniency relative to the "
                    "experts rests on comparisons between episodes only"
                )
    return notes


def reference_statement(
    graders: list[str], weights: list[float], weighting: str, preference_rows: list[dict[str, Any]]
) -> str:
    """Say what the agent levels are, and which self-preference they do and do not remove.

    Levels remove a judge's self-preference only where its term is identified; an unidentified term's bias
    stays in the levels of its family's agents, and the sentence says so rather than "without self-preference".
    """
    if len(graders) == 1:
        who = f"what {graders[0]} would give"
    elif weighting == "equal":
        who = f"what the average of {', '.join(graders)} (weighted equally) would give"
    else:
        shares = ", ".join(f"{gid} {100.0 * w:.0f} %" for gid, w in zip(graders, weights, strict=True))
        who = f"what the average of {', '.join(graders)}, weighted by their number of grades ({shares}), would give"
    removed = [f"{row['grader']} ({row['family']})" for row in preference_rows if row["identifiable"]]
    kept = [f"{row['grader']} ({row['family']})" for row in preference_rows if not row["identifiable"]]
    if not preference_rows:
        bias = "no judge shares a model family with an agent, so there is no self-preference to remove"
    elif not kept:
        bias = f"with the self-preference of {', '.join(removed)} removed"
    elif not removed:
        bias = (
            f"the self-preference of {', '.join(kept)} cannot be measured with these grades and is NOT removed: "
            "any such bias is still in the levels of that family's agents"
        )
    else:
        bias = (
            f"with the self-preference of {', '.join(removed)} removed; that of {', '.join(kept)} cannot be "
            "measured with these grades and is NOT removed (any such bias is still in its family's agents' levels)"
        )
    return f"agent levels are {who} for an average participant and episode, {bias}"


def _result(
    g: _Grades, spec: ModelSpec, core: _Core, model: _Model, reml: _Reml, mixture: Mixture, integrated: bool,
    parts: _Participants, diagnostics: dict[str, Any], ref_weights: np.ndarray,
) -> FitResult:  # fmt: skip
    """Assemble the fit's result: agents' levels, participants, tasks and the leaderboard configuration.

    The restricted likelihood depends on how the leniencies are parametrised by a constant: with unequal
    reference weights, by the log of the last reference grader's weight. It is reported for equal weights
    (the correction is zero when the weights are equal), so it does not depend on the order of the grades.
    """
    n_a = g.agent_ids.shape[0]
    fixed_mu, fixed_cov = mixture.moments()
    agent_mixture = Mixture(
        mixture.weights, mixture.means[:, :n_a], mixture.cov0[:, :n_a, :n_a], mixture.beta2, mixture.beta2_weights
    )
    agent_mu, agent_cov = fixed_mu[:n_a], fixed_cov[:n_a, :n_a]
    beta2 = math.exp(reml.tau)
    beta = math.sqrt(beta2)
    task_ids = task_mu = task_sigma = None
    if core.n_t:
        task_ids = g.task_ids
        task_mu = reml.evaluation.core_mu[core.p :].copy()
        task_sigma = np.sqrt(beta2 * np.diag(parts.s_inv)[core.p :])
    sigma_h = math.sqrt(beta2 * reml.evaluation.gamma["human"])
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
    n_params = 1 + int(reml.free.sum())
    loglik = reml.loglik
    if not np.all(ref_weights == ref_weights[0]):
        loglik -= math.log(float(ref_weights[-1]) * ref_weights.shape[0])
    return FitResult(
        spec=spec,
        agent_ids=g.agent_ids,
        agent_mu=agent_mu,
        agent_cov=agent_cov,
        agent_n=np.bincount(g.ep_agent, minlength=n_a).astype(np.int64),
        human_ids=g.human_ids,
        human_mu=parts.u_h,
        human_sigma=np.sqrt(parts.var_h),
        human_n=np.bincount(g.ep_human, minlength=g.human_ids.shape[0]).astype(np.int64),
        task_ids=task_ids,
        task_mu=task_mu,
        task_sigma=task_sigma,
        level=level,
        hyper=_hyper(model, reml),
        log_likelihood=loglik,
        aic=-2.0 * loglik + 2.0 * n_params,
        diagnostics=diagnostics,
        residuals=parts.residuals,
        standardized_residuals=parts.standardized,
        config=config,
        _mixture=agent_mixture if integrated else None,
    )


def _diagnostics(
    g: _Grades,
    fd: _FixedDesign,
    ident: _Identification,
    reference_choice: tuple[np.ndarray, np.ndarray, str, str],
    mixture: Mixture,
    components: tuple[str, ...],
    component_notes: dict[str, str],
    diagnostics: dict[str, Any],
) -> dict[str, Any]:
    """Add the grader report, the reference statement and the design's notes to the residual diagnostics.

    ``reference_choice`` is (reference grader codes, their weights, reference kind, weighting).
    """
    ref, ref_weights, reference, reference_weighting = reference_choice
    fixed_mu, fixed_cov = mixture.moments()
    fixed_sd = np.sqrt(np.clip(np.diag(fixed_cov), 0.0, None))
    preference_rows = _preference_rows(g, fd, ident, fixed_mu, fixed_sd)
    notes: list[str] = []
    if g.grader_ids.shape[0] == 1:
        notes.append("one grader: leniency and self-preference cannot be estimated; the levels are that grader's")
    notes += [component_notes["episode"]] if "episode" in component_notes else []
    notes += _design_notes(g, reference, preference_rows)
    ref_ids = [str(g.grader_ids[i]) for i in ref.tolist()]
    diagnostics["reference"] = {
        "kind": reference,
        "graders": ref_ids,
        "weighting": reference_weighting,
        "weights": [float(w) for w in ref_weights.tolist()],
        "statement": reference_statement(ref_ids, ref_weights.tolist(), reference_weighting, preference_rows),
    }
    diagnostics["graders"] = {
        "leniency": _leniency_rows(g, fd, ref, fixed_mu, fixed_cov),
        "self_preference": preference_rows,
    }
    diagnostics["components"] = {
        name: "estimated" if name in components else component_notes.get(name, "not in the model")
        for name in ("episode", "human", "task")
    }
    diagnostics["notes"] = notes
    diagnostics["n_grades"] = int(g.n)
    diagnostics["n_episodes"] = int(g.episode_ids.shape[0])
    return diagnostics


# --------------------------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------------------------


def fit_graded(
    agent: Any,
    human: Any,
    scores: Any,
    task: Any = None,
    *,
    episode: Any,
    grader: Any,
    agent_family: Any,
    grader_family: Any,
    spec: ModelSpec | None = None,
    reference: str = "panel",
    reference_graders: Any = None,
    reference_weighting: str = REFERENCE_WEIGHTING,
    weights: Any = None,
) -> FitResult:
    """Fit the judge-aware model to individual grades and return the agents' neutral levels.

    .. math::

        y_{e,g} = a_A + h_H\\,(+\\,t_T) + q_e + b_g + s_g\\,[F(g) = F(A)] + \\epsilon,
        \\qquad \\textstyle\\sum_{g \\in \\mathcal R} b_g = 0

    (``docs/rating-models.md`` §6). ``agent_mu`` is :math:`a_A`, what the reference graders would give on
    average with every identified self-preference term removed, with an average participant, episode and
    task (``diagnostics["reference"]["statement"]`` says which terms that is); ``agent_cov`` is its
    exact GLS covariance, integrated over the variance components when ``spec.integrate_hyper``.

    Parameters
    ----------
    agent, human, scores
        One entry per grade (a judge run or an expert grade); every grade of an episode names the same agent
        and participant.
    task
        Optional task per grade (``None``/blank for none), the same for every grade of an episode; adds
        random task effects.
    episode, grader
        The graded episode and the grader of each grade.
    agent_family, grader_family
        Each agent's and grader's model family: a mapping id -> family, or one entry per grade. A grader
        with no family (``""`` or ``None``) is an expert. A self-preference term :math:`s_g` is estimated for
        each judge whose family is some agent's family, where the design identifies it.
    spec
        ``ModelSpec(kind="judge_aware")`` (the default); ``k`` and ``integrate_hyper`` are honoured.
    reference
        ``"panel"``: levels are the mean of the LLM judges (``reference_graders``, default every grader
        with a family); ``"experts"``: the mean of the expert graders (default every grader without one).
    reference_weighting
        ``"grades"`` (the default): the reference graders' leniencies average zero weighted by their number of
        grades, so a judge with a few grades barely moves the levels or widens their intervals; ``"equal"``:
        unweighted. The two agree when every reference grader graded as many grades, and gaps between
        agents never depend on it.
    weights
        Optional positive grade weights :math:`\\omega` (noise variance :math:`\\beta^2/\\omega`).

    Returns
    -------
    FitResult
        ``diagnostics["graders"]`` holds each grader's leniency relative to the reference
        (``"leniency"``) and each self-preference term with its Wald test or the reason it is not
        identified (``"self_preference"``); ``diagnostics["reference"]`` what the levels mean;
        ``diagnostics["notes"]`` plain statements about what the design could not estimate.
        ``agent_n`` and ``human_n`` count episodes.
    """
    if spec is None:
        spec = ModelSpec(kind="judge_aware")
    if not isinstance(spec, ModelSpec):
        raise ValueError(f"spec must be a ModelSpec, got {type(spec).__name__}")
    if spec.kind != "judge_aware":
        raise ValueError(f"spec: fit_graded fits the judge_aware model, got kind {spec.kind!r} (use fit_model)")
    g = _grades(agent, human, scores, task, episode, grader, agent_family, grader_family, weights)
    ref = _reference(g, reference, reference_graders)
    ref_weights = _reference_weights(g, ref, reference_weighting)
    fd = _fixed_design(g, ref, ref_weights)
    ident = _identification(g, fd, ref)
    core = _core(g, fd, ident)
    components, component_notes = _components(g, core.n_t)
    model = _model(g, core, components)
    reml = _reml(model)
    mixture, integrated = _mixture(model, reml, spec.integrate_hyper)
    parts = _participants(g, core, model, reml)

    diagnostics = _diagnostics(
        g, fd, ident, (ref, ref_weights, reference, reference_weighting), mixture, components, component_notes,
        parts.diagnostics,
    )  # fmt: skip
    diagnostics["reml_converged"] = bool(reml.converged)
    diagnostics["hyper_integrated"] = bool(integrated)
    diagnostics["backend"] = "pooled" if isinstance(model.sums, _PooledSums) else "episodes"
    return _result(g, spec, core, model, reml, mixture, integrated, parts, json_safe(diagnostics), ref_weights)
