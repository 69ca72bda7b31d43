"""manage.py import_sessions, refresh_ratings and rating_report."""

from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from rating.fit import ModelSpec, fit_model
from rating.models import EntityRating, Observation, RatingSnapshot
from rating.services import ledger, refresh
from studies.models import Agent, AuditEvent, Episode, ParticipantIdentity, Study
from tests.factories import AgentFactory, StudyFactory, TaskFactory
from tests.rating.ledger import assert_snapshot_matches_batch, ledger_study

pytestmark = pytest.mark.django_db

SESSIONS = [
    {
        "session_id": "s1",
        "agent_id": "Claude Code",
        "user_id": "u1",
        "autograde_overall_score": 80.0,
        "autograde_status": "done",
        "skipped": False,
    },
    {
        "session_id": "s2",
        "agent_id": "Codex",
        "user_id": "u1",
        "autograde_overall_score": 62.5,
        "autograde_status": "done",
        "skipped": False,
    },
    {
        "session_id": "s3",
        "agent_id": "Codex",
        "user_id": "u2",
        "autograde_overall_score": 70,
        "autograde_status": "done",
        "skipped": False,
    },
    {
        "session_id": "s4",
        "agent_id": "Claude Code",
        "user_id": "u2",
        "autograde_overall_score": 91.0,
        "autograde_status": "done",
        "skipped": False,
    },
    {
        "session_id": "s5",
        "agent_id": "Manus",
        "user_id": "u3",
        "autograde_overall_score": 55.0,
        "autograde_status": "done",
        "skipped": True,
    },
    {
        "session_id": "s6",
        "agent_id": "Manus",
        "user_id": "u3",
        "autograde_overall_score": None,
        "autograde_status": "pending",
        "skipped": False,
    },
    {
        "session_id": "s7",
        "agent_id": "Manus",
        "user_id": "u3",
        "autograde_overall_score": None,
        "autograde_status": "done",
        "skipped": False,
    },
]


def _write(tmp_path, sessions, name="sessions.json"):
    path = tmp_path / name
    path.write_text(json.dumps(sessions))
    return str(path)


def _run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


# ---- import_sessions --------------------------------------------------------------------------------


def test_import_counts_only_done_unskipped_scored_sessions(tmp_path):
    output = _run("import_sessions", _write(tmp_path, SESSIONS), "--study", "released", "--create")
    study = Study.objects.get(slug="released")
    assert study.status == Study.Status.CLOSED
    observations = {o.external_id: o for o in Observation.objects.filter(study=study)}
    assert set(observations) == {"s1", "s2", "s3", "s4"}
    assert {o.source for o in observations.values()} == {"auto"}  # the judges' score, as the file names it
    assert all(o.episode_id is None and o.task_id is None and o.active for o in observations.values())
    assert observations["s3"].y == 70.0
    assert not Agent.objects.filter(name="Manus").exists()  # it appears only in sessions that do not count
    users = dict(ParticipantIdentity.objects.filter(study=study).values_list("platform_worker_id", "participant_id"))
    assert set(users) == {"u1", "u2"}
    assert observations["s1"].participant_id == observations["s2"].participant_id == users["u1"]
    assert set(study.agents.values_list("name", flat=True)) == {"Claude Code", "Codex"}
    assert "4 counted" in output and "1 skipped, 1 not done, 1 unscored" in output
    snapshot = RatingSnapshot.objects.get(study=study)
    assert snapshot.n_observations == 4
    assert_snapshot_matches_batch(snapshot, study)


def test_importing_the_same_file_again_changes_nothing(tmp_path):
    path = _write(tmp_path, SESSIONS)
    _run("import_sessions", path, "--study", "released", "--create")
    study = Study.objects.get(slug="released")
    before = {o.pk: (o.y, o.participant_id, o.agent_id, o.updated_at) for o in Observation.objects.all()}
    audits = AuditEvent.objects.count()
    output = _run("import_sessions", path, "--study", "released")
    after = {o.pk: (o.y, o.participant_id, o.agent_id, o.updated_at) for o in Observation.objects.all()}
    assert after == before
    assert AuditEvent.objects.count() == audits
    assert "0 new, 0 updated, 4 unchanged" in output
    assert study.participants.count() == 2
    first, second = RatingSnapshot.objects.filter(study=study).order_by("version")
    assert [(r.entity_id, r.mu) for r in first.ratings.all()] == [(r.entity_id, r.mu) for r in second.ratings.all()]


def test_a_corrected_file_updates_and_retracts_exactly_the_changed_sessions(tmp_path):
    _run("import_sessions", _write(tmp_path, SESSIONS), "--study", "released", "--create")
    corrected = [dict(s) for s in SESSIONS]
    corrected[0]["autograde_overall_score"] = 40.0
    corrected[1]["skipped"] = True
    output = _run("import_sessions", _write(tmp_path, corrected, "fixed.json"), "--study", "released")
    study = Study.objects.get(slug="released")
    assert Observation.objects.get(external_id="s1").y == 40.0
    s2 = Observation.objects.get(external_id="s2")
    assert (s2.active, s2.retraction_reason) == (False, "imported session skipped")
    assert "1 updated" in output and "1 earlier import(s) retracted" in output
    assert_snapshot_matches_batch(RatingSnapshot.objects.filter(study=study).latest(), study)


def test_sessions_without_ids_are_keyed_by_position_and_tasks_link_by_uuid(tmp_path):
    study = StudyFactory(slug="with-tasks")
    task = TaskFactory(studies=[study])
    sessions = [{k: v for k, v in s.items() if k != "session_id"} for s in SESSIONS[:2]]
    sessions[0]["task_id"] = str(task.uuid)
    sessions[1]["task_id"] = "7b0c2a40-0000-4000-8000-000000000000"
    output = _run("import_sessions", _write(tmp_path, sessions), "--study", "with-tasks")
    observations = {o.external_id: o for o in Observation.objects.filter(study=study)}
    assert set(observations) == {"0", "1"}
    assert observations["0"].task_id == task.pk and observations["1"].task_id is None
    assert str(observations["1"].task_uuid) == sessions[1]["task_id"]  # kept for leave-one-task-out
    assert "1 session(s) linked to known tasks, 1 name unknown task ids" in output


def test_a_malformed_file_is_refused_whole_with_every_problem_listed(tmp_path):
    bad = [dict(s) for s in SESSIONS]
    bad[1]["autograde_overall_score"] = "high"
    bad[2]["user_id"] = ["u3"]
    bad[3]["autograde_overall_score"] = 130
    bad.append(dict(SESSIONS[0]))  # repeats s1
    err = StringIO()
    with pytest.raises(CommandError, match="nothing imported: 4 problem"):
        call_command(
            "import_sessions", _write(tmp_path, bad), "--study", "released", "--create", stdout=StringIO(), stderr=err
        )
    assert "session #1 (s2): autograde_overall_score must be a number" in err.getvalue()
    assert "outside 0-100" in err.getvalue() and "repeats session #0" in err.getvalue()
    assert not Observation.objects.exists() and not Agent.objects.exists()
    assert not Study.objects.exists()  # --create makes no study for a refused file


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "not valid UTF-8 JSON"), ('{"sessions": []}', "JSON list of sessions")],
)
def test_unreadable_files_get_a_clear_message(tmp_path, content, message):
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(CommandError, match=message):
        call_command(
            "import_sessions", str(path), "--study", "released", "--create", stdout=StringIO(), stderr=StringIO()
        )
    assert not Observation.objects.exists() and not Study.objects.exists()


def test_import_into_a_missing_study_needs_create(tmp_path):
    with pytest.raises(CommandError, match="pass --create"):
        _run("import_sessions", _write(tmp_path, SESSIONS), "--study", "nowhere")
    with pytest.raises(CommandError, match="not a valid slug"):
        _run("import_sessions", _write(tmp_path, SESSIONS), "--study", "bad slug!", "--create")
    assert not Study.objects.exists()


def test_an_exported_study_reimported_reproduces_its_ratings(tmp_path):
    """Round trip through the released format: same agents, same per-human ratings, same posterior."""
    study, _, _, episodes = ledger_study(seed=21, n_participants=7)
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk)
    Episode.objects.filter(pk=episodes[0].pk).update(status=Episode.Status.SKIPPED)
    ledger.observation_record(episode_id=episodes[0].pk)
    original = refresh.posterior_refresh(study_id=study.pk)
    exported = [
        {
            "session_id": f"ep-{e.pk}",
            "agent_id": e.agent.name,
            "user_id": e.participant.pseudonym,
            "task_id": str(e.task.uuid),
            "autograde_overall_score": e.score,
            "autograde_status": "done" if e.score is not None else "pending",
            "skipped": e.status == Episode.Status.SKIPPED,
        }
        for e in Episode.objects.filter(study=study).select_related("agent", "participant", "task")
    ]
    _run("import_sessions", _write(tmp_path, exported), "--study", "copy", "--create", "--model", "paper")
    copy = Study.objects.get(slug="copy")
    reimported = RatingSnapshot.objects.get(study=copy)
    assert reimported.n_observations == original.n_observations == len(episodes) - 1
    pseudonym_of = dict(
        ParticipantIdentity.objects.filter(study=copy).values_list("participant_id", "platform_worker_id")
    )
    for kind, key in (
        (EntityRating.Kind.AGENT, lambda r: r.label),
        (EntityRating.Kind.HUMAN, lambda r: pseudonym_of[r.entity_id]),
    ):
        before = {r.label: r for r in original.ratings.filter(entity_kind=kind)}
        after = {key(r): r for r in reimported.ratings.filter(entity_kind=kind)}
        assert before.keys() == after.keys()
        for label, rating in before.items():
            assert after[label].mu == pytest.approx(rating.mu, abs=1e-9)
            assert after[label].sigma == pytest.approx(rating.sigma, abs=1e-9)
            assert after[label].rank == rating.rank
    assert Observation.objects.filter(study=copy, task__isnull=False).count() == len(episodes) - 1


# ---- refresh_ratings -----------------------------------------------------------------------------------


def test_refresh_ratings_writes_a_snapshot_per_study_with_a_ledger():
    study, _, _, episodes = ledger_study(seed=22)
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk)
    StudyFactory(slug="no-ledger")
    output = _run("refresh_ratings")
    assert f"{study.slug}: snapshot v1 from {len(episodes)} active observations (3 agents, 6 humans)" in output
    assert "no-ledger" not in output
    assert "Nothing to refresh." in _run("refresh_ratings", "--stale")
    output = _run("refresh_ratings", "--study", study.slug)
    assert "snapshot v2" in output
    assert_snapshot_matches_batch(RatingSnapshot.objects.filter(study=study).latest(), study)
    with pytest.raises(CommandError, match="no study"):
        _run("refresh_ratings", "--study", "missing")


def test_refresh_ratings_prints_the_connectivity_warning():
    study = StudyFactory(slug="split", rating_model="paper")
    ledger_agents = [AgentFactory(name="Lonely A"), AgentFactory(name="Lonely B")]
    _, _, participants, _ = ledger_study(seed=23, n_agents=1)
    for i, participant in enumerate(participants[:2]):
        Observation.objects.create(
            study=study,
            agent=ledger_agents[i],
            participant=participant,
            y=50.0 + i,
            external_id=f"x{i}",
            source=Observation.Source.IMPORTED,
        )
    assert "share no participant" in _run("refresh_ratings", "--study", "split")


# ---- rating_report -------------------------------------------------------------------------------------


def test_rating_report_prints_the_three_tables_with_agent_names():
    study, agents, _, episodes = ledger_study(seed=24, n_participants=8)
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk)
    refresh.posterior_refresh(study_id=study.pk)
    output = _run("rating_report", "--study", study.slug, "--rounds", "60", "--seed", "5")
    for header in (
        "Agent leaderboard (ranked by CollabSkill = mu - 3 sigma)",
        "Rank  Agent",
        "CollabSkill",
        "Bootstrap ranking stability (60 rounds over observations, seed 5)",
        "paper model: mu0=0, sigma0=1, beta=1",
        "P(rank=1)",
        "95% rank interval",
        "Mean Kendall tau",
        "Leave-one-human-out mean",
        "Leave-one-task-out mean",
        "8 humans left out",
        "Pairwise P(row agent > column agent)",
        "latest snapshot v1",
        "Connectivity: every agent",
    ):
        assert header in output
    for agent in agents:
        assert agent.name in output
    assert output == _run("rating_report", "--study", study.slug, "--rounds", "60", "--seed", "5")


def test_rating_report_prints_the_tables_of_a_task_model_study():
    study, agents, _, episodes = ledger_study(seed=26, n_participants=8, rating_model="calibrated_task")
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk)
    output = _run("rating_report", "--study", study.slug, "--rounds", "30", "--seed", "2", "--cluster", "human")
    assert "calibrated_task model (beta=" in output and "sigma_task=" in output
    for header in ("Bootstrap ranking stability (30 rounds over participants", "Leave-one-task-out mean"):
        assert header in output
    for agent in agents:
        assert agent.name in output


def test_rating_report_notes_when_task_groups_are_missing(tmp_path, settings):
    settings.RATING = {**settings.RATING, "BOOTSTRAP_ROUNDS": 25}
    _run("import_sessions", _write(tmp_path, SESSIONS), "--study", "released", "--create")
    output = _run("rating_report")
    assert "=== released (released) ===" in output
    assert "Bootstrap ranking stability (25 rounds" in output
    assert "Leave-one-task-out skipped" in output
    assert "Claude Code" in output and "Codex" in output


def test_rating_report_handles_studies_without_data():
    assert "No study has rating data yet." in _run("rating_report")
    StudyFactory(slug="empty")
    assert "No active observations" in _run("rating_report", "--study", "empty")
    with pytest.raises(CommandError, match="--rounds"):
        _run("rating_report", "--rounds", "0")


def test_rating_report_leaves_tasks_out_by_uuid_even_when_the_tasks_are_not_in_this_database(tmp_path):
    task_ids = ["0b6f3c1e-1111-4a4a-8b8b-000000000001", "0b6f3c1e-1111-4a4a-8b8b-000000000002"]
    sessions = [dict(s, task_id=task_ids[n % 2]) for n, s in enumerate(SESSIONS[:4])]
    _run("import_sessions", _write(tmp_path, sessions), "--study", "released", "--create")
    output = _run("rating_report", "--study", "released", "--rounds", "20")
    assert "2 tasks left out in turn" in output
    assert "Leave-one-task-out skipped" not in output


def test_invalid_rating_settings_get_a_clear_message():
    study, _, _, episodes = ledger_study(seed=25, rating_beta=0.0)
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk)
    for command in ("refresh_ratings", "rating_report"):
        with pytest.raises(CommandError, match="invalid rating settings: beta must be > 0"):
            _run(command, "--study", study.slug)


# ---- rating models, leniency, --json ---------------------------------------------------------------------


def test_sessions_without_an_agent_or_user_are_left_out_and_named_and_numeric_strings_count(tmp_path):
    sessions = [dict(s) for s in SESSIONS[:4]]
    sessions[0]["agent_id"] = None
    sessions[1]["user_id"] = ""
    sessions[2]["autograde_overall_score"] = " 70.5 "
    output = _run("import_sessions", _write(tmp_path, sessions), "--study", "released", "--create", "--model", "paper")
    observations = {o.external_id: o for o in Observation.objects.filter(study__slug="released")}
    assert set(observations) == {"s3", "s4"}
    assert observations["s3"].y == 70.5
    assert "left out 1 session(s) without an agent and 1 without a user: s1, s2" in output
    assert "2 counted" in output


def test_model_paper_reproduces_the_paper_model_whatever_the_study_had(tmp_path):
    StudyFactory(slug="released", rating_model="calibrated", rating_mu0=50.0, rating_sigma0=20.0, rating_beta=15.0)
    output = _run("import_sessions", _write(tmp_path, SESSIONS), "--study", "released", "--model", "paper")
    study = Study.objects.get(slug="released")
    assert (study.rating_model, study.rating_mu0, study.rating_sigma0, study.rating_beta, study.rating_k) == (
        "paper", 0.0, 1.0, 1.0, 3.0
    )
    assert "rating model: paper (changed by this import)" in output
    snapshot = RatingSnapshot.objects.get(study=study)
    assert snapshot.config["kind"] == "paper"
    assert_snapshot_matches_batch(snapshot, study)
    assert AuditEvent.objects.filter(action="study.rating_model", study=study).exists()


def test_a_new_study_made_by_import_is_calibrated_unless_told(tmp_path):
    _run("import_sessions", _write(tmp_path, SESSIONS), "--study", "released", "--create")
    study = Study.objects.get(slug="released")
    assert study.rating_model == "calibrated"
    assert RatingSnapshot.objects.get(study=study).config["kind"] == "calibrated"


@pytest.mark.parametrize("kind", ["paper", "calibrated", "calibrated_task"])
def test_rating_report_json_is_fit_model_on_the_study_ledger(kind):
    study, agents, _, episodes = ledger_study(seed=31, n_participants=12, rating_model=kind)
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk)
    printed = json.loads(_run("rating_report", "--study", study.slug, "--json"))

    rows = list(Observation.objects.filter(study=study, active=True).order_by("pk")
                .values_list("agent_id", "participant_id", "task_uuid", "y"))
    spec = ModelSpec(kind=kind)
    expected = fit_model(
        np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), np.array([r[3] for r in rows]),
        np.array([str(r[2]) for r in rows], dtype=object), spec=spec,
    ).to_dict()
    assert printed["study"] == study.slug and printed["n_observations"] == len(rows)
    assert printed["agent_names"] == {str(a.pk): a.name for a in agents}
    assert printed["fit"]["model"] == spec.to_dict()
    assert printed["fit"].keys() == expected.keys()
    assert [a["agent_id"] for a in printed["fit"]["agents"]] == [a["agent_id"] for a in expected["agents"]]
    for mine, theirs in zip(printed["fit"]["agents"], expected["agents"], strict=True):
        for key in ("mu", "sigma", "conservative", "n"):
            assert mine[key] == pytest.approx(theirs[key], abs=1e-9)
    np.testing.assert_allclose(printed["fit"]["agent_cov"], expected["agent_cov"], atol=1e-9)
    assert printed["fit"]["hyper"].keys() == expected["hyper"].keys()


def test_rating_report_json_needs_a_study_with_data():
    with pytest.raises(CommandError, match="--json needs --study"):
        _run("rating_report", "--json")
    StudyFactory(slug="empty")
    with pytest.raises(CommandError, match="no active observations"):
        _run("rating_report", "--study", "empty", "--json")
