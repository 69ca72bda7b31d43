"""surveys.study_statistics.survey_statistics on stored answers, checked against direct scipy calls."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.stats

from rating.models import EntityRating
from studies.models import Participant
from surveys.models import Answer, Question, SurveyResponse
from surveys.selectors import study_answers
from surveys.study_statistics import survey_statistics
from tests.factories.surveys import add_survey, default_instrument


def _direct(study, phase: str, code: str) -> dict[int, float]:
    """Read one item's coded answers straight from the tables, the way a notebook would."""
    rows = Answer.objects.filter(
        response__participant__study=study, response__phase=phase, question__code=code,
        response__submitted_at__isnull=False,
    ).exclude(response__participant__status="withdrawn").values_list("response__participant_id", "numeric")
    return dict(rows)


def _skill(snapshot) -> dict[int, float]:
    return dict(
        EntityRating.objects.filter(snapshot=snapshot, entity_kind="human").values_list("entity_id", "conservative")
    )


@pytest.mark.django_db
def test_paired_rows_match_scipy_wilcoxon_on_the_same_answers(populated):
    result = survey_statistics(populated.study)
    assert [row["item"] for row in result["paired"]] == ["A1", "A2", "A3", "A4", "A5", "A6"]
    for row in result["paired"]:
        pre, post = _direct(populated.study, "pre", row["item"]), _direct(populated.study, "post", row["item"])
        ids = sorted(pre.keys() & post.keys())
        before = np.array([pre[i] for i in ids])
        after = np.array([post[i] for i in ids])
        diff = after - before
        assert row["n"] == len(ids) == len(populated.participants)
        assert row["mean_pre"] == pytest.approx(before.mean())
        assert row["mean_post"] == pytest.approx(after.mean())
        assert row["delta"] == pytest.approx(diff.mean())
        assert row["se"] == pytest.approx(scipy.stats.sem(diff))
        if np.any(diff != 0):
            expected = scipy.stats.wilcoxon(diff, zero_method="wilcox")
            assert row["wilcoxon_w"] == pytest.approx(expected.statistic)
            assert row["p_value"] == pytest.approx(expected.pvalue)
    tested = [row for row in result["paired"] if row["p_value"] is not None]
    assert tested
    # Holm by hand: k-th smallest p times (m - k), running maximum, capped at 1.
    ordered = sorted(tested, key=lambda row: row["p_value"])
    running = 0.0
    for k, row in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - k) * row["p_value"]))
        assert row["p_holm"] == pytest.approx(running)


@pytest.mark.django_db
def test_correlations_with_skill_match_scipy_spearman(populated):
    result = survey_statistics(populated.study)
    skill = _skill(populated.snapshot)
    assert result["snapshot_version"] == populated.snapshot.version
    assert result["n_with_skill"] == len(skill) == len(populated.participants)
    codes = [row["x_label"] for row in result["pre_correlations"]]
    assert codes == ["D1", "D2", "D3", "A1", "A2", "A3", "A4", "A5", "A6"]
    for row in result["pre_correlations"]:
        answers = _direct(populated.study, "pre", row["x_label"])
        ids = sorted(answers.keys() & skill.keys())
        expected = scipy.stats.spearmanr([answers[i] for i in ids], [skill[i] for i in ids])
        assert row["n"] == len(ids)
        assert row["rho"] == pytest.approx(expected.statistic)
        assert row["p_value"] == pytest.approx(expected.pvalue)
        assert row["ci_low"] < row["rho"] < row["ci_high"]
    for row in result["change_correlations"]:
        code = row["x_label"].removesuffix(" change")
        pre, post = _direct(populated.study, "pre", code), _direct(populated.study, "post", code)
        ids = sorted(pre.keys() & post.keys() & skill.keys())
        change = [post[i] - pre[i] for i in ids]
        if np.ptp(change) == 0:
            assert row["rho"] is None
            continue
        expected = scipy.stats.spearmanr(change, [skill[i] for i in ids])
        assert row["rho"] == pytest.approx(expected.statistic)


@pytest.mark.django_db
def test_median_split_matches_scipy_mann_whitney(populated):
    result = survey_statistics(populated.study)
    skill = _skill(populated.snapshot)
    row = next(r for r in result["skill_split"] if r["item"] == "A2")
    pre, post = _direct(populated.study, "pre", "A2"), _direct(populated.study, "post", "A2")
    ids = sorted(pre.keys() & post.keys() & skill.keys())
    median = float(np.median([skill[i] for i in ids]))
    below = [post[i] - pre[i] for i in ids if skill[i] < median]
    above = [post[i] - pre[i] for i in ids if skill[i] >= median]
    expected = scipy.stats.mannwhitneyu(below, above, alternative="two-sided")
    assert row["median_skill"] == pytest.approx(median)
    assert (row["n_below"], row["n_above"]) == (len(below), len(above))
    assert row["u_statistic"] == pytest.approx(expected.statistic)
    assert row["p_value"] == pytest.approx(expected.pvalue)


@pytest.mark.django_db
def test_the_affective_item_is_a_pre_post_count_table(populated):
    result = survey_statistics(populated.study)
    (shift,) = result["categorical"]
    assert shift["item"] == "A7"
    assert shift["categories"] == ["Excited", "Curious", "Neutral", "Skeptical", "Anxious"]
    assert shift["n"] == len(populated.participants)
    pre = Answer.objects.filter(
        response__phase="pre", question__code="A7", response__participant__study=populated.study
    )
    counts = {c: pre.filter(value=c).count() for c in shift["categories"]}
    assert [sum(row) for row in shift["table"]] == [counts[c] for c in shift["categories"]]


@pytest.mark.django_db
def test_the_result_is_plain_json(populated):
    result = survey_statistics(populated.study)
    assert json.loads(json.dumps(result, allow_nan=False)) == result


@pytest.mark.django_db
def test_withdrawn_participants_and_unsubmitted_surveys_are_left_out(populated):
    gone = populated.participants[0]
    Participant.objects.filter(pk=gone.pk).update(status=Participant.Status.WITHDRAWN)
    SurveyResponse.objects.filter(participant=populated.participants[1], phase="post").update(submitted_at=None)
    answers = study_answers(populated.study)
    assert gone.pk not in answers.respondents["pre"]
    assert populated.participants[1].pk not in answers.respondents["post"]
    result = survey_statistics(populated.study)
    a2 = next(r for r in result["paired"] if r["item"] == "A2")
    assert a2["n"] == len(populated.participants) - 2


@pytest.mark.django_db
def test_free_text_answers_never_enter_the_statistics(populated):
    instrument = default_instrument()
    question = Question.objects.create(instrument=instrument, code="T1", order=200, kind="text", phases="both",
                                       text="Anything else?")
    response = SurveyResponse.objects.get(participant=populated.participants[0], phase="pre")
    Answer.objects.create(response=response, question=question, value="my name is Ada", numeric=None)
    result = survey_statistics(populated.study)
    assert "T1" not in json.dumps(result)


@pytest.mark.django_db
def test_without_a_posterior_the_paired_table_is_computed_and_skill_tables_explain_why_not(empty_study):
    from tests.factories import ParticipantFactory

    rng = np.random.default_rng(3)
    for _ in range(5):
        add_survey(ParticipantFactory(study=empty_study, status="complete"), rng)
    result = survey_statistics(empty_study)
    assert result["snapshot_version"] is None and not result["empty"]
    assert all(row["n"] == 5 for row in result["paired"])
    assert all(row["rho"] is None for row in result["pre_correlations"])
    assert any("No posterior snapshot" in note for note in result["notes"])


@pytest.mark.django_db
def test_a_study_without_answers_is_empty(empty_study):
    result = survey_statistics(empty_study)
    assert result["empty"] is True
    assert result["paired"] == [] and result["categorical"] == []


@pytest.mark.django_db
def test_an_answer_outside_the_options_is_counted_as_unrecognised(populated):
    question = Question.objects.get(instrument=default_instrument(), code="A7")
    Answer.objects.filter(question=question, response__participant=populated.participants[0]).update(value="Bored")
    result = survey_statistics(populated.study)
    assert result["categorical"][0]["n"] == len(populated.participants) - 1
    assert any("A7" in note and "match none" in note for note in result["notes"])
