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
            study=study,
            agent=AgentFactory(),
            participant=ParticipantFactory(study=study),
            y=50.0,
            source=Observation.Source.IMPORTED,
            external_id=f"s{n}",
            task_uuid=task,
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


# ---- the ledger read in parts ----------------------------------------------------------------------------


def _bulk_ledger(n_rows: int = 3000, seed: int = 0) -> Study:
    """Create a study whose ledger spans many pages of the table, with inactive rows, rows without a task and
    rows rewritten after the load (their new versions sit on later pages than their ids suggest)."""
    rng = np.random.default_rng(seed)
    study = StudyFactory()
    agents = [AgentFactory() for _ in range(4)]
    participants = [ParticipantFactory(study=study) for _ in range(40)]
    tasks = [uuid.uuid4() for _ in range(7)] + [None]
    Observation.objects.bulk_create(
        [
            Observation(
                study=study,
                agent=agents[i % 4],
                participant=participants[int(rng.integers(40))],
                y=float(rng.uniform(0, 100)),
                weight=float(rng.uniform(0.5, 2.0)),
                source=Observation.Source.IMPORTED,
                external_id=f"s{i}",
                task_uuid=tasks[int(rng.integers(len(tasks)))],
                active=bool(rng.random() < 0.9),
            )
            for i in range(n_rows)
        ]
    )
    first = list(Observation.objects.filter(study=study).order_by("pk").values_list("pk", flat=True)[:200])
    Observation.objects.filter(pk__in=first).update(y=12.5, retraction_reason="rewritten " * 20)
    return study


def _reference_ledger(study: Study) -> list[tuple]:
    rows = Observation.objects.filter(study=study, active=True).order_by("pk")
    return [
        (o.agent_id, o.participant_id, "" if o.task_uuid is None else str(o.task_uuid), o.y, o.weight) for o in rows
    ]


def _as_rows(arrays: selectors.ObservationArrays) -> list[tuple]:
    tasks = arrays.task_ids.tolist() if arrays.task_ids is not None else [None] * arrays.n
    return list(
        zip(
            arrays.agent_ids.tolist(),
            arrays.participant_ids.tolist(),
            tasks,
            arrays.y.tolist(),
            arrays.w.tolist(),
            strict=True,
        )
    )


@pytest.fixture
def parts_read(monkeypatch) -> list[int]:
    """Count the parts read on their own connections."""
    calls: list[int] = []
    original = selectors._read_part

    def counted(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(selectors, "_read_part", counted)
    return calls


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("parts", [2, 3, 5])
def test_a_ledger_read_in_parts_equals_the_one_query_read_row_for_row(parts, parts_read):
    study = _bulk_ledger(seed=parts)
    reference = _reference_ledger(study)
    single = selectors.ObservationArrays(*selectors._ledger_read(study.pk, True, parts=1))
    assert not parts_read
    split = selectors.ObservationArrays(*selectors._ledger_read(study.pk, True, parts=parts))
    assert len(parts_read) == parts
    assert _as_rows(split) == _as_rows(single) == reference
    bare = selectors.ObservationArrays(*selectors._ledger_read(study.pk, False, parts=parts))
    assert _as_rows(bare) == [(a, p, None, y, w) for a, p, _, y, w in reference]
    assert bare.digest({}) == selectors.ObservationArrays(*selectors._ledger_read(study.pk, False, parts=1)).digest({})


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("narrow", [True, False])
def test_parts_read_in_many_page_ranges_with_either_key_width_equal_the_reference(monkeypatch, narrow, parts_read):
    """Each part reads its pages one range per query (pipelined); keys travel as int4 while they fit 32 bits
    and as int8 otherwise (forced here): the ledger is the same row for row."""
    study = _bulk_ledger(seed=11)
    monkeypatch.setattr(selectors, "READ_CHUNK_PAGES", 1)
    if not narrow:
        monkeypatch.setattr(selectors, "_NARROW_KEYS_SQL", "SELECT false")
    pages = Observation.objects.raw(
        "SELECT 1 AS id, pg_relation_size('rating_observation') / current_setting('block_size')::bigint AS pages"
    )[0].pages
    assert pages >= 6  # several ranges per part
    reference = _reference_ledger(study)
    split = selectors.ObservationArrays(*selectors._ledger_read(study.pk, True, parts=2))
    assert len(parts_read) == 2
    assert _as_rows(split) == reference
    bare = selectors.ObservationArrays(*selectors._ledger_read(study.pk, False, parts=3))
    assert _as_rows(bare) == [(a, p, None, y, w) for a, p, _, y, w in reference]


def test_page_ranges_cover_a_part_and_leave_the_last_open():
    assert selectors._page_ranges(0, 5, 2) == [("(0,0)", "(2,0)"), ("(2,0)", "(4,0)"), ("(4,0)", "(5,0)")]
    assert selectors._page_ranges(4, None, 8) == [("(4,0)", selectors._END_OF_TABLE)]
    assert selectors._page_ranges(3, 3, 8) == [("(3,0)", "(3,0)")]  # an empty part reads nothing


@pytest.mark.django_db(transaction=True)
def test_rows_committed_while_the_parts_are_read_are_invisible_to_the_read(monkeypatch):
    import psycopg

    study = _bulk_ledger(seed=7)
    params = selectors.part_connection_params()
    original = selectors._read_part

    def after_a_commit(*args):
        # Another session records a row (on the table's last page) and commits before this part starts.
        with psycopg.connect(**params, autocommit=True) as other:
            other.execute(
                "INSERT INTO rating_observation (study_id, agent_id, participant_id, task_uuid, external_id, y, "
                "weight, source, active, retraction_reason, recorded_at, updated_at) SELECT study_id, agent_id, "
                "participant_id, task_uuid, '', 99.0, 1.0, 'auto', true, '', now(), now() FROM rating_observation "
                "WHERE study_id = %s ORDER BY id LIMIT 1",
                (study.pk,),
            )
        return original(*args)

    monkeypatch.setattr(selectors, "_read_part", after_a_commit)
    with refresh.refresh_transaction(study.pk):
        before = selectors.ObservationArrays(*selectors._ledger_read(study.pk, True, parts=1))
        split = selectors.ObservationArrays(*selectors._ledger_read(study.pk, True, parts=2))
    assert _as_rows(split) == _as_rows(before) == _reference_ledger(study)[: before.n]
    later = selectors.observations_arrays(study)
    assert later.n == before.n + 2 and later.y[-2:].tolist() == [99.0, 99.0]


def test_a_transaction_that_wrote_reads_its_own_rows_in_one_query(parts_read):
    study = _bulk_ledger(n_rows=300, seed=8)  # written in this test's transaction, not committed
    arrays = selectors.ObservationArrays(*selectors._ledger_read(study.pk, True, parts=2))
    assert not parts_read
    assert _as_rows(arrays) == _reference_ledger(study)


@pytest.mark.django_db(transaction=True)
def test_a_small_ledger_is_read_in_one_query_and_a_large_table_in_parts(monkeypatch, parts_read):
    study = _bulk_ledger(n_rows=300, seed=9)
    assert _as_rows(selectors.observations_arrays(study)) == _reference_ledger(study)
    assert not parts_read
    monkeypatch.setattr(selectors, "PARALLEL_MIN_PAGES", 1)
    assert _as_rows(selectors.observations_arrays(study)) == _reference_ledger(study)
    assert len(parts_read) == selectors.READ_PARTS


@pytest.mark.django_db(transaction=True)
def test_when_the_server_refuses_the_part_connections_the_ledger_is_read_in_one_query(monkeypatch, caplog):
    import socket

    with socket.socket() as probe:  # a port nothing listens on: every part connection is refused
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    study = _bulk_ledger(n_rows=300, seed=10)
    params = selectors.part_connection_params()
    monkeypatch.setattr(selectors, "part_connection_params",
                        lambda: {**params, "host": "127.0.0.1", "port": closed, "connect_timeout": 2})
    monkeypatch.setattr(selectors, "PARALLEL_MIN_PAGES", 1)
    with caplog.at_level("WARNING", logger="rating.selectors"):
        arrays = selectors.observations_arrays(study)
    assert _as_rows(arrays) == _reference_ledger(study)
    assert "read in one query" in caplog.text


@pytest.mark.parametrize("vendor_path", ["database", "python"])
def test_participant_label_bytes_are_the_pseudonyms_in_the_order_asked(monkeypatch, vendor_path):
    from django.db import connection

    if vendor_path == "python":
        monkeypatch.setattr(connection, "vendor", "sqlite-like")
    study = StudyFactory()
    people = [ParticipantFactory(study=study, pseudonym=name) for name in ("ana", "Bø-ørn", "c", "dmitri-ü")]
    stranger = ParticipantFactory(study=StudyFactory(), pseudonym="elsewhere")
    keys = np.array([people[2].pk, stranger.pk, people[0].pk, 10**9, people[1].pk, people[3].pk, people[0].pk])
    labels = selectors.participant_label_bytes(selectors.study_pseudonym_table(study), keys)
    assert [label.decode() for label in labels.tolist()] == [
        "c",
        "elsewhere",
        "ana",
        f"human {10**9}",
        "Bø-ørn",
        "dmitri-ü",
        "ana",
    ]
    assert selectors.participant_label_bytes(
        selectors.study_pseudonym_table(study), np.zeros(0, dtype=np.int64)
    ).shape == (0,)
    empty = selectors.study_pseudonym_table(StudyFactory())
    assert selectors.participant_label_bytes(empty, np.array([stranger.pk])).tolist() == [b"elsewhere"]
    # A table out of key order (the server returns rows in physical order) is looked up the same way.
    table = selectors.study_pseudonym_table(study)
    shuffled = selectors.PseudonymTable(table.ids[::-1].copy(), table.labels[::-1].copy())
    assert selectors.participant_label_bytes(shuffled, keys).tolist() == labels.tolist()


def test_packed_labels_split_the_bytes_by_their_lengths():
    blob = b"ab" + "çd".encode() + b"xyz"  # "ç" is two bytes
    labels = selectors._packed_labels(blob, np.array([2, 0, 3, 3]))
    assert labels.tolist() == [b"ab", b"", "çd".encode(), b"xyz"]
    same = selectors._packed_labels(b"aabbcc", np.array([2, 2, 2]))
    assert same.tolist() == [b"aa", b"bb", b"cc"]
