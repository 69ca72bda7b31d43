"""Survey statistics checked against direct scipy calls and small cases worked by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.stats

from surveys.stats import (
    CategoryShift,
    CorrelationResult,
    MannWhitneyResult,
    PairedItemResult,
    category_shift,
    change_by_skill_split,
    correlate_changes_with_skill,
    correlate_items_with_skill,
    has_code,
    holm,
    median_split,
    paired_change,
    paired_differences,
    paired_table,
    skill_split_table,
    spearman_with_ci,
)

LIKERT_ITEMS = ("A1", "A2", "A3", "A6")
HAS_ITEMS = ("A4", "A5")


@pytest.fixture(scope="module")
def cohort() -> dict:
    """Return 40 seeded participants: pre/post answers per item and a skill estimate each.

    Holes mirror real data: p03 skipped A2 before, p07 skipped A2 after, p41 only took the post survey,
    and p40 has no skill estimate.
    """
    rng = np.random.default_rng(20240611)
    pids = [f"p{i:02d}" for i in range(1, 41)]
    skill = dict(zip(pids, rng.normal(0.0, 1.0, size=len(pids)).round(3).tolist(), strict=True))
    pre: dict[str, dict[str, float | None]] = {}
    post: dict[str, dict[str, float | None]] = {}
    for item in LIKERT_ITEMS:
        before = rng.integers(1, 8, size=len(pids))
        after = np.clip(before + rng.integers(-1, 3, size=len(pids)), 1, 7)
        pre[item] = dict(zip(pids, before.astype(float).tolist(), strict=True))
        post[item] = dict(zip(pids, after.astype(float).tolist(), strict=True))
    for item in HAS_ITEMS:
        before = rng.integers(1, 6, size=len(pids))
        after = np.clip(before - rng.integers(0, 2, size=len(pids)), 1, 5)
        pre[item] = {pid: float(has_code(f"H{level}")) for pid, level in zip(pids, before, strict=True)}
        post[item] = {pid: float(has_code(f"H{level}")) for pid, level in zip(pids, after, strict=True)}
    pre["A2"]["p03"] = None
    post["A2"]["p07"] = float("nan")
    post["A2"]["p41"] = 5.0
    del skill["p40"]
    return {"pids": pids, "skill": skill, "pre": pre, "post": post}


def _aligned(pre: dict, post: dict) -> tuple[np.ndarray, np.ndarray]:
    """Pair answers by hand, independently of the module, for reference scipy calls."""
    keys = [
        k
        for k in pre
        if k in post and pre[k] is not None and post[k] is not None and not math.isnan(pre[k])
        if not math.isnan(post[k])
    ]
    return np.array([pre[k] for k in keys]), np.array([post[k] for k in keys])


# ------------------------------------------------------------------------------------- paired change


def test_paired_change_matches_direct_scipy_wilcoxon_on_the_cohort(cohort):
    for item in LIKERT_ITEMS + HAS_ITEMS:
        before, after = _aligned(cohort["pre"][item], cohort["post"][item])
        diff = after - before
        expected = scipy.stats.wilcoxon(diff, zero_method="wilcox", method="auto")

        result = paired_change(cohort["pre"][item], cohort["post"][item], item)

        assert result.n == diff.size
        assert result.wilcoxon_w == pytest.approx(expected.statistic)
        assert result.p_value == pytest.approx(expected.pvalue)
        assert result.delta == pytest.approx(diff.mean())
        assert result.mean_pre == pytest.approx(before.mean())
        assert result.mean_post == pytest.approx(after.mean())
        assert result.se == pytest.approx(scipy.stats.sem(diff))
        assert result.se_pre == pytest.approx(scipy.stats.sem(before))
        assert result.se_post == pytest.approx(scipy.stats.sem(after))
        assert result.n_zero == int(np.sum(diff == 0))


def test_paired_change_effect_size_is_the_matched_pairs_rank_biserial(cohort):
    before, after = _aligned(cohort["pre"]["A3"], cohort["post"]["A3"])
    diff = after - before
    nonzero = diff[diff != 0]
    ranks = scipy.stats.rankdata(np.abs(nonzero))
    w_plus, w_minus = ranks[nonzero > 0].sum(), ranks[nonzero < 0].sum()

    result = paired_change(cohort["pre"]["A3"], cohort["post"]["A3"], "A3")

    assert result.effect_size == pytest.approx((w_plus - w_minus) / (w_plus + w_minus))
    assert result.wilcoxon_w == pytest.approx(min(w_plus, w_minus))


def test_paired_change_reproduces_a_five_pair_case_worked_by_hand():
    # pre  = 3 4 2 5 4   post = 5 5 2 4 7   ->   d = +2 +1 0 -1 +3
    # Δ = (2 + 1 + 0 - 1 + 3) / 5 = 1.0
    # SE: deviations 1 0 -1 -2 2, squares sum 10, var = 10/4 = 2.5, SE = sqrt(2.5 / 5) = sqrt(0.5)
    # Wilcoxon drops the zero; |d| = 2 1 1 3 ranks 3 1.5 1.5 4
    # W+ = 3 + 1.5 + 4 = 8.5, W- = 1.5, W = min = 1.5, r = (8.5 - 1.5) / 10 = 0.7
    # p: the zero and the tie send scipy to the exact sign-flip permutation. Rank subsets of
    # {1.5, 1.5, 3, 4} summing to >= 8.5 are 3 of 16, so p = 2 * 3/16 = 0.375.
    pre = {"a": 3, "b": 4, "c": 2, "d": 5, "e": 4}
    post = {"a": 5, "b": 5, "c": 2, "d": 4, "e": 7}

    result = paired_change(pre, post, "A2")

    assert result.n == 5
    assert result.delta == pytest.approx(1.0)
    assert result.se == pytest.approx(math.sqrt(0.5))
    assert result.mean_pre == pytest.approx(3.6)
    assert result.mean_post == pytest.approx(4.6)
    assert result.wilcoxon_w == pytest.approx(1.5)
    assert result.effect_size == pytest.approx(0.7)
    assert result.p_value == pytest.approx(0.375)
    assert result.n_zero == 1
    assert result.zero_method == "wilcox"
    assert "dropped 1 zero difference" in result.note
    assert "permutation" in result.note


@pytest.mark.parametrize(
    ("diff", "method", "word"),
    [
        (np.array([1.0, -2.0, 3.0, 4.5, 5.0, 6.0]), "exact", "exact null distribution"),
        (np.array([1.0, 1.0, 2.0, -3.0, 0.0, 4.0]), scipy.stats.PermutationMethod(), "permutation"),
        (np.arange(-4.0, 9.0), scipy.stats.PermutationMethod(), "permutation"),  # 13 pairs, one zero
        (np.arange(-4.0, 10.0), "asymptotic", "normal approximation"),  # 14 pairs, one zero
        (np.tile([1.0, 2.0, -1.0, 0.0, 3.0], 4), "asymptotic", "normal approximation"),
        (np.arange(1.0, 61.0) - 20.5, "asymptotic", "normal approximation"),
    ],
)
def test_wilcoxon_note_names_the_method_whose_p_value_is_reported(diff, method, word):
    pre = dict.fromkeys(range(diff.size), 0.0)
    post = {i: float(d) for i, d in enumerate(diff)}

    result = paired_change(pre, post, "A1")

    expected = scipy.stats.wilcoxon(diff, zero_method="wilcox", method=method)
    assert result.p_value == pytest.approx(expected.pvalue)
    assert word in result.note


@pytest.mark.parametrize(
    ("diff", "method", "named"),
    [
        (np.array([1.0, -2.0, 3.0, 4.5, 5.0, 6.0]), "exact", "method='exact'"),
        (np.array([1.0, 1.0, 2.0, -3.0, 0.0, 4.0]), scipy.stats.PermutationMethod(), "method=PermutationMethod()"),
        (np.arange(-4.0, 10.0), "asymptotic", "method='asymptotic'"),
        (np.arange(1.0, 61.0) - 20.5, "asymptotic", "method='asymptotic'"),
    ],
)
def test_wilcoxon_note_names_the_method_argument_passed_to_scipy(diff, method, named):
    result = paired_change(dict.fromkeys(range(diff.size), 0.0), {i: float(d) for i, d in enumerate(diff)}, "A1")

    assert named in result.note
    assert "method='auto'" not in result.note
    assert result.p_value == scipy.stats.wilcoxon(diff, zero_method="wilcox", method=method).pvalue


def test_wilcoxon_normal_approximation_is_described_without_a_continuity_correction():
    diff = np.arange(1.0, 61.0) - 20.5  # more than 50 pairs: the normal approximation
    result = paired_change(dict.fromkeys(range(diff.size), 0.0), {i: float(d) for i, d in enumerate(diff)}, "A1")

    # scipy's wilcoxon defaults to correction=False, so a note claiming a continuity correction is wrong.
    uncorrected = scipy.stats.wilcoxon(diff, zero_method="wilcox", method="asymptotic", correction=False)
    corrected = scipy.stats.wilcoxon(diff, zero_method="wilcox", method="asymptotic", correction=True)
    assert result.p_value == uncorrected.pvalue != corrected.pvalue
    assert "no continuity correction" in result.note


@pytest.mark.parametrize(
    ("below", "above", "method"),
    [
        ([1.0, 2.0, 3.0], [4.0, 5.0, 6.5, 7.0], "exact"),
        ([1.0, 2.0, 2.0], [4.0, 5.0, 6.5, 7.0], "asymptotic"),
        (list(np.arange(9.0)), list(np.arange(9.0) + 0.5), "asymptotic"),
    ],
)
def test_mann_whitney_note_names_the_method_argument_passed_to_scipy(below, above, method):
    skill = {f"b{i}": 0.0 for i in range(len(below))} | {f"a{i}": 1.0 for i in range(len(above))}
    pre = dict.fromkeys(skill, 0.0)
    post = {f"b{i}": v for i, v in enumerate(below)} | {f"a{i}": v for i, v in enumerate(above)}

    result = change_by_skill_split(pre, post, skill, "A2")

    assert f"method='{method}'" in result.note and "method='auto'" not in result.note
    expected = scipy.stats.mannwhitneyu(below, above, alternative="two-sided", method=method)
    assert result.p_value == pytest.approx(expected.pvalue)


def test_paired_change_drops_unpaired_and_missing_answers():
    pre = {"a": 1, "b": 2, "c": None, "d": 4, "only_pre": 5, "e": 6}
    post = {"a": 2, "b": 4, "c": 3, "d": float("nan"), "only_post": 7, "e": 5}

    result = paired_change(pre, post, "A1")

    assert result.n == 3  # a, b, e
    assert result.delta == pytest.approx((1 + 2 - 1) / 3)
    assert result.mean_pre == pytest.approx((1 + 2 + 6) / 3)
    assert paired_differences(pre, post) == {"a": 1.0, "b": 2.0, "e": -1.0}


@pytest.mark.parametrize(("pre", "post"), [({}, {}), ({"a": 3}, {"a": 5}), ({"a": 3, "b": 2}, {"a": 4})])
def test_fewer_than_two_pairs_returns_a_note_instead_of_raising(pre, post):
    result = paired_change(pre, post, "A2")

    assert result.wilcoxon_w is None
    assert result.p_value is None
    assert result.effect_size is None
    assert result.se is None
    assert "at least 2" in result.note
    assert result.n == len(set(pre) & set(post))


def test_all_zero_differences_return_a_note_instead_of_raising():
    result = paired_change({"a": 4, "b": 2, "c": 7}, {"a": 4, "b": 2, "c": 7}, "A6")

    assert (result.n, result.n_zero, result.delta, result.se) == (3, 3, 0.0, 0.0)
    assert result.wilcoxon_w is None
    assert result.p_value is None
    assert result.effect_size is None
    assert "all 3 differences are zero" in result.note


def test_paired_change_rejects_uncoded_has_labels_with_a_hint():
    with pytest.raises(ValueError, match="has_code"):
        paired_change({"a": "H3", "b": "H2"}, {"a": "H2", "b": "H1"}, "A4")


def test_paired_table_holm_flag_adjusts_across_the_items(cohort):
    items = list(LIKERT_ITEMS + HAS_ITEMS)

    plain = paired_table(cohort["pre"], cohort["post"], items)
    corrected = paired_table(cohort["pre"], cohort["post"], items, holm_correction=True)

    assert [r.item for r in corrected] == items
    assert all(r.p_holm is None for r in plain)
    assert [r.p_holm for r in corrected] == pytest.approx(holm([r.p_value for r in plain]))
    assert [r.p_value for r in corrected] == [r.p_value for r in plain]


def test_paired_table_defaults_to_items_in_both_surveys_and_reports_missing_ones():
    pre = {"A1": {"a": 1, "b": 2}, "A2": {"a": 1}, "D1": {"a": 3}}
    post = {"A1": {"a": 2, "b": 4}, "A2": {"a": 3}}

    assert [r.item for r in paired_table(pre, post)] == ["A1", "A2"]
    assert paired_table(pre, post, ["A9"])[0].n == 0


# ----------------------------------------------------------------------------------------------- Holm


def test_holm_matches_a_hand_computed_family():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> raised to 0.06 (monotone)
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_passes_none_through_and_excludes_it_from_the_family_size():
    assert holm([None, 0.02, None, 0.04]) == pytest.approx([None, 0.04, None, 0.04])
    assert holm([]) == []
    assert holm([None]) == [None]


def test_holm_caps_at_one_and_keeps_the_input_order_monotone_in_p():
    p = [0.5, 0.3, 0.9, 0.001, 0.3]
    adjusted = holm(p)

    assert max(adjusted) == 1.0
    assert adjusted[3] == pytest.approx(0.005)
    ordered = [adjusted[i] for i in np.argsort(p, kind="stable")]
    assert ordered == sorted(ordered)
    assert all(a >= raw for a, raw in zip(adjusted, p, strict=True))


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_holm_rejects_values_that_are_not_probabilities(bad):
    with pytest.raises(ValueError, match=r"p_values\[1\]"):
        holm([0.1, bad])


# ------------------------------------------------------------------------------------------ Spearman


def test_spearman_matches_scipy_and_the_bonett_wright_fisher_interval(cohort):
    answers, skill = cohort["pre"]["A1"], cohort["skill"]
    keys = [k for k in answers if k in skill]
    x = np.array([answers[k] for k in keys])
    y = np.array([skill[k] for k in keys])
    expected = scipy.stats.spearmanr(x, y)

    result = spearman_with_ci(answers, skill, ("A1", "collabskill"))

    n = len(keys)
    se = math.sqrt((1 + expected.statistic**2 / 2) / (n - 3))
    z = math.atanh(expected.statistic)
    assert result.n == n == 39
    assert result.rho == pytest.approx(expected.statistic)
    assert result.p_value == pytest.approx(expected.pvalue)
    assert result.ci_low == pytest.approx(math.tanh(z - 1.959963984540054 * se))
    assert result.ci_high == pytest.approx(math.tanh(z + 1.959963984540054 * se))
    assert result.ci_low < result.rho < result.ci_high
    assert "Bonett-Wright" in result.note


def test_a_higher_confidence_widens_the_interval(cohort):
    narrow = spearman_with_ci(cohort["pre"]["A3"], cohort["skill"], confidence=0.80)
    wide = spearman_with_ci(cohort["pre"]["A3"], cohort["skill"], confidence=0.99)

    assert wide.ci_low < narrow.ci_low < narrow.rho < narrow.ci_high < wide.ci_high


def test_spearman_pairs_arrays_by_position_and_drops_nan():
    x = [1.0, 2.0, float("nan"), 4.0, 5.0, 6.0]
    y = [2.0, 1.0, 3.0, 5.0, float("nan"), 4.0]

    result = spearman_with_ci(x, y)

    expected = scipy.stats.spearmanr([1, 2, 4, 6], [2, 1, 5, 4])
    assert result.n == 4
    assert result.rho == pytest.approx(expected.statistic)


def test_spearman_with_fewer_than_four_pairs_returns_nulls_and_a_note():
    result = spearman_with_ci({"a": 1, "b": 2, "c": 3, "d": None}, {"a": 1, "b": 3, "c": 2, "d": 4})

    assert result.n == 3
    assert (result.rho, result.p_value, result.ci_low, result.ci_high) == (None, None, None, None)
    assert "at least 4" in result.note


def test_spearman_with_a_constant_variable_returns_nulls_and_a_note():
    result = spearman_with_ci([4, 4, 4, 4, 4], [0.1, 0.5, 0.2, 0.9, 0.3], labels=("A2", "collabskill"))

    assert result.rho is None
    assert result.p_value is None
    assert "A2 is constant" in result.note


def test_spearman_rejects_a_bad_confidence_and_mixed_inputs():
    with pytest.raises(ValueError, match="confidence"):
        spearman_with_ci([1, 2, 3, 4], [1, 2, 3, 4], confidence=95)
    with pytest.raises(ValueError, match="both be mappings"):
        spearman_with_ci({"a": 1}, [1])
    with pytest.raises(ValueError, match="equal length"):
        spearman_with_ci([1, 2, 3, 4], [1, 2, 3])


def test_item_correlations_use_each_pre_item_against_skill_with_optional_holm(cohort):
    results = correlate_items_with_skill(cohort["pre"], cohort["skill"], holm_correction=True)

    assert [r.x_label for r in results] == list(cohort["pre"])
    assert {r.y_label for r in results} == {"collabskill"}
    for result in results:
        direct = spearman_with_ci(cohort["pre"][result.x_label], cohort["skill"])
        assert result.rho == pytest.approx(direct.rho)
        assert result.ci_low == pytest.approx(direct.ci_low)
    assert [r.p_holm for r in results] == pytest.approx(holm([r.p_value for r in results]))


def test_change_correlations_use_post_minus_pre_against_skill(cohort):
    results = correlate_changes_with_skill(cohort["pre"], cohort["post"], cohort["skill"], items=["A2", "A4"])

    assert [r.x_label for r in results] == ["A2 change", "A4 change"]
    for result, item in zip(results, ["A2", "A4"], strict=True):
        pre, post = cohort["pre"][item], cohort["post"][item]
        keys = [
            k
            for k in cohort["pids"]
            if k in cohort["skill"] and pre[k] is not None and not math.isnan(post[k])
        ]
        change = [post[k] - pre[k] for k in keys]
        expected = scipy.stats.spearmanr(change, [cohort["skill"][k] for k in keys])
        assert result.n == len(keys)
        assert result.rho == pytest.approx(expected.statistic)
        assert result.p_value == pytest.approx(expected.pvalue)
        assert result.p_holm is None


# ----------------------------------------------------------------------------------- median split


def test_median_split_puts_ties_with_the_median_in_the_upper_half():
    odd = median_split({"a": 1.0, "b": 5.0, "c": 3.0, "d": 2.0, "e": 4.0})
    even = median_split({"a": 1.0, "b": 4.0, "c": 3.0, "d": 2.0, "missing": None})
    tied = median_split({"a": 1.0, "b": 2.0, "c": 2.0, "d": 2.0})

    assert odd == (3.0, ("a", "d"), ("b", "c", "e"))
    assert even == (2.5, ("a", "d"), ("b", "c"))
    assert tied == (2.0, ("a",), ("b", "c", "d"))


def test_skill_split_reproduces_a_case_worked_by_hand():
    # Changes 0 1 | 2 3 4 for skills 1 2 | 3 4 5 (median 3 goes up). No lower-half change beats an
    # upper-half one, so U_below = 0, r = 2*0/(2*3) - 1 = -1, and without ties the exact two-sided
    # p = 2 * 1 / C(5, 2) = 0.2.
    pre = dict.fromkeys("abcde", 3)
    post = {"a": 3, "b": 4, "c": 5, "d": 6, "e": 7}
    skill = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0}

    result = change_by_skill_split(pre, post, skill, "A2")

    assert (result.median_skill, result.n_below, result.n_above) == (3.0, 2, 3)
    assert result.mean_change_below == pytest.approx(0.5)
    assert result.mean_change_above == pytest.approx(3.0)
    assert result.u_statistic == 0.0
    assert result.effect_size == pytest.approx(-1.0)
    assert result.p_value == pytest.approx(0.2)
    assert "exact" in result.note


def test_skill_split_matches_direct_mannwhitneyu_on_the_cohort(cohort):
    pre, post, skill = cohort["pre"]["A2"], cohort["post"]["A2"], cohort["skill"]
    keys = [k for k in cohort["pids"] if k in skill and pre[k] is not None and not math.isnan(post[k])]
    median = float(np.median([skill[k] for k in keys]))
    below = [post[k] - pre[k] for k in keys if skill[k] < median]
    above = [post[k] - pre[k] for k in keys if skill[k] >= median]
    expected = scipy.stats.mannwhitneyu(below, above, alternative="two-sided")

    result = change_by_skill_split(pre, post, skill, "A2")

    assert result.median_skill == pytest.approx(median)
    assert (result.n_below, result.n_above) == (len(below), len(above)) == (18, 19)
    assert result.mean_change_below == pytest.approx(np.mean(below))
    assert result.mean_change_above == pytest.approx(np.mean(above))
    assert result.u_statistic == pytest.approx(expected.statistic)
    assert result.p_value == pytest.approx(expected.pvalue)
    assert result.effect_size == pytest.approx(2 * expected.statistic / (len(below) * len(above)) - 1)


def test_skill_split_with_an_empty_lower_half_returns_a_note():
    result = change_by_skill_split({"a": 1, "b": 2}, {"a": 3, "b": 2}, {"a": 0.5, "b": 0.5}, "A2")

    assert (result.n_below, result.n_above) == (0, 2)
    assert result.u_statistic is None
    assert result.p_value is None
    assert "lower half is empty" in result.note

    nobody = change_by_skill_split({"a": 1}, {"a": 3}, {"z": 0.5}, "A2")
    assert nobody.median_skill is None
    assert "no participant" in nobody.note


def test_skill_split_table_holm_flag_adjusts_across_the_items(cohort):
    results = skill_split_table(cohort["pre"], cohort["post"], cohort["skill"], holm_correction=True)

    assert len(results) == len(cohort["pre"])
    assert [r.p_holm for r in results] == pytest.approx(holm([r.p_value for r in results]))


# ------------------------------------------------------------------------------------------ coding


@pytest.mark.parametrize(("label", "code"), [("H1", 1), ("H3", 3), ("H5", 5), (3, 3), (np.int64(2), 2)])
def test_has_code_maps_h1_to_1_through_h5_to_5(label, code):
    assert has_code(label) == code


@pytest.mark.parametrize("label", ["H0", "H6", "3", "Partnership", 0, 6, 3.0, True, None])
def test_has_code_rejects_anything_else(label):
    with pytest.raises(ValueError, match="H1..H5"):
        has_code(label)


def test_category_shift_counts_pre_by_post_and_net_proportion_change():
    pre = {"a": "Curious", "b": "Skeptical", "c": "Anxious", "d": "Curious", "e": "Neutral", "f": None}
    post = {"a": "Excited", "b": "Curious", "c": "Anxious", "d": "Curious", "e": None, "f": "Curious"}

    result = category_shift(pre, post)

    assert result.categories == ("Excited", "Curious", "Neutral", "Skeptical", "Anxious")
    assert result.n == 4
    assert result.table == (
        (0, 0, 0, 0, 0),
        (1, 1, 0, 0, 0),  # Curious -> Excited (a), Curious -> Curious (d)
        (0, 0, 0, 0, 0),
        (0, 1, 0, 0, 0),  # Skeptical -> Curious (b)
        (0, 0, 0, 0, 1),  # Anxious -> Anxious (c)
    )
    assert result.n_unchanged == 2
    assert result.pre_proportion == {
        "Excited": 0,
        "Curious": 0.5,
        "Neutral": 0,
        "Skeptical": 0.25,
        "Anxious": 0.25,
    }
    assert result.post_proportion == {
        "Excited": 0.25,
        "Curious": 0.5,
        "Neutral": 0,
        "Skeptical": 0,
        "Anxious": 0.25,
    }
    assert result.proportion_change == pytest.approx(
        {"Excited": 0.25, "Curious": 0.0, "Neutral": 0.0, "Skeptical": -0.25, "Anxious": 0.0}
    )


def test_category_shift_rejects_an_unknown_category_and_handles_no_pairs():
    with pytest.raises(ValueError, match="'Bored'"):
        category_shift({"a": "Bored"}, {"a": "Curious"})

    empty = category_shift({"a": "Curious"}, {"b": "Curious"})
    assert empty.n == 0
    assert set(empty.proportion_change.values()) == {None}


# ----------------------------------------------------------------------------------- serialisation


def test_every_result_survives_a_strict_json_round_trip(cohort):
    results = [
        *paired_table(cohort["pre"], cohort["post"], holm_correction=True),
        paired_change({"a": 1}, {"a": 2}, "A1"),
        *correlate_items_with_skill(cohort["pre"], cohort["skill"], holm_correction=True),
        spearman_with_ci([1, 1, 1, 1], [1, 2, 3, 4]),
        *skill_split_table(cohort["pre"], cohort["post"], cohort["skill"]),
        category_shift({"a": "Curious", "b": "Anxious"}, {"a": "Excited", "b": "Anxious"}),
    ]
    types = {
        "PairedItemResult": PairedItemResult,
        "CorrelationResult": CorrelationResult,
        "MannWhitneyResult": MannWhitneyResult,
        "CategoryShift": CategoryShift,
    }

    for result in results:
        text = json.dumps(result.to_dict(), allow_nan=False)
        restored = types[type(result).__name__].from_dict(json.loads(text))
        assert restored == result
