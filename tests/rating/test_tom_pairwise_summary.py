"""The pairwise ToM summary against counts worked by hand, and its Wilson interval against statsmodels."""

from __future__ import annotations

import math

import pytest
from statsmodels.stats.proportion import proportion_confint

from rating.tom_pairwise_summary import PairAnswer, pairwise_summary, wilson_interval

ABSOLUTE = {1: 0.0, 2: 1.0, 3: 2.0, 4: 3.0, 5: 4.0, 6: 4.0, 7: math.nan}


def _answers() -> list[PairAnswer]:
    one = [  # (a, b, order, shown, winner)
        (1, 2, "ab", "B", "b"), (1, 2, "ba", "A", "b"),      # consistent, both agree with the codes
        (1, 3, "ab", "A", "a"), (1, 3, "ba", "A", "b"),      # inconsistent; ab disagrees, ba agrees
        (2, 4, "ab", "B", "b"), (2, 4, "ba", "A", "b"),      # consistent, both agree
        (3, 5, "ab", "tie", "tie"), (3, 5, "ba", "tie", "tie"),  # consistent ties: no position, no agreement
        (5, 6, "ab", "A", "a"), (5, 6, "ba", "B", "a"),      # consistent; equal absolute codes, left out
        (4, 7, "ab", "A", "a"), (4, 7, "ba", "A", "b"),      # inconsistent; episode 7 not coded, left out
    ]
    two = [(1, 2, "ab", "A", "a"), (2, 3, "ab", "B", "b"), (3, 4, "ab", "A", "a")]  # one order only
    other = [(1, 2, "ab", "A", "a")] * 3  # a judge outside the study's pair: ignored
    return ([PairAnswer(a, b, o, "j1", s, w) for a, b, o, s, w in one]
            + [PairAnswer(a, b, o, "j2", s, w) for a, b, o, s, w in two]
            + [PairAnswer(a, b, o, "j3", s, w) for a, b, o, s, w in other])


def test_the_summary_matches_the_counts_worked_by_hand():
    result = pairwise_summary(_answers(), ABSOLUTE, ["j1", "j2"])
    rows = {r["judge"]: r for r in result["rows"]}
    assert list(rows) == ["j1", "j2", "all judges"] and result["reason"] is None
    j1, j2, pooled = rows["j1"], rows["j2"], rows["all judges"]
    assert (j1["n_pairs"], j1["n_comparisons"]) == (6, 12)
    assert (j1["order_consistency"]["successes"], j1["order_consistency"]["n"]) == (4, 6)
    assert j1["order_consistency"]["share"] == pytest.approx(4 / 6)
    position = j1["position_a"]
    assert (position["successes"], position["n"], position["ties"]) == (7, 10, 2)
    assert position["interval"] == pytest.approx(list(proportion_confint(7, 10, method="wilson")), abs=1e-12)
    agreement = j1["absolute_agreement"]
    assert (agreement["successes"], agreement["n"], agreement["absolute_ties"], agreement["uncoded"]) == (5, 6, 2, 2)
    assert agreement["share"] == pytest.approx(5 / 6)
    # j2 answered three pairs in one order only: every share rests on too few cases and shows no number.
    assert (j2["n_pairs"], j2["n_comparisons"]) == (3, 3)
    assert j2["order_consistency"] == {"successes": 0, "n": 0, "share": None, "interval": None,
                                       "reason": "no pairs compared in both orders"}
    assert j2["position_a"]["share"] is None and j2["position_a"]["successes"] == 2
    assert j2["position_a"]["reason"] == "only 3 answers other than a tie; at least 5 are needed"
    assert (j2["absolute_agreement"]["successes"], j2["absolute_agreement"]["n"]) == (1, 3)
    assert j2["absolute_agreement"]["share"] is None
    # Pooled: pairs counted once across judges, the j3 answers left out.
    assert (pooled["n_pairs"], pooled["n_comparisons"]) == (8, 15)
    assert (pooled["order_consistency"]["successes"], pooled["order_consistency"]["n"]) == (4, 6)
    assert (pooled["position_a"]["successes"], pooled["position_a"]["n"]) == (9, 13)
    assert (pooled["absolute_agreement"]["successes"], pooled["absolute_agreement"]["n"]) == (6, 9)
    assert pooled["absolute_agreement"]["share"] == pytest.approx(6 / 9)


def test_no_answers_give_the_reason_and_no_rows():
    result = pairwise_summary([PairAnswer(1, 2, "ab", "other", "A", "a")], ABSOLUTE, ["j1", "j2"])
    assert result["rows"] == [] and "no pairwise comparison" in result["reason"]


@pytest.mark.parametrize(("k", "n"), [(0, 5), (5, 5), (7, 10), (31, 57), (1, 200)])
def test_the_wilson_interval_equals_statsmodels(k, n):
    assert wilson_interval(k, n) == pytest.approx(proportion_confint(k, n, method="wilson"), abs=1e-12)
    assert wilson_interval(k, n, 0.9) == pytest.approx(proportion_confint(k, n, alpha=0.1, method="wilson"),
                                                       abs=1e-12)


def test_a_malformed_answer_is_refused():
    with pytest.raises(ValueError, match="not a pairwise answer"):
        pairwise_summary([PairAnswer(1, 2, "ab", "j1", "left", "a")], ABSOLUTE, ["j1"])
