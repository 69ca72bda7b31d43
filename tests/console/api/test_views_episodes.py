"""Episodes and participants: staff filters, and what workers and experts may (not) see."""

from __future__ import annotations

import pytest

from studies.models import Episode
from tests.console.api.conftest import client_for
from tests.factories import AgentFactory, EpisodeFactory, SectorFactory, TaskFactory

SCORE_FIELDS = {"score", "auto_score", "expert_score", "score_source", "needs_expert_review", "grading_note",
                "is_gold"}


def _ids(response) -> set[int]:
    return {row["id"] for row in response.json()["results"]}


def test_staff_see_every_episode_with_scores(world, staff_client):
    response = staff_client.get("/api/episodes/")
    assert response.status_code == 200
    assert _ids(response) == {world.episode.pk, world.other_episode.pk}
    row = next(r for r in response.json()["results"] if r["id"] == world.episode.pk)
    assert row["score"] == 72.5
    assert row["participant"] == world.participant.pseudonym
    assert row["agent"] == "claude-code"
    assert row["task"] == str(world.task.uuid)
    assert row["sector"] == "finance"
    assert {f["name"] for f in row["files"]} == {"summary.txt", "session.log"}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status=graded", "episode"),
        ("status=submitted", "other_episode"),
        ("status=graded&status=submitted", "both"),
        ("participant={pseudonym}", "episode"),
        ("agent=claude-code", "both"),
        ("agent=someone-else", "none"),
        ("sector=finance", "both"),
        ("sector=health", "none"),
        ("study=alpha", "both"),
        ("task={task}", "episode"),
    ],
)
def test_staff_filter_episodes_by_status_agent_sector_participant_study_and_task(world, staff_client, query,
                                                                                   expected):
    query = query.format(pseudonym=world.participant.pseudonym, task=world.task.uuid)
    response = staff_client.get(f"/api/episodes/?{query}")
    assert response.status_code == 200
    wanted = {"episode": {world.episode.pk}, "other_episode": {world.other_episode.pk},
              "both": {world.episode.pk, world.other_episode.pk}, "none": set()}[expected]
    assert _ids(response) == wanted


def test_a_filter_on_another_sectors_tasks_finds_them(world, staff_client):
    health = SectorFactory(code="health", name="Health Care")
    task = TaskFactory(sector=health)
    episode = EpisodeFactory(study=world.study, agent=AgentFactory(slug="codex"), task=task)
    assert _ids(staff_client.get("/api/episodes/?sector=health")) == {episode.pk}
    assert _ids(staff_client.get("/api/episodes/?agent=codex")) == {episode.pk}


def test_submitted_filters_compare_instants_whatever_the_offset(world, staff_client):
    from datetime import UTC, datetime

    from django.utils.http import urlencode

    episode = EpisodeFactory(study=world.study, submitted_at=datetime(2026, 5, 1, 12, 0, tzinfo=UTC))
    # +18:41 is a valid ISO offset that PostgreSQL itself would refuse: 2026-05-02T06:40+18:41 is 11:59 UTC.
    before = staff_client.get("/api/episodes/?" + urlencode({"submitted_before": "2026-05-02T06:40:00+18:41"}))
    after = staff_client.get("/api/episodes/?" + urlencode({"submitted_after": "2026-05-02T06:40:00+18:41"}))
    assert before.status_code == after.status_code == 200
    assert episode.pk not in _ids(before)
    assert episode.pk in _ids(after)


def test_a_date_time_outside_the_calendar_in_utc_is_a_field_error(world, staff_client):
    from django.utils.http import urlencode

    response = staff_client.get("/api/episodes/?" + urlencode({"submitted_after": "0001-01-01T00:00:00+12:00"}))
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["submitted_after"]


def test_an_unknown_status_filter_is_a_field_error(world, staff_client):
    response = staff_client.get("/api/episodes/?status=bogus")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["status"]


def test_a_worker_sees_only_their_own_episodes_without_scores(world):
    client = client_for(world.worker)
    response = client.get("/api/episodes/")
    assert _ids(response) == {world.episode.pk}
    row = response.json()["results"][0]
    assert SCORE_FIELDS.isdisjoint(row)
    assert "participant" not in row
    assert {f["name"] for f in row["files"]} == {"summary.txt", "session.log"}
    assert b"GOLD" not in response.content and b"judges agreed" not in response.content


def test_a_worker_gets_404_for_someone_elses_episode_and_files(world):
    client = client_for(world.worker)
    assert client.get(f"/api/episodes/{world.other_episode.pk}/").status_code == 404
    other_file = world.other_episode.files.create(kind="deliverable", name="x.txt", size=1, sha256="0",
                                                  file="episodes/x")
    url = f"/api/episodes/{world.other_episode.pk}/files/{other_file.pk}/download/"
    assert client.get(url).status_code == 404


def test_a_worker_downloads_their_own_files_as_attachments(world):
    response = client_for(world.worker).get(f"/api/episodes/{world.episode.pk}/files/{world.log_file.pk}/download/")
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert b"".join(response.streaming_content) == b"> agent run\n"


def test_an_expert_sees_assigned_episodes_blind_and_deliverables_only(world):
    client = client_for(world.expert)
    response = client.get("/api/episodes/")
    assert _ids(response) == {world.episode.pk}
    row = response.json()["results"][0]
    assert set(row) == {"id", "study", "task", "task_title", "sector", "submitted_at", "files"}
    assert [f["name"] for f in row["files"]] == ["summary.txt"]
    log_url = f"/api/episodes/{world.episode.pk}/files/{world.log_file.pk}/download/"
    assert client.get(log_url).status_code == 404
    deliverable_url = f"/api/episodes/{world.episode.pk}/files/{world.deliverable.pk}/download/"
    assert client.get(deliverable_url).status_code == 200


def test_an_expert_gets_404_for_episodes_not_assigned_to_them(world):
    client = client_for(world.expert)
    assert client.get(f"/api/episodes/{world.other_episode.pk}/").status_code == 404


def test_a_cancelled_assignment_no_longer_opens_the_episode(world):
    world.expert_grade.assignment.status = "cancelled"
    world.expert_grade.assignment.save()
    assert client_for(world.expert).get(f"/api/episodes/{world.episode.pk}/").status_code == 404


def test_a_worker_reads_only_their_own_participation(world):
    client = client_for(world.worker)
    response = client.get("/api/participants/")
    assert [row["pseudonym"] for row in response.json()["results"]] == [world.participant.pseudonym]
    assert response.json()["results"][0]["episode_count"] == 1
    assert client.get(f"/api/participants/{world.other_participant.pseudonym}/").status_code == 404


def test_staff_filter_participants_by_study_and_status(world, staff_client):
    world.other_participant.status = "withdrawn"
    world.other_participant.save()
    response = staff_client.get("/api/participants/?study=alpha&status=withdrawn")
    assert [row["pseudonym"] for row in response.json()["results"]] == [world.other_participant.pseudonym]


def test_page_size_is_chosen_by_the_client_within_bounds(world, staff_client):
    for position in range(2, 5):
        EpisodeFactory(participant=world.participant, agent=world.agent, task=TaskFactory(), position=position)
    response = staff_client.get("/api/episodes/?page_size=2")
    body = response.json()
    assert body["count"] == Episode.objects.count() == 5
    assert len(body["results"]) == 2 and body["next"]
    assert staff_client.get("/api/episodes/?page=99").status_code == 404
