"""Factoring the preference model's penalised information H.

A comparison is within one task, so a task effect cancels from every pair: the task columns of H touch only
themselves (a diagonal block) and, through the rubric scores, the arm cells and workers. Eliminating them
leaves the Schur complement S = R − Bᵀ T⁻¹ B over the cells, workers and preference parameters, factored
densely by Cholesky: log|H| = Σ log T_ii + log|S|, and a failed Cholesky says H is not positive definite.
A general sparse LU is the fallback when the remaining block is too large to hold densely. Pure numpy/scipy.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.linalg

__all__ = ["Factor", "factor"]

# Largest remaining block (cells + workers + preference parameters) factored densely.
DENSE_LIMIT = 4000


class Factor:
    """Solves with H and its log-determinant; ``ok`` is False when H is not positive definite."""

    def __init__(self, h: scipy.sparse.spmatrix, diagonal: np.ndarray) -> None:
        h = scipy.sparse.csr_matrix(h)
        n = h.shape[0]
        self.diagonal = diagonal
        self.rest = np.setdiff1d(np.arange(n), diagonal)
        self.lu = None
        self.ok = True
        t_block = h[diagonal][:, diagonal]
        self.t = t_block.diagonal()
        if self.rest.size > DENSE_LIMIT or t_block.nnz > np.count_nonzero(self.t):
            self._sparse(h)
            return
        if np.any(self.t <= 0):
            self.ok = False
            return
        self.b = h[diagonal][:, self.rest].tocsc()
        s = h[self.rest][:, self.rest].toarray()
        if diagonal.size:
            s -= (self.b.T @ scipy.sparse.diags(1.0 / self.t) @ self.b).toarray()
        try:
            self.chol = scipy.linalg.cho_factor(s, lower=True, check_finite=True)
        except (np.linalg.LinAlgError, ValueError):
            self.ok = False

    def _sparse(self, h: scipy.sparse.csr_matrix) -> None:
        try:
            self.lu = scipy.sparse.linalg.splu(h.tocsc(), permc_spec="COLAMD")
        except RuntimeError:
            self.ok = False
            return
        d = self.lu.U.diagonal()
        self.ok = bool(np.all(d > 0) or _lu_positive(self.lu))

    def solve(self, g: np.ndarray) -> np.ndarray:
        """H⁻¹ g for a vector or a matrix of right-hand sides."""
        if self.lu is not None:
            return self.lu.solve(g)
        out = np.empty_like(g, dtype=float)
        g_t, g_r = g[self.diagonal], g[self.rest]
        t = self.t if g.ndim == 1 else self.t[:, None]
        rhs = g_r - self.b.T @ (g_t / t) if self.diagonal.size else g_r
        x_r = scipy.linalg.cho_solve(self.chol, rhs)
        out[self.rest] = x_r
        if self.diagonal.size:
            out[self.diagonal] = (g_t - self.b @ x_r) / t
        return out

    def rest_inverse(self) -> np.ndarray | None:
        """The block of H⁻¹ over the non-diagonal columns (S⁻¹); None on the sparse-LU path."""
        if self.lu is not None or not self.ok:
            return None
        inverse, info = scipy.linalg.lapack.dpotri(self.chol[0], lower=1)
        if info != 0:
            return None
        return np.tril(inverse) + np.tril(inverse, -1).T

    def eliminated(self) -> scipy.sparse.csr_matrix:
        """G = T⁻¹B, the diagonal columns' coupling to the rest: H⁻¹ = [[T⁻¹ + G S⁻¹ Gᵀ, −G S⁻¹], [−S⁻¹ Gᵀ, S⁻¹]]."""
        return (scipy.sparse.diags(1.0 / self.t) @ self.b).tocsr()

    def logdet(self) -> float:
        if not self.ok:
            return float("nan")
        if self.lu is not None:
            return float(np.sum(np.log(np.abs(self.lu.U.diagonal()))))
        return float(np.sum(np.log(self.t)) + 2.0 * np.sum(np.log(np.diag(self.chol[0]))))


def _lu_positive(lu: scipy.sparse.linalg.SuperLU) -> bool:
    """Whether the LU's determinant is positive (pivot signs times the permutations' signs)."""
    sign = np.prod(np.sign(lu.U.diagonal())) * _perm_sign(lu.perm_r) * _perm_sign(lu.perm_c)
    return bool(sign > 0)


def _perm_sign(perm: np.ndarray) -> int:
    """Sign of a permutation from the parity of its cycles."""
    seen = np.zeros(perm.size, dtype=bool)
    sign = 1
    for start in range(perm.size):
        length, j = 0, start
        while not seen[j]:
            seen[j] = True
            j = perm[j]
            length += 1
        if length and length % 2 == 0:
            sign = -sign
    return sign


def factor(h: scipy.sparse.spmatrix, diagonal: np.ndarray) -> Factor:
    """Factor H with the given columns eliminated first as a diagonal block (when they are one)."""
    return Factor(h, diagonal)
