"""What each role really receives validates against the generated schema (staff, workers and experts alike).

The schemathesis checks in test_schema.py call the API as staff; the scoped representations (a worker's own
episodes, an expert's assigned ones) are only reached here. Each 200 JSON answer of every GET operation is
validated against the operation's documented 200 schema, with OpenAPI 3.0's ``nullable`` turned into JSON
Schema's null type.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from jsonschema import Draft202012Validator

from tests.console.api.conftest import World, client_for


def _document() -> dict[str, Any]:
    document = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(document, renderer_context={}))


def _json_schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: _json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable"):
        if "enum" in converted and None not in converted["enum"]:
            converted["enum"] = [*converted["enum"], None]
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


def _validator(document: dict[str, Any], path: str) -> Draft202012Validator:
    content = document["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    schema = {**_json_schema(content), "components": _json_schema(document["components"])}
    return Draft202012Validator(schema)


def _url(world: World, path: str) -> str:
    known = {"slug": world.study.slug, "code": world.sector.code, "soc_code": world.occupation.soc_code,
             "uuid": str(world.task.uuid), "pseudonym": world.participant.pseudonym}
    ids = {"/api/episodes/{id}/": world.episode.pk, "/api/judge-runs/{id}/": world.judge_run.pk,
           "/api/expert-grades/{id}/": world.expert_grade.pk, "/api/studies/{slug}/exports/{id}/": world.export_job.pk}
    if path.startswith("/api/agents/"):
        known["slug"] = world.agent.slug
    url = path.replace("{id}", str(ids.get(path, "")))
    for key, value in known.items():
        url = url.replace("{" + key + "}", value)
    return url


def _json_gets(document: dict[str, Any]) -> list[str]:
    return [path for path, operations in document["paths"].items()
            if "application/json" in operations.get("get", {}).get("responses", {}).get("200", {}).get("content", {})]


@pytest.mark.parametrize("role", ["staff", "worker", "expert"])
def test_every_answer_a_role_receives_matches_the_documented_schema(world: World, role: str):
    document = _document()
    client = client_for({"staff": world.staff, "worker": world.worker, "expert": world.expert}[role])
    checked, problems = [], []
    for path in _json_gets(document):
        url = _url(world, path)
        if "{" in url:
            continue
        response = client.get(url)
        if response.status_code != 200:
            continue
        errors = [f"{url}: {'/'.join(map(str, e.absolute_path))}: {e.message[:200]}"
                  for e in _validator(document, path).iter_errors(response.json())]
        problems += errors
        checked.append(path)
    assert problems == []
    assert "/api/episodes/" in checked and "/api/episodes/{id}/" in checked
    if role != "staff":
        assert len(checked) >= 3


def test_a_worker_episode_matches_the_worker_shape_only(world: World):
    document = _document()
    answer = client_for(world.worker).get(f"/api/episodes/{world.episode.pk}/").json()
    components = _json_schema(document["components"])
    matching = [name for name in ("Episode", "WorkerEpisode", "ExpertEpisode")
                if Draft202012Validator({**components["schemas"][name], "components": components}).is_valid(answer)]
    assert matching == ["WorkerEpisode"]
    assert "auto_score" not in answer and "auto_score" in components["schemas"]["Episode"]["required"]
