"""Summary of the LLM judges' comparison-mode rankings: do they prefer what the experts prefer, are they stable
when the order is reversed, and does the first-shown deliverable win more?

Every ranking (a judge's or an expert's) of a comparison set is broken into its pairs of deliverables; a pair's
outcome is which of the two is ranked better, or a tie (equal ranks). Per judge, and pooled over the judges:

* agreement with the experts: over every (judge ranking, expert ranking of the same set, pair) the share where
  the two outcomes are equal. Ties count as an outcome of their own: a tie matches only a tie, a tie against a
  strict preference is a disagreement. Beside it Cohen's kappa on the three outcomes (first-by-id better, tie,
  second better), chance agreement taken from the judge's and the experts' own outcome shares over the same
  units, with a delete-one-set jackknife interval (below); and the share over the units where both were strict
  (ties left out), which is the number comparable with the rubric graders' agreement on the Comparisons tab;
* order consistency: of the pairs the judge ranked in both orders of a set, those with the same outcome both
  times (a tie twice is consistent);
* position bias: of the judge's strict pair outcomes, the share won by the deliverable shown earlier, minus 0.5
  (0 = no bias); the interval is the Wilson interval of the share, shifted by 0.5.

The experts' agreement with each other on sets two experts ranked is given beside it, measured the same way,
as the yardstick a judge is held to. Wilson intervals treat every unit as independent; units sharing a set, a
pair or an expert are not, so the intervals are narrower than the truth when few sets carry many units. A share
resting on fewer than :data:`MIN_COUNT` units carries the reason and no number.

Kappa's interval respects that clustering: every unit carries its comparison set, kappa is recomputed leaving out
one set at a time (the G sets that carry units), SE = sqrt((G - 1) / G * sum((kappa_-s - their mean)^2)) and the
interval is kappa +- z * SE at the summary's level, clipped to [-1, 1]. It is withheld, with the reason, when
fewer than 2 sets or fewer than :data:`MIN_COUNT` units carry it, or when kappa is undefined (chance agreement 1)
on the whole or on any leave-one-set-out sample. Pure Python and numpy: no Django.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from statistics import NormalDist
from typing import Any

import numpy as np

from rating.tom_pairwise_summary import MIN_COUNT, share_summary

__all__ = ["MIN_COUNT", "OVERALL", "ExpertRanking", "JudgeRanking", "judge_preference_summary", "pair_outcomes"]

OVERALL = "all judges"
ORDERS = ("recorded", "reversed")


@dataclass(frozen=True)
class JudgeRanking:
    """One judge's ranking of one set in one order: ``shown[i]`` is the item shown at position i + 1, ``ranks[i]``
    its rank (1 is best, equal ranks are ties)."""

    set_id: int
    judge: str
    order: str
    shown: tuple[int, ...]
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class ExpertRanking:
    """One expert's submitted ranking of one set (items in any order, ``ranks`` aligned with ``items``)."""

    set_id: int
    expert: str
    items: tuple[int, ...]
    ranks: tuple[int, ...]


def pair_outcomes(items: Sequence[int], ranks: Sequence[int]) -> dict[tuple[int, int], int]:
    """Each pair (lower item id first): +1 when the lower id is ranked better, -1 when the higher, 0 a tie."""
    if len(items) != len(ranks) or len(set(items)) != len(items):
        raise ValueError(f"not a ranking: items {tuple(items)}, ranks {tuple(ranks)}")
    rank = dict(zip(items, ranks, strict=True))
    return {(a, b): (rank[a] < rank[b]) - (rank[a] > rank[b]) for a, b in combinations(sorted(items), 2)}



def _kappa(pairs: list[tuple[int, int]]) -> float | None:
    """Cohen's kappa of (judge outcome, expert outcome) units; None when chance agreement is 1 or no unit."""
    if not pairs:
        return None
    n = len(pairs)
    observed = sum(1 for x, y in pairs if x == y) / n
    left, right = Counter(x for x, _ in pairs), Counter(y for _, y in pairs)
    chance = sum(left[k] * right[k] for k in (-1, 0, 1)) / (n * n)
    return None if chance >= 1.0 else (observed - chance) / (1.0 - chance)


def _table_kappas(tables: np.ndarray) -> np.ndarray:
    """Cohen's kappa of each 3 x 3 outcome table (stacked on the first axis); NaN where chance agreement is 1."""
    n = tables.sum(axis=(1, 2))
    observed = np.trace(tables, axis1=1, axis2=2) / n
    chance = np.einsum("gi,gi->g", tables.sum(axis=2), tables.sum(axis=1)) / (n * n)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(chance < 1.0, (observed - chance) / (1.0 - chance), np.nan)


def _kappa_jackknife(units: list[tuple[int, int, int]], kappa: float | None, level: float,
                     unit: str) -> dict[str, Any]:
    """Delete-one-set jackknife interval of ``kappa`` over (set id, judge outcome, expert outcome) units, or the
    reason there is none: the sets, not the units, are the independent draws."""
    sets = sorted({s for s, _, _ in units})
    n, g = len(units), len(sets)
    reason = None
    if not n:
        reason = f"no {unit}"
    elif g < 2:
        reason = f"only {g} comparison set carries {unit}; at least 2 are needed"
    elif n < MIN_COUNT:
        reason = f"only {n} {unit}; at least {MIN_COUNT} are needed"
    elif kappa is None:
        reason = "kappa is undefined: both sides gave a single outcome throughout"
    if reason is not None or kappa is None:
        return {"kappa_interval": None, "kappa_reason": reason}
    index = {s: i for i, s in enumerate(sets)}
    tables = np.zeros((g, 3, 3))
    for s, x, y in units:
        tables[index[s], x + 1, y + 1] += 1
    left_out = _table_kappas(tables.sum(axis=0) - tables)
    if np.isnan(left_out).any():
        s = sets[int(np.flatnonzero(np.isnan(left_out))[0])]
        return {"kappa_interval": None, "kappa_reason": f"kappa is undefined without comparison set {s}: the other "
                                                        "sets give both sides a single outcome throughout"}
    se = float(np.sqrt((g - 1) / g * np.sum((left_out - left_out.mean()) ** 2)))
    z = NormalDist().inv_cdf(0.5 + level / 2)
    return {"kappa_interval": {"lower": max(-1.0, kappa - z * se), "upper": min(1.0, kappa + z * se), "se": se,
                               "n_sets": g},
            "kappa_reason": None}


def _agreement(units: list[tuple[int, int, int]], level: float, unit: str) -> dict[str, Any]:
    """Exact agreement over three outcomes, its kappa with the jackknife interval over sets, and the agreement
    where both sides were strict; ``units`` are (set id, one side's outcome, the other's)."""
    pairs = [(x, y) for _, x, y in units]
    agree = sum(1 for x, y in pairs if x == y)
    strict = [(x, y) for x, y in pairs if x and y]
    kappa = _kappa(pairs)
    out = share_summary(agree, len(pairs), level, unit,
                        extra={"kappa": kappa, **_kappa_jackknife(units, kappa, level, unit)})
    out["strict"] = share_summary(sum(1 for x, y in strict if x == y), len(strict), level,
                           f"{unit} where both preferred one deliverable")
    return out


def _versus_experts(judged: list[JudgeRanking], experts: dict[int, list[dict[tuple[int, int], int]]],
                    level: float) -> dict[str, Any]:
    units: list[tuple[int, int, int]] = []
    for ranking in judged:
        mine = pair_outcomes(ranking.shown, ranking.ranks)
        for theirs in experts.get(ranking.set_id, []):
            units.extend((ranking.set_id, outcome, theirs[pair]) for pair, outcome in mine.items() if pair in theirs)
    return _agreement(units, level, "judge-expert pair verdicts")


def _consistency(judged: list[JudgeRanking], level: float) -> dict[str, Any]:
    by_set: dict[tuple[str, int], dict[str, dict[tuple[int, int], int]]] = {}
    for ranking in judged:
        by_set.setdefault((ranking.judge, ranking.set_id), {})[ranking.order] = pair_outcomes(ranking.shown,
                                                                                              ranking.ranks)
    same = n = 0
    for orders in by_set.values():
        if len(orders) < 2:
            continue
        first, second = orders[ORDERS[0]], orders[ORDERS[1]]
        for pair, outcome in first.items():
            if pair in second:
                n += 1
                same += int(outcome == second[pair])
    return share_summary(same, n, level, "pairs ranked in both orders")


def _position(judged: list[JudgeRanking], level: float) -> dict[str, Any]:
    earlier_wins = decided = ties = 0
    for ranking in judged:
        for rank_i, rank_j in combinations(ranking.ranks, 2):  # the first of the two was shown earlier
            if rank_i == rank_j:
                ties += 1
                continue
            decided += 1
            earlier_wins += int(rank_i < rank_j)
    return share_summary(earlier_wins, decided, level, "strict pair verdicts", shift=0.5, extra={"ties": ties})


def _judge_row(label: str, judged: list[JudgeRanking], experts: dict[int, list[dict[tuple[int, int], int]]],
               level: float) -> dict[str, Any]:
    return {"judge": label, "n_sets": len({r.set_id for r in judged}), "n_rankings": len(judged),
            "expert_agreement": _versus_experts(judged, experts, level),
            "order_consistency": _consistency(judged, level), "position_bias": _position(judged, level)}


def _experts_with_each_other(experts: dict[int, list[dict[tuple[int, int], int]]], level: float) -> dict[str, Any]:
    units: list[tuple[int, int, int]] = []
    for set_id, rankings in experts.items():
        for left, right in combinations(rankings, 2):
            units.extend((set_id, outcome, right[pair]) for pair, outcome in left.items() if pair in right)
    return _agreement(units, level, "expert-expert pair verdicts")


def _checked(judged: Iterable[JudgeRanking], labels: list[str]) -> list[JudgeRanking]:
    kept = [r for r in judged if r.judge in labels]
    for r in kept:
        if r.order not in ORDERS or len(r.shown) != len(r.ranks) or len(r.shown) < 2:
            raise ValueError(f"not a judge ranking: {r!r}")
    return kept


def judge_preference_summary(judged: Iterable[JudgeRanking], experts: Iterable[ExpertRanking],
                             judges: Iterable[str], level: float = 0.95) -> dict[str, Any]:
    """Per judge (in ``judges``' order; rankings of other judges are left out) and pooled: JSON-ready.

    Without any succeeded judge ranking the result has no rows and says why.
    """
    labels = list(dict.fromkeys(judges))
    kept = _checked(judged, labels)
    by_set: dict[int, list[dict[tuple[int, int], int]]] = {}
    for e in experts:
        by_set.setdefault(e.set_id, []).append(pair_outcomes(e.items, e.ranks))
    base = {"level": level, "min_count": MIN_COUNT, "n_expert_rankings": sum(len(v) for v in by_set.values()),
            "experts_with_each_other": _experts_with_each_other(by_set, level)}
    if not kept:
        return base | {"rows": [], "reason": "no judge ranking of a comparison set has succeeded yet"}
    rows = [_judge_row(label, [r for r in kept if r.judge == label], by_set, level) for label in labels]
    rows.append(_judge_row(OVERALL, kept, by_set, level))
    return base | {"rows": rows, "reason": None}
