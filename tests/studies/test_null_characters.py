"""A NUL character in any text a client sends (query, form, JSON) is a 400 naming the field, never a 500."""

from __future__ import annotations

import io
import json
import uuid
from urllib.parse import urlencode

import pytest
from django.test import Client
from django.urls import URLResolver, get_resolver, reverse
from rest_framework.parsers import FileUploadParser
from rest_framework.test import APIClient
from rest_framework.views import APIView

from console.api.parsers import NulRefusingFormParser, NulRefusingMultiPartParser
from experts.models import ExpertAssignment, ExpertCriterionGrade
from studies.models import TaskInstance
from tests.factories import OccupationFactory, SectorFactory, StudyFactory, TaskFactory, UserFactory
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


def _task_table(title: str = "Imported task") -> io.BytesIO:
    occupation = OccupationFactory()
    row = f"{uuid.uuid4()},{occupation.sector.code},{occupation.soc_code},{title}"
    upload = io.BytesIO(f"task_id,sector,occupation,prompt\n{row}\n".encode())
    upload.name = "tasks.csv"
    return upload


@pytest.mark.parametrize("fields", [
    {"study": "beta\x00"},  # the text field that reached PostgreSQL and answered 500
    {"dry_run": "true\x00"},
    {"no\x00te": "x"},
])
def test_a_nul_in_a_text_field_of_an_api_upload_is_a_400_naming_it_and_imports_nothing(staff_api, fields):
    StudyFactory(slug="beta")
    response = staff_api.post("/api/tasks/import/", {"file": _task_table(), **fields}, format="multipart")
    assert response.status_code == 400
    name = next(iter(fields)).replace("\x00", "\\x00")
    assert response.json() == {"error": {"code": "invalid", "message": "Some fields are invalid.",
                                         "fields": {name: ["Null characters are not allowed."]}}}
    assert not TaskInstance.objects.exists()


def test_a_nul_in_the_field_name_of_a_file_part_is_a_400_and_imports_nothing(staff_api):
    # (A NUL in the file's own name never arrives: Django drops unprintable characters from file names.)
    response = staff_api.post("/api/tasks/import/", {"file": _task_table(), "fi\x00le": _task_table()},
                              format="multipart")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"fi\\x00le": ["Null characters are not allowed."]}
    assert not TaskInstance.objects.exists()


def test_the_same_upload_without_nul_characters_imports(staff_api):
    response = staff_api.post("/api/tasks/import/", {"file": _task_table(), "dry_run": "false"}, format="multipart")
    assert response.status_code == 200, response.content
    assert TaskInstance.objects.filter(title="Imported task").count() == 1


def _views(patterns, prefix: str = ""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _views(entry.url_patterns, prefix + str(entry.pattern))
        else:
            yield prefix + str(entry.pattern), entry.callback


# Plain Django views that parse their own multipart body, and what refuses a NUL there.
_SELF_PARSING_DJANGO_VIEWS = {
    "journey.views.uploads.upload": "its fields go through journey.forms.UploadForm, whose fields refuse NUL",
    "console.api.errors.not_found": "reads no body",
}


def test_every_view_that_parses_its_own_form_or_upload_refuses_nul_characters():
    """The middleware checks multipart bodies only for views that are not CSRF-exempt; every other one must
    parse with a NUL-refusing parser (DRF) or be listed above with what protects it."""
    unguarded = []
    for route, callback in _views(get_resolver().url_patterns):
        view_class = getattr(callback, "cls", None)
        if view_class is not None and issubclass(view_class, APIView):
            parser_lists = [view_class.parser_classes]
            for action_name in (getattr(callback, "actions", None) or {}).values():
                action_kwargs = getattr(getattr(view_class, action_name, None), "kwargs", {})
                parser_lists.append(action_kwargs.get("parser_classes", view_class.parser_classes))
            for parsers in parser_lists:
                for parser in parsers:
                    if parser.media_type in ("multipart/form-data", "application/x-www-form-urlencoded") and \
                            not issubclass(parser, NulRefusingFormParser | NulRefusingMultiPartParser):
                        unguarded.append(f"{route}: {parser.__name__}")
                    if issubclass(parser, FileUploadParser):
                        unguarded.append(f"{route}: {parser.__name__}")
        elif getattr(callback, "csrf_exempt", False):
            name = f"{callback.__module__}.{callback.__name__}"
            if name not in _SELF_PARSING_DJANGO_VIEWS:
                unguarded.append(f"{route}: {name}")
    assert unguarded == []
