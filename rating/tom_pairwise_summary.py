"""Summary of the pairwise ToM robustness run: is a judge's "which shows more ToM" stable, unbiased by position
and in line with its absolute 0–5 codes?

Three shares, per judge and pooled over judges, each with its counts and a Wilson interval:

* order consistency: of the pairs a judge compared in both orders, those with the same winner both times (a tie
  twice counts as consistent);
* position bias: of the judge's answers that were not ties, the share naming the first-shown prompt "A"
  (0.5 = no bias), unit one comparison (pair × order);
* agreement with the absolute codes: of the decided comparisons (not ties) whose two episodes have different
  mean absolute ToM codes, the share where the winner has the higher one (absolute ties and uncoded episodes
  left out, and counted).

A share resting on fewer than :data:`MIN_COUNT` cases is not identifiable: it carries the reason and no number.
Pure Python and scipy: no Django.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scipy.stats import norm

__all__ = ["MIN_COUNT", "PairAnswer", "pairwise_summary", "wilson_interval"]

MIN_COUNT = 5
OVERALL = "all judges"


@dataclass(frozen=True)
class PairAnswer:
    """One judge's answer on one pair in one order: ``shown`` is "A", "B" or "tie" as answered, ``winner`` "a",
    "b" or "tie" in the pair's own terms (episode_a < episode_b)."""

    episode_a: int
    episode_b: int
    order: str
    judge: str
    shown: str
    winner: str


def wilson_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial share (stays inside [0, 1] and is usable near 0 and 1)."""
    if n < 1:
        raise ValueError("the Wilson interval needs at least one trial")
    z = float(norm.ppf(0.5 + level / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def share_summary(successes: int, n: int, level: float, unit: str, *, shift: float = 0.0,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A share with its Wilson interval (both moved by ``shift``, e.g. -0.5 for a bias); with fewer than
    ``MIN_COUNT`` units the reason instead of a number."""
    out: dict[str, Any] = {"successes": successes, "n": n, **(extra or {})}
    if n < MIN_COUNT:
        out.update(share=None, interval=None,
                   reason=f"only {n} {unit}; at least {MIN_COUNT} are needed" if n else f"no {unit}")
        return out
    low, high = wilson_interval(successes, n, level)
    out.update(share=successes / n - shift, interval=[low - shift, high - shift], reason=None)
    return out


def _consistency(answers: list[PairAnswer], level: float) -> dict[str, Any]:
    winners: dict[tuple[str, int, int], dict[str, str]] = {}
    for x in answers:
        winners.setdefault((x.judge, x.episode_a, x.episode_b), {})[x.order] = x.winner
    both = [w for w in winners.values() if len(w) == 2]
    same = sum(1 for w in both if len(set(w.values())) == 1)
    return share_summary(same, len(both), level, "pairs compared in both orders")


def _position(answers: list[PairAnswer], level: float) -> dict[str, Any]:
    decided = [x for x in answers if x.shown in ("A", "B")]
    first = sum(1 for x in decided if x.shown == "A")
    return share_summary(first, len(decided), level, "answers other than a tie",
                         extra={"ties": sum(1 for x in answers if x.shown == "tie")})


def _agreement(answers: list[PairAnswer], absolute: Mapping[int, float], level: float) -> dict[str, Any]:
    agree = n = absolute_ties = uncoded = 0
    for x in answers:
        if x.winner not in ("a", "b"):
            continue
        a, b = absolute.get(x.episode_a, math.nan), absolute.get(x.episode_b, math.nan)
        if math.isnan(a) or math.isnan(b):
            uncoded += 1
        elif a == b:
            absolute_ties += 1
        else:
            n += 1
            agree += int((x.winner == "a") == (a > b))
    return share_summary(agree, n, level, "decided comparisons of episodes with different absolute codes",
                         extra={"absolute_ties": absolute_ties, "uncoded": uncoded})


def _summary(label: str, answers: list[PairAnswer], absolute: Mapping[int, float], level: float) -> dict[str, Any]:
    return {"judge": label, "n_pairs": len({(x.episode_a, x.episode_b) for x in answers}),
            "n_comparisons": len(answers), "order_consistency": _consistency(answers, level),
            "position_a": _position(answers, level), "absolute_agreement": _agreement(answers, absolute, level)}


def pairwise_summary(answers: Iterable[PairAnswer], absolute: Mapping[int, float], judges: Iterable[str],
                     level: float = 0.95) -> dict[str, Any]:
    """Per judge (in ``judges``' order; answers of other judges are left out) and pooled: JSON-ready.

    ``absolute`` maps an episode id to the mean of its absolute ToM codes (NaN or absent when not coded).
    Without any answer the result has no rows and says why.
    """
    labels = list(dict.fromkeys(judges))
    kept = [x for x in answers if x.judge in labels]
    for x in kept:
        if x.order not in ("ab", "ba") or x.shown not in ("A", "B", "tie") or x.winner not in ("a", "b", "tie"):
            raise ValueError(f"not a pairwise answer: {x!r}")
    if not kept:
        return {"level": level, "rows": [], "min_count": MIN_COUNT,
                "reason": "no pairwise comparison by the study's judges has succeeded yet"}
    rows = [_summary(label, [x for x in kept if x.judge == label], absolute, level) for label in labels]
    rows.append(_summary(OVERALL, kept, absolute, level))
    return {"level": level, "rows": rows, "min_count": MIN_COUNT, "reason": None}
