"""Exact REML for the synergy model on its worker-eliminated structure.

The random effects are written as u = Λ b with b ~ N(0, σ² I) (the relative-covariance factor form), so a
variance component at zero is an ordinary point of the search. Per worker, u_h = (θ_h, κ_h) = L b_h with L the
2×2 lower-triangular factor of Σ_h/σ²; per task β_t = λ_β b_t, γ_t = λ_γ b'_t. The mixed-model matrix C
(all of b and the fixed effects) has a 2×2 block per worker; eliminating them leaves a dense system on the
fixed effects and the task effects (size p + 2T), and the REML criterion

    −2 ℓ_R = log|C| + (n − p) (1 + log(2π q / (n − p))),   log|C| = Σ_h log|Lᵀ N_h L + I| + log|S|,

with q the penalised residual sum of squares and S the Schur complement. Workers with the same numbers of
solo and with-agent episodes (N_h) share the eliminated block, so each evaluation is a few dense
combinations and one Cholesky of S. Pure numpy/scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize

from rating.synergy_data import Design

__all__ = ["CoreFit", "Evaluation", "evaluate", "fit_reml", "worker_factor"]

# Bounds of the relative standard deviations (Λ entries) searched; the lower 0 is a component at zero.
UPPER = 1e3
# A relative SD this small is reported as "estimated at zero".
BOUNDARY = 1e-4


def worker_factor(params: np.ndarray, restricted: bool) -> np.ndarray:
    """L of the worker effects: full [[a, 0], [b, c]]; restricted θ = κ: [[a, 0], [a, 0]]."""
    if restricted:
        a = params[0]
        return np.array([[a, 0.0], [a, 0.0]])
    a, b, c = params[:3]
    return np.array([[a, 0.0], [b, c]])


def task_scales(params: np.ndarray, restricted: bool) -> tuple[float, float]:
    k = 1 if restricted else 3
    return float(params[k]), float(params[k + 1])


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Everything at one value of the variance parameters."""

    deviance: float
    q: float
    sigma2: float
    scale: np.ndarray            # (d,) 1 on fixed columns, λ_β / λ_γ on task columns
    k: np.ndarray                # (G, 2, 2) L (LᵀN L + I)⁻¹ Lᵀ per worker group
    chol: np.ndarray             # lower Cholesky of S
    solution: np.ndarray         # (d,) fixed effects and task effects on the score scale
    correction: np.ndarray | None = None   # the eliminated workers' matrix on the small system (unscaled)
    correction_rhs: np.ndarray | None = None

    def s_inverse(self) -> np.ndarray:
        """S⁻¹ from its Cholesky factor (LAPACK potri: half the work of two triangular solves)."""
        inv, info = scipy.linalg.lapack.dpotri(self.chol, lower=1)
        if info != 0:
            raise np.linalg.LinAlgError("S is singular")
        return np.tril(inv) + np.tril(inv, -1).T


def _group_blocks(design: Design, lam: np.ndarray) -> tuple[np.ndarray, float]:
    pat = design.patterns
    g = pat.n_solo.shape[0]
    n_mat = np.zeros((g, 2, 2))
    n_mat[:, 0, 0], n_mat[:, 1, 1] = pat.n_solo, pat.n_team
    c = np.einsum("ji,gjk,kl->gil", lam, n_mat, lam) + np.eye(2)
    c_inv = np.linalg.inv(c)
    k = np.einsum("ij,gjk,lk->gil", lam, c_inv, lam)
    logdet = float(pat.count @ np.log(np.linalg.det(c)))
    return k, logdet


def _correction(design: Design, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Σ_h of the eliminated worker blocks on the small system: matrix, right-hand side and y-part."""
    pat = design.patterns
    k00, k01, k11 = k[:, 0, 0], k[:, 0, 1], k[:, 1, 1]
    if pat.p_ss is not None and pat.p_tt is not None and pat.p_st is not None:
        mat = np.einsum("g,gij->ij", k00, pat.p_ss) + np.einsum("g,gij->ij", k11, pat.p_tt)
        cross = np.einsum("g,gij->ij", k01, pat.p_st)
        mat += cross + cross.T
    else:
        w = pat.of_worker
        ms, mt = design.m_solo, design.m_team
        mat = (ms.T @ ms.multiply(k00[w][:, None]) + mt.T @ mt.multiply(k11[w][:, None])).toarray()
        cross = (ms.T @ mt.multiply(k01[w][:, None])).toarray()
        mat += cross + cross.T
    vec = k00 @ pat.r_ss + k01 @ (pat.r_st + pat.r_ts) + k11 @ pat.r_tt
    yy = float(k00 @ pat.yy_ss + 2.0 * k01 @ pat.yy_st + k11 @ pat.yy_tt)
    return mat, vec, yy


def evaluate(design: Design, params: np.ndarray, restricted: bool = False) -> Evaluation:
    """The REML criterion and the solution at ``params`` (relative SDs; see `worker_factor`)."""
    lam = worker_factor(params, restricted)
    lb, lg = task_scales(params, restricted)
    p, t = design.p, design.n_tasks
    scale = np.ones(design.d)
    scale[p:p + t], scale[p + t:] = lb, lg
    k, logdet_workers = _group_blocks(design, lam)
    mat, vec, yy_corr = _correction(design, k)
    s = scale[:, None] * (design.gram - mat) * scale[None, :]
    s[np.arange(p, design.d), np.arange(p, design.d)] += 1.0
    z = scale * (design.rhs - vec)
    try:
        chol = scipy.linalg.cholesky(s, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return Evaluation(math.inf, math.nan, math.nan, scale, k, np.empty((0, 0)), np.empty(0))
    half = scipy.linalg.solve_triangular(chol, z, lower=True, check_finite=False)
    sol = scipy.linalg.solve_triangular(chol, half, lower=True, trans="T", check_finite=False)
    q = design.yy - yy_corr - float(half @ half)
    dof = design.n - p
    if not q > 0:
        return Evaluation(math.inf, q, math.nan, scale, k, chol, sol * scale)
    deviance = logdet_workers + 2.0 * float(np.log(np.diag(chol)).sum()) + dof * (1.0 + math.log(2 * math.pi * q / dof))
    return Evaluation(deviance, q, q / dof, scale, k, chol, sol * scale, mat, vec)


def _factor_derivatives(restricted: bool) -> list[np.ndarray]:
    if restricted:
        return [np.array([[1.0, 0.0], [1.0, 0.0]])]
    return [np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([[0.0, 0.0], [1.0, 0.0]]),
            np.array([[0.0, 0.0], [0.0, 1.0]])]


def _k_derivatives(design: Design, lam: np.ndarray, d_lams: list[np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
    """dK_g and d log|C_g| per group for each direction of L."""
    pat = design.patterns
    g = pat.n_solo.shape[0]
    n_mat = np.zeros((g, 2, 2))
    n_mat[:, 0, 0], n_mat[:, 1, 1] = pat.n_solo, pat.n_team
    c_inv = np.linalg.inv(np.einsum("ji,gjk,kl->gil", lam, n_mat, lam) + np.eye(2))
    out = []
    for d_lam in d_lams:
        d_c = np.einsum("ji,gjk,kl->gil", d_lam, n_mat, lam)
        d_c = d_c + np.transpose(d_c, (0, 2, 1))
        left = d_lam @ (c_inv @ lam.T)
        inner = lam @ (c_inv @ d_c @ c_inv) @ lam.T
        out.append((left + np.transpose(left, (0, 2, 1)) - inner, np.einsum("gij,gji->g", c_inv, d_c)))
    return out


def gradient(design: Design, params: np.ndarray, restricted: bool, ev: Evaluation) -> np.ndarray:
    """Analytic gradient of the REML criterion (σ² profiled): d log|C| + (n − p) dq / q, using
    d log|S| = tr(S⁻¹ dS) and dq = −y(dK) − 2 x̂·dz + x̂ᵀ dS x̂ in the small system."""
    pat = design.patterns
    lam = worker_factor(params, restricted)
    p, t, d = design.p, design.n_tasks, design.d
    s_inv = ev.s_inverse()
    scaled = ev.scale[:, None] * s_inv * ev.scale[None, :]       # D S⁻¹ D
    x = ev.solution                                              # D S⁻¹ z
    mat, vec = ev.correction, ev.correction_rhs
    sol = s_inv @ (ev.scale * (design.rhs - vec))
    dof = design.n - p
    out = []
    traces, quads = _group_forms(design, scaled, x)
    for d_k, d_logdet in _k_derivatives(design, lam, _factor_derivatives(restricted)):
        k00, k01, k11 = d_k[:, 0, 0], d_k[:, 0, 1], d_k[:, 1, 1]
        tr = -(k00 @ traces[0] + k11 @ traces[1] + 2.0 * k01 @ traces[2])
        quad = -(k00 @ quads[0] + k11 @ quads[1] + 2.0 * k01 @ quads[2])
        v = k00 @ pat.r_ss + k01 @ (pat.r_st + pat.r_ts) + k11 @ pat.r_tt
        y_part = float(k00 @ pat.yy_ss + 2.0 * k01 @ pat.yy_st + k11 @ pat.yy_tt)
        dq = -y_part + 2.0 * float(x @ v) + quad
        out.append(float(pat.count @ d_logdet) + tr + dof * dq / ev.q)
    h = design.gram - mat
    hd = h * ev.scale[None, :]
    for cols in (slice(p, p + t), slice(p + t, d)):
        tr = 2.0 * float(np.sum(hd[cols] * s_inv[cols]))
        quad = 2.0 * float(sol[cols] @ (h[cols] @ x))
        dq = -2.0 * float(sol[cols] @ (design.rhs - vec)[cols]) + quad
        out.append(tr + dof * dq / ev.q)
    return np.array(out)


def _group_forms(design: Design, scaled: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group: tr(D S⁻¹ D P) and x̂ᵀ P x̂ for P = P_ss, P_tt, P_st."""
    pat = design.patterns
    g = pat.n_solo.shape[0]
    traces, quads = np.zeros((3, g)), np.zeros((3, g))
    if pat.p_ss is not None and pat.p_tt is not None and pat.p_st is not None:
        for j, mats in enumerate((pat.p_ss, pat.p_tt, pat.p_st)):
            traces[j] = np.einsum("gij,ij->g", mats, scaled)
            quads[j] = (mats @ x) @ x
        return traces, quads
    w = pat.of_worker
    ms, mt = design.m_solo, design.m_team
    for j, (a, b) in enumerate(((ms, ms), (mt, mt), (ms, mt))):
        per_worker = np.asarray((b.multiply(a @ scaled)).sum(axis=1)).ravel()
        traces[j] = np.bincount(w, weights=per_worker, minlength=g)
        quads[j] = np.bincount(w, weights=(a @ x) * (b @ x), minlength=g)
    return traces, quads


@dataclass(frozen=True, eq=False)
class CoreFit:
    """The REML estimate of one model (full, or restricted to θ = κ) and its solution."""

    restricted: bool
    params: np.ndarray
    ev: Evaluation
    converged: bool
    message: str
    n_evaluations: int
    worker_effects: np.ndarray   # (H, 2) BLUPs of (θ_h, κ_h)

    @property
    def deviance(self) -> float:
        return self.ev.deviance

    @property
    def sigma2(self) -> float:
        return self.ev.sigma2

    def worker_cov(self) -> np.ndarray:
        """Σ_h on the score scale (2×2)."""
        lam = worker_factor(self.params, self.restricted)
        return self.ev.sigma2 * lam @ lam.T

    def task_variances(self) -> tuple[float, float]:
        lb, lg = task_scales(self.params, self.restricted)
        return self.ev.sigma2 * lb * lb, self.ev.sigma2 * lg * lg

    def small_cov(self) -> np.ndarray:
        """Error covariance of the fixed effects and task effects (score scale): σ² D S⁻¹ D."""
        s_inv = self.ev.s_inverse()
        return self.ev.sigma2 * self.ev.scale[:, None] * s_inv * self.ev.scale[None, :]


def _worker_blups(design: Design, ev: Evaluation) -> np.ndarray:
    """u_h = K_h (r_h − M_hᵀ x̂), x̂ the fixed and task effects."""
    fitted_s = design.m_solo @ ev.solution
    fitted_t = design.m_team @ ev.solution
    res = np.stack([design.r_solo - fitted_s, design.r_team - fitted_t], axis=1)
    k = ev.k[design.patterns.of_worker]
    return np.einsum("hij,hj->hi", k, res)


def _start(design: Design, restricted: bool) -> np.ndarray:
    return np.array([0.5, 0.5, 0.5]) if restricted else np.array([0.5, 0.3, 0.4, 0.5, 0.5])


def _bounds(restricted: bool) -> list[tuple[float, float]]:
    if restricted:
        return [(0.0, UPPER)] * 3
    return [(0.0, UPPER), (-UPPER, UPPER), (0.0, UPPER), (0.0, UPPER), (0.0, UPPER)]


def _minimise(objective, x0: np.ndarray, bounds: list[tuple[float, float]]) -> scipy.optimize.OptimizeResult:
    return scipy.optimize.minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                                   options={"ftol": 1e-15, "gtol": 1e-7, "maxiter": 1000})


def fit_reml(design: Design, *, restricted: bool = False, start: np.ndarray | None = None) -> CoreFit:
    """Minimise the REML criterion over the relative SDs by bounded quasi-Newton with the analytic gradient."""
    count = 0

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        nonlocal count
        count += 1
        ev = evaluate(design, x, restricted)
        if not math.isfinite(ev.deviance):
            return 1e300, np.zeros_like(x)
        return ev.deviance, gradient(design, x, restricted, ev)

    x0 = _start(design, restricted) if start is None else np.asarray(start, dtype=float)
    bounds = _bounds(restricted)
    best = _minimise(objective, x0, bounds)
    # The criterion depends on a task scale or a leading worker SD only through its square, so its gradient is
    # exactly zero at 0: a search that reached a bound may sit on a stationary point that is not the minimum.
    # Restart once off every bound and keep the better optimum.
    lower = np.array([b[0] for b in bounds])
    at_bound = best.x <= lower + BOUNDARY
    if np.any(at_bound):
        retry = _minimise(objective, np.where(at_bound, 0.3, best.x), bounds)
        if retry.fun < best.fun:
            best = retry
    params = np.clip(best.x, [b[0] for b in bounds], [b[1] for b in bounds])
    ev = evaluate(design, params, restricted)
    converged = bool(math.isfinite(ev.deviance) and best.success)
    return CoreFit(restricted, params, ev, converged, f"L-BFGS-B: {best.message}", count, _worker_blups(design, ev))
