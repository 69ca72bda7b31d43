"""The judges' comparison-mode summary against counts worked by hand, its intervals against statsmodels' Wilson
interval, its kappa against statsmodels' Cohen's kappa and kappa's delete-one-set jackknife interval against one
assembled here from statsmodels' kappa of each leave-one-set-out table, and in simulation against a known kappa."""

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


def _units(judged, experts, judge):
    """(set id, judge verdict, expert verdict) of every judge ranking x expert ranking of a set x pair, worked
    out here from the ranks without the module's pair outcomes."""
    out = []
    for ranking in (r for r in judged if r.judge == judge):
        mine = dict(zip(ranking.shown, ranking.ranks))
        for expert in (e for e in experts if e.set_id == ranking.set_id):
            theirs = dict(zip(expert.items, expert.ranks))
            for a in sorted(mine):
                for b in sorted(mine):
                    if a < b and a in theirs and b in theirs:
                        verdicts = int(np.sign(mine[b] - mine[a])), int(np.sign(theirs[b] - theirs[a]))
                        out.append((ranking.set_id, *verdicts))
    return out


def _jackknife_by_statsmodels(units, kappa, z):
    """Leave each set out, build its 3 x 3 table by hand, take statsmodels' kappa, then the jackknife SE."""
    sets = sorted({s for s, _, _ in units})
    left_out = []
    for s in sets:
        table = np.zeros((3, 3))
        for other, judge, expert in units:
            if other != s:
                table[judge + 1, expert + 1] += 1
        left_out.append(cohens_kappa(table).kappa)
    g = len(sets)
    se = float(np.sqrt((g - 1) / g * sum((k - np.mean(left_out)) ** 2 for k in left_out)))
    return {"lower": max(-1.0, kappa - z * se), "upper": min(1.0, kappa + z * se), "se": se, "n_sets": g}


def _random_rankings(rng, n_sets: int):
    def ranks(n: int) -> tuple[int, ...]:
        return tuple(int(r) for r in rng.integers(1, 4, n))

    judged, experts = [], []
    for set_id in range(n_sets):
        items = tuple(range(10 * set_id, 10 * set_id + int(rng.integers(2, 5))))
        for judge in (J, K):
            for order, shown in (("recorded", items), ("reversed", items[::-1])):
                judged.append(JudgeRanking(set_id, judge, order, shown, ranks(len(items))))
        for expert in range(int(rng.integers(1, 4))):
            experts.append(ExpertRanking(set_id, f"e{expert}", items[::-1], ranks(len(items))))
    return judged, experts


def test_the_kappa_interval_is_the_delete_one_set_jackknife():
    # The hand example: judge J's 14 units in 2 sets; without set 1 the 12 units of set 2, without set 2 the
    # units (+1, +1) and (-1, +1) of set 1, whose kappa is 0.
    agreement = {r["judge"]: r for r in _summary()["rows"]}[J]["expert_agreement"]
    set_two = np.zeros((3, 3))
    for judge, expert in 2 * [(0, 1), (0, 0), (1, 1), (1, -1), (1, 1), (1, -1)]:
        set_two[judge + 1, expert + 1] += 1
    left_out = [cohens_kappa(set_two).kappa, 0.0]
    se = np.sqrt(1 / 2 * sum((k - np.mean(left_out)) ** 2 for k in left_out))
    z = 1.959963984540054
    interval = agreement["kappa_interval"]
    assert interval["se"] == pytest.approx(se, abs=1e-12) and interval["n_sets"] == 2
    assert interval["lower"] == pytest.approx(max(-1.0, agreement["kappa"] - z * se), abs=1e-12)
    assert interval["upper"] == pytest.approx(min(1.0, agreement["kappa"] + z * se), abs=1e-12)
    assert agreement["kappa_reason"] is None
    # Random sets of 2-4 deliverables, two judges, 1-3 experts a set, at the 90 % level; the experts' kappa too.
    judged, experts = _random_rankings(np.random.default_rng(7), 12)
    summary = judge_preference_summary(judged, experts, [J, K], level=0.9)
    z = 1.6448536269514722
    for row in summary["rows"][:2]:
        agreement = row["expert_agreement"]
        units = _units(judged, experts, row["judge"])
        assert agreement["n"] == len(units)
        expected = _jackknife_by_statsmodels(units, agreement["kappa"], z)
        assert agreement["kappa_interval"] == pytest.approx(expected, abs=1e-12)
    by_set: dict[int, list] = {}
    for e in experts:
        by_set.setdefault(e.set_id, []).append(dict(zip(e.items, e.ranks)))
    units = [(s, int(np.sign(right[b] - right[a])), int(np.sign(left[b] - left[a])))
             for s, rankings in by_set.items() for i, right in enumerate(rankings) for left in rankings[i + 1:]
             for a in sorted(right) for b in sorted(right) if a < b]
    each_other = summary["experts_with_each_other"]
    assert each_other["n"] == len(units) and len({s for s, _, _ in units}) >= 2
    assert each_other["kappa_interval"] == pytest.approx(_jackknife_by_statsmodels(units, each_other["kappa"], z),
                                                         abs=1e-12)


# A set's latent verdict (-1, 0, +1), the judge's and each expert's verdict given it: verdicts of one set share
# the latent verdict, so they are dependent within a set and independent across sets.
LATENT = np.array([0.35, 0.3, 0.35])
JUDGE_GIVEN = np.array([[0.7, 0.2, 0.1], [0.25, 0.5, 0.25], [0.1, 0.2, 0.7]])
EXPERT_GIVEN = np.array([[0.8, 0.15, 0.05], [0.2, 0.6, 0.2], [0.05, 0.15, 0.8]])
RANKS = {1: (1, 2), 0: (1, 1), -1: (2, 1)}  # the ranks of the lower and the higher item id for each verdict


def _simulated_study(rng, n_sets: int, n_experts: int) -> tuple[list[JudgeRanking], list[ExpertRanking]]:
    judged, experts = [], []
    for set_id in range(n_sets):
        latent = rng.choice(3, p=LATENT)
        low, high = 2 * set_id, 2 * set_id + 1
        for order in ("recorded", "reversed"):
            ranks = RANKS[int(rng.choice(3, p=JUDGE_GIVEN[latent])) - 1]
            judged.append(JudgeRanking(set_id, J, order, (low, high), ranks) if order == "recorded"
                          else JudgeRanking(set_id, J, order, (high, low), ranks[::-1]))
        for expert in range(n_experts):
            experts.append(ExpertRanking(set_id, f"e{expert}", (low, high),
                                         RANKS[int(rng.choice(3, p=EXPERT_GIVEN[latent])) - 1]))
    return judged, experts


def test_the_kappa_interval_covers_a_known_kappa_in_simulation():
    joint = np.einsum("t,tj,te->je", LATENT, JUDGE_GIVEN, EXPERT_GIVEN)  # one unit's (judge, expert) law
    chance = joint.sum(axis=1) @ joint.sum(axis=0)
    true = (np.trace(joint) - chance) / (1 - chance)
    rng = np.random.default_rng(2026)
    covered, estimates, ses = 0, [], []
    for _ in range(300):
        agreement = judge_preference_summary(*_simulated_study(rng, 40, 3), [J])["rows"][0]["expert_agreement"]
        interval = agreement["kappa_interval"]
        assert interval["n_sets"] == 40 and agreement["n"] == 240
        covered += int(interval["lower"] <= true <= interval["upper"])
        estimates.append(agreement["kappa"])
        ses.append(interval["se"])
    assert 0.92 <= covered / 300 <= 0.97
    assert np.mean(estimates) == pytest.approx(true, abs=0.02)
    # The standard error follows the spread across studies, which the dependence within sets widens.
    assert np.mean(ses) == pytest.approx(np.std(estimates), rel=0.15)


def _ranked(set_id: int, judge_verdict: int, expert_verdict: int) -> tuple[JudgeRanking, ExpertRanking]:
    items = (2 * set_id, 2 * set_id + 1)
    return (JudgeRanking(set_id, J, "recorded", items, RANKS[judge_verdict]),
            ExpertRanking(set_id, "e", items, RANKS[expert_verdict]))


def _kappa_of(pairs: list[tuple[int, int, int]]) -> dict:
    made = [_ranked(s, j, e) for s, j, e in pairs]
    summary = judge_preference_summary([j for j, _ in made], [e for _, e in made], [J])
    return summary["rows"][0]["expert_agreement"]


def test_without_a_kappa_interval_the_reason_is_given():
    # Ranked sets are one pair each here: the set id, the judge's verdict, the expert's.
    def case(units):
        agreement = _kappa_of(units)
        assert agreement["kappa_interval"] is None
        return agreement["kappa"], agreement["kappa_reason"]

    # One set: sets of two deliverables with several expert rankings of the one set.
    judged = [JudgeRanking(0, J, order, shown, (1, 2)) for order, shown in (("recorded", (0, 1)), ("reversed", (1, 0)))]
    experts = [ExpertRanking(0, f"e{i}", (0, 1), RANKS[v]) for i, v in enumerate((1, 1, 0, -1))]
    one_set = judge_preference_summary(judged, experts, [J])["rows"][0]["expert_agreement"]
    assert one_set["n"] == 8 and one_set["kappa"] is not None and one_set["kappa_interval"] is None
    assert one_set["kappa_reason"] == "only 1 comparison set carries judge-expert pair verdicts; at least 2 are needed"
    kappa, reason = case([(0, 1, 1), (1, -1, 1), (2, 0, -1), (3, 1, 1)])
    assert kappa is not None and reason == "only 4 judge-expert pair verdicts; at least 5 are needed"
    kappa, reason = case([(s, 1, 1) for s in range(6)])
    assert kappa is None and reason == "kappa is undefined: both sides gave a single outcome throughout"
    kappa, reason = case([(s, 1, 1) for s in range(5)] + [(5, -1, 0)])
    assert kappa is not None
    assert reason == ("kappa is undefined without comparison set 5: the other sets give both sides a single outcome "
                      "throughout")
    no_experts = judge_preference_summary(judged, [], [J])
    assert no_experts["rows"][0]["expert_agreement"]["kappa_reason"] == "no judge-expert pair verdicts"
    assert no_experts["experts_with_each_other"]["kappa_reason"] == "no expert-expert pair verdicts"
    # The kappa beside an interval keeps its place and value among the keys it had.
    agreement = {r["judge"]: r for r in _summary()["rows"]}[J]["expert_agreement"]
    assert list(agreement) == ["successes", "n", "kappa", "kappa_interval", "kappa_reason", "share", "interval",
                               "reason", "strict"]
