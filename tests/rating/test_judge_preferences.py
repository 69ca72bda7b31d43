"""The judges' comparison-mode summary against counts worked by hand, its intervals against statsmodels' Wilson
interval and its kappa against statsmodels' Cohen's kappa."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.inter_rater import cohens_kappa
from statsmodels.stats.proportion import proportion_confint

from rating.judge_preferences import ExpertRanking, JudgeRanking, judge_preference_summary, pair_outcomes

J, K = "openai/gpt-4.1", "anthropic/claude"
JUDGED = [
    JudgeRanking(1, J, "recorded", (1, 2), (1, 2)),        # (1,2): 1 better; the earlier-shown wins
    JudgeRanking(1, J, "reversed", (2, 1), (1, 2)),        # (1,2): 2 better; the earlier-shown wins again
    JudgeRanking(2, J, "recorded", (3, 4, 5), (1, 1, 3)),  # (3,4) tie, (3,5) 3, (4,5) 4: earlier wins twice
    JudgeRanking(2, J, "reversed", (5, 4, 3), (3, 1, 1)),  # the same verdicts; the later-shown wins twice
    JudgeRanking(1, K, "recorded", (1, 2), (2, 2)),        # a tie
    JudgeRanking(1, "someone/else", "recorded", (1, 2), (1, 2)),  # not one of the judges asked about
]
EXPERTS = [
    ExpertRanking(1, "e1", (2, 1), (2, 1)),          # (1,2): 1 better
    ExpertRanking(2, "e2", (3, 4, 5), (1, 2, 3)),    # 3 > 4 > 5
    ExpertRanking(2, "e3", (5, 3, 4), (1, 2, 2)),    # 5 best, 3 and 4 tied
]


def _summary():
    return judge_preference_summary(JUDGED, EXPERTS, [J, K])


def test_pair_outcomes_say_which_of_each_pair_is_ranked_better():
    assert pair_outcomes((5, 3, 4), (1, 2, 2)) == {(3, 4): 0, (3, 5): -1, (4, 5): -1}
    with pytest.raises(ValueError, match="not a ranking"):
        pair_outcomes((1, 1), (1, 2))


def test_agreement_with_the_experts_equals_the_hand_count():
    rows = {r["judge"]: r for r in _summary()["rows"]}
    assert list(rows) == [J, K, "all judges"]
    agreement = rows[J]["expert_agreement"]
    # Set 1: recorded agrees with e1, reversed does not (1 of 2). Set 2, each order: e2 matches (3,5) and (4,5),
    # e3 matches the (3,4) tie (3 of 6 per order). 7 of 14.
    assert (agreement["successes"], agreement["n"], agreement["share"]) == (7, 14, 0.5)
    assert agreement["interval"] == pytest.approx(list(proportion_confint(7, 14, method="wilson")), abs=1e-12)
    # Both strict: set 1 both units (1 agree), set 2 four units per order (2 agree each).
    assert (agreement["strict"]["successes"], agreement["strict"]["n"]) == (5, 10)
    # Kappa: judge margins (+1: 9, 0: 4, -1: 1), expert margins (+1: 8, 0: 2, -1: 4): chance 84/196.
    assert agreement["kappa"] == pytest.approx((0.5 - 84 / 196) / (1 - 84 / 196), abs=1e-12)
    table = np.zeros((3, 3))
    for judge, expert in [(1, 1), (-1, 1)] + 2 * [(0, 1), (0, 0), (1, 1), (1, -1), (1, 1), (1, -1)]:
        table[judge + 1, expert + 1] += 1
    assert agreement["kappa"] == pytest.approx(cohens_kappa(table).kappa, abs=1e-12)
    assert rows[K]["expert_agreement"]["successes"] == 0 and rows[K]["expert_agreement"]["n"] == 1
    assert rows["all judges"]["expert_agreement"]["successes"] == 7
    assert rows["all judges"]["expert_agreement"]["n"] == 15


def test_order_consistency_and_position_bias_equal_the_hand_count():
    rows = {r["judge"]: r for r in _summary()["rows"]}
    consistency = rows[J]["order_consistency"]
    # (1,2) flips with the order; the three pairs of set 2 keep their verdict (the tie twice counts).
    assert (consistency["successes"], consistency["n"]) == (3, 4)
    assert consistency["share"] is None and "at least 5" in consistency["reason"]
    assert rows[K]["order_consistency"]["reason"] == "no pairs ranked in both orders"
    position = rows[J]["position_bias"]
    assert (position["successes"], position["n"], position["ties"]) == (4, 6, 2)
    assert position["share"] == pytest.approx(4 / 6 - 0.5)
    low, high = proportion_confint(4, 6, method="wilson")
    assert position["interval"] == pytest.approx([low - 0.5, high - 0.5], abs=1e-12)
    assert rows["all judges"]["position_bias"]["ties"] == 3
    assert rows[J]["n_sets"] == 2 and rows[J]["n_rankings"] == 4


def test_the_experts_yardstick_and_the_empty_cases_say_why():
    summary = _summary()
    each_other = summary["experts_with_each_other"]
    assert (each_other["successes"], each_other["n"], each_other["share"]) == (0, 3, None)
    assert summary["n_expert_rankings"] == 3
    empty = judge_preference_summary([], EXPERTS, [J])
    assert empty["rows"] == [] and "no judge ranking" in empty["reason"]
    with pytest.raises(ValueError, match="not a judge ranking"):
        judge_preference_summary([JudgeRanking(1, J, "sideways", (1, 2), (1, 2))], EXPERTS, [J])


def _simulated_judge(rng, n_sets: int, p_first: float) -> list[JudgeRanking]:
    """Two-deliverable sets shown in both orders to a judge who names the first-shown one with ``p_first``."""
    out = []
    for set_id in range(n_sets):
        for order, shown in (("recorded", (2 * set_id, 2 * set_id + 1)), ("reversed", (2 * set_id + 1, 2 * set_id))):
            out.append(JudgeRanking(set_id, J, order, shown, (1, 2) if rng.random() < p_first else (2, 1)))
    return out


def test_the_position_bias_interval_covers_a_known_bias_in_simulation():
    rng = np.random.default_rng(38)
    covered, estimates = 0, []
    for _ in range(300):
        row = judge_preference_summary(_simulated_judge(rng, 60, 0.7), [], [J])["rows"][0]["position_bias"]
        low, high = row["interval"]
        covered += int(low <= 0.2 <= high)
        estimates.append(row["share"])
    assert covered / 300 >= 0.92
    assert np.mean(estimates) == pytest.approx(0.2, abs=0.01)
    # A judge with no position bias but a verdict that flips with the order is consistent only by chance.
    consistent = judge_preference_summary(_simulated_judge(rng, 400, 0.5), [], [J])["rows"][0]["order_consistency"]
    assert consistent["share"] == pytest.approx(0.5, abs=0.06)
