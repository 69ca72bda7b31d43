"""Permission matrix: every API endpoint, called as anonymous, worker, expert and staff."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from tests.console.api.bundles import bundle_members, new_uuid, spec, zip_bytes
from tests.console.api.conftest import World, client_for

ROLES = ("anonymous", "worker", "expert", "staff")
STAFF_ONLY = {"anonymous": 401, "worker": 403, "expert": 403, "staff": 200}
WORKER_EXPERT_STAFF = {"anonymous": 401, "worker": 200, "expert": 200, "staff": 200}


@dataclass(frozen=True)
class Endpoint:
    method: str
    template: str  # the path as the OpenAPI schema names it
    url: Callable[[World], str]
    expected: dict[str, int]
    body: Callable[[World], dict] | None = None
    multipart: bool = False


def _import_body(world: World) -> dict:
    members = bundle_members(data=spec(uuid=new_uuid()), reference={"ledger.csv": b"a,b\n1,2\n"})
    upload = io.BytesIO(zip_bytes(members))
    upload.name = "bundle.zip"
    return {"file": upload, "dry_run": "true"}


ENDPOINTS = [
    Endpoint("get", "/api/schema/", lambda w: reverse("api-schema"), STAFF_ONLY),
    # A browser page: anonymous visitors are sent to the sign-in page instead of getting a 401.
    Endpoint("get", "/api/docs/", lambda w: reverse("api-docs"), {**STAFF_ONLY, "anonymous": 302}),
    Endpoint("get", "/api/studies/", lambda w: "/api/studies/", STAFF_ONLY),
    Endpoint("get", "/api/studies/{slug}/", lambda w: f"/api/studies/{w.study.slug}/", STAFF_ONLY),
    Endpoint("get", "/api/studies/{slug}/leaderboard/", lambda w: f"/api/studies/{w.study.slug}/leaderboard/",
             STAFF_ONLY),
    Endpoint("get", "/api/studies/{slug}/stability/", lambda w: f"/api/studies/{w.study.slug}/stability/",
             STAFF_ONLY),
    Endpoint("get", "/api/studies/{slug}/costs/", lambda w: f"/api/studies/{w.study.slug}/costs/", STAFF_ONLY),
    Endpoint("get", "/api/studies/{slug}/comparisons/", lambda w: f"/api/studies/{w.study.slug}/comparisons/",
             STAFF_ONLY),
    # Staff get 404 here: the world has no finished preference fit (tests/console/test_preference_exports.py
    # checks the 200).
    Endpoint("get", "/api/studies/{slug}/preferences/", lambda w: f"/api/studies/{w.study.slug}/preferences/",
             {**STAFF_ONLY, "staff": 404}),
    Endpoint("get", "/api/studies/{slug}/survey-statistics/",
             lambda w: f"/api/studies/{w.study.slug}/survey-statistics/", STAFF_ONLY),
    Endpoint("get", "/api/studies/{slug}/exports/", lambda w: f"/api/studies/{w.study.slug}/exports/", STAFF_ONLY),
    Endpoint("post", "/api/studies/{slug}/exports/", lambda w: f"/api/studies/{w.study.slug}/exports/",
             {**STAFF_ONLY, "staff": 202}, body=lambda w: {"include_pii": False}),
    Endpoint("get", "/api/studies/{slug}/exports/{id}/",
             lambda w: f"/api/studies/{w.study.slug}/exports/{w.export_job.pk}/", STAFF_ONLY),
    Endpoint("get", "/api/studies/{slug}/exports/{id}/download/",
             lambda w: f"/api/studies/{w.study.slug}/exports/{w.export_job.pk}/download/", STAFF_ONLY),
    Endpoint("get", "/api/sectors/", lambda w: "/api/sectors/", STAFF_ONLY),
    Endpoint("get", "/api/sectors/{code}/", lambda w: f"/api/sectors/{w.sector.code}/", STAFF_ONLY),
    Endpoint("get", "/api/occupations/", lambda w: "/api/occupations/", STAFF_ONLY),
    Endpoint("get", "/api/occupations/{soc_code}/", lambda w: f"/api/occupations/{w.occupation.soc_code}/",
             STAFF_ONLY),
    Endpoint("get", "/api/agents/", lambda w: "/api/agents/", STAFF_ONLY),
    Endpoint("get", "/api/agents/{slug}/", lambda w: f"/api/agents/{w.agent.slug}/", STAFF_ONLY),
    Endpoint("get", "/api/tasks/", lambda w: "/api/tasks/", STAFF_ONLY),
    Endpoint("get", "/api/tasks/{uuid}/", lambda w: f"/api/tasks/{w.task.uuid}/", STAFF_ONLY),
    Endpoint("post", "/api/tasks/import/", lambda w: "/api/tasks/import/", STAFF_ONLY, body=_import_body,
             multipart=True),
    Endpoint("get", "/api/tasks/{uuid}/reference-files/", lambda w: f"/api/tasks/{w.task.uuid}/reference-files/",
             WORKER_EXPERT_STAFF),
    Endpoint("get", "/api/tasks/{uuid}/reference-files/{id}/download/",
             lambda w: f"/api/tasks/{w.task.uuid}/reference-files/{w.reference_file.pk}/download/",
             WORKER_EXPERT_STAFF),
    Endpoint("get", "/api/tasks/{uuid}/hidden-files/", lambda w: f"/api/tasks/{w.task.uuid}/hidden-files/",
             STAFF_ONLY),
    Endpoint("get", "/api/tasks/{uuid}/hidden-files/{id}/download/",
             lambda w: f"/api/tasks/{w.task.uuid}/hidden-files/{w.hidden_file.pk}/download/", STAFF_ONLY),
    Endpoint("get", "/api/participants/", lambda w: "/api/participants/", {**STAFF_ONLY, "worker": 200}),
    Endpoint("get", "/api/participants/{pseudonym}/", lambda w: f"/api/participants/{w.participant.pseudonym}/",
             {**STAFF_ONLY, "worker": 200}),
    Endpoint("get", "/api/episodes/", lambda w: "/api/episodes/", WORKER_EXPERT_STAFF),
    Endpoint("get", "/api/episodes/{id}/", lambda w: f"/api/episodes/{w.episode.pk}/", WORKER_EXPERT_STAFF),
    Endpoint("get", "/api/episodes/{id}/files/{file_pk}/download/",
             lambda w: f"/api/episodes/{w.episode.pk}/files/{w.deliverable.pk}/download/", WORKER_EXPERT_STAFF),
    Endpoint("get", "/api/judge-runs/", lambda w: "/api/judge-runs/", STAFF_ONLY),
    Endpoint("get", "/api/judge-runs/{id}/", lambda w: f"/api/judge-runs/{w.judge_run.pk}/", STAFF_ONLY),
    Endpoint("get", "/api/expert-grades/", lambda w: "/api/expert-grades/", {**STAFF_ONLY, "expert": 200}),
    Endpoint("get", "/api/expert-grades/{id}/", lambda w: f"/api/expert-grades/{w.expert_grade.pk}/",
             {**STAFF_ONLY, "expert": 200}),
]


def _client(world: World, role: str) -> APIClient:
    users = {"anonymous": None, "worker": world.worker, "expert": world.expert, "staff": world.staff}
    return client_for(users[role])


def test_the_matrix_covers_every_operation_in_the_schema(db):
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = {(method, path) for path, item in schema["paths"].items() for method in item}
    covered = {(e.method, e.template) for e in ENDPOINTS}
    # The token endpoint takes credentials rather than a signed-in role; its own tests are below.
    assert operations - covered == {("post", "/api/auth/token/")}, "add new endpoints to the permission matrix"
    assert covered - operations == {("get", "/api/schema/"), ("get", "/api/docs/")}


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: f"{e.method.upper()} {e.template}")
def test_each_role_gets_the_status_the_matrix_promises(world, endpoint, role):
    client = _client(world, role)
    url = endpoint.url(world)
    kwargs = {}
    if endpoint.body is not None:
        kwargs["data"] = endpoint.body(world)
        kwargs["format"] = "multipart" if endpoint.multipart else "json"
    response = getattr(client, endpoint.method)(url, **kwargs)
    assert response.status_code == endpoint.expected[role], getattr(response, "data", response)
    browser_pages = {"/api/schema/", "/api/docs/"}  # YAML and HTML renderers, not the JSON error body
    if response.status_code in (401, 403) and endpoint.template not in browser_pages:
        body = response.json()
        assert set(body["error"]) == {"code", "message", "fields"}
        assert body["error"]["code"] in {"not_authenticated", "permission_denied"}


@pytest.mark.parametrize(
    ("username", "expected"),
    [("staffer", 200), ("worker1", 400), ("expert1", 400), ("nobody", 400)],
)
def test_only_staff_credentials_obtain_an_api_token(world, username, expected):
    response = APIClient().post(reverse("api-token"), {"username": username, "password": "pw-correct-horse"},
                                format="json")
    assert response.status_code == expected
    if expected == 200:
        token = response.json()["token"]
        studies = APIClient(HTTP_AUTHORIZATION=f"Token {token}").get("/api/studies/")
        assert studies.status_code == 200
    else:
        assert "token" not in response.json()


def test_a_wrong_password_gets_no_token_and_a_field_error(world):
    response = APIClient().post(reverse("api-token"), {"username": "staffer", "password": "wrong"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"


def test_session_authentication_works_for_staff(world):
    client = APIClient()
    assert client.login(username="staffer", password="pw-correct-horse")
    assert client.get("/api/tasks/").status_code == 200


def test_session_writes_need_a_csrf_token(world):
    client = APIClient(enforce_csrf_checks=True)
    client.login(username="staffer", password="pw-correct-horse")
    response = client.post(f"/api/studies/{world.study.slug}/exports/", {}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]["message"]
