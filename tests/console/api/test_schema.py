"""The OpenAPI schema is valid and warning-free, and fuzzing every operation never gets a 5xx."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
import schemathesis
from django.core import signals
from django.core.management import call_command
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client
from django.urls import reverse
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.console.api.conftest import World


def test_schema_generation_validates_without_warnings(db, tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target))
    text = target.read_text()
    assert "/api/tasks/import/" in text and "/api/studies/{slug}/leaderboard/" in text


def test_staff_get_the_schema_and_a_swagger_ui_served_from_local_assets(world, staff_client):
    assert staff_client.get(reverse("api-schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json").json()["paths"]
    staff_client.force_login(world.staff)
    page = staff_client.get(reverse("api-docs"))
    assert page.status_code == 200
    html = page.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn.jsdelivr" not in html and "unpkg.com" not in html


def test_anonymous_visitors_of_the_docs_are_sent_to_sign_in(db):
    response = Client().get(reverse("api-docs"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def _load_schema() -> schemathesis.BaseSchema:
    """Load the generated schema in-process; requests go straight to the Django WSGI application."""
    document = SchemaGenerator().get_schema(request=None, public=True)
    raw = json.loads(OpenApiJsonRenderer().render(document, renderer_context={}))
    loaded = schemathesis.openapi.from_dict(raw)
    loaded.app = get_wsgi_application()
    return loaded


schema = _load_schema()


@pytest.fixture
def connection_kept_open():
    """Keep the test's database connection open across WSGI requests, as Django's test client does."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def _known_path_parameters(world: World, path: str) -> dict[str, object]:
    """Real identifiers for each path, so fuzzed queries and bodies also reach existing objects."""
    by_path = {
        "/api/studies/{slug}/": {"slug": world.study.slug},
        "/api/agents/{slug}/": {"slug": world.agent.slug},
        "/api/sectors/{code}/": {"code": world.sector.code},
        "/api/occupations/{soc_code}/": {"soc_code": world.occupation.soc_code},
        "/api/tasks/{uuid}/": {"uuid": str(world.task.uuid)},
        "/api/participants/{pseudonym}/": {"pseudonym": world.participant.pseudonym},
        "/api/episodes/{id}/": {"id": world.episode.pk},
        "/api/judge-runs/{id}/": {"id": world.judge_run.pk},
        "/api/expert-grades/{id}/": {"id": world.expert_grade.pk},
    }
    if path.startswith("/api/studies/{slug}/exports/"):
        return {"slug": world.study.slug, "id": world.export_job.pk}
    if path.startswith("/api/studies/{slug}/"):
        return {"slug": world.study.slug}
    if path.startswith("/api/tasks/{uuid}/reference-files/"):
        return {"uuid": str(world.task.uuid), "id": world.reference_file.pk}
    if path.startswith("/api/tasks/{uuid}/hidden-files/"):
        return {"uuid": str(world.task.uuid), "id": world.hidden_file.pk}
    if path.startswith("/api/episodes/{id}/files/"):
        return {"id": world.episode.pk, "file_pk": world.deliverable.pk}
    return by_path.get(path, {})


@schema.parametrize()
@pytest.mark.django_db
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_no_operation_answers_with_a_server_error(case, world, connection_kept_open):
    token, _ = Token.objects.get_or_create(user=world.staff)
    headers = {"Authorization": f"Token {token.key}"}
    case.call_and_validate(headers=headers, checks=[not_a_server_error])
    known = _known_path_parameters(world, case.path)
    if known and case.path_parameters is not None:
        case.path_parameters.update({k: v for k, v in known.items() if k in case.path_parameters})
        case.call_and_validate(headers=headers, checks=[not_a_server_error])



@schema.parametrize()
@pytest.mark.django_db
@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
def test_every_answer_matches_the_documented_status_content_type_and_schema(case, world, connection_kept_open):
    token, _ = Token.objects.get_or_create(user=world.staff)
    headers = {"Authorization": f"Token {token.key}"}
    checks = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
    case.call_and_validate(headers=headers, checks=checks)
    known = _known_path_parameters(world, case.path)
    if known and case.path_parameters is not None:
        case.path_parameters.update({k: v for k, v in known.items() if k in case.path_parameters})
        case.call_and_validate(headers=headers, checks=checks)


def _typed_query_parameters() -> list[tuple[str, str, str, str]]:
    """(method, path, parameter, wrong value) for every query parameter whose schema has a type to break."""
    found = []
    for path, operations in schema.raw_schema["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] != "query":
                    continue
                declared = parameter.get("schema", {})
                if declared.get("type") in ("integer", "number"):
                    wrong = "not-a-number"
                elif declared.get("type") == "boolean":
                    wrong = "perhaps"
                elif "enum" in declared or "enum" in declared.get("items", {}):
                    wrong = "no-such-choice"
                elif declared.get("format") in ("date-time", "date", "uuid"):
                    wrong = "not-a-" + declared["format"]
                else:
                    continue
                found.append((method, path, parameter["name"], wrong))
    return found


@pytest.mark.parametrize(("method", "path", "name", "wrong"), _typed_query_parameters())
def test_a_query_parameter_of_the_wrong_type_is_refused_with_a_400_naming_it(world, staff_client, method, path,
                                                                              name, wrong):
    url = path
    for key, value in _known_path_parameters(world, path).items():
        url = url.replace("{" + key + "}", str(value))
    response = getattr(staff_client, method)(url + "?" + urlencode({name: wrong}))
    assert response.status_code == 400, (response.status_code, response.content[:300])
    error = response.json()["error"]
    assert set(error) == {"code", "message", "fields"} and name in error["fields"], error


def test_a_signed_in_worker_opening_the_docs_gets_a_page_that_says_why(db):
    from tests.factories import UserFactory

    client = Client()
    client.force_login(UserFactory(roles=["worker"]))
    response = client.get(reverse("api-docs"))
    assert response.status_code == 403
    assert response["Content-Type"].startswith("text/html")
    assert "The API documentation is for staff accounts" in response.content.decode()
