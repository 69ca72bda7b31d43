"""Pieces of restricted maximum likelihood shared by the calibrated models (`rating/fit.py`) and the judge-aware
model (`rating/grader_fit.py`): the search bounds of the variance ratios, the quadrature over the variance
components, the agents' posterior as a mixture over its nodes, and the residual summary.

Pure numpy/scipy: no Django, no settings, no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

__all__ = [
    "BOUNDARY_TOL", "FLAT_SIGMA", "GH_NODES", "GH_WEIGHTS", "THETA_BOUNDS", "Mixture", "residual_diagnostics",
    "variance_summary",
]

# The agent prior of the bipartite config equivalent to fixed agent effects: precision 1e-12, below any
# data precision by many orders of magnitude, so the bipartite solve reproduces the fixed-effect fit.
FLAT_SIGMA = 1e6
# Bounds of the log variance ratios gamma = sigma^2 / beta^2 searched by REML.
THETA_BOUNDS = (-18.0, 14.0)
# A log ratio this close to the lower bound means the component is estimated at zero.
BOUNDARY_TOL = 1e-3
# Sigma-point (3-point Gauss-Hermite) nodes and weights for one standard normal dimension.
GH_NODES = np.array([-math.sqrt(3.0), 0.0, math.sqrt(3.0)])
GH_WEIGHTS = np.array([1.0 / 6.0, 2.0 / 3.0, 1.0 / 6.0])


@dataclass(frozen=True, eq=False)
class Mixture:
    """The agents' posterior as a quadrature mixture over the variance components.

    Node ``k`` has weight ``weights[k]``, agent means ``means[k]`` and unit-noise covariance ``cov0[k]``;
    at that node the noise variance takes the values ``beta2[k, l]`` with weights ``beta2_weights[k, l]``.
    """

    weights: np.ndarray
    means: np.ndarray
    cov0: np.ndarray
    beta2: np.ndarray
    beta2_weights: np.ndarray

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Return the mixture mean and covariance (law of total covariance)."""
        mean = self.weights @ self.means
        e_beta2 = (self.beta2 * self.beta2_weights).sum(axis=1)
        dev = self.means - mean
        cov = np.einsum("k,kij->ij", self.weights * e_beta2, self.cov0) + np.einsum(
            "k,ki,kj->ij", self.weights, dev, dev
        )
        return mean, 0.5 * (cov + cov.T)

    def prob_greater(self) -> np.ndarray:
        """Return :math:`P(s_i > s_j)` averaged over the mixture nodes (exact for the mixture)."""
        n_a = self.means.shape[1]
        total = np.zeros((n_a, n_a))
        for k in range(self.weights.shape[0]):
            diag = np.diag(self.cov0[k])
            var0 = diag[:, None] + diag[None, :] - 2.0 * self.cov0[k]
            np.fill_diagonal(var0, 1.0)
            diff = self.means[k][:, None] - self.means[k][None, :]
            for beta2, weight in zip(self.beta2[k], self.beta2_weights[k], strict=True):
                z = diff / np.sqrt(np.maximum(beta2 * var0, np.finfo(float).tiny))
                total += self.weights[k] * weight * norm.cdf(z)
        np.fill_diagonal(total, 0.5)
        return total


def residual_diagnostics(
    residuals: np.ndarray, beta: float, omega: np.ndarray, leverage: np.ndarray | None
) -> tuple[dict[str, Any], np.ndarray]:
    """Summarise the residuals against the model's noise: SD ratio, standardised residual tails.

    Written with in-place operations: at 10^7 residuals every temporary array is 80 MB and a pass over it.
    """
    n = residuals.shape[0]
    scale = np.sqrt(omega)
    np.divide(beta, scale, out=scale)  # beta / sqrt(omega)
    if leverage is not None:
        room = np.subtract(1.0, leverage)
        np.clip(room, 1e-12, None, out=room)
        np.sqrt(room, out=room)
        np.multiply(scale, room, out=scale)
        del room
    standardized = np.divide(residuals, scale, out=scale)
    residual_sd = math.sqrt(float(np.dot(residuals, residuals)) / n) if n else math.nan
    mean = float(standardized.mean()) if n else math.nan
    spread = np.subtract(standardized, mean)
    sd = math.sqrt(float(np.dot(spread, spread)) / n) if n else math.nan
    abs_z = np.abs(standardized, out=spread)
    return {
        "n": int(n),
        "beta": float(beta),
        "residual_sd": residual_sd,
        "ratio": residual_sd / beta if beta > 0 else math.nan,
        "standardized": {
            "mean": mean,
            "sd": sd,
            "share_abs_gt_2": float(np.count_nonzero(abs_z > 2.0) / n) if n else math.nan,
            "share_abs_gt_3": float(np.count_nonzero(abs_z > 3.0) / n) if n else math.nan,
            "expected_abs_gt_2": float(2.0 * norm.sf(2.0)),
            "expected_abs_gt_3": float(2.0 * norm.sf(3.0)),
            "max_abs": float(abs_z.max()) if n else math.nan,
        },
    }, standardized


def variance_summary(
    components: tuple[str, ...], theta: np.ndarray, tau: float, cov: np.ndarray, free: np.ndarray, *, z: float
) -> dict[str, dict[str, float]]:
    """Return each standard deviation with its standard error and ``z``-interval (delta method, log scale).

    ``tau`` is the log noise variance, ``theta`` the log variance ratios of ``components``, ``cov`` the
    covariance of (tau, free thetas) and ``free`` which components are interior (the others sit at zero).
    """
    free_idx = np.flatnonzero(free)

    def scaled(log_sd: float, shift: float) -> float:
        # A flat likelihood (few data) gives a huge log-scale SE: the interval is unbounded, not an overflow.
        exponent = log_sd + shift
        return math.inf if exponent > 700.0 else math.exp(exponent)

    def entry(log_var: float, var_log: float, boundary: bool) -> dict[str, float]:
        log_sd = 0.5 * log_var
        sd = scaled(log_sd, 0.0)
        se_log_sd = 0.5 * math.sqrt(var_log) if var_log >= 0 and math.isfinite(var_log) else math.nan
        return {
            "estimate": 0.0 if boundary else sd,
            "se": math.nan if boundary else sd * se_log_sd,
            "ci_low": 0.0 if boundary else scaled(log_sd, -z * se_log_sd),
            "ci_high": math.nan if boundary else scaled(log_sd, z * se_log_sd),
            "at_zero": 1.0 if boundary else 0.0,
        }

    out = {"beta": entry(tau, float(cov[0, 0]), False)}
    for j, name in enumerate(components):
        log_var = tau + float(theta[j])
        if free[j]:
            pos = 1 + int(np.searchsorted(free_idx, j))
            out[f"sigma_{name}"] = entry(log_var, float(cov[0, 0] + cov[pos, pos] + 2.0 * cov[0, pos]), False)
        else:
            out[f"sigma_{name}"] = entry(log_var, math.nan, True)
    return out
