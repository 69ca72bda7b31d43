"""Every API error, from DRF, Django or a domain service, has the same body."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError as DjangoValidationError
from django.test import Client
from rest_framework import exceptions
from rest_framework.test import APIClient
from rest_framework.throttling import AnonRateThrottle

from console.api.errors import exception_handler
from console.api.views.studies import StudyViewSet
from studies.exceptions import StudyError
from studies.files import FileRejected
from studies.task_bundle_format import Problem, TaskBundleInvalid
from tests.console.api.conftest import client_for


def _error(response) -> dict:
    body = response.json()
    assert list(body) == ["error"]
    assert set(body["error"]) == {"code", "message", "fields"}
    return body["error"]


def test_unknown_api_paths_answer_json_404(world, staff_client):
    response = staff_client.get("/api/no-such-thing/")
    assert response.status_code == 404
    assert _error(response)["code"] == "not_found"


def test_a_missing_object_is_a_json_404(world, staff_client):
    response = staff_client.get("/api/studies/does-not-exist/")
    assert response.status_code == 404
    assert _error(response) == {"code": "not_found", "message": "Not found.", "fields": {}}


def test_anonymous_requests_are_401_with_a_token_challenge(db):
    response = APIClient().get("/api/studies/")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert _error(response)["code"] == "not_authenticated"


def test_a_bad_token_is_401(db):
    response = APIClient(HTTP_AUTHORIZATION="Token not-a-real-token").get("/api/studies/")
    assert response.status_code == 401
    assert _error(response)["code"] == "authentication_failed"


def test_a_wrong_method_is_405(world, staff_client):
    response = staff_client.delete("/api/studies/alpha/")
    assert response.status_code == 405
    assert _error(response)["code"] == "method_not_allowed"


def test_workers_get_403_on_staff_endpoints(world):
    response = client_for(world.worker).get("/api/judge-runs/")
    assert response.status_code == 403
    assert _error(response)["code"] == "permission_denied"


def test_throttled_requests_are_429_with_retry_after(db, monkeypatch):
    monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": "3/min"})
    client = APIClient()
    for attempt in range(3):
        client.post("/api/auth/token/", {"username": f"x{attempt}", "password": "y"}, format="json")
    response = client.post("/api/auth/token/", {"username": "x9", "password": "y"}, format="json")
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert _error(response)["code"] == "throttled"


def test_a_locked_out_sign_in_is_429_in_the_error_shape(db, settings):
    settings.AXES_FAILURE_LIMIT = 2
    client = APIClient()
    client.post("/api/auth/token/", {"username": "x", "password": "y"}, format="json")
    response = client.post("/api/auth/token/", {"username": "x", "password": "y"}, format="json")
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert _error(response)["code"] == "locked_out"


@pytest.mark.parametrize(
    ("exc", "status", "code", "fields"),
    [
        (exceptions.ValidationError({"name": ["Too long."], "nested": {"inner": ["Bad."]}}), 400, "invalid",
         {"name": ["Too long."], "nested.inner": ["Bad."]}),
        (exceptions.ValidationError(["One.", "Two."]), 400, "invalid", {"non_field_errors": ["One.", "Two."]}),
        (DjangoValidationError({"slug": ["Taken."]}), 400, "invalid", {"slug": ["Taken."]}),
        (TaskBundleInvalid([Problem("a/task.json", "title", "must not be empty"), Problem("b.zip", "", "bad")]),
         400, "invalid_task_bundle", {"a/task.json:title": ["must not be empty"], "b.zip": ["bad"]}),
        (FileRejected("“x.exe”: not accepted."), 400, "file_rejected", {}),
        (StudyError("The study is closed."), 409, "study_error", {}),
    ],
)
def test_the_handler_maps_drf_django_and_domain_errors(exc, status, code, fields):
    response = exception_handler(exc, {})
    assert response.status_code == status
    assert response.data["error"]["code"] == code
    assert response.data["error"]["fields"] == fields
    assert response.data["error"]["message"]


def test_unexpected_exceptions_are_left_to_django(db):
    assert exception_handler(RuntimeError("boom"), {}) is None


def test_a_missing_trailing_slash_gets_a_hint(world, staff_client):
    response = staff_client.get("/api/studies")
    assert response.status_code == 404
    assert "Did you mean /api/studies/" in _error(response)["message"]
    assert "Did you mean" not in _error(staff_client.get("/api/nothing-here"))["message"]


@pytest.mark.parametrize("path", ["/api/no%0Asuch/", "/api/studies/%0A/", "/api/%0A", "/api/studies%0D%0A/"])
def test_a_path_holding_an_encoded_newline_is_a_json_404(world, staff_client, path):
    response = staff_client.get(path)
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert _error(response)["code"] == "not_found"


def test_an_unexpected_exception_in_the_api_is_a_json_500(world, staff_client, monkeypatch):
    def broken(self):
        raise RuntimeError("boom")

    monkeypatch.setattr(StudyViewSet, "get_queryset", broken)
    staff_client.raise_request_exception = False
    response = staff_client.get("/api/studies/")
    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert _error(response)["code"] == "server_error" and "boom" not in response.content.decode()


def test_a_request_refused_before_any_view_runs_is_a_json_400_under_the_api(db, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 2
    body = "username=a&password=b&extra=c"
    api = Client().post("/api/auth/token/", body, content_type="application/x-www-form-urlencoded")
    assert api.status_code == 400 and api["Content-Type"] == "application/json"
    assert _error(api)["code"] == "bad_request"
    site = Client().post("/accounts/login/", body, content_type="application/x-www-form-urlencoded")
    assert site.status_code == 400 and site["Content-Type"].startswith("text/html")


def test_site_pages_keep_their_html_error_pages(db):
    response = Client().get("/no-such-page%0A/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")
