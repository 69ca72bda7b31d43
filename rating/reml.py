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

__all__ = ["BOUNDARY_TOL", "FLAT_SIGMA", "GH_NODES", "GH_WEIGHTS", "THETA_BOUNDS", "Mixture", "residual_diagnostics"]

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
    """Summarise the residuals against the model's noise: SD ratio, standardised residual tails."""
    n = residuals.shape[0]
    scale = beta / np.sqrt(omega)
    if leverage is not None:
        scale = scale * np.sqrt(np.clip(1.0 - leverage, 1e-12, None))
    standardized = residuals / scale
    residual_sd = float(np.sqrt(np.mean(residuals**2))) if n else math.nan
    abs_z = np.abs(standardized)
    return {
        "n": int(n),
        "beta": float(beta),
        "residual_sd": residual_sd,
        "ratio": residual_sd / beta if beta > 0 else math.nan,
        "standardized": {
            "mean": float(standardized.mean()),
            "sd": float(standardized.std()),
            "share_abs_gt_2": float(np.mean(abs_z > 2.0)),
            "share_abs_gt_3": float(np.mean(abs_z > 3.0)),
            "expected_abs_gt_2": float(2.0 * norm.sf(2.0)),
            "expected_abs_gt_3": float(2.0 * norm.sf(3.0)),
            "max_abs": float(abs_z.max()) if n else math.nan,
        },
    }, standardized
