"""A NUL character in any text a client sends (query, form, JSON) is a 400 naming the field, never a 500."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from experts.models import ExpertAssignment, ExpertCriterionGrade
from tests.factories import SectorFactory, StudyFactory, TaskFactory, UserFactory
from tests.factories.experts import make_expert
from tests.factories.grading import make_rubric
from tests.factories.scenarios import make_episode

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in():
    client = Client(raise_request_exception=False)
    client.force_login(UserFactory(roles=["worker"]))
    return client


@pytest.fixture
def staff_api():
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(UserFactory(roles=["staff"], is_staff=True))
    return client


@pytest.fixture
def assignment():
    sector = SectorFactory()
    task = TaskFactory(sector=sector)
    make_rubric(task)
    return ExpertAssignment.objects.create(episode=make_episode(task=task, study=StudyFactory()),
                                           expert=make_expert(sectors=[sector]))


def test_a_nul_in_a_query_parameter_of_a_page_is_a_400_naming_the_parameter(signed_in):
    response = signed_in.get(reverse("worker:occupation-search"), {"q": "acc\x00ount"},
                             HTTP_ACCEPT="application/json")
    assert response.status_code == 400
    body = response.json()
    assert body["ok"] is False and body["fields"] == {"q": ["Null characters are not allowed."]}
    html = signed_in.get(reverse("worker:occupation-search"), {"q": "acc\x00ount"})
    assert html.status_code == 400 and b"q" in html.content and b"Null characters" in html.content


def test_a_nul_in_an_api_query_parameter_is_a_400_in_the_api_error_shape(staff_api):
    response = staff_api.get("/api/occupations/", {"search": "acc\x00ount"})
    assert response.status_code == 400
    assert response.json() == {"error": {"code": "invalid", "message": "Null characters are not allowed.",
                                         "fields": {"search": ["Null characters are not allowed."]}}}


def test_a_nul_anywhere_in_a_json_body_is_a_400_naming_its_path(client, assignment):
    client.raise_request_exception = False
    client.force_login(assignment.expert.user)
    client.get(reverse("expert:grade", args=[assignment.pk]))
    criterion = assignment.episode.task.rubrics.get().criteria.order_by("order").first()
    body = {"verdicts": {str(criterion.pk): {"verdict": "fail", "feedback": "Total\x00 is wrong."}}}
    response = client.post(reverse("expert:grade_autosave", args=[assignment.pk]), json.dumps(body),
                           content_type="application/json", HTTP_ACCEPT="application/json")
    assert response.status_code == 400
    assert response.json()["fields"] == {f"verdicts.{criterion.pk}.feedback": ["Null characters are not allowed."]}
    assert not ExpertCriterionGrade.objects.exists()


def test_a_nul_in_an_api_json_body_is_a_400_even_in_a_field_the_operation_ignores(staff_api):
    study = StudyFactory()
    response = staff_api.post(f"/api/studies/{study.slug}/exports/", {"include_pii": False, "note": ["a\x00"]},
                              format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"note[0]": ["Null characters are not allowed."]}


@pytest.mark.parametrize("encoding", ["multipart", "urlencoded"])
def test_a_nul_in_a_posted_form_field_is_a_400_and_nothing_is_saved(assignment, encoding):
    staff = Client(raise_request_exception=False)
    staff.force_login(UserFactory(roles=["staff"], is_staff=True))
    url = reverse("expert:staff_assignment_cancel", args=[assignment.pk])
    if encoding == "multipart":
        response = staff.post(url, {"reason": "duplicate\x00"})
    else:
        response = staff.post(url, urlencode({"reason": "duplicate\x00"}),
                              content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400 and b"reason" in response.content
    assignment.refresh_from_db()
    assert assignment.status != ExpertAssignment.Status.CANCELLED


def test_text_without_nul_characters_passes_untouched(signed_in):
    response = signed_in.get(reverse("worker:occupation-search"), {"q": "Accountants"})
    assert response.status_code == 200
