"""Every filter of every list endpoint treats an empty value as no filter, and the schema says so."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator

from console.api.filters import EMPTY_MEANS_NO_FILTER
from tests.console.api.conftest import World, client_for

PAGINATION = {"page", "page_size"}


def _filter_parameters() -> list[tuple[str, str]]:
    """(path, parameter) for every query parameter of every list operation except the page controls."""
    document = SchemaGenerator().get_schema(request=None, public=True)
    found = []
    for path, operations in document["paths"].items():
        operation = operations.get("get")
        if operation is None or "{" in path:
            continue
        found += [(path, parameter["name"]) for parameter in operation.get("parameters", [])
                  if parameter["in"] == "query" and parameter["name"] not in PAGINATION]
    return found


FILTERS = _filter_parameters()


def test_the_filtered_endpoints_are_all_found():
    paths = {path for path, _ in FILTERS}
    assert {"/api/studies/", "/api/agents/", "/api/tasks/", "/api/episodes/", "/api/participants/",
            "/api/judge-runs/", "/api/expert-grades/", "/api/occupations/"} <= paths
    assert ("/api/agents/", "interface") in FILTERS and ("/api/episodes/", "submitted_after") in FILTERS


def test_the_schema_documents_an_empty_value_as_no_filter_on_every_filter():
    document = SchemaGenerator().get_schema(request=None, public=True)
    undocumented = [
        (path, parameter["name"])
        for path, operations in document["paths"].items() if "get" in operations and "{" not in path
        for parameter in operations["get"].get("parameters", [])
        if parameter["in"] == "query" and parameter["name"] not in PAGINATION
        and EMPTY_MEANS_NO_FILTER not in parameter.get("description", "")
    ]
    assert undocumented == []


def _ids(response) -> list:
    assert response.status_code == 200, (response.status_code, response.content[:300])
    return [item.get("id", item.get("slug", item.get("uuid", item.get("code")))) for item in response.json()["results"]]


@pytest.mark.parametrize(("path", "name"), FILTERS)
def test_an_empty_filter_value_answers_as_if_the_parameter_were_left_out(world: World, staff_client, path, name):
    unfiltered = _ids(staff_client.get(path))
    assert unfiltered, "the world must hold something to list"
    assert _ids(staff_client.get(f"{path}?{name}=")) == unfiltered
    assert _ids(staff_client.get(f"{path}?{name}=&{name}=")) == unfiltered


def test_an_empty_value_beside_a_real_one_keeps_the_real_one(world: World, staff_client):
    world.other_study.status = next(s for s in type(world.study).Status.values if s != world.study.status)
    world.other_study.save(update_fields=["status"])
    only = _ids(staff_client.get(f"/api/studies/?status={world.study.status}"))
    assert _ids(staff_client.get(f"/api/studies/?status=&status={world.study.status}")) == only
    assert len(only) < len(_ids(staff_client.get("/api/studies/")))


def test_a_worker_filtering_their_own_episodes_gets_the_same_rule(world: World):
    worker = client_for(world.worker)
    mine = _ids(worker.get("/api/episodes/"))
    assert mine and _ids(worker.get("/api/episodes/?status=&study=")) == mine
    assert worker.get("/api/episodes/?status=graded").status_code == 400  # still refused: it would reveal grading
