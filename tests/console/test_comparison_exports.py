"""Comparisons leave through the export ZIP (with the data dictionary) and the staff API, never through
anything an expert can call."""

from __future__ import annotations

import csv
import io
import zipfile

import pytest
from rest_framework.test import APIClient

from console.exports import Pseudonymizer, build_export
from experts.services.comparisons import PlacementInput, comparison_open, comparison_set_create, comparison_submit
from studies.models import Participant
from tests.factories.experts import make_comparison_world, make_expert
from tests.factories.users import UserFactory

pytestmark = pytest.mark.django_db
JUSTIFY = "The memo with the table is what the client asked for; the others are drafts."


@pytest.fixture
def answered():
    world = make_comparison_world()
    for episode in (world["with_agent"], world["alone"]):
        Participant.objects.filter(pk=episode.participant_id).update(status=Participant.Status.COMPLETE)
    staff = UserFactory(is_staff=True)
    expert, waiting = make_expert(), make_expert()
    comparison_set = comparison_set_create(
        study=world["study"], task=world["task"], actor=staff, experts=[expert, waiting],
        episode_ids=[world["with_agent"].pk, world["alone"].pk], solo_run_ids=[world["run"].pk])
    assignment = comparison_set.assignments.get(expert=expert)
    comparison_open(assignment=assignment, user=expert.user)
    comparison_submit(assignment=assignment, user=expert.user, justification=JUSTIFY, visible_seconds=0,
                      placements={1: PlacementInput(1, "ready"), 2: PlacementInput(2, "major"),
                                  3: PlacementInput(2, "unusable")})
    return {**world, "expert": expert, "assignment": assignment, "set": comparison_set, "staff": staff}


def _export(study) -> zipfile.ZipFile:
    handle = io.BytesIO()
    build_export(study, handle)
    return zipfile.ZipFile(io.BytesIO(handle.getvalue()))


def _rows(archive, name):
    return list(csv.DictReader(io.TextIOWrapper(archive.open(name), encoding="utf-8")))


def test_the_export_carries_each_comparison_its_shown_order_ranks_and_the_dictionary(answered):
    archive = _export(answered["study"])
    hasher = Pseudonymizer(answered["study"])
    comparisons = {row["comparison_id"]: row for row in _rows(archive, "comparisons.csv")}
    assert len(comparisons) == 2  # the submitted one and the one still waiting
    mine = comparisons[hasher("comparison", answered["assignment"].pk)]
    assert mine["status"] == "submitted" and mine["justification"] == JUSTIFY and mine["shown_count"] == "3"
    assert mine["expert_id"] == hasher("expert", answered["expert"].pk)
    assert mine["task_id"] == str(answered["task"].uuid) and float(mine["order_probability"]) == pytest.approx(1 / 6)
    rankings = [r for r in _rows(archive, "comparison_rankings.csv") if r["comparison_id"] == mine["comparison_id"]]
    placements = list(answered["assignment"].placements.select_related("item").order_by("position"))
    assert [r["shown_position"] for r in rankings] == ["1", "2", "3"]
    assert [r["rank"] for r in rankings] == ["1", "2", "2"]
    assert [r["acceptability_code"] for r in rankings] == ["4", "2", "1"]
    for row, placement in zip(rankings, placements, strict=True):
        if placement.item.solo_run_id:
            assert (row["deliverable_kind"], row["arm"], row["agent"], row["episode_id"], row["participant_id"]) == (
                "solo_run", "agent_alone", "Claude Code", "", "")
            assert row["solo_run_id"] == str(answered["run"].pk)
        else:
            episode = placement.item.episode
            assert row["episode_id"] == hasher("episode", episode.pk)
            assert row["participant_id"] == hasher("participant", episode.participant_id)
            assert row["arm"] == ("human_alone" if episode.agent_id is None else "human_agent")
        assert int(row["size_bytes"]) > 0
    dictionary = archive.read("data_dictionary.csv").decode()
    for entry in ("comparisons.csv,justification", "comparison_rankings.csv,shown_position",
                  "comparison_rankings.csv,acceptability_code", "comparisons.csv,time_spent_seconds"):
        assert entry in dictionary


def test_a_withdrawn_participant_s_deliverable_leaves_the_rankings(answered):
    Participant.objects.filter(pk=answered["alone"].participant_id).update(status=Participant.Status.WITHDRAWN)
    archive = _export(answered["study"])
    hasher = Pseudonymizer(answered["study"])
    rows = _rows(archive, "comparison_rankings.csv")
    assert hasher("episode", answered["alone"].pk) not in {r["episode_id"] for r in rows}
    assert len(rows) == 4  # two comparisons of three, less the withdrawn worker's deliverable in each


def test_a_study_without_comparison_sets_exports_no_comparison_files(answered):
    from tests.factories import StudyFactory
    archive = _export(StudyFactory())
    assert "comparisons.csv" not in archive.namelist()
    assert "comparisons.csv" not in archive.read("data_dictionary.csv").decode()


def test_the_staff_api_gives_the_comparisons_and_raw_counts_and_refuses_experts(answered):
    client = APIClient()
    client.force_authenticate(answered["staff"])
    response = client.get(f"/api/studies/{answered['study'].slug}/comparisons/")
    assert response.status_code == 200
    [comparison] = response.json()["comparisons"]
    assert comparison["id"] == answered["assignment"].pk and comparison["justification"] == JUSTIFY
    assert [d["rank"] for d in comparison["shown"]] == [1, 2, 2]
    kinds = {d["arm"]: d for d in comparison["shown"]}
    assert kinds["agent_alone"]["deliverable_kind"] == "solo_run" and kinds["agent_alone"]["episode"] is None
    assert kinds["human_agent"]["episode"] == answered["with_agent"].pk
    assert sum(row["pairs"] for row in response.json()["raw_arm_pair_counts"]) == 3
    for user in (answered["expert"].user, UserFactory(roles=["worker"])):
        other = APIClient()
        other.force_authenticate(user)
        assert other.get(f"/api/studies/{answered['study'].slug}/comparisons/").status_code == 403
