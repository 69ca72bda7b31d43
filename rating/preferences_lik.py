"""The preference model's joint penalised log-likelihood, its exact gradient and Hessian, and Newton's method.

Parameters, in this order: the linear terms of quality (free arm cells, then worker and task effects), then
``rho`` (logits per quality point), ``first`` (position bias), ``length`` (per doubling of length) and ``tie``
(log of Davidson's ν). The log SD of the rubric-score noise, ``log_sd``, is held fixed here (``Problem.fixed``):
it is a variance component, estimated outside with the others. For a deliverable e with quality q_e:

    rubric score      y = q_e + ε,  ε ~ N(0, e^{2·log_sd})
    ranked pair e, f  z = rho (q_e − q_f) + first·([e first] − [f first]) + length·log2(len_e / len_f)
                      P(e ≻ f) = e^{z/2} / D,  P(f ≻ e) = e^{−z/2} / D,  P(tie) = ν / D,  D = e^{z/2} + e^{−z/2} + ν

and the worker and task effects carry Gaussian penalties (their prior precisions). Everything is sparse in
the linear terms, so a Newton step costs one sparse LU of the penalised information. Pure numpy/scipy.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse

from rating.preferences_solve import factor

__all__ = ["EXTRAS", "Davidson", "Evaluation", "Pairs", "Problem", "comparison_hessian", "davidson", "evaluate",
           "logdet", "maximise", "other_hessian", "pair_scores", "pair_terms", "pairs_at", "penalised_value",
           "scores_gram", "weighted", "z_jacobian"]

EXTRAS = ("rho", "first", "length", "tie")
# Beyond this many log-odds a position, length or tie term is running off to infinity (separated rankings).
RUNAWAY = 30.0


@dataclass(frozen=True, eq=False)
class Problem:
    """The parameter-free arrays of one fit. ``columns`` maps each present extra to its column; an absent extra
    is fixed (rho at 1, the others at 0; no ``tie`` column means ν = 0, no ties possible)."""

    n_lin: int
    columns: dict[str, int]
    a: scipy.sparse.csr_matrix          # episodes x linear terms
    a_scores: scipy.sparse.csr_matrix   # rubric scores x linear terms
    y: np.ndarray
    d_a: scipy.sparse.csr_matrix        # pairs x linear terms: row(e) - row(f)
    outcome: np.ndarray
    first: np.ndarray
    log_length: np.ndarray
    random_cols: np.ndarray             # columns of the penalised (random) terms
    random_group: np.ndarray            # their group: 0 workers, 1 tasks
    diagonal_cols: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # task effects
    fixed: dict[str, float] = field(default_factory=dict)   # values of extras held fixed (log_sd: outer)
    weight: np.ndarray | None = None    # per pair: its weight in the composite likelihood (None: all 1)
    gram: scipy.sparse.csr_matrix | None = None   # scores_gram, formed once

    @property
    def n_params(self) -> int:
        return self.n_lin + len(self.columns)

    def value(self, theta: np.ndarray, name: str) -> float:
        """An extra's value (its fixed value when it is not estimated)."""
        if name in self.columns:
            return float(theta[self.columns[name]])
        return self.fixed.get(name, 1.0 if name == "rho" else 0.0)


@dataclass(frozen=True)
class Davidson:
    """Per-pair log-likelihood and its derivatives in (z, tie)."""

    ll: np.ndarray
    lz: np.ndarray
    lzz: np.ndarray
    lk: np.ndarray
    lkk: np.ndarray
    lzk: np.ndarray
    p_win: np.ndarray
    p_tie: np.ndarray
    p_loss: np.ndarray


def davidson(z: np.ndarray, tie: float | None, outcome: np.ndarray) -> Davidson:
    """Davidson's tie model, evaluated stably (every exponential scaled by e^{-|z|/2})."""
    m = np.abs(z) / 2.0
    e1, e2 = np.exp(z / 2.0 - m), np.exp(-z / 2.0 - m)
    nu = np.zeros_like(z) if tie is None else np.exp(np.minimum(tie - m, 700.0))
    ds = e1 + e2 + nu
    log_d = m + np.log(ds)
    a, c, b = (e1 - e2) / (2.0 * ds), (e1 + e2) / (4.0 * ds), nu / ds
    is_tie = outcome == 0
    ll = np.where(outcome > 0, z / 2.0, np.where(outcome < 0, -z / 2.0, 0.0 if tie is None else tie)) - log_d
    return Davidson(ll=ll, lz=0.5 * outcome - a, lzz=-(c - a * a), lk=is_tie - b, lkk=-(b - b * b), lzk=a * b,
                    p_win=e1 / ds, p_tie=b, p_loss=e2 / ds)


@dataclass(frozen=True, eq=False)
class Evaluation:
    value: float
    gradient: np.ndarray
    neg_hessian: scipy.sparse.csc_matrix | None


def _extra_column(pb: Problem, values: dict[str, np.ndarray], rows: int) -> scipy.sparse.csr_matrix:
    """Pairs x params sparse matrix holding the given extras' per-pair values in their columns."""
    cols = [(pb.columns[k], v) for k, v in values.items() if k in pb.columns]
    if not cols:
        return scipy.sparse.csr_matrix((rows, pb.n_params))
    r = np.concatenate([np.arange(rows)] * len(cols))
    c = np.concatenate([np.full(rows, j) for j, _ in cols])
    v = np.concatenate([v for _, v in cols])
    return scipy.sparse.csr_matrix((v, (r, c)), shape=(rows, pb.n_params))


def _pad(m: scipy.sparse.csr_matrix, n: int) -> scipy.sparse.csr_matrix:
    return scipy.sparse.hstack([m, scipy.sparse.csr_matrix((m.shape[0], n - m.shape[1]))], format="csr")


def pair_terms(pb: Problem, theta: np.ndarray) -> tuple[np.ndarray, Davidson, np.ndarray]:
    """Each pair's z, its Davidson terms and its quality difference q_e - q_f."""
    rho = pb.value(theta, "rho")
    dq = pb.d_a @ theta[:pb.n_lin]
    z = rho * dq + pb.value(theta, "first") * pb.first + pb.value(theta, "length") * pb.log_length
    tie = pb.value(theta, "tie") if "tie" in pb.columns else None
    return z, weighted(davidson(z, tie, pb.outcome), pb.weight), dq


def weighted(dv: Davidson, weight: np.ndarray | None) -> Davidson:
    """The pairs' log-likelihood terms times their weights (the probabilities stay as they are)."""
    if weight is None:
        return dv
    return dataclasses.replace(dv, ll=dv.ll * weight, lz=dv.lz * weight, lzz=dv.lzz * weight, lk=dv.lk * weight,
                               lkk=dv.lkk * weight, lzk=dv.lzk * weight)


def z_jacobian(pb: Problem, theta: np.ndarray, dq: np.ndarray) -> scipy.sparse.csr_matrix:
    """∂z/∂θ per pair (pairs x params)."""
    rho = pb.value(theta, "rho")
    lin = _pad((pb.d_a * rho).tocsr(), pb.n_params)
    return (lin + _extra_column(pb, {"rho": dq, "first": pb.first, "length": pb.log_length}, dq.size)).tocsr()


@dataclass(frozen=True, eq=False)
class Pairs:
    """The pairs' terms at one θ, computed once for the value, the gradient and the Hessian."""

    z: np.ndarray
    dv: Davidson
    dq: np.ndarray
    j: scipy.sparse.csr_matrix      # ∂z/∂θ


def pairs_at(pb: Problem, theta: np.ndarray) -> Pairs:
    z, dv, dq = pair_terms(pb, theta)
    return Pairs(z, dv, dq, z_jacobian(pb, theta, dq))


def pair_scores(pb: Problem, theta: np.ndarray, at: Pairs | None = None) -> scipy.sparse.csr_matrix:
    """Each pair's contribution to the gradient (pairs x params): the rows summed by ranking give the sandwich."""
    at = at or pairs_at(pb, theta)
    out = scipy.sparse.diags(at.dv.lz) @ at.j
    if "tie" in pb.columns:
        out = out + _extra_column(pb, {"tie": at.dv.lk}, at.dq.size)
    return out.tocsr()


def _pair_gradient(pb: Problem, at: Pairs) -> np.ndarray:
    """The pair scores summed: Jᵀ ∂ℓ/∂z, plus the tie column."""
    g = np.asarray(at.j.T @ at.dv.lz, dtype=float).ravel()
    if "tie" in pb.columns:
        g[pb.columns["tie"]] += float(at.dv.lk.sum())
    return g


def _score_terms(pb: Problem, theta: np.ndarray) -> tuple[float, np.ndarray, float, np.ndarray]:
    """Rubric scores: log-likelihood, gradient, 1/σ² and residuals."""
    g = np.zeros(pb.n_params)
    if pb.y.size == 0:
        return 0.0, g, 0.0, pb.y
    log_sd = pb.value(theta, "log_sd")
    s2inv = float(np.exp(-2.0 * log_sd))
    r = pb.y - pb.a_scores @ theta[:pb.n_lin]
    ll = -0.5 * float(r @ r) * s2inv - pb.y.size * (log_sd + 0.5 * np.log(2.0 * np.pi))
    g[:pb.n_lin] = s2inv * (pb.a_scores.T @ r)
    return ll, g, s2inv, r


def _border(n: int, k: int, column: np.ndarray, corner: float) -> scipy.sparse.csr_matrix:
    """Symmetric sparse matrix with ``column`` (length <= n) in column and row k, plus ``corner`` at (k, k)."""
    idx = np.flatnonzero(column)
    rows = np.concatenate([idx, np.full(idx.size, k), [k]])
    cols = np.concatenate([np.full(idx.size, k), idx, [k]])
    vals = np.concatenate([column[idx], column[idx], [corner]])
    return scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(n, n))


def comparison_hessian(pb: Problem, theta: np.ndarray, at: Pairs | None = None) -> scipy.sparse.csr_matrix:
    """The comparisons' part of the exact negative Hessian (sparse: the extras are a thin border)."""
    n = pb.n_params
    if not pb.outcome.size:
        return scipy.sparse.csr_matrix((n, n))
    at = at or pairs_at(pb, theta)
    dv, j = at.dv, at.j
    full = (j.T @ scipy.sparse.diags(-dv.lzz) @ j).tocsr()
    if "rho" in pb.columns:      # the second derivative of z: ∂²z/∂lin∂rho = d_a
        col = np.zeros(n)
        col[:pb.n_lin] = -(pb.d_a.T @ dv.lz)
        full = full + _border(n, pb.columns["rho"], col, 0.0)
    if "tie" in pb.columns:
        k = pb.columns["tie"]
        cross = -(j.T @ dv.lzk)
        cross[k] = 0.0
        full = full + _border(n, k, cross, -float(dv.lkk.sum()))
    return full.tocsr()


def other_hessian(pb: Problem, theta: np.ndarray, prec: np.ndarray) -> scipy.sparse.csr_matrix:
    """The rubric scores' part of the negative Hessian plus the random effects' penalty."""
    n = pb.n_params
    penalty = np.zeros(n)
    penalty[pb.random_cols] = prec
    full = scipy.sparse.diags(penalty).tocsr()
    if pb.y.size:
        s2inv = float(np.exp(-2.0 * pb.value(theta, "log_sd")))
        full = full + scores_gram(pb) * s2inv
    return full.tocsr()


def scores_gram(pb: Problem) -> scipy.sparse.csr_matrix:
    """AᵀA of the rubric scores' design, padded to all parameters (parameter-free: `build` forms it once)."""
    return pb.gram if pb.gram is not None else _pad_square(pb.a_scores.T @ pb.a_scores, pb.n_params)


def _pad_square(m: scipy.sparse.spmatrix, n: int) -> scipy.sparse.csr_matrix:
    m = scipy.sparse.coo_matrix(m)
    return scipy.sparse.csr_matrix((m.data, (m.row, m.col)), shape=(n, n))


def evaluate(pb: Problem, theta: np.ndarray, prec: np.ndarray, hessian: bool = True) -> Evaluation:
    """Penalised log-likelihood at ``theta`` with prior precisions ``prec`` of the random columns."""
    value, g, _, _ = _score_terms(pb, theta)
    at = pairs_at(pb, theta) if pb.outcome.size else None
    if at is not None:
        value += float(at.dv.ll.sum())
        g = g + _pair_gradient(pb, at)
    u = theta[pb.random_cols]
    value -= 0.5 * float(prec @ (u * u))
    g[pb.random_cols] -= prec * u
    if not hessian:
        return Evaluation(value, g, None)
    return Evaluation(value, g, (comparison_hessian(pb, theta, at) + other_hessian(pb, theta, prec)).tocsr())


def penalised_value(pb: Problem, theta: np.ndarray, prec: np.ndarray) -> float:
    """The penalised log-likelihood alone (a line search's trial needs no derivative)."""
    value = _score_terms(pb, theta)[0]
    if pb.outcome.size:
        value += float(pair_terms(pb, theta)[1].ll.sum())
    u = theta[pb.random_cols]
    return value - 0.5 * float(prec @ (u * u))


def logdet(h: scipy.sparse.spmatrix, pb: Problem) -> float:
    """log |H|; NaN when H is not positive definite."""
    return factor(h, pb.diagonal_cols).logdet()


def _step(h: scipy.sparse.spmatrix, g: np.ndarray, pb: Problem) -> np.ndarray | None:
    f = factor(h, pb.diagonal_cols)
    if not f.ok:
        return None
    step = f.solve(g)
    return step if np.all(np.isfinite(step)) and float(g @ step) > 0 else None


def maximise(pb: Problem, theta: np.ndarray, prec: np.ndarray, *, tol: float = 1e-10,
             max_iter: int = 200) -> tuple[np.ndarray, Evaluation, bool, int]:
    """Newton's method with step halving; where the Hessian is not positive definite (far from the optimum,
    the bilinear rho·q term) the step is damped towards the gradient until it is an ascent direction."""
    ev = evaluate(pb, theta, prec)
    for it in range(1, max_iter + 1):
        step, damp = _step(ev.neg_hessian, ev.gradient, pb), 1e-6
        scale = float(np.abs(ev.neg_hessian.diagonal()).max()) or 1.0
        while step is None and damp < 1e12:
            eye = scipy.sparse.identity(pb.n_params, format="csc") * (damp * scale)
            step, damp = _step(ev.neg_hessian + eye, ev.gradient, pb), damp * 10.0
        if step is None:
            return theta, ev, False, it
        t = 1.0
        while t > 1e-10:
            trial = penalised_value(pb, theta + t * step, prec)
            if np.isfinite(trial) and trial >= ev.value - 1e-12 * max(1.0, abs(ev.value)):
                break
            t /= 2.0
        theta = theta + t * step
        if any(abs(float(theta[pb.columns[k]])) > RUNAWAY for k in ("first", "length", "tie") if k in pb.columns):
            return theta, ev, False, it          # separated rankings: the estimate runs off to infinity
        ev = evaluate(pb, theta, prec)
        if float(np.max(np.abs(t * step))) < tol:
            return theta, ev, True, it
    return theta, ev, False, max_iter
