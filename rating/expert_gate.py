"""The expert-anchored gate: does a judge's criterion scoring agree with the experts well enough to count?

Pure numpy, no Django. Selectors gather, for one judge and one rubric category, the co-graded criterion
items of the calibration sample -- the judge's earned share of the criterion's points and the experts' verdict
(pass = 1, fail = 0; several experts are averaged) -- with the episode each item belongs to and that episode's
inclusion probability. These functions turn them into the agreement, the judge's bias and their intervals.

**Agreement statistic: quadratic-weighted kappa** on the 0-1 share of a criterion's points,

.. math::  \\kappa_w = 1 - \\frac{\\sum_i w_i (x_i - y_i)^2 / \\sum_i w_i}
                              {\\operatorname{Var}_w(x) + \\operatorname{Var}_w(y) + (\\bar x_w - \\bar y_w)^2},

where the denominator is the squared difference expected between a judge score and an expert verdict drawn
independently from their own margins (``mean_{i,j} (x_i - y_j)^2``). Why this one: judges award partial
points on an interval scale while experts give pass/fail, so a statistic for nominal labels (Cohen's or
Fleiss' kappa) would have to throw the partial credit away; quadratic weights charge a disagreement by its
squared size in points, the same loss the rating's scores are averaged under; and unlike a correlation it
counts a constant offset as disagreement, so a judge that ranks well but scores 20 points high does not pass
on agreement alone. On a grid of equally spaced categories it is exactly Cohen's quadratic-weighted kappa
(``statsmodels.stats.inter_rater.cohens_kappa(wt="quadratic")``); on continuous scores it is Lin's
concordance coefficient with population moments.

**Bias**: the weighted mean of ``x - y`` in points of 100 (a criterion worth 5 points that the judge gives
4 and the experts pass contributes -20).

**Weights**: every item carries its episode's ``1 / pi``, the inverse of the probability that the episode
entered the calibration sample, so the estimates are Hajek estimates of the values over all automatically
graded episodes even when small agent families are over-sampled. Only sampled episodes are used: an
episode an expert graded for another reason (judges disagreed, the gate failed, staff chose it) was picked
by a rule that depends on the judges' scores, so no weight makes it representative.

**Intervals**: percentile bootstrap resampling whole episodes (the criteria of one deliverable are graded
together and are not independent), from per-episode sufficient sums so 2 000 rounds cost one matrix product.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "GateRule", "GateResult", "bias", "episodes_for_bias_width", "gate_evaluate", "inclusion_probability",
    "quadratic_weighted_kappa", "statistics_bootstrap",
]

NOT_ENOUGH = "not enough co-graded episodes"


@dataclass(frozen=True)
class GateRule:
    """What must hold for a judge's scores of one criterion category to count.

    ``min_agreement`` bounds the lower end of the kappa interval, ``max_bias`` the absolute bias (points of
    100), ``min_episodes`` the co-graded calibration episodes.
    """

    min_agreement: float = 0.4
    max_bias: float = 10.0
    min_episodes: int = 10
    level: float = 0.95

    def __post_init__(self) -> None:
        if not -1.0 <= self.min_agreement <= 1.0:
            raise ValueError(f"min_agreement must lie in [-1, 1], got {self.min_agreement}")
        if not 0.0 <= self.max_bias <= 100.0:
            raise ValueError(f"max_bias must lie in [0, 100], got {self.max_bias}")
        if self.min_episodes < 2:
            raise ValueError(f"min_episodes must be at least 2, got {self.min_episodes}")
        if not 0.5 < self.level < 1.0:
            raise ValueError(f"level must lie in (0.5, 1), got {self.level}")


@dataclass(frozen=True)
class GateResult:
    """The gate's verdict for one (judge, category) with the numbers behind it; ``None`` where not estimable."""

    n_episodes: int
    n_items: int
    agreement: float | None
    agreement_interval: tuple[float, float] | None
    bias: float | None
    bias_interval: tuple[float, float] | None
    passes: bool
    reasons: list[str] = field(default_factory=list)
    more_for_bias_width: int | None = None


def _arrays(judge: ArrayLike, expert: ArrayLike, weight: ArrayLike | None) -> tuple[NDArray[np.float64], ...]:
    x = np.asarray(judge, dtype=float)
    y = np.asarray(expert, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"judge and expert must be 1-d of one length, got {x.shape} and {y.shape}")
    w = np.ones_like(x) if weight is None else np.asarray(weight, dtype=float)
    if w.shape != x.shape:
        raise ValueError(f"weight must match the scores' length {x.shape}, got {w.shape}")
    if x.size and (not np.all(np.isfinite(x)) or not np.all(np.isfinite(y))):
        raise ValueError("judge and expert scores must be finite")
    if x.size and (np.any(w <= 0) or not np.all(np.isfinite(w))):
        raise ValueError("weight must be positive and finite")
    return x, y, w


def _sums(x: NDArray[np.float64], y: NDArray[np.float64], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """The weighted sums both statistics are functions of, one column each."""
    return np.column_stack([w, w * x, w * y, w * x * x, w * y * y, w * (x - y) ** 2])


def _kappa_from_sums(s: NDArray[np.float64]) -> NDArray[np.float64]:
    total = s[..., 0]
    mx, my = s[..., 1] / total, s[..., 2] / total
    expected = (s[..., 3] / total - mx * mx) + (s[..., 4] / total - my * my) + (mx - my) ** 2
    observed = s[..., 5] / total
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = 1.0 - observed / expected
    return np.where(expected > 1e-12, kappa, np.nan)


def _bias_from_sums(s: NDArray[np.float64]) -> NDArray[np.float64]:
    return 100.0 * (s[..., 1] - s[..., 2]) / s[..., 0]


def quadratic_weighted_kappa(judge: ArrayLike, expert: ArrayLike, weight: ArrayLike | None = None) -> float | None:
    """Return the weighted quadratic kappa of two 0-1 score vectors, ``None`` when nothing varies."""
    x, y, w = _arrays(judge, expert, weight)
    if x.size == 0:
        return None
    value = float(_kappa_from_sums(_sums(x, y, w).sum(axis=0)))
    return None if math.isnan(value) else value


def bias(judge: ArrayLike, expert: ArrayLike, weight: ArrayLike | None = None) -> float | None:
    """Return the judge's weighted mean excess over the experts in points of 100 (``None`` without data)."""
    x, y, w = _arrays(judge, expert, weight)
    if x.size == 0:
        return None
    return float(_bias_from_sums(_sums(x, y, w).sum(axis=0)))


def statistics_bootstrap(judge: ArrayLike, expert: ArrayLike, episode: ArrayLike, weight: ArrayLike | None = None,
                         *, rounds: int = 2000, seed: int = 0) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return bootstrap draws of (kappa, bias), resampling whole episodes with replacement.

    Kappa draws are NaN where a resample has no variation (the interval uses the finite ones).
    """
    x, y, w = _arrays(judge, expert, weight)
    groups = np.asarray(episode)
    if groups.shape != x.shape:
        raise ValueError(f"episode must match the scores' length {x.shape}, got {groups.shape}")
    if rounds < 1:
        raise ValueError(f"rounds must be positive, got {rounds}")
    _, index = np.unique(groups, return_inverse=True)
    n_groups = int(index.max()) + 1 if index.size else 0
    per_episode = np.zeros((n_groups, 6))
    np.add.at(per_episode, index, _sums(x, y, w))
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n_groups, np.full(n_groups, 1.0 / n_groups), size=rounds).astype(float)
    draws = counts @ per_episode
    return _kappa_from_sums(draws), _bias_from_sums(draws)


def _interval(draws: NDArray[np.float64], level: float) -> tuple[float, float] | None:
    finite = draws[np.isfinite(draws)]
    if finite.size < 0.9 * draws.size:  # too many degenerate resamples to trust the tails
        return None
    low, high = np.quantile(finite, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def episodes_for_bias_width(*, n_episodes: int, interval: tuple[float, float] | None, width: float) -> int | None:
    """Return how many more co-graded episodes would bring the bias interval to ``width`` points.

    The interval's width shrinks as ``1 / sqrt(n)`` at a fixed design, so ``n_needed = n (w_now / width)^2``.
    ``None`` when there is no interval to extrapolate from.
    """
    if width <= 0:
        raise ValueError(f"width must be positive, got {width}")
    if interval is None or n_episodes < 2:
        return None
    now = interval[1] - interval[0]
    return max(0, math.ceil(n_episodes * (now / width) ** 2 - n_episodes))


def gate_evaluate(judge: ArrayLike, expert: ArrayLike, episode: ArrayLike, weight: ArrayLike | None = None, *,
                  rule: GateRule, bias_width: float = 10.0, uncovered_families: tuple[str, ...] = (),
                  rounds: int = 2000, seed: int = 0) -> GateResult:
    """Apply the gate to one judge's criterion items of one category; say why it fails when it does.

    ``uncovered_families`` names agent families with automatically graded episodes but none in the
    co-graded sample: the estimate then speaks for part of the study only, which fails the gate.
    """
    x, y, w = _arrays(judge, expert, weight)
    n_episodes = len(set(np.asarray(episode).tolist()))
    reasons: list[str] = []
    if n_episodes == 0:
        return GateResult(0, 0, None, None, None, None, False,
                          [f"{NOT_ENOUGH}: none of the calibration sample's expert-graded episodes has this "
                           f"judge's scores (at least {rule.min_episodes} needed)"])
    agreement = quadratic_weighted_kappa(x, y, w)
    point_bias = bias(x, y, w)
    kappa_interval = bias_interval = None
    if n_episodes >= 2:
        kappa_draws, bias_draws = statistics_bootstrap(x, y, episode, w, rounds=rounds, seed=seed)
        kappa_interval = _interval(kappa_draws, rule.level) if agreement is not None else None
        bias_interval = _interval(bias_draws, rule.level)
    if n_episodes < rule.min_episodes:
        reasons.append(f"{NOT_ENOUGH}: {n_episodes} of the {rule.min_episodes} required")
    if agreement is None:
        reasons.append("agreement undefined: the scores do not vary on the co-graded items")
    elif kappa_interval is None:
        reasons.append("agreement interval not estimable from so few episodes")
    elif kappa_interval[0] < rule.min_agreement:
        reasons.append(f"agreement too low: kappa {agreement:.2f}, lower bound {kappa_interval[0]:.2f} "
                       f"< {rule.min_agreement:g}")
    assert point_bias is not None
    if abs(point_bias) > rule.max_bias:
        reasons.append(f"biased: {point_bias:+.1f} points against the experts (limit ±{rule.max_bias:g})")
    if uncovered_families:
        reasons.append("experts graded no sampled episode of agent family " + ", ".join(uncovered_families))
    return GateResult(
        n_episodes=n_episodes, n_items=int(x.size), agreement=agreement, agreement_interval=kappa_interval,
        bias=point_bias, bias_interval=bias_interval, passes=not reasons, reasons=reasons,
        more_for_bias_width=episodes_for_bias_width(n_episodes=n_episodes, interval=bias_interval,
                                                     width=bias_width))


def inclusion_probability(*, rate: float, sampled_in_family: int, min_per_family: int) -> float:
    """Return the calibration-sample probability of the next automatically graded episode of a family.

    Every family's first ``min_per_family`` sampled episodes are taken for sure (so a rarely used agent is
    still measured), after that each episode is drawn independently with probability ``rate``. The
    probability depends only on earlier draws, so ``1 / pi`` weights stay unbiased.
    """
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must lie in [0, 1], got {rate}")
    if min_per_family < 0 or sampled_in_family < 0:
        raise ValueError("min_per_family and sampled_in_family must not be negative")
    if rate == 0.0:
        return 0.0
    return 1.0 if sampled_in_family < min_per_family else rate
