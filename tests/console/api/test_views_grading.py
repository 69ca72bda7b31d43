"""Judge runs (staff) and expert grades (staff, and each expert their own)."""

from __future__ import annotations

from tests.console.api.conftest import client_for


def test_staff_read_judge_runs_with_criterion_scores(world, staff_client):
    body = staff_client.get(f"/api/judge-runs/{world.judge_run.pk}/").json()
    assert body["total"] == 72.5 and body["task"] == str(world.task.uuid)
    assert body["criterion_scores"] == [
        {"criterion": "C1", "category": "correctness", "points": 40.0, "earned": 30.0, "reason": "close"}
    ]


def test_staff_filter_judge_runs_by_study_and_status(world, staff_client):
    assert staff_client.get("/api/judge-runs/?study=alpha&status=succeeded").json()["count"] == 1
    assert staff_client.get("/api/judge-runs/?status=failed").json()["count"] == 0
    assert staff_client.get(f"/api/judge-runs/?episode={world.episode.pk}").json()["count"] == 1


def test_an_expert_reads_only_their_own_grades(world):
    client = client_for(world.expert)
    listing = client.get("/api/expert-grades/").json()
    assert [row["id"] for row in listing["results"]] == [world.expert_grade.pk]
    assert listing["results"][0]["criterion_grades"] == [{"criterion": "C1", "verdict": "pass", "feedback": ""}]
    assert client.get(f"/api/expert-grades/{world.other_grade.pk}/").status_code == 404


def test_staff_filter_expert_grades_by_expert(world, staff_client):
    rows = staff_client.get("/api/expert-grades/?expert=expert2").json()["results"]
    assert [row["id"] for row in rows] == [world.other_grade.pk]
