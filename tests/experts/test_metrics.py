"""UpBench metrics against hand-computed values (no database)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from experts.metrics import (
    AttemptOutcome,
    Coverage,
    cohen_kappa,
    combine_expert_scores,
    completion,
    evaluated_share,
    gold_agreement,
    gold_drift,
    pass_at_k,
    pass_at_k_suite,
    pearson_r,
    reattempt_summary,
    rubric_coverage,
    rubric_score,
)


def test_rubric_score_is_upbenchs_passed_over_total_with_a_skip_counted_as_not_passed():
    # UpBench Table 2: R_{j,k} = #criteria passed / #criteria total. 3 pass, 1 fail, 2 skip -> 3 / 6.
    assert rubric_score(["pass", "fail", "skip", "pass", "skip", "pass"]) == 0.5
    assert rubric_score(["pass"] * 4 + ["fail"]) == pytest.approx(0.8)  # no skip: 4 / 5
    assert rubric_score(["skip", "skip"]) == 0.0
    assert rubric_score([]) is None


def test_the_stored_grade_score_is_the_share_of_evaluated_criteria_that_passed():
    # 3 pass, 1 fail, 2 skip -> 3 / 4: a criterion the grader could not judge neither helps nor hurts.
    assert evaluated_share(["pass", "fail", "skip", "pass", "skip", "pass"]) == 0.75
    assert evaluated_share(["pass"] * 4 + ["fail"]) == rubric_score(["pass"] * 4 + ["fail"])  # equal without skips
    assert evaluated_share(["skip", "skip"]) is None
    assert evaluated_share([]) is None
    with pytest.raises(ValueError, match="verdict"):
        evaluated_share(["pass", "maybe"])


def test_rubric_score_rejects_unknown_verdicts():
    with pytest.raises(ValueError, match="verdict"):
        rubric_score(["pass", "maybe"])


def test_completion_needs_every_critical_and_important_criterion_to_pass():
    assert completion([("critical", "pass"), ("important", "pass"), ("optional", "fail")]) is True
    assert completion([("critical", "pass"), ("important", "fail")]) is False
    assert completion([("critical", "fail"), ("important", "pass")]) is False


def test_completion_fails_when_a_pitfall_is_hit_and_passes_when_avoided():
    assert completion([("critical", "pass"), ("pitfall", "fail")]) is False
    assert completion([("critical", "pass"), ("pitfall", "pass")]) is True
    assert completion([("critical", "pass"), ("pitfall", "skip")]) is True


def test_completion_treats_a_skipped_critical_criterion_as_not_shown_to_pass():
    assert completion([("critical", "skip"), ("important", "pass")]) is False


def test_completion_counts_unlabelled_criteria_as_important():
    assert completion([("", "fail"), ("critical", "pass")]) is False


def _jobs():
    """10 jobs: 4 pass first time; of 6 failures, 5 are re-attempted and 2 of those pass."""
    jobs = {}
    first_scores = [0.9, 1.0, 0.8, 0.95, 0.5, 0.4, 0.6, 0.2, 0.3, 0.7]
    for j, r in enumerate(first_scores):
        jobs[j] = {1: AttemptOutcome(passed=j < 4, rubric_score=r)}
    second = {4: (True, 0.9), 5: (False, 0.5), 6: (True, 0.8), 7: (False, 0.2), 8: (False, 0.6)}
    for j, (passed, r) in second.items():
        jobs[j][2] = AttemptOutcome(passed=passed, rubric_score=r)
    return jobs  # job 9 failed and was never re-attempted


def test_reattempt_summary_matches_hand_computed_success_lifts():
    s = reattempt_summary(_jobs())
    assert (s.n, s.a, s.f, s.m, s.b) == (10, 4, 6, 5, 2)
    assert s.p1 == pytest.approx(0.4)
    assert s.p_overall == pytest.approx(0.6)
    assert s.abs_lift == pytest.approx(0.2)       # B / N
    assert s.rel_lift == pytest.approx(0.5)       # B / A = p_overall / p1 - 1
    assert s.rescue_rate == pytest.approx(0.4)    # B / M
    assert s.rel_lift == pytest.approx(s.p_overall / s.p1 - 1)


def test_reattempt_summary_matches_hand_computed_rubric_lifts():
    s = reattempt_summary(_jobs())
    r1 = (0.9 + 1.0 + 0.8 + 0.95 + 0.5 + 0.4 + 0.6 + 0.2 + 0.3 + 0.7) / 10          # 6.35 / 10
    r_final = (0.9 + 1.0 + 0.8 + 0.95 + 0.9 + 0.5 + 0.8 + 0.2 + 0.6 + 0.7) / 10     # 7.35 / 10
    assert s.r1_mean == pytest.approx(r1)
    assert s.r_overall_mean == pytest.approx(r_final)
    assert s.r_abs_lift == pytest.approx(0.1)
    r1_m = (0.5 + 0.4 + 0.6 + 0.2 + 0.3) / 5   # 0.4
    r2_m = (0.9 + 0.5 + 0.8 + 0.2 + 0.6) / 5   # 0.6
    assert s.r1_given_m == pytest.approx(r1_m)
    assert s.r2_given_m == pytest.approx(r2_m)
    assert s.r_rel_lift_given_m == pytest.approx(0.5)


def test_reattempt_summary_leaves_undefined_ratios_empty():
    s = reattempt_summary({1: {1: AttemptOutcome(False, 0.0)}})
    assert (s.n, s.a, s.m) == (1, 0, 0)
    assert s.p1 == 0.0 and s.rel_lift is None and s.rescue_rate is None and s.r_rel_lift_given_m is None


def test_reattempt_summary_ignores_attempts_beyond_the_budget_and_jobs_without_a_first_attempt():
    jobs = {1: {1: AttemptOutcome(False, 0.2), 3: AttemptOutcome(True, 1.0)}, 2: {2: AttemptOutcome(True, 1.0)}}
    s = reattempt_summary(jobs, max_attempt=2)
    assert (s.n, s.m, s.b) == (1, 0, 0)
    s3 = reattempt_summary(jobs, max_attempt=3)
    assert (s3.n, s3.m, s3.b) == (1, 1, 1)
    assert s3.r_overall_mean == pytest.approx(1.0)


def _pass_at_k_combinatorial(n: int, c: int, k: int) -> Fraction:
    if n - c < k:
        return Fraction(1)
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def test_pass_at_k_hand_worked_from_upbench_eq_2_and_3():
    # Eq. 2: task with n = 3 attempts, c = 1 success, k = 2: 1 - C(2,2)/C(3,2) = 1 - 1/3.
    assert pass_at_k(3, 1, 2) == pytest.approx(2 / 3)
    # Eq. 3 averages over tasks; Eq. 5 scales by p_max: tasks (3, 1) and (2, 0) at k = 1 -> (1/3 + 0) / 2.
    assert pass_at_k_suite([(3, 1), (2, 0)], 1) == pytest.approx(1 / 6)
    assert pass_at_k_suite([(3, 1), (2, 0)], 1, p_max=0.9) == pytest.approx(0.9 / 6)


def test_pass_at_k_hand_computed_example():
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(10, 0, 3) == 0.0
    assert pass_at_k(4, 3, 2) == 1.0  # n - c < k


@pytest.mark.parametrize("n", range(1, 16))
def test_pass_at_k_equals_the_combinatorial_definition_for_every_small_case(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(_pass_at_k_combinatorial(n, c, k)), abs=1e-12)


def test_pass_at_k_stays_exact_where_binomials_overflow_floats():
    n, c, k = 2000, 37, 400
    exact = float(_pass_at_k_combinatorial(n, c, k))
    assert math.comb(n, k) > 10**308  # a float ratio of binomials would overflow here
    assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-12)


def test_pass_at_k_at_k_1_is_the_success_share():
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (3, 4, 1), (3, -1, 1), (3, 1, 0), (3.0, 1, 1)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_pass_at_k_suite_averages_tasks_with_enough_attempts_and_applies_the_ceiling():
    counts = [(5, 2), (4, 0), (1, 1)]  # the last task has fewer than k=2 attempts and is left out
    expected = (0.7 + 0.0) / 2
    assert pass_at_k_suite(counts, 2) == pytest.approx(expected)
    assert pass_at_k_suite(counts, 2, p_max=0.57) == pytest.approx(0.57 * expected)
    assert pass_at_k_suite([(1, 1)], 2) is None


def test_pearson_r_hand_computed():
    # dx = -2..2, dy = (-2, 0, 1, 0, 1): sxy = 6, sxx = 10, syy = 6
    assert pearson_r([1, 2, 3, 4, 5], [2, 4, 5, 4, 5]) == pytest.approx(6 / math.sqrt(60))
    assert pearson_r([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)


def test_pearson_r_is_undefined_without_variance_or_pairs():
    assert pearson_r([1, 1, 1], [1, 2, 3]) is None
    assert pearson_r([1], [2]) is None


def test_cohen_kappa_textbook_example():
    # 50 items: both pass 20, A pass/B fail 5, A fail/B pass 10, both fail 15.
    a = ["pass"] * 20 + ["pass"] * 5 + ["fail"] * 10 + ["fail"] * 15
    b = ["pass"] * 20 + ["fail"] * 5 + ["pass"] * 10 + ["fail"] * 15
    # p_o = 35/50 = 0.7; p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = 0.2 / 0.5
    assert cohen_kappa(a, b) == pytest.approx(0.4)


def test_cohen_kappa_is_one_for_perfect_agreement_and_negative_below_chance():
    assert cohen_kappa(["pass", "fail", "pass"], ["pass", "fail", "pass"]) == pytest.approx(1.0)
    assert cohen_kappa(["pass", "fail"], ["fail", "pass"]) == pytest.approx(-1.0)


def test_cohen_kappa_is_undefined_when_both_raters_used_one_label():
    assert cohen_kappa(["pass", "pass"], ["pass", "pass"]) is None
    assert cohen_kappa([], []) is None


def test_gold_agreement_counts_skips_apart_from_disagreements():
    result = gold_agreement({"C1": "pass", "C2": "fail", "C3": "skip", "C9": "pass"},
                            {"C1": "pass", "C2": "pass", "C3": "fail", "C4": "pass"})
    assert (result.agreed, result.compared, result.skipped) == (1, 2, 2)
    assert result.share == 0.5


def test_gold_drift_compares_recent_agreement_with_earlier():
    assert gold_drift([1.0, 1.0, 0.5, 0.5], window=2) == pytest.approx(-0.5)
    assert gold_drift([1.0, 0.5], window=2) is None


def test_rubric_coverage_recall_and_precision():
    # Expert criteria E1..E4; auto criteria A1..A5. E1->A1, E2->A1+A2, E3 nothing, E4 -> A9 (not in the auto set).
    cov = rubric_coverage({"E1": {"A1"}, "E2": {"A1", "A2"}, "E3": set(), "E4": {"A9"}},
                          {"A1", "A2", "A3", "A4", "A5"})
    assert cov.recall == pytest.approx(2 / 4)
    assert cov.precision == pytest.approx(2 / 5)


def test_coverage_pools_counts_across_rubrics():
    pooled = Coverage(4, 5, 2, 2) + Coverage(6, 5, 6, 5)
    assert pooled.recall == pytest.approx(8 / 10)
    assert pooled.precision == pytest.approx(7 / 10)


def test_expert_score_uses_the_adjudication_when_there_is_one():
    grades = [("primary", 1, 80.0), ("second", 1, 40.0), ("adjudication", 1, 70.0), ("gold", 1, 0.0)]
    assert combine_expert_scores(grades) == 70.0
    assert combine_expert_scores(grades[:2]) == 60.0


def test_expert_score_follows_the_latest_attempt_and_ignores_gold_and_unscored_grades():
    grades = [("primary", 1, 20.0), ("primary", 2, 90.0), ("second", 2, None), ("gold", 3, 10.0)]
    assert combine_expert_scores(grades) == 90.0
    assert combine_expert_scores([("gold", 1, 50.0)]) is None
