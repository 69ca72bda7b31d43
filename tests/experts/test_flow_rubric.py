"""The rubric editor over HTTP: drafts, stale edits, refused submissions, linting, staff approval."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from grading.models import Rubric
from grading.selectors import rubric_for_grading
from tests.factories import SectorFactory, TaskFactory, UserFactory
from tests.factories.experts import make_expert
from tests.factories.grading import FIVE, make_rubric

pytestmark = pytest.mark.django_db


@pytest.fixture
def expert():
    return make_expert(sectors=[SectorFactory()])


@pytest.fixture
def task(expert):
    return TaskFactory(sector=expert.sectors.get())


def editor_post(rows, *, lock_version, action="save", notes=""):
    data = {"criteria-TOTAL_FORMS": str(len(rows)), "criteria-INITIAL_FORMS": str(len(rows)),
            "criteria-MIN_NUM_FORMS": "0", "criteria-MAX_NUM_FORMS": "40", "lock_version": str(lock_version),
            "notes": notes, "action": action}
    for i, (category, points, label, text) in enumerate(rows):
        data.update({f"criteria-{i}-description": text, f"criteria-{i}-label": label,
                     f"criteria-{i}-category": category, f"criteria-{i}-points": "" if points is None else str(points),
                     f"criteria-{i}-expected_value": "", f"criteria-{i}-evaluation_method": ""})
    return data


def _start(client, task, **data):
    response = client.post(reverse("expert:rubric_start", args=[task.pk]), data)
    assert response.status_code == 302
    return Rubric.objects.filter(task=task, origin="expert").latest("version")


def test_starting_blank_opens_an_editor_with_five_empty_rows(client, expert, task):
    client.force_login(expert.user)
    draft = _start(client, task)
    page = client.get(reverse("expert:rubric_edit", args=[draft.pk])).content.decode()
    assert page.count("data-row") == 6  # five rows plus the template for new ones
    assert 'name="criteria-TOTAL_FORMS" value="5"' in page


def test_starting_from_the_generated_rubric_prefills_it(client, expert, task):
    auto = make_rubric(task, status=Rubric.Status.DRAFT)
    client.force_login(expert.user)
    draft = _start(client, task, based_on=auto.pk)
    page = client.get(reverse("expert:rubric_edit", args=[draft.pk])).content.decode()
    assert FIVE[0][3] in page and draft.based_on == auto


def test_saving_a_draft_keeps_it_private_and_editable(client, expert, task):
    client.force_login(expert.user)
    draft = _start(client, task)
    response = client.post(reverse("expert:rubric_edit", args=[draft.pk]), editor_post(FIVE[:2], lock_version=0))
    assert response.status_code == 302
    draft.refresh_from_db()
    assert (draft.status, draft.lock_version, draft.criteria.count()) == ("draft", 1, 2)


def test_a_stale_editor_is_refused_and_shows_what_was_typed(client, expert, task):
    client.force_login(expert.user)
    draft = _start(client, task)
    client.post(reverse("expert:rubric_edit", args=[draft.pk]), editor_post(FIVE, lock_version=0))
    typed = [("requirements", None, "important", "Report includes exactly 7 named suppliers")]
    response = client.post(reverse("expert:rubric_edit", args=[draft.pk]), editor_post(typed, lock_version=0))
    assert response.status_code == 409
    page = response.content.decode()
    assert "saved elsewhere" in page and "Report includes exactly 7 named suppliers" in page
    assert 'name="lock_version" value="1"' in page  # saving again now replaces the other copy on purpose
    draft.refresh_from_db()
    assert draft.criteria.count() == 5


def test_submitting_four_criteria_is_refused_with_a_clear_message_and_nothing_lost(client, expert, task):
    client.force_login(expert.user)
    draft = _start(client, task)
    response = client.post(reverse("expert:rubric_edit", args=[draft.pk]),
                           editor_post(FIVE[:4], lock_version=0, action="submit"))
    assert response.status_code == 400
    page = response.content.decode()
    assert "4 criteria: a rubric needs between 5 and 20" in page
    assert FIVE[3][3] in page
    draft.refresh_from_db()
    assert draft.status == "draft" and draft.criteria.count() == 4


def test_a_missing_label_is_pointed_out_on_submission(client, expert, task):
    client.force_login(expert.user)
    draft = _start(client, task)
    rows = [*FIVE[:4], ("technical", 15.0, "", FIVE[4][3])]
    response = client.post(reverse("expert:rubric_edit", args=[draft.pk]),
                           editor_post(rows, lock_version=0, action="submit"))
    assert response.status_code == 400
    assert "Criterion 5: Choose a label" in response.content.decode()


def test_invalid_fields_save_nothing_and_redisplay_the_form(client, expert, task):
    client.force_login(expert.user)
    draft = _start(client, task)
    data = editor_post(FIVE, lock_version=0)
    data["criteria-0-points"] = "lots"
    response = client.post(reverse("expert:rubric_edit", args=[draft.pk]), data)
    assert response.status_code == 400 and FIVE[1][3] in response.content.decode()
    draft.refresh_from_db()
    assert draft.lock_version == 0 and draft.criteria.count() == 0


def test_a_complete_rubric_is_submitted_and_then_read_only(client, expert, task):
    client.force_login(expert.user)
    draft = _start(client, task)
    response = client.post(reverse("expert:rubric_edit", args=[draft.pk]),
                           editor_post(FIVE, lock_version=0, action="submit"))
    assert response.status_code == 302 and response.url == reverse("expert:rubric_detail", args=[draft.pk])
    draft.refresh_from_db()
    assert draft.status == "submitted"
    assert client.get(reverse("expert:rubric_edit", args=[draft.pk])).status_code == 302


def test_the_lint_endpoint_flags_vague_and_timeline_wording(client, expert):
    client.force_login(expert.user)
    body = {"criteria": [{"description": "Work is of professional quality", "label": "critical"},
                         {"description": "Delivered by end of the week", "label": ""}]}
    response = client.post(reverse("expert:rubric_lint"), json.dumps(body), content_type="application/json")
    hints = response.json()["hints"]
    codes = {(h["code"], h["index"]) for h in hints}
    assert {("subjective", 0), ("timeline", 1), ("missing_label", 1), ("too_few", None)} <= codes


def test_the_lint_endpoint_rejects_garbage(client, expert):
    client.force_login(expert.user)
    response = client.post(reverse("expert:rubric_lint"), "not json", content_type="application/json")
    assert response.status_code == 400


def test_staff_approve_a_submitted_rubric_and_grading_uses_it(client, expert, task):
    client.force_login(expert.user)
    draft = _start(client, task)
    client.post(reverse("expert:rubric_edit", args=[draft.pk]), editor_post(FIVE, lock_version=0, action="submit"))
    staff = UserFactory(roles=["staff"])
    client.force_login(staff)
    assert "v1" in client.get(reverse("expert:staff_rubrics")).content.decode()
    response = client.post(reverse("expert:staff_rubric_review", args=[draft.pk]), {"decision": "approve",
                                                                                     "note": "Good."})
    assert response.status_code == 302
    assert rubric_for_grading(task).pk == draft.pk


def test_sending_back_without_a_note_is_refused_with_a_message(client, expert, task):
    client.force_login(expert.user)
    draft = _start(client, task)
    client.post(reverse("expert:rubric_edit", args=[draft.pk]), editor_post(FIVE, lock_version=0, action="submit"))
    client.force_login(UserFactory(roles=["staff"]))
    response = client.post(reverse("expert:staff_rubric_review", args=[draft.pk]), {"decision": "reject", "note": ""})
    assert response.status_code == 200 and "Say what needs to change" in response.content.decode()
    draft.refresh_from_db()
    assert draft.status == "submitted"


ROWS = [("correctness", None, "critical", "Total revenue in cell B12 equals 4,210,000"),
        ("correctness", None, "important", "The variance column shows each month's difference to plan"),
        ("completeness", None, "important", "The workbook has one sheet per region, five in all"),
        ("requirements", None, "critical", "The summary memo names the three largest cost overruns"),
        ("technical", None, "optional", "Every formula references cells rather than typed numbers")]


def test_live_hints_name_every_rule_that_would_refuse_the_submission(client, expert, task):
    client.force_login(expert.user)
    draft = _start(client, task)
    rows = [dict(zip(("category", "points", "label", "description"), row, strict=True)) for row in ROWS]
    rows[4]["category"] = "correctness"  # nothing left in "Technical Quality"
    rows[2]["points"] = "25"  # more than the 20 points of "Deliverable Completeness"
    response = client.post(reverse("expert:rubric_lint"), json.dumps({"criteria": rows + [
        {"description": "", "label": "", "category": "requirements", "points": ""}]}),
        content_type="application/json")
    live = {h["message"] for h in response.json()["hints"] if h["severity"] == "error"}
    refused = client.post(reverse("expert:rubric_edit", args=[draft.pk]), editor_post(
        [(r["category"], r["points"] or None, r["label"], r["description"]) for r in rows], lock_version=0,
        action="submit"))
    assert refused.status_code == 400
    page = refused.content.decode().replace("&ldquo;", "“").replace("&rdquo;", "”")
    assert live and all(message.replace("“", "").replace("”", "") in page.replace("“", "").replace("”", "")
                        for message in live), live
    assert any("Technical Quality" in m for m in live) and any("must add up to 20" in m for m in live)


def test_draft_saved_counts_criteria_not_editor_rows(client, expert, task):
    client.force_login(expert.user)
    draft = _start(client, task)
    data = editor_post(ROWS + [("requirements", None, "", "")], lock_version=0)
    response = client.post(reverse("expert:rubric_edit", args=[draft.pk]), data, follow=True)
    assert "Draft saved (5 criteria)." in response.content.decode()
    one = client.post(reverse("expert:rubric_lint"), json.dumps({"criteria": [
        {"description": "The memo names the three largest overruns", "label": "critical"}]}),
        content_type="application/json")
    assert any(h["message"].startswith("1 criterion: a rubric needs") for h in one.json()["hints"])


def test_an_expert_rubric_names_its_author_once(client, expert, task):
    client.force_login(expert.user)
    draft = _start(client, task)
    page = client.get(reverse("expert:rubric_detail", args=[draft.pk])).content.decode()
    assert f"Written by an expert ({expert.user.get_username()})" in page and "expert by" not in page
