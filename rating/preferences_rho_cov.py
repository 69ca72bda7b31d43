"""The covariance of the preference model's estimates when ρ is estimated outside the inner fit
(`rating/preferences_outer.py`).

Given ρ, the inner estimates θ̂(ρ) have the covariance `rating/preferences_fit.py:covariance` gives (model,
cluster sandwich or jackknife by ranking). ρ̂ adds its own uncertainty along the inner maximum's path
v = dθ̂/dρ = −H⁻¹ H_θρ, as the uncertainty of estimated variance parameters is added in mixed models:

    cov(θ̂) = cov(θ̂ | ρ) + v vᵀ var(ρ̂),   cov(θ̂, ρ̂) = v var(ρ̂),

var(ρ̂) = 1 / c for the model covariance and wᵀ M w / c² for the robust ones, c = −d²L/dρ² the curvature of
the Laplace objective in ρ (a difference of its exact derivative), w = (v, 1) the direction in which
ρ̂ moves the parameters and M the same information with the comparisons' part replaced by the outer products
of their scores summed by ranking. The profile curvature of the joint likelihood stands in for c where there
is no exact derivative (H factored by sparse LU). Pure numpy/scipy.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import scipy.sparse

from rating.preferences_data import PreferenceInputError
from rating.preferences_fit import (
    Built,
    Core,
    _precisions,
    covariance,
    held_rho,
    rho_put_back,
    with_rho,
)
from rating.preferences_grad import laplace_gradient_rho
from rating.preferences_lik import Problem, comparison_hessian, evaluate, maximise, pair_scores, pairs_at
from rating.preferences_solve import factor

__all__ = ["covariance_with_rho"]

# The steps of the differences of dL/dρ, in units of ρ's profile SE: a forward difference errs by about half
# its step times the objective's relative third derivative, a central one by the square of its step.
FORWARD, CENTRAL = 1e-4, 1e-2


def _inner(built: Built, core: Core, rho: float) -> Problem:
    return with_rho(held_rho(core.problem), rho)


def _rho_derivative(built: Built, core: Core, rho: float, start: np.ndarray) -> float | None:
    """dL/dρ with the variance components held at their estimates, the inner fit redone at this ρ."""
    full, sds = core.problem, core.sds
    prec = _precisions(full, sds, built.groups)
    inner = _inner(built, core, rho)
    theta, ev, converged, _ = maximise(inner, start, prec, tol=1e-9)
    f = factor(ev.neg_hessian, inner.diagonal_cols)
    if not converged or not f.ok:
        return None
    at = rho_put_back(full, theta, rho)
    grad = laplace_gradient_rho(full, at, prec, (), f, evaluate(full, at, prec))
    return None if grad is None else float(grad.value[-1])


def _curvature(built: Built, core: Core, v: np.ndarray, profile: float) -> float:
    """c = −d²L/dρ² by a difference of the exact dL/dρ: forward from the search's own slope at the estimate
    where it has one (a step of ``FORWARD`` SE), else central (``CENTRAL`` SE); the profile curvature of the
    joint likelihood where the derivative cannot be taken; NaN where neither is positive. The SE that sizes the
    step is the profile one (the joint likelihood need not be concave in ρ at the integrated maximum; then a
    hundredth of ρ stands in)."""
    col = core.problem.columns["rho"]
    rho, theta = float(core.theta[col]), np.delete(core.theta, col)
    se = 1.0 / math.sqrt(profile) if profile > 0.0 else 1e-2 * max(abs(rho), 1e-3)
    if core.rho_slope is not None:
        h = FORWARD * se
        up, down = _rho_derivative(built, core, rho + h, theta + h * v), core.rho_slope
        c = -(up - down) / h if up is not None else float("nan")
    else:
        h = CENTRAL * se
        up = _rho_derivative(built, core, rho + h, theta + h * v)
        down = _rho_derivative(built, core, rho - h, theta - h * v)
        c = -(up - down) / (2.0 * h) if up is not None and down is not None else float("nan")
    if c > 0.0 and math.isfinite(c):
        return c
    return profile if profile > 0.0 else float("nan")


def _robust_information(built: Built, core: Core, w: np.ndarray, prec: np.ndarray, h_full) -> float:
    """wᵀ M w: the rubric scores and penalty model-based, the comparisons by their scores summed by ranking."""
    full, theta = core.problem, core.theta
    at = pairs_at(full, theta)
    meat = h_full - comparison_hessian(full, theta, at)
    _, inv = np.unique(built.coded.cluster, return_inverse=True)
    sums = scipy.sparse.csr_matrix((np.ones(inv.size), (inv.ravel(), np.arange(inv.size))),
                                   shape=(int(inv.max()) + 1, inv.size)) @ pair_scores(full, theta, at)
    return float(w @ (meat @ w)) + float(np.sum((sums @ w) ** 2))


def covariance_with_rho(built: Built, core: Core, params: np.ndarray, kind: str) -> np.ndarray:
    """Covariance of ``params`` (columns of the full problem, ρ's among them) for ρ estimated outside."""
    full, theta = core.problem, core.theta
    if "rho" not in full.columns:
        return covariance(built, core, params, kind)
    col = full.columns["rho"]
    rho = float(theta[col])
    prec = _precisions(full, core.sds, built.groups)
    h_full = evaluate(full, theta, prec).neg_hessian
    assert h_full is not None           # evaluate forms the Hessian unless told not to
    h_rho = np.delete(h_full[:, [col]].toarray().ravel(), col)
    inner = _inner(built, core, rho)
    ev_in = evaluate(inner, np.delete(theta, col), prec)
    f = factor(ev_in.neg_hessian, inner.diagonal_cols)
    v = -f.solve(h_rho)
    profile = float(h_full[col, col]) + float(h_rho @ v)
    c = _curvature(built, core, v, profile)
    if not c > 0.0:
        raise PreferenceInputError("cannot estimate: the likelihood is not curved in the scale linking rubric "
                                   "points to the rankings, so its uncertainty cannot be measured")
    w = np.insert(v, col, 1.0)
    var = 1.0 / c if kind == "model" or not full.outcome.size else \
        _robust_information(built, core, w, prec, h_full) / c ** 2
    inner_params = np.array([p if p < col else p - 1 for p in params if p != col], dtype=np.int64)
    given = covariance(built, dataclasses.replace(core, problem=inner, theta=np.delete(theta, col)),
                       inner_params, kind, at=(ev_in, f))
    out = np.zeros((params.size, params.size))
    keep = params != col
    out[np.ix_(keep, keep)] = given
    path = w[params]
    return out + np.outer(path, path) * var
