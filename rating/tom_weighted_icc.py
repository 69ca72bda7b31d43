"""Judge-vs-gold agreement weighted by the gold sample's design: an estimate of the ICC over every coded episode.

The gold sample is stratified (the judges' score band × condition) with unequal inclusion probabilities, so the
plain ICC of the sampled episodes describes the sample, over-representing small strata. Weighting each episode
by its design weight w_i = N_h / m_h (N_h the stratum's coded episodes when the sample was drawn, m_h its sampled
episodes that have both a judge and a gold code; 1/π when every sampled episode is coded) turns each sum of
squares of the two-way ANOVA into a Horvitz–Thompson estimate of the population's:

    W = Σ w_i,  ȳ_j = Σ w_i y_ij / W,  ȳ_i = Σ_j y_ij / k,  ȳ = Σ_j ȳ_j / k
    MSR = k Σ w_i (ȳ_i − ȳ)² / (W − 1)
    MSC = W Σ_j (ȳ_j − ȳ)² / (k − 1)
    MSE = Σ w_i Σ_j (y_ij − ȳ_i − ȳ_j + ȳ)² / ((W − 1)(k − 1))

and ICC(2,1), ICC(2,k) follow by the usual formulas with n replaced by W. With every w_i = 1 this is the plain
ICC; over the whole population it is the population's ICC, which the weighted one estimates consistently (a
smooth function of unbiased totals, so its bias is of order 1/n) while the plain one does not when agreement
differs between strata. Re-weighting within the stratum to the m_h coded episodes treats a missing gold code as
missing at random within its stratum.

Its variance follows the stratified design: the delete-one jackknife within strata (JKn), each stratum's
replicates re-weighted to N_h / (m_h − 1), with the finite-population factor 1 − m_h / N_h,

    v = Σ_h (1 − m_h/N_h) (m_h − 1)/m_h Σ_{i∈h} (ICC_(hi) − ICC_(h·))²,

and a normal interval. A stratum with one coded episode gives no within-stratum spread, so then no interval is
given. Pure numpy/scipy: no Django.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from rating.tom_reliability import MIN_ITEMS, RatingTable

__all__ = ["GoldDesign", "WeightedIccResult", "design_weights", "weighted_icc", "weighted_icc_agreement"]


@dataclass(frozen=True)
class GoldDesign:
    """Each gold-sample item's stratum and the stratum's population N_h (coded episodes when it was drawn)."""

    strata: dict[str, str]              # item label -> stratum
    stratum_population: dict[str, int]  # stratum -> N_h

    def __post_init__(self) -> None:
        missing = set(self.strata.values()) - set(self.stratum_population)
        if missing:
            raise ValueError(f"strata without a population size: {', '.join(sorted(missing))}")
        if any(int(n) < 1 for n in self.stratum_population.values()):
            raise ValueError("a stratum's population must be at least 1")


@dataclass(frozen=True)
class WeightedIccResult:
    """The design-weighted ICC(2,1) and ICC(2,k) with jackknife errors and intervals, or a ``reason``."""

    n_items: int
    n_strata: int
    level: float
    population: float = 0.0             # W = Σ w_i, the coded episodes the estimate speaks for
    icc_single: float | None = None
    icc_single_se: float | None = None
    icc_single_interval: tuple[float, float] | None = None
    icc_average: float | None = None
    icc_average_se: float | None = None
    icc_average_interval: tuple[float, float] | None = None
    reason: str | None = None
    interval_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values."""
        out = asdict(self)
        for key in ("icc_single_interval", "icc_average_interval"):
            out[key] = list(out[key]) if out[key] else None
        return out


def weighted_icc(x: np.ndarray, w: np.ndarray) -> tuple[float, float] | None:
    """(ICC(2,1), ICC(2,k)) of the complete n × k table ``x`` with item weights ``w`` (module formulas); None when
    a denominator is not positive (the codes do not vary)."""
    k = x.shape[1]
    total = float(w.sum())
    col = w @ x / total
    row = x.mean(axis=1)
    grand = float(col.mean())
    msr = k * float(w @ (row - grand) ** 2) / (total - 1.0)
    msc = total * float(np.sum((col - grand) ** 2)) / (k - 1)
    resid = x - row[:, None] - col[None, :] + grand
    mse = float(w @ np.sum(resid ** 2, axis=1)) / ((total - 1.0) * (k - 1))
    single_den = msr + (k - 1) * mse + k * (msc - mse) / total
    average_den = msr + (msc - mse) / total
    if single_den <= 0.0 or average_den <= 0.0:
        return None
    return (msr - mse) / single_den, (msr - mse) / average_den


def design_weights(strata: Sequence[str], population: dict[str, int]) -> np.ndarray:
    """w_i = N_h / m_h for each item of stratum h, m_h the items of h present."""
    labels = list(strata)
    counts = {h: labels.count(h) for h in set(labels)}
    return np.array([population[h] / counts[h] for h in labels], dtype=float)


def _jackknife(x: np.ndarray, strata: list[str], population: dict[str, int]) -> tuple[float, float] | None:
    """JKn variances of (ICC(2,1), ICC(2,k)); None when a stratum has a single item or a replicate is undefined."""
    variance = np.zeros(2)
    labels = np.array(strata)
    for h in sorted(set(strata)):
        members = np.flatnonzero(labels == h)
        m, n_pop = members.size, population[h]
        if m < 2:
            return None
        replicates = []
        for drop in members:
            keep = np.ones(len(strata), dtype=bool)
            keep[drop] = False
            value = weighted_icc(x[keep], design_weights(labels[keep].tolist(), population))
            if value is None:
                return None
            replicates.append(value)
        reps = np.array(replicates)
        variance += max(0.0, 1.0 - m / n_pop) * (m - 1) / m * np.sum((reps - reps.mean(axis=0)) ** 2, axis=0)
    return float(math.sqrt(variance[0])), float(math.sqrt(variance[1]))


def weighted_icc_agreement(table: RatingTable, design: GoldDesign, *, level: float = 0.95,
                           min_items: int = MIN_ITEMS) -> WeightedIccResult:
    """The design-weighted ICCs of ``table``'s complete items that belong to the sample (module docstring)."""
    if not 0.0 < level < 1.0:
        raise ValueError("level must be between 0 and 1")
    if table.scores.shape[1] < 2:
        raise ValueError("agreement needs at least two raters")
    keep = [i for i, item in enumerate(table.items)
            if item in design.strata and not np.any(np.isnan(table.scores[i]))]
    x = table.scores[keep]
    strata = [design.strata[table.items[i]] for i in keep]
    base: dict[str, Any] = {"n_items": len(keep), "n_strata": len(set(strata)), "level": level}
    if len(keep) < max(min_items, 2):
        return WeightedIccResult(**base, reason=f"only {len(keep)} sampled episodes have both codes; at least "
                                                f"{max(min_items, 2)} are needed")
    w = design_weights(strata, design.stratum_population)
    value = weighted_icc(x, w)
    if value is None:
        return WeightedIccResult(**base, population=float(w.sum()),
                                 reason="the codes do not vary between episodes: agreement is undefined")
    se = _jackknife(x, strata, design.stratum_population)
    out = base | {"population": float(w.sum()), "icc_single": float(value[0]), "icc_average": float(value[1])}
    if se is None:
        return WeightedIccResult(**out, interval_note="a stratum has a single coded gold episode, so the design "
                                                      "variance cannot be estimated")
    z = float(norm.ppf(0.5 + level / 2.0))
    return WeightedIccResult(**out, icc_single_se=se[0], icc_average_se=se[1],
                             icc_single_interval=(value[0] - z * se[0], value[0] + z * se[0]),
                             icc_average_interval=(value[1] - z * se[1], value[1] + z * se[1]))
