"""The leave-one-ranking-out (jackknife, CR3-style) covariance of the preference model.

The plain cluster sandwich H⁻¹ (M + Σ_g s_g s_gᵀ) H⁻¹ takes each ranking's influence as H⁻¹ s_g. With a few
hundred rankings and one random effect per worker, a ranking weighs visibly in its own fit, and H⁻¹ s_g
understates how far the estimate would move without it. The one-step jackknife takes that move instead,

    Δ_g = (H − I_g)⁻¹ s_g,   cov = H⁻¹ M H⁻¹ + Σ_g Δ_g Δ_gᵀ,

I_g being ranking g's part of the negative Hessian (M, the rubric scores' information and the penalty, stays
model-based). A ranking touches few columns K (its deliverables' cells and workers, the preference terms), so
by Woodbury Δ_g = (H⁻¹)_{·K} (I − I_g,KK (H⁻¹)_KK)⁻¹ s_g,K: one small solve per ranking, all at once. Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse

from rating.preferences_lik import Pairs, Problem

__all__ = ["jackknife_influence"]


@dataclass(frozen=True)
class _Slots:
    """Per pair, padded to a common width: its columns in S's numbering (-1 unused), Hessian block and score."""

    cols: np.ndarray
    block: np.ndarray
    score: np.ndarray


def _pair_slots(pb: Problem, at: Pairs, rest_pos: np.ndarray) -> _Slots:
    j = scipy.sparse.csr_matrix(at.j)
    j.eliminate_zeros()
    counts = np.diff(j.indptr)
    tie = 1 if "tie" in pb.columns else 0
    width = int(counts.max(initial=0)) + tie
    rows = np.repeat(np.arange(j.shape[0]), counts)
    slot = np.arange(j.indices.size) - np.repeat(j.indptr[:-1], counts)
    cols, v = np.full((j.shape[0], width), -1, dtype=np.int64), np.zeros((j.shape[0], width))
    cols[rows, slot], v[rows, slot] = rest_pos[j.indices], j.data
    dv = at.dv
    block = -dv.lzz[:, None, None] * v[:, :, None] * v[:, None, :]
    score = dv.lz[:, None] * v
    if "rho" in pb.columns:            # ∂²z/∂q∂ρ = d, the pair's coefficients of q_e − q_f
        d = np.zeros_like(v)
        lin = j.indices < pb.n_lin
        d[rows[lin], slot[lin]] = np.asarray(pb.d_a[rows[lin], j.indices[lin]]).ravel()
        is_rho = cols == rest_pos[pb.columns["rho"]]
        cross = -dv.lz[:, None] * d
        block += cross[:, :, None] * is_rho[:, None, :] + is_rho[:, :, None] * cross[:, None, :]
    if tie:
        k = width - 1
        cols[:, k] = rest_pos[pb.columns["tie"]]
        block[:, :, k] -= dv.lzk[:, None] * v
        block[:, k, :] -= dv.lzk[:, None] * v
        block[:, k, k] = -dv.lkk
        score[:, k] = dv.lk
    return _Slots(cols, block, score)


def _by_ranking(slots: _Slots, cluster: np.ndarray, n_rest: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs' blocks and scores summed by ranking on each ranking's own columns (padded with -1)."""
    _, g = np.unique(cluster, return_inverse=True)
    g = g.ravel()
    n_g = int(g.max()) + 1
    valid = slots.cols >= 0
    keys = g[:, None] * (n_rest + 1) + (slots.cols + 1)
    uniq, where = np.unique(keys[valid], return_inverse=True)
    owner = uniq // (n_rest + 1)
    first = np.searchsorted(owner, np.arange(n_g))
    local_of_uniq = np.arange(uniq.size) - first[owner]
    local = np.zeros(slots.cols.shape, dtype=np.int64)
    local[valid] = local_of_uniq[where.ravel()]
    width = int(local_of_uniq.max(initial=0)) + 1
    cols = np.full((n_g, width), -1, dtype=np.int64)
    cols[owner, local_of_uniq] = uniq % (n_rest + 1) - 1
    block = np.zeros((n_g, width, width))
    np.add.at(block, (g[:, None, None], local[:, :, None], local[:, None, :]), slots.block)
    score = np.zeros((n_g, width))
    np.add.at(score, (g[:, None], local), slots.score)
    return cols, block, score


def jackknife_influence(pb: Problem, at: Pairs, cluster: np.ndarray, rest: np.ndarray, c: np.ndarray,
                        x_rest: np.ndarray) -> np.ndarray:
    """Δ_g on the reported parameters (rankings x reported): ``rest`` are the columns of S, ``c`` = S⁻¹ (H⁻¹ on
    them: a pair never touches a task column) and ``x_rest`` the reported columns of H⁻¹ on those rows."""
    rest_pos = np.full(pb.n_params, -1, dtype=np.int64)
    rest_pos[rest] = np.arange(rest.size)
    cols, block, score = _by_ranking(_pair_slots(pb, at, rest_pos), cluster, rest.size)
    safe = np.where(cols >= 0, cols, 0)
    c_kk = c[safe[:, :, None], safe[:, None, :]]
    system = np.eye(cols.shape[1])[None] - block @ c_kk
    y = np.linalg.solve(system, score[:, :, None])[:, :, 0]
    return np.einsum("gw,gwp->gp", y, x_rest[safe])
