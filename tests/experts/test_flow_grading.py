"""The grading page over HTTP: preview, autosave, refused submissions that keep answers, downloads."""

from __future__ import annotations

import json

import pytest
from celery import current_app
from django.urls import reverse

from experts.models import ExpertAssignment, ExpertGrade
from tests.factories import SectorFactory, StudyFactory, TaskFactory
from tests.factories.episodes import EpisodeFileFactory
from tests.factories.experts import make_expert
from tests.factories.grading import make_rubric
from tests.factories.scenarios import make_episode

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.setattr(current_app, "send_task", lambda *a, **k: None)


@pytest.fixture
def ctx(client):
    sector = SectorFactory()
    task = TaskFactory(sector=sector)
    rubric = make_rubric(task)
    episode = make_episode(task=task, study=StudyFactory())
    delivered = EpisodeFileFactory(episode=episode, csv=True)
    expert = make_expert(sectors=[sector])
    assignment = ExpertAssignment.objects.create(episode=episode, expert=expert)
    client.force_login(expert.user)
    return {"episode": episode, "assignment": assignment, "criteria": list(rubric.criteria.order_by("order")),
            "file": delivered, "url": reverse("expert:grade", args=[assignment.pk]),
            "autosave": reverse("expert:grade_autosave", args=[assignment.pk])}


def post_data(criteria, verdicts, feedback=None, overall="revise", action="submit"):
    data = {"overall": overall, "feedback": "Overall fine.", "action": action, "visible_seconds": "12"}
    for i, (c, v) in enumerate(zip(criteria, verdicts, strict=True)):
        data[f"verdict_{c.pk}"] = v
        data[f"feedback_{c.pk}"] = (feedback or {}).get(i, "")
    return data


def test_the_grade_page_shows_criteria_and_the_extracted_deliverable(client, ctx):
    page = client.get(ctx["url"]).content.decode()
    assert all(c.description in page for c in ctx["criteria"])
    assert "| month | revenue |" in page
    assert reverse("expert:grade_file", args=[ctx["assignment"].pk, ctx["file"].pk]) in page
    assert "Pass (avoided)" in page  # pitfall wording


def test_autosave_stores_a_draft_and_reports_time(client, ctx):
    client.get(ctx["url"])
    c1 = ctx["criteria"][0]
    body = {"verdicts": {str(c1.pk): {"verdict": "fail", "feedback": "Total is 1,200,000."}}, "overall": "revise",
            "feedback": "", "visible_seconds": 0}
    response = client.post(ctx["autosave"], json.dumps(body), content_type="application/json")
    assert response.status_code == 200 and response.json()["ok"]
    row = ExpertGrade.objects.get(assignment=ctx["assignment"]).criterion_grades.get()
    assert (row.criterion_id, row.verdict, row.feedback) == (c1.pk, "fail", "Total is 1,200,000.")


@pytest.mark.parametrize("body", ["not json", json.dumps({"verdicts": []}), json.dumps({"verdicts": {"x": {}}}),
                                  json.dumps({"verdicts": {"1": {"verdict": "maybe"}}})])
def test_autosave_rejects_malformed_payloads(client, ctx, body):
    client.get(ctx["url"])
    assert client.post(ctx["autosave"], body, content_type="application/json").status_code == 400


def test_autosave_before_opening_and_after_submitting_is_refused(client, ctx):
    assert client.post(ctx["autosave"], "{}", content_type="application/json").status_code == 409
    client.post(ctx["url"], post_data(ctx["criteria"], ["pass"] * 5, overall="accept"))
    response = client.post(ctx["autosave"], "{}", content_type="application/json")
    assert response.status_code == 409 and "already submitted" in response.json()["error"]


def test_a_fail_without_feedback_is_refused_and_every_answer_survives(client, ctx):
    client.get(ctx["url"])
    data = post_data(ctx["criteria"], ["pass", "fail", "skip", "fail", "pass"],
                     feedback={1: "March row missing.", 2: "Cannot open the chart."})
    response = client.post(ctx["url"], data)
    assert response.status_code == 400
    page = response.content.decode()
    assert page.count("C4: say what is wrong. Feedback is required on a fail.") == 1  # beside its answer only
    assert "the grade cannot be submitted yet: 1 answer below needs attention (marked in red)." in page
    assert "cannot be submitted yet:<" not in page and "cannot be submitted yet: <" not in page
    assert "March row missing." in page and "Cannot open the chart." in page
    grade = ExpertGrade.objects.get(assignment=ctx["assignment"])
    assert grade.status == "draft"
    assert sorted(grade.criterion_grades.values_list("verdict", flat=True)) == ["fail", "fail", "pass", "pass",
                                                                                  "skip"]


def test_a_complete_grade_is_submitted_and_the_page_becomes_the_reveal(client, ctx):
    client.get(ctx["url"])
    data = post_data(ctx["criteria"], ["pass", "fail", "pass", "pass", "pass"], feedback={1: "Row 3 is empty."})
    response = client.post(ctx["url"], data)
    assert response.status_code == 302
    grade = ExpertGrade.objects.get(assignment=ctx["assignment"])
    assert (grade.status, grade.score, grade.overall) == ("submitted", 80.0, "revise")
    page = client.get(ctx["url"]).content.decode()
    assert "Now revealed" in page and ctx["episode"].agent.name in page
    assert "not completed" in page  # C2 is important and failed


def test_deliverables_download_as_attachments(client, ctx):
    response = client.get(reverse("expert:grade_file", args=[ctx["assignment"].pk, ctx["file"].pk]))
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert b"".join(response.streaming_content) == b"month,revenue\nJan,100\n"


def test_a_task_without_a_rubric_shows_a_waiting_page(client):
    sector = SectorFactory()
    expert = make_expert(sectors=[sector])
    assignment = ExpertAssignment.objects.create(episode=make_episode(sector=sector), expert=expert)
    client.force_login(expert.user)
    response = client.get(reverse("expert:grade", args=[assignment.pk]))
    assert response.status_code == 200 and "no rubric yet" in response.content.decode()


def test_acceptable_with_a_failed_critical_criterion_needs_a_confirmation(client):
    expert = make_expert(username="cora")
    episode = make_episode()
    rubric = make_rubric(episode.task)
    criteria = list(rubric.criteria.order_by("order"))
    critical = next((c for c in criteria if c.label == "critical"), None)
    if critical is None:
        critical = criteria[0]
        critical.label = "critical"
        critical.save()
    assignment = expert.assignments.create(episode=episode)
    client.force_login(expert.user)
    url = reverse("expert:grade", args=[assignment.pk])
    client.get(url)
    data = {"action": "submit", "overall": "accept"}
    for criterion in criteria:
        data[f"verdict_{criterion.pk}"] = "fail" if criterion.pk == critical.pk else "pass"
        data[f"feedback_{criterion.pk}"] = "Total is wrong." if criterion.pk == critical.pk else ""
    refused = client.post(url, data)
    assert refused.status_code == 400
    html = refused.content.decode()
    assert f"fails critical criteria ({critical.key})" in html and 'name="accept_despite_critical"' in html
    assert ExpertGrade.objects.get(assignment=assignment).status == "draft", "nothing submitted, answers kept"
    confirmed = client.post(url, {**data, "accept_despite_critical": "1"})
    assert confirmed.status_code == 302
    grade = ExpertGrade.objects.get(assignment=assignment)
    assert (grade.status, grade.overall) == ("submitted", "accept")
    page = client.get(url).content.decode()
    assert "share of the criteria you evaluated that passed" in page
