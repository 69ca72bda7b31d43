"""Do workers whose prompts show more ToM get better answers from the agent? The paper's Table 1, by OLS.

The agent's response-quality code of each coded with-agent episode regressed on the worker's ToM trait and the
episode's deviation from it, over and above effort (turns, characters in thousands, edit ratio):

    quality = b0 + b_trait·trait + b_dev·deviation + b1·turns + b2·characters/1000 + b3·edit_ratio + e

with standard errors clustered by worker (CR1: (X'X)⁻¹ Σ_g X_g'e_g e_g'X_g (X'X)⁻¹ · G/(G−1) · (N−1)/(N−K),
statsmodels' ``cov_type='cluster'``), because a worker's episodes share the worker and are not independent;
intervals use t with G − 1 degrees of freedom. The decomposition defaults to Mundlak (worker mean and centred
deviation) so that the deviation's slope is purely within-worker; ``decomposition="loo"`` gives the paper's
leave-one-out trait (see `rating/tom_traits.py` for why the two differ). Pure numpy/scipy: no Django.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy.stats import t as t_dist

from rating.fit import json_safe
from rating.tom_traits import tom_traits

__all__ = ["MIN_CLUSTERS", "QualityData", "QualityResult", "design_matrix", "tom_quality"]

# Cluster-robust errors from fewer workers than this are too unstable to report.
MIN_CLUSTERS = 10
TERMS = ("intercept", "tom_trait", "tom_deviation", "turns", "characters_k", "edit_ratio")


@dataclass(frozen=True)
class QualityData:
    """One row per with-agent episode: the quality code (NaN when not coded), the worker, the episode's ToM
    code (NaN when not coded) and the effort measures from the transcript."""

    quality: np.ndarray
    human: np.ndarray
    tom: np.ndarray
    turns: np.ndarray
    characters: np.ndarray
    edit_ratio: np.ndarray

    def __post_init__(self) -> None:
        n = np.asarray(self.quality).shape[0]
        for name in ("quality", "human", "tom", "turns", "characters", "edit_ratio"):
            arr = np.asarray(getattr(self, name), dtype=float)
            if arr.shape != (n,):
                raise ValueError(f"{name} must hold one value per episode ({n})")
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "human", self.human.astype(np.int64))


@dataclass(frozen=True)
class QualityResult:
    """Coefficients by term (estimate, se, lower, upper, p_value), or empty with ``reason``."""

    decomposition: str
    level: float
    n_episodes: int = 0
    n_workers: int = 0
    excluded: int = 0
    coefficients: dict[str, dict[str, float]] = field(default_factory=dict)
    r_squared: float | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values."""
        return json_safe(asdict(self))


def design_matrix(data: QualityData, decomposition: str = "mundlak") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(X, y, cluster) of the complete rows, columns in ``TERMS`` order; the trait is computed from every coded
    episode of the worker before incomplete rows are dropped."""
    traits = tom_traits(data.human, data.tom, decomposition)
    x = np.column_stack([np.ones(data.quality.size), traits.trait, traits.deviation, data.turns,
                         data.characters / 1000.0, data.edit_ratio])
    keep = np.all(np.isfinite(x), axis=1) & np.isfinite(data.quality)
    return x[keep], data.quality[keep], data.human[keep]


def _cluster_cov(x: np.ndarray, resid: np.ndarray, cluster: np.ndarray, bread: np.ndarray) -> np.ndarray:
    groups, inverse = np.unique(cluster, return_inverse=True)
    scores = np.zeros((groups.size, x.shape[1]))
    np.add.at(scores, inverse, x * resid[:, None])
    n, k, g = x.shape[0], x.shape[1], groups.size
    factor = g / (g - 1) * (n - 1) / (n - k)
    return factor * bread @ (scores.T @ scores) @ bread


def tom_quality(data: QualityData, *, decomposition: str = "mundlak", level: float = 0.95) -> QualityResult:
    """OLS of response quality on ToM trait, deviation and effort, errors clustered by worker (module docstring)."""
    if not 0.0 < level < 1.0:
        raise ValueError("level must be between 0 and 1")
    x, y, cluster = design_matrix(data, decomposition)
    base = {"decomposition": decomposition, "level": level, "n_episodes": int(y.size),
            "n_workers": int(np.unique(cluster).size), "excluded": int(data.quality.size - y.size)}
    g = base["n_workers"]
    if g < MIN_CLUSTERS:
        return QualityResult(**base, reason=f"only {g} workers have coded episodes with a ToM trait; errors "
                                            f"clustered by worker need at least {MIN_CLUSTERS}")
    if y.size <= x.shape[1] or np.linalg.matrix_rank(x) < x.shape[1]:
        flat = [TERMS[j] for j in range(1, x.shape[1]) if np.ptp(x[:, j]) == 0]
        return QualityResult(**base, reason="the regressors are collinear or too few episodes"
                                            + (f" ({', '.join(flat)} do not vary)" if flat else ""))
    bread = np.linalg.inv(x.T @ x)
    coef = bread @ x.T @ y
    resid = y - x @ coef
    cov = _cluster_cov(x, resid, cluster, bread)
    crit = float(t_dist.ppf(0.5 + level / 2.0, g - 1))
    out = {}
    for j, term in enumerate(TERMS):
        se = math.sqrt(max(cov[j, j], 0.0))
        stat = coef[j] / se if se > 0 else math.inf
        out[term] = {"estimate": float(coef[j]), "se": se, "lower": float(coef[j] - crit * se),
                     "upper": float(coef[j] + crit * se), "p_value": float(2.0 * t_dist.sf(abs(stat), g - 1))}
    r2 = 1.0 - float(resid @ resid) / float(np.sum((y - y.mean()) ** 2)) if np.ptp(y) > 0 else None
    return QualityResult(**base, coefficients=out, r_squared=r2)
