"""UpBench metrics (UpBench §5.2, App. C, App. D.1) and rater-agreement statistics, as pure functions.

No Django, no I/O: selectors gather verdicts and scores, these functions turn them into numbers, and the
tests check every formula against hand-computed values. Verdicts are the strings ``"pass"``, ``"fail"``
and ``"skip"``; labels are ``"critical"``, ``"important"``, ``"optional"`` and ``"pitfall"``.

A pitfall criterion describes a mistake to avoid, and its verdict answers "did the deliverable stay clear
of it?": ``pass`` means the pitfall was avoided, ``fail`` means it was hit. Every verdict therefore reads
"good = pass", which is what lets both scores below be plain shares of passed criteria.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PASS, FAIL, SKIP = "pass", "fail", "skip"
VERDICTS = (PASS, FAIL, SKIP)
CRITICAL, IMPORTANT, OPTIONAL, PITFALL = "critical", "important", "optional", "pitfall"
LABELS = (CRITICAL, IMPORTANT, OPTIONAL, PITFALL)
# Criteria that must pass for completion; an unlabelled criterion (older auto rubrics) counts as important.
REQUIRED_LABELS = (CRITICAL, IMPORTANT, "")

__all__ = [
    "AttemptOutcome", "Coverage", "GoldAgreement", "ReattemptSummary", "combine_expert_scores", "cohen_kappa",
    "completion", "evaluated_share", "gold_agreement", "gold_drift", "pass_at_k", "pass_at_k_suite", "pearson_r",
    "reattempt_summary",
    "rubric_coverage", "rubric_score",
]


def _check_verdict(verdict: str) -> str:
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
    return verdict


def rubric_score(verdicts: Iterable[str]) -> float | None:
    """Return UpBench's rubric score R = criteria passed / criteria total in [0, 1] (Table 2, R_{j,k}).

    A skipped criterion stays in the total: it was not shown to pass. Return ``None`` for a rubric with no
    criteria. The staff metrics page reports this R; the grade's stored score is `evaluated_share`.
    """
    total = passed = 0
    for verdict in verdicts:
        total += 1
        passed += _check_verdict(verdict) == PASS
    return passed / total if total else None


def evaluated_share(verdicts: Iterable[str]) -> float | None:
    """Return passed / evaluated in [0, 1]: the share of the criteria the grader could judge that passed.

    Skipped criteria (cannot be evaluated, App. A.4) are left out of both counts. This is the score an
    expert grade stores and the rating models read, so a grader who cannot judge a criterion neither helps
    nor hurts the agent; it equals UpBench's R only when nothing was skipped. ``None`` when nothing was
    evaluated: a score of 0 would claim every check failed.
    """
    passed = evaluated = 0
    for verdict in verdicts:
        if _check_verdict(verdict) == SKIP:
            continue
        evaluated += 1
        passed += verdict == PASS
    return passed / evaluated if evaluated else None


def completion(graded: Iterable[tuple[str, str]]) -> bool:
    """Return whether a graded deliverable counts as completed (UpBench §5.2.1).

    ``graded`` holds ``(label, verdict)`` pairs. Completed means every critical and important criterion
    passes and no pitfall is hit. Strictly so: a skipped critical or important criterion was not shown to
    pass, so it blocks completion. Unlabelled criteria count as important.
    """
    for label, verdict in graded:
        _check_verdict(verdict)
        if label in REQUIRED_LABELS and verdict != PASS:
            return False
        if label == PITFALL and verdict == FAIL:
            return False
    return True


# --------------------------------------------------------------------------------------------------------
# Re-attempts with human feedback (UpBench Table 2 and App. C)
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttemptOutcome:
    """One graded attempt k of one job: did it complete, and its rubric score R_{j,k} (None if unscored)."""

    passed: bool
    rubric_score: float | None = None


@dataclass(frozen=True)
class ReattemptSummary:
    """UpBench's HITL measures over N jobs (Table 2, App. C); undefined ratios are ``None``.

    ``r_*`` fields are the rubric-score analogues on [0, 1]: mean first-attempt score, mean final score,
    their difference, and the first / re-attempt means over the re-attempted set M with their relative lift.
    """

    n: int
    a: int
    f: int
    m: int
    b: int
    p1: float | None
    p_overall: float | None
    abs_lift: float | None
    rel_lift: float | None
    rescue_rate: float | None
    r1_mean: float | None
    r_overall_mean: float | None
    r_abs_lift: float | None
    r1_given_m: float | None
    r2_given_m: float | None
    r_rel_lift_given_m: float | None


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def reattempt_summary(
    jobs: Mapping[Hashable, Mapping[int, AttemptOutcome]], *, max_attempt: int = 2
) -> ReattemptSummary:
    """Return p₁, p_overall, absolute and relative lift and rescue rate over jobs with a first attempt.

    ``jobs`` maps a job to its graded attempts by k (1 = AI-only/first, 2 = first re-attempt with
    feedback, …). With A first-attempt passes among N jobs, M failed jobs re-attempted (some k in
    2..max_attempt) and B of those passing at a re-attempt:

    p₁ = A/N, p_overall = (A+B)/N, absolute lift = p_overall − p₁ = B/N, relative lift = p_overall/p₁ − 1
    = B/A, rescue rate = B/M. A job's final rubric score is its first-attempt score unless it is in M, in
    which case it is the score of its last re-attempt (the paper's R_{j,2} at ``max_attempt=2``). Jobs with
    no first attempt are ignored; jobs without a rubric score are left out of the rubric means.
    """
    if max_attempt < 2:
        raise ValueError(f"max_attempt must be >= 2, got {max_attempt!r}")
    n = a = m = b = 0
    r1: list[float] = []
    r_final: list[float] = []
    r1_m: list[float] = []
    r2_m: list[float] = []
    for attempts in jobs.values():
        first = attempts.get(1)
        if first is None:
            continue
        n += 1
        later = [attempts[k] for k in sorted(attempts) if 2 <= k <= max_attempt]
        final_score = first.rubric_score
        if first.passed:
            a += 1
        elif later:
            m += 1
            b += any(outcome.passed for outcome in later)
            final_score = later[-1].rubric_score
            if first.rubric_score is not None and final_score is not None:
                r1_m.append(first.rubric_score)
                r2_m.append(final_score)
        if first.rubric_score is not None:
            r1.append(first.rubric_score)
        if final_score is not None:
            r_final.append(final_score)
    p1 = a / n if n else None
    p_overall = (a + b) / n if n else None
    r1_mean, r_overall_mean = _mean(r1), _mean(r_final)
    r1_given_m, r2_given_m = _mean(r1_m), _mean(r2_m)
    return ReattemptSummary(
        n=n, a=a, f=n - a, m=m, b=b,
        p1=p1,
        p_overall=p_overall,
        abs_lift=b / n if n else None,
        rel_lift=b / a if a else None,
        rescue_rate=b / m if m else None,
        r1_mean=r1_mean,
        r_overall_mean=r_overall_mean,
        r_abs_lift=(r_overall_mean - r1_mean) if r1_mean is not None and r_overall_mean is not None else None,
        r1_given_m=r1_given_m,
        r2_given_m=r2_given_m,
        r_rel_lift_given_m=(r2_given_m / r1_given_m - 1) if r1_given_m and r2_given_m is not None else None,
    )


# --------------------------------------------------------------------------------------------------------
# pass@k (UpBench App. D.1, Eq. 2-5)
# --------------------------------------------------------------------------------------------------------


def pass_at_k(n: int, c: int, k: int) -> float:
    """Return the unbiased pass@k estimate for one task with n attempts of which c succeeded.

    .. math:: \\widehat{pass}(k) = 1 - \\binom{n-c}{k} / \\binom{n}{k}
              = 1 - \\prod_{i=n-c+1}^{n} (1 - k/i)

    computed with the product form (UpBench Eq. 4), which never forms the huge binomials; 1 when n − c < k.
    """
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if n < k:
        raise ValueError(f"n must be >= k (the estimator needs at least k attempts), got n={n}, k={k}")
    if not 0 <= c <= n:
        raise ValueError(f"c must be between 0 and n={n}, got {c}")
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


def pass_at_k_suite(counts: Iterable[tuple[int, int]], k: int, *, p_max: float = 1.0) -> float | None:
    """Return p_max × the mean per-task pass@k over tasks with at least k attempts (UpBench Eq. 3, 5).

    ``counts`` holds ``(n_i, c_i)`` per task. Tasks with fewer than k attempts cannot be estimated and
    are left out; ``None`` when no task qualifies. ``p_max = 1`` is the plain estimator of Eq. 3.
    """
    if not 0.0 <= p_max <= 1.0:
        raise ValueError(f"p_max must be between 0 and 1, got {p_max!r}")
    values = [pass_at_k(n, c, k) for n, c in counts if n >= k]
    return p_max * math.fsum(values) / len(values) if values else None


# --------------------------------------------------------------------------------------------------------
# Agreement
# --------------------------------------------------------------------------------------------------------


def pearson_r(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Return Pearson's correlation of paired scores; ``None`` with fewer than 2 pairs or no variance."""
    if len(x) != len(y):
        raise ValueError(f"x and y must pair up, got {len(x)} and {len(y)} values")
    n = len(x)
    if n < 2:
        return None
    mx, my = math.fsum(x) / n, math.fsum(y) / n
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = math.fsum((a - mx) ** 2 for a in x)
    syy = math.fsum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Return Cohen's κ = (p_o − p_e) / (1 − p_e) for two raters' labels of the same items.

    p_o is the share of items both label alike; p_e = Σ_c p_a(c)·p_b(c) is the agreement expected from
    each rater's own label frequencies. ``None`` with no items, or when p_e = 1 (both raters used one
    and the same label throughout, so chance explains everything and κ is 0/0).
    """
    if len(a) != len(b):
        raise ValueError(f"a and b must label the same items, got {len(a)} and {len(b)} labels")
    n = len(a)
    if n == 0:
        return None
    p_o = sum(x == y for x, y in zip(a, b, strict=True)) / n
    counts_a: dict[Hashable, int] = {}
    counts_b: dict[Hashable, int] = {}
    for x, y in zip(a, b, strict=True):
        counts_a[x] = counts_a.get(x, 0) + 1
        counts_b[y] = counts_b.get(y, 0) + 1
    p_e = math.fsum(counts_a[c] * counts_b.get(c, 0) for c in counts_a) / (n * n)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1.0 - p_e)


@dataclass(frozen=True)
class GoldAgreement:
    """How one grade compares with a gold episode's known answers."""

    agreed: int
    compared: int
    skipped: int

    @property
    def share(self) -> float | None:
        return self.agreed / self.compared if self.compared else None


def gold_agreement(verdicts: Mapping[str, str], gold: Mapping[str, str]) -> GoldAgreement:
    """Compare an expert's verdicts (criterion key → verdict) with known answers (key → pass|fail).

    Only keys in the answer key count. A skip or a missing verdict on a known-answer criterion is counted
    as ``skipped``, not as a disagreement: the expert said they could not tell.
    """
    agreed = compared = skipped = 0
    for key, answer in gold.items():
        if answer not in (PASS, FAIL):
            raise ValueError(f"gold answer for {key!r} must be pass or fail, got {answer!r}")
        verdict = verdicts.get(key)
        if verdict in (None, SKIP):
            skipped += 1
            continue
        compared += 1
        agreed += verdict == answer
    return GoldAgreement(agreed=agreed, compared=compared, skipped=skipped)


def gold_drift(shares: Sequence[float], *, window: int = 5) -> float | None:
    """Return mean(last ``window`` gold agreements) − mean(earlier ones), oldest first; ``None`` if too few.

    Negative values mean an expert agrees with known answers less than they used to.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    if len(shares) <= window:
        return None
    recent, earlier = shares[-window:], shares[:-window]
    return math.fsum(recent) / len(recent) - math.fsum(earlier) / len(earlier)


@dataclass(frozen=True)
class Coverage:
    """How well an auto-generated rubric covers an expert's rubric, from the expert's match marks."""

    n_expert: int
    n_auto: int
    expert_covered: int
    auto_used: int

    @property
    def recall(self) -> float | None:
        """Share of the expert's criteria matched by at least one auto criterion."""
        return self.expert_covered / self.n_expert if self.n_expert else None

    @property
    def precision(self) -> float | None:
        """Share of auto criteria that match at least one of the expert's criteria."""
        return self.auto_used / self.n_auto if self.n_auto else None

    def __add__(self, other: Coverage) -> Coverage:
        """Pool counts across rubrics (micro-averaging)."""
        return Coverage(self.n_expert + other.n_expert, self.n_auto + other.n_auto,
                        self.expert_covered + other.expert_covered, self.auto_used + other.auto_used)


def rubric_coverage(matches: Mapping[Any, Collection[Hashable]], auto_ids: Iterable[Hashable]) -> Coverage:
    """Return coverage of an expert rubric by an auto rubric.

    ``matches`` maps each expert criterion to the auto criteria the expert marked as checking the same
    thing; ``auto_ids`` is the auto rubric's full criterion set (marks outside it are ignored). The expert
    rubric is the reference: recall asks how much of it the auto rubric found, precision how much of the
    auto rubric is backed by an expert criterion.
    """
    auto = set(auto_ids)
    used: set[Hashable] = set()
    covered = 0
    for marked in matches.values():
        hits = auto.intersection(marked)
        covered += bool(hits)
        used |= hits
    return Coverage(n_expert=len(matches), n_auto=len(auto), expert_covered=covered, auto_used=len(used))


def combine_expert_scores(grades: Iterable[tuple[str, int, float | None]]) -> float | None:
    """Return an episode's expert score from its submitted grades as ``(role, attempt, score)``.

    Only the latest attempt counts (a re-attempt replaces the deliverable that was graded). Gold checks
    never count. Within that attempt an adjudication decides: the mean of adjudication scores if any,
    else the mean of the primary and second grades. Unscored grades (everything skipped) are ignored.
    """
    rows = [(role, attempt, score) for role, attempt, score in grades if role != "gold" and score is not None]
    if not rows:
        return None
    latest = max(attempt for _, attempt, _ in rows)
    rows = [(role, score) for role, attempt, score in rows if attempt == latest]
    adjudicated = [score for role, score in rows if role == "adjudication"]
    chosen = adjudicated or [score for _, score in rows]
    return math.fsum(chosen) / len(chosen)
