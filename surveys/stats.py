"""Survey statistics for the pre/post attitude instrument (paper §5, §6.2 Figure 4, App. F).

Pure functions over plain mappings and numpy arrays so the analysis can run in a notebook, a Celery task
or a test without Django; every result is a frozen dataclass with ``to_dict()`` / ``from_dict()`` so it can
be cached as JSON. Results never carry participant ids, so a cached table holds no personal data.

Answer coding (callers convert stored answers before calling in):

- 7-point Likert items (A1 agent familiarity, A2 trust, A3 delegation comfort, A6 role concern) are the
  numbers 1-7 as answered.
- Human Agency Scale items (A4 perceived capability, A5 desired autonomy) are coded with :func:`has_code`,
  H1 = 1 (agent fully autonomous) ... H5 = 5 (continuous human involvement), so a negative change means a
  shift toward more agent autonomy.
- A7 affective orientation is nominal: it has no order, so it never enters a rank statistic.
  :func:`category_shift` summarises it as a pre x post count table and per-category proportions.

A missing answer is ``None`` or NaN. Paired statistics use only participants who answered both pre and
post; correlations use only participants who have both an answer and a skill estimate.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Self, TypeVar

import numpy as np
import scipy
import scipy.stats

__all__ = [
    "AFFECTIVE_ORIENTATIONS",
    "CategoryShift",
    "CorrelationResult",
    "MannWhitneyResult",
    "PairedItemResult",
    "SkillSplit",
    "category_shift",
    "change_by_skill_split",
    "correlate_changes_with_skill",
    "correlate_items_with_skill",
    "has_code",
    "holm",
    "median_split",
    "paired_change",
    "paired_differences",
    "paired_table",
    "skill_split_table",
    "spearman_with_ci",
]

# Any hashable id; not `Hashable` itself, since Mapping keys are invariant and would refuse dict[int, …].
ParticipantId = Any
Answers = Mapping[ParticipantId, float | None]
ItemAnswers = Mapping[str, Answers]

AFFECTIVE_ORIENTATIONS: tuple[str, ...] = ("Excited", "Curious", "Neutral", "Skeptical", "Anxious")
HAS_LEVELS: tuple[str, ...] = ("H1", "H2", "H3", "H4", "H5")

_R = TypeVar("_R", "PairedItemResult", "CorrelationResult", "MannWhitneyResult")

# Below this many pairs a Fisher-z interval has no degrees of freedom (SE uses n - 3).
_MIN_CORRELATION_N = 4


class _JsonResult:
    """Give flat result dataclasses a JSON round trip for the statistics cache."""

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as JSON-serialisable builtins."""
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Rebuild a result from :meth:`to_dict` output."""
        return cls(**data)


@dataclass(frozen=True)
class PairedItemResult(_JsonResult):
    """Pre/post change of one item (one row of Figure 4(c)).

    ``delta`` and ``se`` describe the paired differences post - pre; ``se_pre``/``se_post`` are the
    standard errors of each mean for plotting. ``wilcoxon_w`` is scipy's two-sided statistic
    min(W+, W-); ``effect_size`` is the matched-pairs rank-biserial r = (W+ - W-) / (W+ + W-), positive
    when answers rose.
    """

    item: str
    n: int
    mean_pre: float | None
    mean_post: float | None
    delta: float | None
    se: float | None
    se_pre: float | None
    se_post: float | None
    wilcoxon_w: float | None
    p_value: float | None
    effect_size: float | None
    n_zero: int
    zero_method: str
    note: str
    p_holm: float | None = None


@dataclass(frozen=True)
class CorrelationResult(_JsonResult):
    """Spearman rho with a Fisher-z confidence interval (one row of Figure 4(a) or 4(b))."""

    x_label: str
    y_label: str
    n: int
    rho: float | None
    p_value: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    note: str
    p_holm: float | None = None


@dataclass(frozen=True)
class MannWhitneyResult(_JsonResult):
    """Change of one item compared between the below-median and at-or-above-median skill halves.

    ``u_statistic`` is U of the below-median group; ``effect_size`` is the rank-biserial
    r = 2U / (n_below * n_above) - 1 = P(below > above) - P(below < above), positive when the
    lower-skilled half changed more.
    """

    item: str
    median_skill: float | None
    n_below: int
    n_above: int
    mean_change_below: float | None
    mean_change_above: float | None
    u_statistic: float | None
    p_value: float | None
    effect_size: float | None
    note: str
    p_holm: float | None = None


@dataclass(frozen=True)
class CategoryShift(_JsonResult):
    """Pre x post counts of a nominal item; rows are pre answers, columns post answers."""

    item: str
    categories: tuple[str, ...]
    n: int
    table: tuple[tuple[int, ...], ...]
    n_unchanged: int
    pre_proportion: dict[str, float | None]
    post_proportion: dict[str, float | None]
    proportion_change: dict[str, float | None]
    note: str

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Rebuild a result from :meth:`to_dict` output, restoring the tuples JSON turned into lists."""
        fields = dict(data)
        fields["categories"] = tuple(fields["categories"])
        fields["table"] = tuple(tuple(row) for row in fields["table"])
        return cls(**fields)


class SkillSplit(NamedTuple):
    """Participants on each side of the median skill; ties with the median go to ``above``."""

    median: float
    below: tuple[ParticipantId, ...]
    above: tuple[ParticipantId, ...]


# --------------------------------------------------------------------------------------------- coding


def has_code(label: str | int) -> int:
    """Return the numeric Human Agency Scale code: ``"H1"`` or ``1`` -> 1 ... ``"H5"`` or ``5`` -> 5."""
    if isinstance(label, bool):
        raise ValueError(f"label must be one of H1..H5 or 1..5, got {label!r}")
    if isinstance(label, int | np.integer):
        code = int(label)
        if 1 <= code <= 5:
            return code
    elif isinstance(label, str):
        text = label.strip().upper()
        if text in HAS_LEVELS:
            return HAS_LEVELS.index(text) + 1
    raise ValueError(f"label must be one of H1..H5 or 1..5, got {label!r}")


# ----------------------------------------------------------------------------------------- pairing


def _value(raw: Any, *, item: str, pid: ParticipantId) -> float | None:
    """Return the answer as a float, or None when it is missing."""
    if raw is None:
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(
            f"answer of participant {pid!r} to item {item!r} is not numeric ({raw!r}); "
            "code HAS labels with has_code() first"
        ) from None
    return None if math.isnan(value) else value


def _paired_values(pre: Answers, post: Answers, item: str) -> tuple[np.ndarray, np.ndarray]:
    """Return aligned pre and post arrays for participants who answered both."""
    pre_values: list[float] = []
    post_values: list[float] = []
    for pid, raw_pre in pre.items():
        if pid not in post:
            continue
        before = _value(raw_pre, item=item, pid=pid)
        after = _value(post[pid], item=item, pid=pid)
        if before is None or after is None:
            continue
        pre_values.append(before)
        post_values.append(after)
    return np.asarray(pre_values, dtype=float), np.asarray(post_values, dtype=float)


def paired_differences(pre: Answers, post: Answers, item: str = "") -> dict[ParticipantId, float]:
    """Return post - pre for every participant who answered both, keyed by participant id."""
    changes: dict[ParticipantId, float] = {}
    for pid, raw_pre in pre.items():
        if pid not in post:
            continue
        before = _value(raw_pre, item=item, pid=pid)
        after = _value(post[pid], item=item, pid=pid)
        if before is not None and after is not None:
            changes[pid] = after - before
    return changes


def _sem(values: np.ndarray) -> float | None:
    """Return the standard error of the mean (ddof=1), or None below two values."""
    if values.size < 2:
        return None
    return float(np.std(values, ddof=1) / math.sqrt(values.size))


def _float_or_none(value: Any) -> float | None:
    """Return a builtin float, mapping NaN to None so cached JSON stays strict."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


# ------------------------------------------------------------------------------------ Holm correction


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Return Holm-Bonferroni step-down adjusted p-values in input order.

    The family is the non-None entries (m of them): the k-th smallest p is multiplied by m - k + 1, a
    running maximum keeps the adjusted values monotone, and they are capped at 1. ``None`` entries (tests
    that could not run) pass through and do not count toward m.
    """
    present: list[tuple[int, float]] = []
    for index, p in enumerate(p_values):
        if p is None:
            continue
        value = float(p)
        if not 0.0 <= value <= 1.0:  # also rejects NaN
            raise ValueError(f"p_values[{index}] must lie in [0, 1], got {p!r}")
        present.append((index, value))
    adjusted: list[float | None] = [None] * len(p_values)
    m = len(present)
    running = 0.0
    for rank, (index, value) in enumerate(sorted(present, key=lambda pair: pair[1])):
        running = max(running, min(1.0, (m - rank) * value))
        adjusted[index] = running
    return adjusted


def _with_holm(results: list[_R]) -> list[_R]:
    """Return the results with ``p_holm`` filled across them as one family."""
    adjusted = holm([result.p_value for result in results])
    return [dataclasses.replace(result, p_holm=p) for result, p in zip(results, adjusted, strict=True)]


# ------------------------------------------------------------------------------- paired change (4c)


def _wilcoxon_method(diff: np.ndarray) -> tuple[Any, str]:
    """Return the ``method=`` to pass to ``scipy.stats.wilcoxon`` for these differences and its description.

    The choice follows scipy's own ``"auto"`` rule (exact without zeros or ties, a full sign permutation up
    to 13 pairs, else the normal approximation), but is made here and passed explicitly, so the note names
    the method that produced the p-value rather than a guess of scipy's. ``correction`` stays scipy's
    default (False): the normal approximation is tie-corrected but has no continuity correction.
    """
    nonzero = np.abs(diff[diff != 0])
    ties = nonzero.size != np.unique(nonzero).size
    if diff.size > 50:
        return "asymptotic", (
            "method='asymptotic': a normal approximation with tie correction, no continuity correction "
            "(more than 50 pairs)"
        )
    if not ties and nonzero.size == diff.size:
        return "exact", "method='exact': the exact null distribution (no zero or tied differences)"
    if diff.size <= 13:
        return scipy.stats.PermutationMethod(), (
            "method=PermutationMethod(): an exact permutation over all sign assignments (zero or tied "
            "differences, at most 13 pairs)"
        )
    return "asymptotic", (
        "method='asymptotic': a normal approximation with tie correction, no continuity correction (zero or "
        "tied differences, more than 13 pairs)"
    )


def paired_change(pre: Answers, post: Answers, item: str) -> PairedItemResult:
    """Return the pre/post change of one item with a two-sided Wilcoxon signed-rank test.

    Participants are paired by id; anyone without both answers is dropped. Zero differences are dropped
    before ranking (``zero_method="wilcox"``) but still count toward n, Δ and SE. With fewer than two
    pairs, or when every difference is zero, the test is undefined: W, p and r are None and ``note`` says
    why.
    """
    before, after = _paired_values(pre, post, item)
    n = int(before.size)
    diff = after - before
    n_zero = int(np.count_nonzero(diff == 0))
    descriptives: dict[str, Any] = {
        "item": item,
        "n": n,
        "mean_pre": float(before.mean()) if n else None,
        "mean_post": float(after.mean()) if n else None,
        "delta": float(diff.mean()) if n else None,
        "se": _sem(diff),
        "se_pre": _sem(before),
        "se_post": _sem(after),
        "n_zero": n_zero,
        "zero_method": "wilcox",
    }
    untested = {"wilcoxon_w": None, "p_value": None, "effect_size": None}
    if n < 2:
        note = f"Wilcoxon test not run: {n} participant(s) answered both pre and post; at least 2 are needed."
        return PairedItemResult(**descriptives, **untested, note=note)
    if n_zero == n:
        note = (
            f"Wilcoxon test not run: all {n} differences are zero, and zero_method='wilcox' drops zeros, "
            "leaving nothing to rank."
        )
        return PairedItemResult(**descriptives, **untested, note=note)

    method, described = _wilcoxon_method(diff)
    test = scipy.stats.wilcoxon(diff, zero_method="wilcox", method=method)
    nonzero = diff[diff != 0]
    ranks = scipy.stats.rankdata(np.abs(nonzero))
    w_plus = float(ranks[nonzero > 0].sum())
    w_minus = float(ranks[nonzero < 0].sum())
    note = (
        f"Two-sided Wilcoxon signed-rank test on {n} pairs; zero_method='wilcox' dropped {n_zero} zero "
        f"difference(s) before ranking; scipy {scipy.__version__} with {described}."
    )
    return PairedItemResult(
        **descriptives,
        wilcoxon_w=_float_or_none(test.statistic),
        p_value=_float_or_none(test.pvalue),
        effect_size=(w_plus - w_minus) / (w_plus + w_minus),
        note=note,
    )


def paired_table(
    pre_answers: ItemAnswers,
    post_answers: ItemAnswers,
    items: Sequence[str] | None = None,
    holm_correction: bool = False,
) -> list[PairedItemResult]:
    """Return :func:`paired_change` for each item, optionally Holm-adjusted across the table.

    ``items`` defaults to the items present in both surveys, in pre-survey order.
    """
    if items is None:
        items = [item for item in pre_answers if item in post_answers]
    results = [paired_change(pre_answers.get(item, {}), post_answers.get(item, {}), item) for item in items]
    return _with_holm(results) if holm_correction else results


# ---------------------------------------------------------------------------- correlations (4a, 4b)


def _paired_xy(x: Any, y: Any, labels: tuple[str, str]) -> tuple[np.ndarray, np.ndarray]:
    """Return aligned finite x and y arrays from two mappings (paired by key) or two arrays."""
    if isinstance(x, Mapping) and isinstance(y, Mapping):
        xs: list[float] = []
        ys: list[float] = []
        for key, raw_x in x.items():
            if key not in y:
                continue
            value_x = _value(raw_x, item=labels[0], pid=key)
            value_y = _value(y[key], item=labels[1], pid=key)
            if value_x is not None and value_y is not None:
                xs.append(value_x)
                ys.append(value_y)
        return np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if isinstance(x, Mapping) or isinstance(y, Mapping):
        raise ValueError("x and y must both be mappings keyed by participant or both be arrays")
    array_x = np.asarray(x, dtype=float)
    array_y = np.asarray(y, dtype=float)
    if array_x.ndim != 1 or array_y.ndim != 1 or array_x.shape != array_y.shape:
        raise ValueError(
            f"x and y must be 1-D of equal length, got shapes {array_x.shape} and {array_y.shape}"
        )
    keep = ~(np.isnan(array_x) | np.isnan(array_y))
    return array_x[keep], array_y[keep]


def spearman_with_ci(
    x: Mapping[ParticipantId, float | None] | Sequence[float] | np.ndarray,
    y: Mapping[ParticipantId, float | None] | Sequence[float] | np.ndarray,
    labels: tuple[str, str] = ("x", "y"),
    confidence: float = 0.95,
) -> CorrelationResult:
    """Return Spearman's rho, its p-value and a Fisher-z confidence interval.

    Mappings are paired by participant id, arrays by position; pairs with a missing value are dropped.
    The p-value is scipy's (t distribution with n - 2 df). The interval transforms
    z = atanh(rho) +/- z_crit * SE back with tanh, using the Bonett-Wright (2000) standard error for
    Spearman's rho, SE = sqrt((1 + rho^2 / 2) / (n - 3)), which is wider than Pearson's 1/sqrt(n - 3).
    Fewer than 4 pairs or a constant variable give None values and a note.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    x_values, y_values = _paired_xy(x, y, labels)
    n = int(x_values.size)
    empty = {"rho": None, "p_value": None, "ci_low": None, "ci_high": None}
    base = {"x_label": labels[0], "y_label": labels[1], "n": n, "confidence": confidence}
    if n < _MIN_CORRELATION_N:
        note = (
            f"Not computed: {n} complete pair(s); the Fisher-z interval needs at least {_MIN_CORRELATION_N}."
        )
        return CorrelationResult(**base, **empty, note=note)
    constant = [
        label for label, values in zip(labels, (x_values, y_values), strict=True) if np.ptp(values) == 0
    ]
    if constant:
        note = f"Not computed: {' and '.join(constant)} is constant across the {n} pairs; rho is undefined."
        return CorrelationResult(**base, **empty, note=note)

    test = scipy.stats.spearmanr(x_values, y_values)
    rho = float(np.clip(test.statistic, -1.0, 1.0))
    method = (
        f"Spearman rho on {n} pairs (p from scipy's t approximation); {confidence:.0%} CI by Fisher z with "
        "the Bonett-Wright SE sqrt((1 + rho^2/2) / (n - 3))."
    )
    if abs(rho) == 1.0:
        note = method + " Interval not given: |rho| = 1 has no finite Fisher z."
        return CorrelationResult(
            **base, rho=rho, p_value=_float_or_none(test.pvalue), ci_low=None, ci_high=None, note=note
        )
    z_crit = float(scipy.stats.norm.ppf(0.5 + confidence / 2.0))
    se = math.sqrt((1.0 + rho**2 / 2.0) / (n - 3))
    z = math.atanh(rho)
    return CorrelationResult(
        **base,
        rho=rho,
        p_value=_float_or_none(test.pvalue),
        ci_low=math.tanh(z - z_crit * se),
        ci_high=math.tanh(z + z_crit * se),
        note=method,
    )


def correlate_items_with_skill(
    answers: ItemAnswers,
    skill: Mapping[ParticipantId, float | None],
    items: Sequence[str] | None = None,
    skill_label: str = "collabskill",
    holm_correction: bool = False,
    confidence: float = 0.95,
) -> list[CorrelationResult]:
    """Return Spearman rho between each pre-survey item and human CollabSkill (Figure 4(a))."""
    items = list(answers) if items is None else items
    results = [
        spearman_with_ci(answers.get(item, {}), skill, (item, skill_label), confidence) for item in items
    ]
    return _with_holm(results) if holm_correction else results


def correlate_changes_with_skill(
    pre_answers: ItemAnswers,
    post_answers: ItemAnswers,
    skill: Mapping[ParticipantId, float | None],
    items: Sequence[str] | None = None,
    skill_label: str = "collabskill",
    holm_correction: bool = False,
    confidence: float = 0.95,
) -> list[CorrelationResult]:
    """Return Spearman rho between each item's change (post - pre) and human CollabSkill (Figure 4(b)).

    The x label is ``"<item> change"`` so these rows cannot be mistaken for pre-survey correlations.
    """
    if items is None:
        items = [item for item in pre_answers if item in post_answers]
    results = [
        spearman_with_ci(
            paired_differences(pre_answers.get(item, {}), post_answers.get(item, {}), item),
            skill,
            (f"{item} change", skill_label),
            confidence,
        )
        for item in items
    ]
    return _with_holm(results) if holm_correction else results


# -------------------------------------------------------------------------------- median skill split


def _known_skill(skill: Mapping[ParticipantId, float | None]) -> dict[ParticipantId, float]:
    """Return the participants that have a skill estimate, as floats."""
    known: dict[ParticipantId, float] = {}
    for pid, raw in skill.items():
        value = _value(raw, item="skill", pid=pid)
        if value is not None:
            known[pid] = value
    return known


def median_split(skill: Mapping[ParticipantId, float | None]) -> SkillSplit:
    """Split participants at the median skill: strictly below vs at-or-above.

    Putting ties with the median above keeps the split deterministic; with an odd count the median
    participant lands in the upper half. Participants without a skill estimate are left out.
    """
    known = _known_skill(skill)
    if not known:
        raise ValueError("skill must hold at least one participant with a skill estimate")
    median = float(np.median(np.fromiter(known.values(), dtype=float)))
    below = tuple(pid for pid, value in known.items() if value < median)
    above = tuple(pid for pid, value in known.items() if value >= median)
    return SkillSplit(median=median, below=below, above=above)


def _mannwhitney_method(below: np.ndarray, above: np.ndarray) -> tuple[str, str]:
    """Return the ``method=`` to pass to ``scipy.stats.mannwhitneyu`` and its description.

    Follows scipy's ``"auto"`` rule (exact for a half of at most 8 without ties, else the normal
    approximation), passed explicitly so the note says what ran.
    """
    pooled = np.concatenate([below, above])
    if below.size > 8 and above.size > 8:
        return "asymptotic", (
            "method='asymptotic': a normal approximation with tie and continuity correction (both halves "
            "larger than 8)"
        )
    if np.unique(pooled).size < pooled.size:
        return "asymptotic", (
            "method='asymptotic': a normal approximation with tie and continuity correction (tied changes)"
        )
    return "exact", "method='exact': the exact null distribution (a half of at most 8 and no ties)"


def change_by_skill_split(
    pre: Answers,
    post: Answers,
    skill: Mapping[ParticipantId, float | None],
    item: str,
) -> MannWhitneyResult:
    """Compare one item's change between lower- and higher-skilled participants (paper §6.2).

    The median is taken over the participants analysed for this item (both answers and a skill
    estimate), so the halves are balanced for the item rather than for the whole cohort. Participants
    strictly below the median form the lower half; the rest form the upper half. The test is a two-sided
    Mann-Whitney U of the lower half's changes against the upper half's.
    """
    changes = paired_differences(pre, post, item)
    known = _known_skill(skill)
    analysed = {pid: known[pid] for pid in changes if pid in known}
    empty: dict[str, Any] = {"u_statistic": None, "p_value": None, "effect_size": None}
    if not analysed:
        return MannWhitneyResult(
            item=item,
            median_skill=None,
            n_below=0,
            n_above=0,
            mean_change_below=None,
            mean_change_above=None,
            **empty,
            note="Not computed: no participant has both answers and a skill estimate.",
        )
    split = median_split(analysed)
    below = np.asarray([changes[pid] for pid in split.below], dtype=float)
    above = np.asarray([changes[pid] for pid in split.above], dtype=float)
    base: dict[str, Any] = {
        "item": item,
        "median_skill": split.median,
        "n_below": int(below.size),
        "n_above": int(above.size),
        "mean_change_below": float(below.mean()) if below.size else None,
        "mean_change_above": float(above.mean()) if above.size else None,
    }
    if below.size == 0 or above.size == 0:
        note = (
            f"Not computed: every analysed participant has skill at or above the median {split.median:g}, "
            "so the lower half is empty."
        )
        return MannWhitneyResult(**base, **empty, note=note)

    method, described = _mannwhitney_method(below, above)
    test = scipy.stats.mannwhitneyu(below, above, alternative="two-sided", method=method)
    u = float(test.statistic)
    note = (
        f"Two-sided Mann-Whitney U of change ({below.size} below vs {above.size} at or above median skill "
        f"{split.median:g}); U is the lower half's; scipy {scipy.__version__} with {described}."
    )
    return MannWhitneyResult(
        **base,
        u_statistic=u,
        p_value=_float_or_none(test.pvalue),
        effect_size=2.0 * u / (below.size * above.size) - 1.0,
        note=note,
    )


def skill_split_table(
    pre_answers: ItemAnswers,
    post_answers: ItemAnswers,
    skill: Mapping[ParticipantId, float | None],
    items: Sequence[str] | None = None,
    holm_correction: bool = False,
) -> list[MannWhitneyResult]:
    """Return :func:`change_by_skill_split` for each item, optionally Holm-adjusted across the table."""
    if items is None:
        items = [item for item in pre_answers if item in post_answers]
    results = [
        change_by_skill_split(pre_answers.get(item, {}), post_answers.get(item, {}), skill, item)
        for item in items
    ]
    return _with_holm(results) if holm_correction else results


# ------------------------------------------------------------------------------------ nominal items


def category_shift(
    pre: Mapping[ParticipantId, str | None],
    post: Mapping[ParticipantId, str | None],
    item: str = "A7",
    categories: Sequence[str] = AFFECTIVE_ORIENTATIONS,
) -> CategoryShift:
    """Return the pre x post count table and per-category proportion change of a nominal item.

    Only participants with both answers count, so pre and post proportions share a denominator and
    their difference is the net share that moved into (positive) or out of (negative) a category. No
    significance test is attached; the table is descriptive.
    """
    order = tuple(categories)
    if len(set(order)) != len(order) or not order:
        raise ValueError(f"categories must be non-empty and distinct, got {order!r}")
    index = {category: position for position, category in enumerate(order)}
    counts = np.zeros((len(order), len(order)), dtype=int)
    for pid, before in pre.items():
        after = post.get(pid)
        if before is None or after is None:
            continue
        for answer in (before, after):
            if answer not in index:
                raise ValueError(
                    f"answer of participant {pid!r} to item {item!r} is {answer!r}, not one of {order!r}"
                )
        counts[index[before], index[after]] += 1
    n = int(counts.sum())
    pre_counts = counts.sum(axis=1)
    post_counts = counts.sum(axis=0)
    pre_share = {c: float(pre_counts[i] / n) if n else None for c, i in index.items()}
    post_share = {c: float(post_counts[i] / n) if n else None for c, i in index.items()}
    change = {c: float((post_counts[i] - pre_counts[i]) / n) if n else None for c, i in index.items()}
    note = (
        f"Descriptive only: {n} participant(s) answered both; rows are pre answers, columns post answers."
        if n
        else "No participant answered both pre and post; proportions are undefined."
    )
    return CategoryShift(
        item=item,
        categories=order,
        n=n,
        table=tuple(tuple(int(count) for count in row) for row in counts),
        n_unchanged=int(np.trace(counts)),
        pre_proportion=pre_share,
        post_proportion=post_share,
        proportion_change=change,
        note=note,
    )
