"""Taking surveys: the default instrument, answer coding the statistics rely on, validation, autosave."""

from __future__ import annotations

import pytest

from studies import models as m
from studies.exceptions import StepNotAvailable, SurveyAnswerInvalid, SurveyIncomplete
from surveys.models import Answer, Instrument, Question, SurveyResponse
from surveys.selectors import default_instrument, instrument_for, question_text, questions_for, survey_items
from surveys.services import answer_code, answers_save, instrument_install_default, response_submit
from tests.factories.scenarios import make_participant, make_world

pytestmark = pytest.mark.django_db
PRE_ANSWERS = {"D1": "regular", "D2": "weekly", "D3": "6", "A1": "5", "A2": "3", "A3": "2", "A4": "H3", "A5": "H4",
               "A6": "6", "A7": "Curious"}


@pytest.fixture
def instrument():
    return instrument_install_default()


def _q(instrument, code):
    return instrument.questions.get(code=code)


def test_the_data_migration_installs_the_default_instrument_with_the_agreed_codes():
    instrument = default_instrument()
    assert instrument is not None and (instrument.slug, instrument.version) == ("collabskill-attitudes", 1)
    codes = list(instrument.questions.order_by("order").values_list("code", flat=True))
    assert codes == ["D1", "D2", "D3", "A1", "A2", "A3", "A4", "A5", "A6", "A7"]
    assert instrument.post_prefix.startswith("After collaborating with agents on these tasks")
    assert instrument_install_default() == instrument, "installing again changes nothing"


def test_demographics_are_pre_only_and_attitudes_are_asked_twice(instrument):
    pre = [q.code for q in questions_for(instrument, "pre")]
    post = [q.code for q in questions_for(instrument, "post")]
    assert pre == ["D1", "D2", "D3", "A1", "A2", "A3", "A4", "A5", "A6", "A7"]
    assert post == ["A1", "A2", "A3", "A4", "A5", "A6", "A7"]


def test_item_kinds_and_labelled_anchors_follow_the_design(instrument):
    assert len(_q(instrument, "D1").options["choices"]) == 4
    assert len(_q(instrument, "D2").options["choices"]) == 5
    assert _q(instrument, "D3").kind == Question.Kind.NUMBER
    for code in ("A1", "A2", "A3", "A6"):
        q = _q(instrument, code)
        assert q.kind == Question.Kind.LIKERT and (q.options["min"], q.options["max"]) == (1, 7)
        assert q.options["min_label"] and q.options["max_label"]
    for code in ("A4", "A5"):
        levels = _q(instrument, code).options["levels"]
        assert [lv["value"] for lv in levels] == ["H1", "H2", "H3", "H4", "H5"]
    assert [c["value"] for c in _q(instrument, "A7").options["choices"]] == [
        "Excited", "Curious", "Neutral", "Skeptical", "Anxious"]


def test_answers_are_coded_for_the_statistics(instrument):
    assert answer_code(_q(instrument, "A2"), "6") == ("6", 6.0)
    assert answer_code(_q(instrument, "A4"), "H1") == ("H1", 1.0)
    assert answer_code(_q(instrument, "A5"), "H5") == ("H5", 5.0)
    assert answer_code(_q(instrument, "D1"), "regular") == ("regular", 4.0)
    assert answer_code(_q(instrument, "D1"), "never") == ("never", 1.0)
    assert answer_code(_q(instrument, "D2"), "daily") == ("daily", 5.0)
    assert answer_code(_q(instrument, "D2"), "never_heard") == ("never_heard", 1.0)
    assert answer_code(_q(instrument, "D3"), "2,5") == ("2.5", 2.5)
    assert answer_code(_q(instrument, "A7"), "Anxious") == ("Anxious", None)


def test_choice_codes_rise_with_familiarity_and_use(instrument):
    for code in ("D1", "D2"):
        codes = [c["code"] for c in _q(instrument, code).options["choices"]]
        assert codes == sorted(codes, reverse=True), "listed from most to least, coded high to low"


@pytest.mark.parametrize("code, raw", [("A1", "0"), ("A1", "8"), ("A1", "x"), ("A4", "H6"), ("D1", "sometimes"),
                                        ("D3", "-1"), ("D3", "200"), ("D3", "many"), ("D3", "nan"), ("A7", "Happy")])
def test_answers_outside_the_question_are_refused(instrument, code, raw):
    with pytest.raises(SurveyAnswerInvalid):
        answer_code(_q(instrument, code), raw)


def test_post_items_carry_the_post_framing_and_d3_names_the_occupation(instrument):
    a2 = _q(instrument, "A2")
    assert question_text(a2, "post", prefix=instrument.post_prefix, occupation="").startswith(
        "After collaborating with agents on these tasks")
    assert not question_text(a2, "pre", prefix=instrument.post_prefix, occupation="").startswith("After")
    d3 = _q(instrument, "D3")
    assert "(Nurses)" in question_text(d3, "pre", prefix="", occupation="Nurses")
    bare = Question(code="X", kind="likert", text="Do you like agents?")
    expected = "After the tasks… Do you like agents?"
    assert question_text(bare, "post", prefix="After the tasks…", occupation="") == expected


def test_autosave_keeps_saved_answers_when_a_new_value_is_bad(instrument):
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.PRE_SURVEY)
    assert answers_save(participant=participant, phase="pre", raw={"A2": "5"}) == {}
    errors = answers_save(participant=participant, phase="pre", raw={"A2": "99", "A3": "4"})
    assert set(errors) == {"A2"}
    saved = dict(Answer.objects.values_list("question__code", "numeric"))
    assert saved == {"A2": 5.0, "A3": 4.0}
    answers_save(participant=participant, phase="pre", raw={"A3": ""})
    assert dict(Answer.objects.values_list("question__code", "numeric")) == {"A2": 5.0}


def test_submitting_needs_every_required_answer_and_moves_the_participant_on(instrument):
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.PRE_SURVEY)
    partial = {k: v for k, v in PRE_ANSWERS.items() if k not in {"A5", "A6"}}
    with pytest.raises(SurveyIncomplete) as info:
        response_submit(participant=participant, phase="pre", raw=partial)
    assert set(info.value.errors) == {"A5", "A6"}
    assert Answer.objects.count() == 8, "the valid answers were saved"
    response = response_submit(participant=participant, phase="pre", raw=PRE_ANSWERS)
    assert response.submitted_at is not None
    participant.refresh_from_db()
    assert participant.status == m.Participant.Status.WORKING
    with pytest.raises(StepNotAvailable, match="already submitted"):
        answers_save(participant=participant, phase="pre", raw={"A2": "1"})


def test_the_post_survey_opens_only_after_the_tasks_and_uses_the_pre_instrument(instrument):
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.PRE_SURVEY)
    response_submit(participant=participant, phase="pre", raw=PRE_ANSWERS)
    participant.refresh_from_db()
    with pytest.raises(StepNotAvailable, match="after your last task"):
        answers_save(participant=participant, phase="post", raw={"A2": "3"})
    newer = Instrument.objects.create(slug="collabskill-attitudes", version=2, title="v2")
    assert default_instrument() == newer
    participant.status = m.Participant.Status.POST_SURVEY
    participant.save()
    assert instrument_for(participant, "post") == instrument
    post = {k: v for k, v in PRE_ANSWERS.items() if k.startswith("A")}
    response_submit(participant=participant, phase="post", raw=post)
    participant.refresh_from_db()
    assert participant.status == m.Participant.Status.COMPLETE and participant.completed_at is not None
    assert SurveyResponse.objects.get(phase="post").instrument == instrument


def test_a_study_instrument_takes_precedence_over_the_default(instrument):
    world = make_world()
    own = Instrument.objects.create(slug="team-survey", version=1, title="Team survey")
    world.study.survey_instrument = own
    world.study.save()
    participant = make_participant(world, status=m.Participant.Status.PRE_SURVEY)
    assert instrument_for(participant, "pre") == own


def test_items_prefill_d3_from_the_profile_without_saving_it(instrument):
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.PRE_SURVEY, years_experience=11)
    items = survey_items(participant=participant, instrument=instrument, phase="pre", response=None)
    assert {i.question.code: i.value for i in items}["D3"] == "11"
    assert not Answer.objects.exists()
