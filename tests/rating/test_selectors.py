"""Reads of the rating ledger: arrays for analysis, latest snapshot, leaderboards, staleness, reports."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from rating import selectors
from rating.models import Observation
from rating.services import analysis, ledger, refresh
from studies.models import Episode, Study
from tests.factories import AgentFactory, ParticipantFactory, StudyFactory
from tests.rating.ledger import ledger_study

pytestmark = pytest.mark.django_db


def _recorded_study(**kwargs):
    study, agents, participants, episodes = ledger_study(**kwargs)
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk)
    return study, agents, participants, episodes


def test_observations_arrays_hold_only_the_active_ledger_in_id_order():
    study, _, _, episodes = _recorded_study(seed=10)
    Episode.objects.filter(pk=episodes[0].pk).update(status=Episode.Status.SKIPPED)
    ledger.observation_record(episode_id=episodes[0].pk)
    arrays = selectors.observations_arrays(study)
    active = list(Observation.objects.filter(study=study, active=True).order_by("pk"))
    assert arrays.n == len(episodes) - 1 == len(active)
    assert arrays.agent_ids.tolist() == [o.agent_id for o in active]
    assert arrays.participant_ids.tolist() == [o.participant_id for o in active]
    assert arrays.task_ids.tolist() == [str(o.task.uuid) for o in active]
    assert arrays.y.tolist() == [o.y for o in active]
    assert arrays.w.tolist() == [1.0] * len(active)
    assert arrays.has_tasks
    agent_ids, participant_ids, task_ids, y, w = arrays  # unpacks like the documented 5-tuple
    assert agent_ids.dtype == np.int64 and y.dtype == np.float64


def test_a_row_without_its_task_uuid_reads_the_uuid_of_its_task():
    study, _, _, _ = _recorded_study(seed=12)
    expected = [str(o.task.uuid) for o in Observation.objects.filter(study=study, active=True).order_by("pk")]
    Observation.objects.filter(study=study).update(task_uuid=None)
    assert selectors.observations_arrays(study).task_ids.tolist() == expected


def test_imported_task_uuids_count_as_tasks_and_a_missing_one_disables_task_groups():
    study = StudyFactory()
    task_uuid = uuid.uuid4()
    for n, task in enumerate((task_uuid, None)):
        Observation.objects.create(
            study=study, agent=AgentFactory(), participant=ParticipantFactory(study=study), y=50.0,
            source=Observation.Source.IMPORTED, external_id=f"s{n}", task_uuid=task,
        )
    arrays = selectors.observations_arrays(study)
    assert arrays.task_ids.tolist() == [str(task_uuid), ""]
    assert not arrays.has_tasks
    Observation.objects.filter(task_uuid__isnull=True).update(active=False)
    assert selectors.observations_arrays(study).has_tasks


def test_latest_snapshot_and_leaderboards_follow_the_newest_version():
    study, agents, participants, episodes = _recorded_study(seed=11)
    assert selectors.latest_snapshot(study) is None
    assert list(selectors.leaderboard(study)) == []
    refresh.posterior_refresh(study_id=study.pk)
    Episode.objects.filter(pk=episodes[0].pk).update(auto_score=3.0)
    ledger.observation_record(episode_id=episodes[0].pk)
    newest = refresh.posterior_refresh(study_id=study.pk)
    assert selectors.latest_snapshot(study.pk) == newest
    agent_rows = list(selectors.leaderboard(study, kind="agent"))
    human_rows = list(selectors.leaderboard(study, kind="human"))
    assert {r.snapshot_id for r in agent_rows + human_rows} == {newest.pk}
    assert [r.rank for r in agent_rows] == list(range(1, len(agents) + 1))
    assert len(human_rows) == len(participants)
    with pytest.raises(ValueError, match="kind"):
        selectors.leaderboard(study, kind="task")


def test_staleness_follows_ledger_changes_deletions_and_setting_edits():
    study, _, _, episodes = _recorded_study(seed=12)
    other = StudyFactory()  # no ledger: never stale
    assert selectors.studies_needing_refresh() == [study.pk]
    refresh.posterior_refresh(study_id=study.pk)
    assert selectors.studies_needing_refresh() == []
    Episode.objects.filter(pk=episodes[1].pk).update(auto_score=20.0)
    ledger.observation_record(episode_id=episodes[1].pk)
    assert selectors.studies_needing_refresh() == [study.pk]
    refresh.posterior_refresh(study_id=study.pk)
    Episode.objects.filter(pk=episodes[2].pk).delete()  # its observation goes with it
    assert selectors.studies_needing_refresh() == [study.pk]
    refresh.posterior_refresh(study_id=study.pk)
    Study.objects.filter(pk=study.pk).update(rating_beta=5.0)
    assert selectors.studies_needing_refresh() == [study.pk]
    assert other.pk not in selectors.studies_needing_refresh()


def test_studies_with_ratings_lists_studies_with_a_ledger_or_a_snapshot():
    study, _, _, _ = _recorded_study(seed=13)
    empty_but_refreshed = StudyFactory()
    refresh.posterior_refresh(study_id=empty_but_refreshed.pk)
    StudyFactory()
    assert list(selectors.studies_with_ratings()) == [study, empty_but_refreshed]


def test_stability_report_names_agents_and_uses_pseudonyms_for_humans():
    study, agents, participants, _ = _recorded_study(seed=14, n_participants=8)
    report = analysis.study_stability_report(study, rounds=40, seed=3)
    assert {row["agent_id"] for row in report["leaderboard"]} == {str(a.pk) for a in agents}
    assert report["agent_names"] == {str(a.pk): a.name for a in agents}
    assert report["model"]["kind"] == "paper" and report["cluster"] == "observation"
    assert report["n_humans"] == len(participants)
    assert report["n_tasks"] == report["n_observations"]
    assert report["leave_one_task_out"] is not None
    assert report["bootstrap"]["rounds"] == 40
    snapshot = refresh.posterior_refresh(study_id=study.pk)
    stored = {str(r.entity_id): r for r in snapshot.ratings.filter(entity_kind="agent")}
    for row in report["leaderboard"]:
        assert row["mu"] == pytest.approx(stored[row["agent_id"]].mu, abs=1e-9)
        assert row["rank"] == stored[row["agent_id"]].rank


def test_stability_report_is_none_without_active_observations():
    assert analysis.study_stability_report(StudyFactory(), rounds=10) is None


def test_stability_report_of_a_task_model_study_resamples_the_task_model():
    study, agents, _, _ = _recorded_study(seed=15, n_participants=10, rating_model="calibrated_task")
    report = analysis.study_stability_report(study, rounds=30, seed=2, cluster="human")
    assert report["model"]["kind"] == "calibrated_task" and "sigma_task" in report["hyper"]
    assert {row["agent_id"] for row in report["leaderboard"]} == {str(a.pk) for a in agents}
    assert report["leave_one_task_out"]["n_groups"] == report["n_tasks"]
    assert report["bootstrap"]["cluster"] == "human" and report["bootstrap"]["rounds"] == 30
