"""Studies: leaderboard, stability, survey statistics and exports."""

from __future__ import annotations

from unittest import mock

import pytest

from studies.models import AuditEvent, BackgroundJob
from tests.factories.rating import EntityRatingFactory, RatingSnapshotFactory


def test_studies_list_their_counts(world, staff_client):
    body = staff_client.get("/api/studies/alpha/").json()
    assert (body["participant_count"], body["episode_count"], body["task_count"]) == (2, 2, 2)
    assert "invite_code" not in body


def test_the_leaderboard_comes_from_the_latest_snapshot(world, staff_client):
    older = RatingSnapshotFactory(study=world.study, version=2)
    EntityRatingFactory(snapshot=older, label="stale agent")
    body = staff_client.get("/api/studies/alpha/leaderboard/").json()
    assert body["version"] == 3
    assert [row["label"] for row in body["agents"]] == ["Claude Code"]
    assert [row["label"] for row in body["humans"]] == [world.participant.pseudonym]
    only_agents = staff_client.get("/api/studies/alpha/leaderboard/?kind=agent").json()
    assert only_agents["humans"] == [] and len(only_agents["agents"]) == 1


def test_the_leaderboard_ranks_rows_by_rank(world, staff_client):
    snapshot = RatingSnapshotFactory(study=world.study, version=4)
    for rank, label in ((2, "second"), (1, "first"), (3, "third")):
        EntityRatingFactory(snapshot=snapshot, label=label, rank=rank)
    body = staff_client.get("/api/studies/alpha/leaderboard/").json()
    assert [row["label"] for row in body["agents"]] == ["first", "second", "third"]


def test_a_study_without_a_rating_answers_404_with_a_reason(world, staff_client):
    response = staff_client.get("/api/studies/beta/leaderboard/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "no_rating_yet"


def test_stability_returns_the_latest_finished_analysis(world, staff_client):
    BackgroundJob.objects.create(kind="stability", study=world.study, status=BackgroundJob.Status.RUNNING)
    body = staff_client.get("/api/studies/alpha/stability/").json()
    assert body["job"] == world.stability_job.pk
    assert body["result"]["bootstrap"] == {"rounds": 100}


def test_stability_before_any_analysis_says_so(world, staff_client):
    response = staff_client.get("/api/studies/beta/stability/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "no_stability_analysis"


def test_survey_statistics_pass_the_query_to_the_analysis(world, staff_client):
    with mock.patch("console.api.views.studies.survey_statistics", return_value={"paired": []}) as stats:
        response = staff_client.get("/api/studies/alpha/survey-statistics/?skill_measure=mu&holm=false")
    assert response.json() == {"paired": []}
    stats.assert_called_once_with(world.study, skill_measure="mu", holm_correction=False)


def test_survey_statistics_of_a_study_without_answers_are_empty_tables(world, staff_client):
    body = staff_client.get("/api/studies/alpha/survey-statistics/").json()
    assert body["skill_measure"] == "conservative"
    assert body["paired"] == []


def test_an_unknown_skill_measure_is_a_field_error(world, staff_client):
    response = staff_client.get("/api/studies/alpha/survey-statistics/?skill_measure=median")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["skill_measure"]


@pytest.mark.django_db(transaction=True)
def test_requesting_an_export_queues_the_job_after_commit_and_audits_it(world, staff_client):
    with mock.patch("studyapp.celery.app.send_task") as send_task:
        response = staff_client.post("/api/studies/alpha/exports/", {"include_pii": False}, format="json")
    assert response.status_code == 202
    job = BackgroundJob.objects.get(pk=response.json()["id"])
    assert job.kind == "export" and job.requested_by == world.staff and job.status == "queued"
    send_task.assert_called_once_with("console.dashboard.tasks.run_export", args=[job.pk], ignore_result=True)
    assert AuditEvent.objects.filter(action="export.requested", object_id=str(job.pk)).exists()
    assert response.json()["download_url"] is None


def test_exporting_identities_needs_the_identity_permission(world, staff_client):
    response = staff_client.post("/api/studies/alpha/exports/", {"include_pii": True}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "job_refused"
    assert not BackgroundJob.objects.filter(kind="export", params__include_pii=True).exists()


def test_a_finished_export_is_listed_with_a_download_link_and_downloads_audited(world, staff_client):
    listing = staff_client.get("/api/studies/alpha/exports/").json()
    assert [job["id"] for job in listing["results"]] == [world.export_job.pk]
    response = staff_client.get(listing["results"][0]["download_url"])
    assert response.status_code == 200
    assert 'filename="alpha-export.zip"' in response["Content-Disposition"]
    assert AuditEvent.objects.filter(action="export.downloaded", object_id=str(world.export_job.pk)).exists()


def test_an_unfinished_export_cannot_be_downloaded_yet(world, staff_client):
    job = BackgroundJob.objects.create(kind="export", study=world.study, status=BackgroundJob.Status.RUNNING)
    response = staff_client.get(f"/api/studies/alpha/exports/{job.pk}/download/")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "export_not_ready"


def test_another_studys_export_is_not_found_under_this_study(world, staff_client):
    response = staff_client.get(f"/api/studies/beta/exports/{world.export_job.pk}/")
    assert response.status_code == 404
    assert staff_client.get("/api/studies/nope/exports/").status_code == 404
