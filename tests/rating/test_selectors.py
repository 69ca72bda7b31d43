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


def test_a_read_without_tasks_holds_the_same_ledger_and_no_task_ids():
    study, _, _, _ = _recorded_study(seed=14)
    full = selectors.observations_arrays(study)
    bare = selectors.observations_arrays(study, tasks=False)
    assert bare.task_ids is None and not bare.has_tasks and not bare.any_task and bare.task_groups() is None
    for name in ("agent_ids", "participant_ids", "y", "w"):
        np.testing.assert_array_equal(getattr(bare, name), getattr(full, name))
    # Only the task model reads tasks.
    assert selectors.study_ledger(study, selectors.study_model_spec(study)).task_ids is None
    Study.objects.filter(pk=study.pk).update(rating_model="calibrated_task")
    study.refresh_from_db()
    assert selectors.study_ledger(study, selectors.study_model_spec(study)).task_ids.tolist() == full.task_ids.tolist()


def test_an_empty_ledger_reads_as_empty_arrays_with_or_without_tasks():
    study = StudyFactory()
    full, bare = selectors.observations_arrays(study), selectors.observations_arrays(study, tasks=False)
    assert full.n == bare.n == 0 and full.task_ids.shape == (0,) and bare.task_ids is None
    assert full.agent_ids.dtype == bare.agent_ids.dtype == np.int64


def test_task_labels_are_the_uuids_text_and_blank_for_the_nil_uuid():
    raw = [uuid.uuid4() for _ in range(50)] + [uuid.UUID(int=0), uuid.UUID(int=1), uuid.UUID(int=2**128 - 1)]
    labels = selectors._uuid_labels(np.frombuffer(b"".join(u.bytes for u in raw), dtype=np.uint8).reshape(-1, 16))
    assert labels.dtype == object
    assert labels.tolist() == [str(u) for u in raw[:50]] + ["", str(raw[51]), str(raw[52])]


def test_the_digest_ignores_tasks_only_for_task_less_models_and_follows_a_switch_of_model():
    study, _, _, episodes = _recorded_study(seed=15)
    first = refresh.posterior_refresh(study_id=study.pk)
    # A task-less model never reads tasks: a changed task leaves its ledger, and its refit, the same.
    moved = Observation.objects.filter(study=study, active=True).order_by("pk").first()
    other = Observation.objects.filter(study=study).exclude(task_uuid=moved.task_uuid).first()
    Observation.objects.filter(pk=moved.pk).update(task_uuid=other.task_uuid)
    assert refresh.posterior_refresh(study_id=study.pk, only_if_changed=True).pk == first.pk
    # The model is in the digest: switching to the task model refits although the ledger is unchanged.
    Study.objects.filter(pk=study.pk).update(rating_model="calibrated_task")
    task_fit = refresh.posterior_refresh(study_id=study.pk, only_if_changed=True)
    assert task_fit.pk != first.pk and task_fit.config["kind"] == "calibrated_task"
    assert refresh.posterior_refresh(study_id=study.pk, only_if_changed=True).pk == task_fit.pk
    # The task model reads tasks: a changed task is a changed ledger.
    Observation.objects.filter(pk=moved.pk).update(task_uuid=moved.task_uuid)
    assert refresh.posterior_refresh(study_id=study.pk, only_if_changed=True).pk != task_fit.pk
    # And back to the task-less model: a new snapshot, then nothing to do.
    Study.objects.filter(pk=study.pk).update(rating_model="calibrated")
    back = refresh.posterior_refresh(study_id=study.pk, only_if_changed=True)
    assert back.pk != first.pk and back.config["kind"] == "calibrated"
    assert refresh.posterior_refresh(study_id=study.pk, only_if_changed=True).pk == back.pk


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
