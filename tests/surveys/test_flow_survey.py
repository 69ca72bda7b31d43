"""HTTP flow of the surveys: page rendering (HAS table, labelled anchors), autosave, reload, submission."""

from __future__ import annotations

import pytest
from django.urls import reverse

from studies import models as m
from surveys.models import Answer
from surveys.services import instrument_install_default
from tests.factories import UserFactory
from tests.factories.scenarios import make_participant, make_world
from tests.surveys.test_taking import PRE_ANSWERS

pytestmark = pytest.mark.django_db
PRE = reverse("worker:survey", args=["pilot", "pre"])
AUTOSAVE = reverse("worker:survey-autosave", args=["pilot", "pre"])


@pytest.fixture
def worker(client):
    instrument_install_default()
    world = make_world()
    participant = make_participant(world, status=m.Participant.Status.PRE_SURVEY)
    client.force_login(participant.user)
    return participant


def _form(answers):
    return {f"q_{code}": value for code, value in answers.items()}


def test_the_pre_survey_shows_every_item_the_has_table_and_labelled_anchors(client, worker):
    html = client.get(PRE).content.decode()
    for code in ("D1", "D2", "D3", "A1", "A2", "A3", "A4", "A5", "A6", "A7"):
        assert f'data-code="{code}"' in html
    assert html.index('id="has-table"') < html.index('data-code="A4"')
    for level in ("H1", "H2", "H3", "H4", "H5"):
        assert f"<th scope=\"row\">{level}</th>" in html
    assert "No trust at all" in html and "Complete trust" in html
    assert "(Accountants and Auditors)" in html, "D3 names the worker's occupation"
    assert 'value="5"' in html, "D3 is prefilled from the profile's years of experience"


def test_autosave_stores_each_answer_and_a_reload_shows_it(client, worker):
    assert client.post(AUTOSAVE, {"code": "A2", "value": "6"}).json()["ok"] is True
    assert client.post(AUTOSAVE, {"code": "A7", "value": "Skeptical"}).json()["ok"] is True
    html = client.get(PRE).content.decode()
    assert 'id="q_A2-6" name="q_A2" value="6" checked' in html
    assert 'value="Skeptical" checked' in html


def test_autosave_refuses_bad_values_and_keeps_the_saved_one(client, worker):
    client.post(AUTOSAVE, {"code": "A2", "value": "6"})
    bad = client.post(AUTOSAVE, {"code": "A2", "value": "12"})
    assert bad.status_code == 400 and "from 1 to 7" in bad.json()["error"]
    unknown = client.post(AUTOSAVE, {"code": "Z9", "value": "1"})
    assert unknown.status_code == 400
    assert Answer.objects.get(question__code="A2").numeric == 6.0


def test_one_autosave_carries_the_answers_given_together_and_refuses_only_the_bad_one(client, worker, settings):
    settings.SURVEY_AUTOSAVE_SECONDS = 2.5
    assert 'data-autosave-ms="2500"' in client.get(PRE).content.decode(), "the page's batching window"
    client.post(AUTOSAVE, {"code": "A3", "value": "2"})
    reply = client.post(AUTOSAVE, {"code": ["A1", "A2", "A3", "A1"], "value": ["3", "6", "12", "4"]})
    body = reply.json()
    assert reply.status_code == 400 and body["ok"] is False
    assert body["saved"] == ["A1", "A2"] and set(body["errors"]) == {"A3"} and "from 1 to 7" in body["error"]
    saved = dict(Answer.objects.filter(response__participant=worker).values_list("question__code", "value"))
    assert saved == {"A1": "4", "A2": "6", "A3": "2"}, "a later pair for the same code wins; the bad one kept the old"
    good = client.post(AUTOSAVE, {"code": ["A4", "A7"], "value": ["H2", "Skeptical"]}).json()
    assert good["ok"] is True and good["saved"] == ["A4", "A7"] and good["errors"] == {}


@pytest.mark.parametrize("data", [
    {"code": ["A1", "A2"], "value": ["3"]},  # pairs do not match up
    {"value": "3"},  # no code
    {"code": ["A1"] * 201, "value": ["3"] * 201},  # more than a page has
    {"code": "A" * 17, "value": "3"},  # code over its length
    {"code": "A1", "value": "x" * 6001},  # value over its length
], ids=["unpaired", "no-code", "too-many", "long-code", "long-value"])
def test_an_autosave_that_cannot_be_read_is_refused_and_saves_nothing(client, worker, data):
    client.post(AUTOSAVE, {"code": "A1", "value": "5"})
    reply = client.post(AUTOSAVE, data)
    assert reply.status_code == 400 and reply.json()["ok"] is False and "could not be read" in reply.json()["error"]
    assert dict(Answer.objects.filter(response__participant=worker).values_list("question__code", "value")) == \
        {"A1": "5"}


def test_submitting_with_missing_answers_shows_them_and_keeps_what_was_typed(client, worker):
    partial = {k: v for k, v in PRE_ANSWERS.items() if k != "A5"}
    partial["D3"] = "lots"
    response = client.post(PRE, {**_form(partial), "action": "submit"})
    html = response.content.decode()
    assert response.status_code == 400
    assert "Please answer this question." in html and "Enter a number" in html
    assert 'value="lots"' in html, "the typed value is shown again for correction"
    assert Answer.objects.filter(question__code="A2").exists()
    worker.refresh_from_db()
    assert worker.status == m.Participant.Status.PRE_SURVEY


def test_save_and_continue_later_keeps_partial_answers(client, worker):
    response = client.post(PRE, {**_form({"A1": "3"}), "action": "save"})
    assert response.status_code == 302
    assert Answer.objects.get(question__code="A1").value == "3"


def test_a_complete_pre_survey_opens_the_first_task_and_cannot_be_resubmitted(client, worker):
    response = client.post(PRE, {**_form(PRE_ANSWERS), "action": "submit"})
    assert response["Location"] == reverse("worker:task", args=["pilot", 1])
    again = client.get(PRE)
    assert again.status_code == 302
    assert client.post(AUTOSAVE, {"code": "A2", "value": "1"}).status_code == 409
    assert Answer.objects.get(question__code="A2").value == "3"


def test_the_post_survey_is_locked_until_the_tasks_are_done_and_framed_after_them(client, worker):
    client.post(PRE, {**_form(PRE_ANSWERS), "action": "submit"})
    post = reverse("worker:survey", args=["pilot", "post"])
    assert client.get(post)["Location"] == reverse("worker:task", args=["pilot", 1])
    m.Participant.objects.filter(pk=worker.pk).update(status=m.Participant.Status.POST_SURVEY)
    html = client.get(post).content.decode()
    assert 'data-code="D1"' not in html and 'data-code="A1"' in html
    assert html.count("After collaborating with agents on these tasks") >= 7
    answers = {k: v for k, v in PRE_ANSWERS.items() if k.startswith("A")}
    done = client.post(post, {**_form(answers), "action": "submit"})
    assert done["Location"] == reverse("worker:complete", args=["pilot"])


def test_another_workers_survey_is_not_reachable(client, worker):
    client.force_login(UserFactory())
    assert client.get(PRE).status_code == 404
    assert client.post(AUTOSAVE, {"code": "A2", "value": "6"}).status_code == 404
    assert client.get(reverse("worker:survey", args=["pilot", "middle"])).status_code == 404


def test_a_page_sent_without_a_radio_answer_keeps_the_one_saved_from_another_tab(client, worker):
    client.post(AUTOSAVE, {"code": "A2", "value": "6"})
    client.post(PRE, {"q_A1": "3", "q_D3": "5", "action": "save"})
    assert Answer.objects.get(question__code="A2").value == "6"
    client.post(PRE, {"q_D3": "", "action": "save"})
    assert not Answer.objects.filter(question__code="D3").exists(), "an emptied text field clears its answer"
