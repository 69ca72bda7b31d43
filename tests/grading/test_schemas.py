"""The rubric, judge and log-coding shapes and the domain checks that feed repair rounds."""

from __future__ import annotations

import pydantic
import pytest

from grading.models import Criterion
from grading.schemas import (
    FLUENCY_CODES,
    RUBRIC_CATEGORIES,
    ComparisonOut,
    CriterionSpec,
    FluencyOut,
    JudgeOut,
    RubricOut,
    category_code,
    category_point_problems,
    comparison_problems,
    judge_problems,
    judge_totals,
    one_line,
    rubric_problems,
)
from tests.grading.responders import fluency_dict, rubric_dict

CRITERIA = [CriterionSpec("C1", "correctness", 40), CriterionSpec("C2", "completeness", 20),
            CriterionSpec("C3", "requirements", 25), CriterionSpec("C4", "technical", 15)]


def verdict(**earned: float) -> JudgeOut:
    return JudgeOut.model_validate({"criteria": [{"key": k, "earned": v, "reason": "seen"} for k, v in earned.items()]})


def test_the_four_categories_carry_the_papers_fixed_points_and_match_the_model_choices():
    assert [(name, points) for _c, name, points in RUBRIC_CATEGORIES] == [
        ("Correctness & Accuracy", 40), ("Deliverable Completeness", 20), ("Task Requirements", 25),
        ("Technical Quality", 15)]
    assert {code for code, _n, _p in RUBRIC_CATEGORIES} == set(Criterion.Category.values)


def test_a_rubric_with_four_categories_adding_up_to_100_has_no_problems():
    assert rubric_problems(RubricOut.model_validate(rubric_dict(per_category=3))) == []


def test_category_names_are_matched_regardless_of_ampersand_and_case():
    assert category_code("correctness and accuracy") == "correctness"
    assert category_code("TECHNICAL QUALITY") == "technical"
    assert category_code("Style") is None


def test_a_missing_category_is_reported_by_name():
    data = rubric_dict()
    data["categories"] = data["categories"][:3]
    problems = rubric_problems(RubricOut.model_validate(data))
    assert any("exactly four" in p for p in problems)


def test_an_unknown_category_is_reported():
    data = rubric_dict()
    data["categories"][3]["name"] = "Style"
    problems = rubric_problems(RubricOut.model_validate(data))
    assert any('"Style" is not one of the four categories' in p for p in problems)


def test_a_category_with_the_wrong_maximum_is_reported():
    data = rubric_dict()
    data["categories"][0]["max_points"] = 50
    assert any("max_points 50" in p for p in rubric_problems(RubricOut.model_validate(data)))


def test_criteria_that_do_not_add_up_to_their_category_are_reported():
    data = rubric_dict()
    data["categories"][1]["criteria"][0]["points"] = 3
    problems = rubric_problems(RubricOut.model_validate(data))
    assert problems == ['the criteria of "Deliverable Completeness" add up to 13 points, but they must add up to '
                        "exactly 20"]


def test_total_points_other_than_100_are_reported():
    problems = rubric_problems(RubricOut.model_validate(rubric_dict(total_points=90)))
    assert any("total_points is 90" in p for p in problems)


def test_zero_point_criteria_fail_validation():
    data = rubric_dict()
    data["categories"][0]["criteria"][0]["points"] = 0
    with pytest.raises(pydantic.ValidationError):
        RubricOut.model_validate(data)


def test_point_problems_check_stored_criteria_too():
    assert category_point_problems({"correctness": [40], "completeness": [20], "requirements": [25],
                                    "technical": [15]}) == []
    assert category_point_problems({"correctness": [40], "completeness": [20], "requirements": [25]}) == [
        'category "Technical Quality" has no criteria; it needs criteria worth 15 points']


def test_a_complete_verdict_within_limits_has_no_problems():
    assert judge_problems(verdict(C1=40, C2=0, C3=12.5, C4=15), CRITERIA) == []


def test_earned_above_the_criterion_maximum_is_rejected_not_clamped():
    assert judge_problems(verdict(C1=41, C2=1, C3=1, C4=1), CRITERIA) == [
        'criterion "C1": earned 41 exceeds its maximum of 40']


def test_unknown_missing_and_repeated_criteria_are_rejected():
    data = {"criteria": [{"key": "C1", "earned": 1, "reason": "x"}, {"key": "C1", "earned": 1, "reason": "x"},
                         {"key": "C9", "earned": 1, "reason": "x"}]}
    problems = judge_problems(JudgeOut.model_validate(data), CRITERIA)
    assert any('"C9" is not in the rubric' in p for p in problems)
    assert any('"C1" is scored more than once' in p for p in problems)
    assert any("no score for criteria: C2, C3, C4" in p for p in problems)


def test_negative_earned_points_fail_validation():
    with pytest.raises(pydantic.ValidationError):
        verdict(C1=-1)


def test_category_and_total_sums_are_recomputed_from_criterion_points():
    totals = judge_totals(verdict(C1=30, C2=10, C3=20.5, C4=5), CRITERIA)
    assert totals.category_totals == {"correctness": 30, "completeness": 10, "requirements": 20.5, "technical": 5}
    assert totals.total == 65.5


def test_log_coding_needs_every_one_of_the_eleven_behaviours():
    assert len(FLUENCY_CODES) == 11
    assert FluencyOut.model_validate(fluency_dict()).iterates_and_refines.observed is True
    partial = fluency_dict()
    partial.pop("checks_facts_and_claims")
    with pytest.raises(pydantic.ValidationError):
        FluencyOut.model_validate(partial)


def test_reasons_are_collapsed_to_one_bounded_line():
    assert one_line("first\n  second\tthird") == "first second third"
    assert len(one_line("x" * 1000, 50)) == 50


def test_a_comparison_ranking_is_checked_strictly_and_never_mended():
    def ranked(*ranks: int) -> ComparisonOut:
        return ComparisonOut.model_validate({"reason": "Memo 1 answers the question.", "ranks": list(ranks)})

    assert comparison_problems(ranked(1, 2, 3), 3) == []
    assert comparison_problems(ranked(2, 1, 1), 3) == []   # ties are allowed
    assert comparison_problems(ranked(1, 3, 3), 3) == []   # competition ranking
    assert comparison_problems(ranked(1, 2), 3) == ["give exactly 3 ranks, one per deliverable in the order shown; "
                                                    "2 were given"]
    assert comparison_problems(ranked(1, 4, 2), 3) == ["rank 4 of deliverable 2 is not between 1 and 3"]
    assert comparison_problems(ranked(2, 2), 2) == ["the best deliverable must have rank 1"]
    with pytest.raises(pydantic.ValidationError):
        ComparisonOut.model_validate({"reason": "", "ranks": [1, 2]})
