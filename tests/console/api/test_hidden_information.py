"""Nothing a worker or expert can read through the API carries hidden evaluator information."""

from __future__ import annotations

import pytest

from tests.console.api.conftest import client_for
from tests.console.api.test_permissions import ENDPOINTS

SECRETS = (b"GOLD", b"judges agreed", b"72.5", b'"score"', b"hidden_info", b"gold.txt")


@pytest.mark.parametrize("role", ["worker", "expert"])
def test_no_readable_endpoint_leaks_scores_or_gold_information(world, role):
    user = world.worker if role == "worker" else world.expert
    client = client_for(user)
    readable = 0
    for endpoint in ENDPOINTS:
        if endpoint.method != "get":
            continue
        response = client.get(endpoint.url(world))
        if response.status_code != 200:
            continue
        readable += 1
        content = b"".join(response.streaming_content) if response.streaming else response.content
        for secret in SECRETS:
            if secret == b'"score"' and endpoint.template.startswith("/api/expert-grades/"):
                continue  # an expert's own grade carries the score their verdicts give, nothing else
            assert secret not in content, f"{endpoint.template} shows {secret!r} to a {role}"
    assert readable >= 5


@pytest.mark.parametrize("status", ["grading", "graded", "failed"])
def test_a_worker_sees_only_submitted_whatever_the_grading_state(world, status):
    type(world.episode).objects.filter(pk=world.episode.pk).update(status=status, grading_note="judge timed out")
    client = client_for(world.worker)
    detail = client.get(f"/api/episodes/{world.episode.pk}/")
    assert detail.status_code == 200 and detail.json()["status"] == "submitted"
    listed = client.get("/api/episodes/").json()["results"]
    assert [row["status"] for row in listed] == ["submitted"]
    assert b"judge timed out" not in detail.content and status.encode() not in detail.content


@pytest.mark.parametrize("status", ["grading", "graded", "failed"])
def test_filters_do_not_tell_a_worker_how_grading_went(world, status):
    type(world.episode).objects.filter(pk=world.episode.pk).update(status=status, needs_expert_review=True)
    client = client_for(world.worker)
    by_submitted = client.get("/api/episodes/", {"status": "submitted"}).json()["results"]
    assert [row["id"] for row in by_submitted] == [world.episode.pk]
    for probe in ({"status": status}, {"needs_expert_review": "true"}, {"needs_expert_review": "false"}):
        response = client.get("/api/episodes/", probe)
        # Either refused as an unknown value or ignored: never an answer that differs by grading state.
        assert response.status_code == 400 or response.json()["results"] == client.get("/api/episodes/").json()[
            "results"], probe
