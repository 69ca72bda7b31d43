"""Agreement of ToM codes: ICC(2,1) and ICC(2,k), two-way random effects, absolute agreement.

Why these two: the judges (two LLM families, or a judge and the expert gold) are a sample of possible raters and
a code is used for its level, not only its rank, so a rater who is systematically higher counts as
disagreement (absolute agreement, Shrout & Fleiss 1979 case 2; McGraw & Wong 1996 ICC(A,1), ICC(A,k)). ICC(2,1)
is the reliability of one rater's code; ICC(2,k) that of the mean of the k raters, which is what the analysis
uses when it averages the two judge families.

With MSR, MSC, MSE the mean squares of items (rows), raters (columns) and residual of the n × k table:

    ICC(2,1) = (MSR − MSE) / (MSR + (k − 1) MSE + k (MSC − MSE) / n)
    ICC(2,k) = (MSR − MSE) / (MSR + (MSC − MSE) / n)

and the intervals are McGraw & Wong's F-based ones with Satterthwaite's degrees of freedom v. Only items coded
by every rater enter (complete cases; the count left out is reported). Pure numpy/scipy: no Django.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import f as f_dist

__all__ = ["MIN_ITEMS", "IccResult", "RatingTable", "icc_agreement", "judge_gold_table", "rating_table"]

# Fewer complete items than this and the interval is too wide to say anything: no number is given.
MIN_ITEMS = 5


@dataclass(frozen=True)
class RatingTable:
    """Codes of ``items`` (episodes) by ``raters`` (judge families, or judge and gold); NaN where a rater gave
    no code."""

    items: tuple[str, ...]
    raters: tuple[str, ...]
    scores: np.ndarray          # (n_items, n_raters), float, NaN = missing

    def __post_init__(self) -> None:
        arr = np.asarray(self.scores, dtype=float)
        if arr.ndim != 2 or arr.shape != (len(self.items), len(self.raters)):
            raise ValueError("scores must be a (items x raters) table matching the labels")
        if np.any(np.isinf(arr)):
            raise ValueError("scores must be finite or NaN (missing)")
        object.__setattr__(self, "scores", arr)


@dataclass(frozen=True)
class IccResult:
    """ICC(2,1) and ICC(2,k) with their intervals, or ``None`` with ``reason`` when they cannot be estimated."""

    raters: tuple[str, ...]
    n_items: int                  # complete items used
    n_incomplete: int             # items left out because a rater gave no code
    level: float
    icc_single: float | None = None
    icc_single_interval: tuple[float, float] | None = None
    icc_average: float | None = None
    icc_average_interval: tuple[float, float] | None = None
    mean_squares: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    missing_rule: str = "complete cases: only items coded by every rater enter"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values."""
        return {
            "raters": list(self.raters), "n_items": self.n_items, "n_incomplete": self.n_incomplete,
            "level": self.level, "icc_single": self.icc_single,
            "icc_single_interval": list(self.icc_single_interval) if self.icc_single_interval else None,
            "icc_average": self.icc_average,
            "icc_average_interval": list(self.icc_average_interval) if self.icc_average_interval else None,
            "mean_squares": dict(self.mean_squares), "reason": self.reason, "missing_rule": self.missing_rule,
        }


def rating_table(codes: Iterable[tuple[Any, Any, float]], raters: Iterable[Any] | None = None) -> RatingTable:
    """Build the items × raters table from (item, rater, score) rows, as a service reads them from the database.

    ``raters`` fixes the columns (and their order); a repeated (item, rater) pair is an error rather than an
    average, since it means the caller mixed codings (e.g. two instrument versions).
    """
    rows = list(codes)
    rater_labels = tuple(str(r) for r in raters) if raters is not None else tuple(
        sorted({str(r) for _, r, _ in rows}))
    item_labels = tuple(sorted({str(i) for i, _, _ in rows}))
    col = {r: j for j, r in enumerate(rater_labels)}
    row = {i: j for j, i in enumerate(item_labels)}
    table = np.full((len(item_labels), len(rater_labels)), np.nan)
    for item, rater, score in rows:
        if str(rater) not in col:
            continue
        i, j = row[str(item)], col[str(rater)]
        if not math.isnan(table[i, j]):
            raise ValueError(f"item {item!r} has more than one code by rater {rater!r}")
        table[i, j] = float(score)
    return RatingTable(items=item_labels, raters=rater_labels, scores=table)


def judge_gold_table(judge_codes: Iterable[tuple[Any, Any, float]],
                     gold_codes: Iterable[tuple[Any, Any, float]]) -> RatingTable:
    """Two columns, "judges" and "gold": per episode the mean of the judges' codes and the mean of the experts'
    codes, from (episode, judge or expert, score) rows. Experts are averaged first because the gold standard is
    their consensus (the paper's ICC2k 0.83 is that of the mean); episodes without both sides stay NaN and so
    drop out as incomplete."""
    sides: dict[str, dict[str, list[float]]] = {"judges": {}, "gold": {}}
    for side, rows in (("judges", judge_codes), ("gold", gold_codes)):
        for item, _, score in rows:
            sides[side].setdefault(str(item), []).append(float(score))
    means = [(item, side, float(np.mean(scores))) for side, by_item in sides.items()
             for item, scores in by_item.items()]
    return rating_table(means, raters=("judges", "gold"))


def _mean_squares(x: np.ndarray) -> dict[str, float]:
    """Two-way ANOVA without replication: rows (items), columns (raters), residual."""
    n, k = x.shape
    grand = x.mean()
    ss_rows = k * float(np.sum((x.mean(axis=1) - grand) ** 2))
    ss_cols = n * float(np.sum((x.mean(axis=0) - grand) ** 2))
    ss_err = float(np.sum((x - grand) ** 2)) - ss_rows - ss_cols
    return {"rows": ss_rows / (n - 1), "raters": ss_cols / (k - 1), "error": max(ss_err, 0.0) / ((n - 1) * (k - 1))}


def _interval(ms: dict[str, float], n: int, k: int, icc: float, level: float) -> tuple[float, float] | None:
    """McGraw & Wong (1996) case 2A interval of ICC(A,1) (Satterthwaite df for the rater-plus-error term)."""
    msr, msc, mse = ms["rows"], ms["raters"], ms["error"]
    if icc >= 1.0 or mse <= 0.0:
        return None
    a = k * icc / (n * (1.0 - icc))
    b = 1.0 + k * icc * (n - 1) / (n * (1.0 - icc))
    denom = (a * msc) ** 2 / (k - 1) + (b * mse) ** 2 / ((n - 1) * (k - 1))
    v = (a * msc + b * mse) ** 2 / denom if denom > 0 else math.inf
    q = 0.5 + level / 2.0
    f_upper = float(f_dist.ppf(q, n - 1, v))
    f_lower = float(f_dist.ppf(q, v, n - 1))
    low = n * (msr - f_upper * mse) / (f_upper * (k * msc + (k * n - k - n) * mse) + n * msr)
    high = n * (f_lower * msr - mse) / (k * msc + (k * n - k - n) * mse + n * f_lower * msr)
    return float(low), float(high)


def _spearman_brown(value: float, k: int) -> float:
    return k * value / (1.0 + (k - 1) * value)


def icc_agreement(table: RatingTable, *, level: float = 0.95, min_items: int = MIN_ITEMS) -> IccResult:
    """ICC(2,1) and ICC(2,k) of ``table`` with their intervals at ``level`` (see the module docstring)."""
    if not 0.0 < level < 1.0:
        raise ValueError("level must be between 0 and 1")
    complete = ~np.any(np.isnan(table.scores), axis=1)
    x = table.scores[complete]
    n, k = x.shape
    base = {"raters": table.raters, "n_items": int(n), "n_incomplete": int((~complete).sum()), "level": level}
    if k < 2:
        return IccResult(**base, reason="agreement needs at least two raters")
    if n < max(min_items, 2):
        return IccResult(**base, reason=f"only {n} items were coded by every rater; at least {max(min_items, 2)} "
                                        "are needed to estimate agreement")
    ms = _mean_squares(x)
    single_den = ms["rows"] + (k - 1) * ms["error"] + k * (ms["raters"] - ms["error"]) / n
    average_den = ms["rows"] + (ms["raters"] - ms["error"]) / n
    if single_den <= 0.0 or average_den <= 0.0:
        return IccResult(**base, mean_squares=ms,
                         reason="the codes do not vary between items: agreement is undefined")
    single = (ms["rows"] - ms["error"]) / single_den
    average = (ms["rows"] - ms["error"]) / average_den
    ci = _interval(ms, n, k, single, level)
    ci_k = (_spearman_brown(ci[0], k), _spearman_brown(ci[1], k)) if ci is not None else None
    return IccResult(**base, icc_single=float(single), icc_single_interval=ci, icc_average=float(average),
                     icc_average_interval=ci_k, mean_squares=ms)
