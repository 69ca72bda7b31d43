"""The gradient of the preference model's Laplace objective in the log variance components.

The objective is L(φ) = F(θ̂(φ), φ) + ½ Σ log P − ½ log |H(θ̂(φ), φ)|, with F the penalised log-likelihood,
θ̂ its maximum, P the random effects' precisions e^{−2φ_g} and H = −∇²F. Since ∇F(θ̂) = 0,

    dL/dφ = ∂F/∂φ + ½ ∂(Σ log P)/∂φ − ½ tr(H⁻¹ ∂H/∂φ) − ½ tr(H⁻¹ ∇H[v]),   v = dθ̂/dφ = H⁻¹ ∂(∇F)/∂φ,

where ∇H[v] is H's derivative along v: only the comparisons make H depend on θ (Davidson's third
derivatives and the bilinear ρ·q term). Every trace is a sum over few entries of H⁻¹: a pair lies within one
task, so its task effects cancel and it touches only the Schur block S⁻¹; a rubric score reaches one task,
handled by the block form of H⁻¹ (`Factor.eliminated`). Exact, so the outer search needs one inner fit per step
instead of one per coordinate; v also predicts the inner maximum at the next step. Pure numpy/scipy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse

from rating.preferences_lik import Evaluation, Problem, davidson, pair_terms, z_jacobian
from rating.preferences_solve import Factor

__all__ = ["Gradient", "laplace_gradient", "laplace_gradient_rho"]

GROUPS = ("worker", "task")


@dataclass(frozen=True)
class Gradient:
    value: np.ndarray        # dL/dφ per free component
    direction: np.ndarray    # dθ̂/dφ (params x free components)


@dataclass(frozen=True)
class _Third:
    """Per pair: the log-likelihood's second and third derivatives in (z, log ν)."""

    zz: np.ndarray
    zk: np.ndarray
    zzz: np.ndarray
    zzk: np.ndarray
    zkk: np.ndarray
    kkk: np.ndarray


def _third(z: np.ndarray, tie: float | None, outcome: np.ndarray, weight: np.ndarray | None) -> _Third:
    """With D = e^{z/2} + e^{−z/2} + ν: a = ∂log D/∂z, c = D_zz/D, b = ν/D; the outcome term is linear."""
    dv = davidson(z, tie, outcome)
    a = (dv.p_win - dv.p_loss) / 2.0
    c = (dv.p_win + dv.p_loss) / 4.0
    b = dv.p_tie
    w = np.ones_like(z) if weight is None else weight
    return _Third(zz=w * dv.lzz, zk=w * dv.lzk, zzz=-w * (a / 4.0 - 3.0 * a * c + 2.0 * a ** 3),
                  zzk=-w * b * (2.0 * a * a - c), zkk=-w * a * b * (2.0 * b - 1.0),
                  kkk=-w * (1.0 - 2.0 * b) * (b - b * b))


def _padded(m: scipy.sparse.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Each row's stored columns and values, padded to the longest row (column 0, value 0)."""
    m = scipy.sparse.csr_matrix(m)
    counts = np.diff(m.indptr)
    width = int(counts.max(initial=0))
    rows = np.repeat(np.arange(m.shape[0]), counts)
    offset = np.arange(m.indices.size) - np.repeat(m.indptr[:-1], counts)
    idx, val = np.zeros((m.shape[0], width), dtype=np.int64), np.zeros((m.shape[0], width))
    idx[rows, offset], val[rows, offset] = m.indices, m.data
    return idx, val


def _row_quad(c: np.ndarray, left: scipy.sparse.csr_matrix, right: scipy.sparse.csr_matrix) -> np.ndarray:
    """left_i · C · right_i for every row i, from the few stored entries of each row."""
    (il, vl), (ir, vr) = _padded(left), _padded(right)
    if not il.size or not ir.size:
        return np.zeros(left.shape[0])
    flat = (il * c.shape[0])[:, :, None] + ir[:, None, :]
    return np.einsum("pi,pij,pj->p", vl, np.take(c.ravel(), flat), vr)


def _trace(c: np.ndarray, left: scipy.sparse.csr_matrix, w: np.ndarray, right: scipy.sparse.csr_matrix) -> float:
    """tr(C · leftᵀ diag(w) right) = Σ_i w_i left_i · C · right_i, when only the weighted sum is needed."""
    prod = (left.T @ scipy.sparse.diags(w) @ right).tocoo()
    return float(np.sum(prod.data * c[prod.row, prod.col]))


@dataclass(frozen=True, eq=False)
class _Blocks:
    """H⁻¹ where the traces need it: ``c`` = S⁻¹ over ``rest`` (columns of the problem the traces run over),
    ``pos`` a column's place in ``rest`` (-1 for an eliminated, diagonal column), ``g`` = T⁻¹B and ``t`` = T's
    diagonal over ``diagonal``."""

    c: np.ndarray
    pos: np.ndarray
    g: scipy.sparse.csr_matrix
    t: np.ndarray
    rest_cols: np.ndarray
    diagonal: np.ndarray
    held: int = -1

    def rest(self, m: scipy.sparse.spmatrix) -> scipy.sparse.csr_matrix:
        """m's columns outside the diagonal block, numbered as in S."""
        return scipy.sparse.csc_matrix(m)[:, self.rest_cols].tocsr()

    def within(self, m: scipy.sparse.csr_matrix) -> scipy.sparse.csr_matrix:
        """``rest`` for a matrix known to be zero on the diagonal block (a pair's row: its task cancels); a held
        column's entries are dropped (its row and column of H⁻¹ are zero, so they add nothing)."""
        m = scipy.sparse.csr_matrix(m)
        keep = m.data != 0.0
        if self.held >= 0:
            keep &= m.indices != self.held
        rows = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))[keep]
        return scipy.sparse.csr_matrix((m.data[keep], (rows, self.pos[m.indices[keep]])),
                                       shape=(m.shape[0], self.rest_cols.size))

    def diag_part(self, m: scipy.sparse.spmatrix) -> scipy.sparse.csr_matrix:
        return scipy.sparse.csc_matrix(m)[:, self.diagonal].tocsr()


def _blocks(f: Factor, n: int, held: int | None = None) -> _Blocks | None:
    """The blocks of H⁻¹ in the columns of a problem of ``n`` parameters. ``held``: a column of that problem
    that H (factored in ``f``) leaves out because it is held fixed in the inner fit; its row and column of H⁻¹
    are zero, so traces over the larger problem's derivatives count only what H depends on."""
    c = f.rest_inverse()
    if c is None:
        return None
    to_full = np.arange(n) if held is None else np.delete(np.arange(n), held)
    rest, diagonal = to_full[f.rest], to_full[f.diagonal]
    g = f.eliminated() if f.diagonal.size else scipy.sparse.csr_matrix((0, f.rest.size))
    if held is not None:
        rest = np.append(rest, held)
        c = np.pad(c, ((0, 1), (0, 1)))
        g = scipy.sparse.hstack([g, scipy.sparse.csr_matrix((g.shape[0], 1))], format="csr")
    pos = np.full(n, -1, dtype=np.int64)
    pos[rest] = np.arange(rest.size)
    return _Blocks(c, pos, g, f.t, rest, diagonal, -1 if held is None else held)


def _score_trace(pb: Problem, bl: _Blocks) -> float:
    """tr(H⁻¹ AᵀA) over the rubric scores' design A: (r − Gᵀt)ᵀ S⁻¹ (r − Gᵀt) + tᵀT⁻¹t per score."""
    a = scipy.sparse.hstack([pb.a_scores, scipy.sparse.csr_matrix((pb.y.size, pb.n_params - pb.n_lin))]).tocsr()
    m, total = bl.rest(a), 0.0
    if bl.diagonal.size:
        a_t = bl.diag_part(a)
        m = (m - a_t @ bl.g).tocsr()
        total += float(np.sum(a_t @ (1.0 / bl.t)))
    return total + _trace(bl.c, m, np.ones(m.shape[0]), m)


def _random_diagonal(pb: Problem, bl: _Blocks, prec: np.ndarray, group: int) -> float:
    """Σ P_i (H⁻¹)_ii over one group's random columns."""
    cols = pb.random_cols[pb.random_group == group]
    p = prec[pb.random_group == group]
    inside = bl.pos[cols] >= 0
    total = float(np.sum(p[inside] * bl.c[bl.pos[cols[inside]], bl.pos[cols[inside]]]))
    if np.any(~inside):            # eliminated columns: 1/T_i + (G S⁻¹ Gᵀ)_ii
        where = np.searchsorted(bl.diagonal, cols[~inside])
        g = bl.g[where]
        total += float(np.sum(p[~inside] / bl.t[where])) + _trace(bl.c, g, p[~inside], g)
    return total


def _explicit(pb: Problem, theta: np.ndarray, prec: np.ndarray, free: tuple[str, ...],
              bl: _Blocks) -> tuple[np.ndarray, np.ndarray]:
    """∂F/∂φ + ½∂ΣlogP/∂φ − ½tr(H⁻¹∂H/∂φ) per free component, and ∂(∇F)/∂φ as columns."""
    value, dg = np.zeros(len(free)), np.zeros((pb.n_params, len(free)))
    u = theta[pb.random_cols]
    for i, name in enumerate(free):
        if name == "score":
            s2inv = float(np.exp(-2.0 * pb.value(theta, "log_sd")))
            r = pb.y - pb.a_scores @ theta[:pb.n_lin]
            value[i] = s2inv * float(r @ r) - pb.y.size + s2inv * _score_trace(pb, bl)
            dg[:pb.n_lin, i] = -2.0 * s2inv * (pb.a_scores.T @ r)
            continue
        g = GROUPS.index(name)
        mine = pb.random_group == g
        value[i] = float(np.sum(prec[mine] * u[mine] ** 2)) - int(mine.sum()) + _random_diagonal(pb, bl, prec, g)
        dg[pb.random_cols[mine], i] = 2.0 * prec[mine] * u[mine]
    return value, dg


def _third_trace(pb: Problem, theta: np.ndarray, v: np.ndarray, bl: _Blocks) -> np.ndarray:
    """tr(H⁻¹ ∇H[v]) for each column of v (pairs only: the rest of H does not depend on θ)."""
    if not pb.outcome.size:
        return np.zeros(v.shape[1])
    z, _, dq = pair_terms(pb, theta)
    tie = pb.value(theta, "tie") if "tie" in pb.columns else None
    d3 = _third(z, tie, pb.outcome, pb.weight)
    j_full = z_jacobian(pb, theta, dq)
    j, d = bl.within(j_full), bl.within(pb.d_a)      # d_a's columns are the first of the parameters
    c = bl.c
    q_jj = _row_quad(c, j, j)
    rho = bl.pos[pb.columns["rho"]] if "rho" in pb.columns else -1
    tie_at = bl.pos[pb.columns["tie"]] if "tie" in pb.columns else -1
    if rho >= 0:
        q_jd = _trace(c, j, d3.zz, d)
        cj_rho, cd_rho = j @ c[:, rho], d @ c[:, rho]
    if tie_at >= 0:
        cj_k, cd_k = j @ c[:, tie_at], d @ c[:, tie_at]
    out = np.zeros(v.shape[1])
    for i in range(v.shape[1]):
        dz = j_full @ v[:, i]
        dk = float(v[pb.columns["tie"], i]) if tie_at >= 0 else 0.0
        total = float((d3.zzz * dz + d3.zzk * dk) @ q_jj)
        if rho >= 0:
            v_rho, dd = float(v[pb.columns["rho"], i]), pb.d_a @ v[:pb.n_lin, i]
            total += 2.0 * v_rho * q_jd + 2.0 * float(np.sum(d3.zz * dd * cj_rho))
            total += 2.0 * float(np.sum((d3.zz * dz + d3.zk * dk) * cd_rho))
        if tie_at >= 0:
            total += 2.0 * float(np.sum((d3.zzk * dz + d3.zkk * dk) * cj_k))
            total += float(np.sum(d3.zkk * dz + d3.kkk * dk)) * c[tie_at, tie_at]
            if rho >= 0:
                total += 2.0 * float(np.sum(d3.zk * (v_rho * cd_k + dd * c[rho, tie_at])))
        out[i] = -total
    return out


def laplace_gradient(pb: Problem, theta: np.ndarray, prec: np.ndarray, free: tuple[str, ...],
                     f: Factor) -> Gradient | None:
    """dL/d log SD of each free component (``score``, ``worker``, ``task``) at the inner maximum ``theta``;
    None when H was factored by sparse LU (too many cells and workers for the dense Schur block)."""
    bl = _blocks(f, pb.n_params)
    if bl is None:
        return None
    explicit, dg = _explicit(pb, theta, prec, free, bl)
    v = f.solve(dg)
    return Gradient(explicit - 0.5 * _third_trace(pb, theta, v, bl), v)


def laplace_gradient_rho(full: Problem, theta: np.ndarray, prec: np.ndarray, free: tuple[str, ...], f: Factor,
                         ev: Evaluation) -> Gradient | None:
    """The same where ρ is held fixed in the inner fit and estimated outside it: dL/d log SD of each free
    component, then dL/dρ, with the inner maximum's directions in the inner fit's parameters (ρ left out).

    ``full`` is the problem with ρ as a parameter, ``theta`` the inner maximum with the fixed ρ put in, ``ev``
    ``full`` evaluated there and ``f`` the factor of the inner fit's H (``full``'s H without ρ's row and column).
    With v = dθ̂/dρ = −H⁻¹ H_θρ: dL/dρ = ∂F/∂ρ − ½ tr(H⁻¹ dH/dρ), dH/dρ being the θθ block of ∇H along (v, 1)."""
    rho = full.columns["rho"]
    bl = _blocks(f, full.n_params, held=rho)
    if bl is None:
        return None
    explicit, dg = _explicit(full, theta, prec, free, bl)
    h_rho = ev.neg_hessian[:, [rho]].toarray().ravel()
    rhs = np.column_stack([np.delete(dg, rho, axis=0), -np.delete(h_rho, rho)])
    v = f.solve(rhs)
    w = np.insert(v, rho, np.r_[np.zeros(len(free)), 1.0], axis=0)
    value = np.r_[explicit, ev.gradient[rho]]
    return Gradient(value - 0.5 * _third_trace(full, theta, w, bl), v)
