"""Live updates through the services (rating/services/live.py): queued ledger changes update the stored
information form, the snapshot equals a solve of the whole final ledger at the refit's variance components,
and every condition that needs a refit gets one, with its reason recorded."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rating import selectors
from rating.live import InformationState, participant_terms
from rating.models import EntityRating, LedgerChange, PosteriorState, RatingSnapshot
from rating.services import ledger, live, refresh
from studies.models import Episode, Study
from tests.factories import AgentFactory, EpisodeFactory, ParticipantFactory, TaskFactory
from tests.rating.ledger import ledger_study

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def live_settings(settings):
    settings.RATING = {**settings.RATING, "LIVE_UPDATES": True, "LIVE_MIN_OBSERVATIONS": 0,
                       "REML_INTERVAL_SECONDS": 3600.0, "LIVE_DRIFT_ALPHA": 1e-12}
    return settings


def _refitted_study(**fields):
    study, agents, participants, episodes = ledger_study(
        n_agents=3, n_participants=40, per_participant=3, seed=4, rating_model=Study.RatingModel.CALIBRATED,
        **fields)
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk, schedule_refresh=False)
    refit = refresh.posterior_refresh(study_id=study.pk)
    return study, agents, participants, episodes, refit


def _scored(study, participant, agent, score: float) -> Episode:
    episode = EpisodeFactory(participant=participant, study=study, agent=agent, task=TaskFactory(studies=[study]),
                             position=9, status=Episode.Status.GRADED, auto_score=score)
    ledger.observation_record(episode_id=episode.pk, schedule_refresh=False)
    return episode


def _solve_of_the_ledger(study):
    """The agents' posterior from the whole active ledger at the stored variance components (no chain)."""
    state = InformationState.from_bytes(bytes(PosteriorState.objects.get(study=study).data))
    arrays = selectors.observations_arrays(study)
    position = {int(a): i for i, a in enumerate(state.agent_ids.tolist())}
    codes = np.array([position[int(a)] for a in arrays.agent_ids])
    terms = participant_terms(codes, arrays.participant_ids, arrays.y, arrays.w, state.n_agents, state.gammas)
    return state, dataclasses.replace(state, terms=terms).posterior()


def _assert_snapshot_is_the_solve(study, snapshot: RatingSnapshot) -> None:
    state, expected = _solve_of_the_ledger(study)
    rows = {r.entity_id: r for r in EntityRating.objects.filter(snapshot=snapshot, entity_kind="agent")}
    keys = state.agent_ids.astype(int).tolist()
    np.testing.assert_allclose([rows[k].mu for k in keys], expected.agent_mu, rtol=0, atol=1e-9)
    np.testing.assert_allclose([rows[k].sigma for k in keys], expected.agent_sigma(), rtol=0, atol=1e-9)
    np.testing.assert_allclose(snapshot.fit["prob_greater"], expected.prob_greater, rtol=0, atol=1e-9)
    np.testing.assert_allclose(snapshot.fit["agent_cov"], expected.agent_cov, rtol=0, atol=1e-9)


def test_queued_changes_update_the_agents_exactly_and_the_snapshot_says_how():
    study, agents, participants, episodes, refit = _refitted_study()
    row = PosteriorState.objects.get(study=study)
    assert row.live and row.refit_id == refit.pk and row.updates == 0
    assert not LedgerChange.objects.filter(study=study).exists()

    # New episodes of known and new participants, a regrade and an excluded episode.
    _scored(study, participants[0], agents[1], 91.0)
    _scored(study, ParticipantFactory(study=study), agents[2], 40.0)
    regraded = episodes[5]
    regraded.auto_score = 12.5
    regraded.save(update_fields=["auto_score"])
    ledger.observation_record(episode_id=regraded.pk, schedule_refresh=False)
    skipped = episodes[8]
    skipped.status = Episode.Status.SKIPPED
    skipped.save(update_fields=["status"])
    ledger.observation_record(episode_id=skipped.pk, schedule_refresh=False)
    assert LedgerChange.objects.filter(study=study).count() == 4

    first = live.posterior_update(study_id=study.pk)
    assert (first.produced_by, first.base_id, first.version) == ("update", refit.pk, refit.version + 1)
    assert first.fit["update"]["kind"] == "live" and first.fit["update"]["changes"] == 4
    assert first.fit["update"]["base_version"] == refit.version and first.fit["update"]["score_test"]["df"] >= 1
    assert first.n_observations == selectors.active_observations(study).count()
    assert not LedgerChange.objects.filter(study=study).exists()
    _assert_snapshot_is_the_solve(study, first)

    # A withdrawal retracts a participant's every observation; the chain goes on from the stored state.
    ledger.observations_retract_participant(participant_id=participants[3].pk, reason="withdrew")
    _scored(study, participants[3 + 1], agents[0], 77.0)
    second = live.posterior_update(study_id=study.pk)
    assert second.produced_by == "update" and second.base_id == refit.pk and second.fit["update"]["changes"] == 4
    assert PosteriorState.objects.get(study=study).updates == 2
    _assert_snapshot_is_the_solve(study, second)

    # Participants' ratings are the refit's, through every reader.
    humans = list(selectors.snapshot_ratings(second, EntityRating.Kind.HUMAN).values_list("entity_id", "mu"))
    assert humans == list(selectors.snapshot_ratings(refit, EntityRating.Kind.HUMAN).values_list("entity_id", "mu"))
    assert selectors.snapshot_ratings_count(second) == selectors.snapshot_ratings_count(refit)
    assert selectors.snapshot_rating_rows(second).filter(entity_kind="agent").first().snapshot_id == second.pk

    # Nothing queued: the request returns the latest snapshot and writes nothing.
    assert live.posterior_update(study_id=study.pk).pk == second.pk


def test_the_leaderboard_api_names_the_update_and_its_refit(client, django_user_model):
    study, agents, participants, _, refit = _refitted_study()
    _scored(study, participants[1], agents[0], 66.0)
    update = live.posterior_update(study_id=study.pk)
    client.force_login(django_user_model.objects.create_user("staff", is_staff=True, is_superuser=True))
    body = client.get(f"/api/studies/{study.slug}/leaderboard/").json()
    assert (body["version"], body["produced_by"], body["base_version"]) == (update.version, "update", refit.version)
    assert len(body["agents"]) == 3 and len(body["humans"]) == 40


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("new_agent", "a new agent has observations"),
        ("settings", "the rating model settings changed"),
        ("schedule", "scheduled re-estimation of the variance components"),
        ("drift", "the variance components drifted"),
        ("crowd", "participants changed at once"),
        ("small", "a small ledger"),
    ],
)
def test_a_refit_replaces_the_live_update_when_it_must(change, reason, live_settings):
    study, agents, participants, _, refit = _refitted_study()
    agent = AgentFactory() if change == "new_agent" else agents[0]
    _scored(study, participants[2], agent, 55.0)
    _scored(study, participants[5], agents[1], 65.0)
    overrides = {"schedule": {"REML_INTERVAL_SECONDS": 0.0}, "drift": {"LIVE_DRIFT_ALPHA": 1.0},
                 "crowd": {"LIVE_MAX_PARTICIPANTS": 1}, "small": {"LIVE_MIN_OBSERVATIONS": 10_000}}
    live_settings.RATING = {**live_settings.RATING, **overrides.get(change, {})}
    if change == "settings":
        study.rating_k = 2.0
        study.save(update_fields=["rating_k"])
    snapshot = live.posterior_update(study_id=study.pk)
    assert snapshot.produced_by == "refit" and snapshot.base_id is None and snapshot.version == refit.version + 1
    assert reason in snapshot.fit["update"]["reason"]
    row = PosteriorState.objects.get(study=study)
    assert row.refit_id == snapshot.pk and row.updates == 0
    assert row.live == (change != "small")  # below LIVE_MIN_OBSERVATIONS a refit keeps no live state
    assert not LedgerChange.objects.filter(study=study).exists()


def test_models_without_live_updates_refit_and_keep_no_queue():
    study, agents, participants, episodes = ledger_study(n_agents=3, n_participants=8, seed=2)  # the paper model
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk, schedule_refresh=False)
    first = live.posterior_update(study_id=study.pk)
    assert first.produced_by == "refit" and "no live state" in first.fit["update"]["reason"]
    assert not PosteriorState.objects.get(study=study).live
    _scored(study, participants[0], agents[0], 50.0)
    second = live.posterior_update(study_id=study.pk)
    assert second.produced_by == "refit" and second.version == first.version + 1
    assert not LedgerChange.objects.filter(study=study).exists()


def test_a_live_state_shortens_the_debounce_of_refresh_requests(live_settings):
    live_settings.RATING = {**live_settings.RATING, "LIVE_DEBOUNCE_SECONDS": 0.25, "REFRESH_DEBOUNCE_SECONDS": 7.0}
    study, *_ = _refitted_study()
    assert refresh._debounce_seconds(study.pk) == 0.25
    PosteriorState.objects.filter(study=study).update(live=False)
    assert refresh._debounce_seconds(study.pk) == 7.0


def test_the_sweep_refits_a_study_whose_live_updates_rest_on_old_variance_components(live_settings):
    study, agents, participants, _, refit = _refitted_study()
    _scored(study, participants[1], agents[2], 58.0)
    update = live.posterior_update(study_id=study.pk)
    assert update.produced_by == "update"
    assert refresh.posteriors_refresh_stale() == []  # current, and the components are fresh
    live_settings.RATING = {**live_settings.RATING, "REML_INTERVAL_SECONDS": 0.0}
    assert refresh.posteriors_refresh_stale() == [study.pk]
    latest = selectors.latest_snapshot(study)
    assert latest.produced_by == "refit" and "scheduled" in latest.fit["update"]["reason"]
    assert PosteriorState.objects.get(study=study).updates == 0
    assert refresh.posteriors_refresh_stale() == []  # nothing updated since


@pytest.mark.django_db(transaction=True)
def test_a_refresh_task_that_finds_another_refresh_running_asks_again_instead_of_waiting(monkeypatch):
    import psycopg
    from django.db import connection

    from rating import tasks
    from rating.task_names import REFRESH_POSTERIOR

    study, agents, participants, _, refit = _refitted_study()
    _scored(study, participants[0], agents[0], 61.0)
    sent = []
    monkeypatch.setattr("celery.current_app.send_task", lambda name, args, **kw: sent.append((name, args, kw)))
    params = connection.get_connection_params()
    with psycopg.connect(**{k: v for k, v in params.items() if k in ("dbname", "host", "port", "user", "password")},
                         autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [refresh._REFRESH_LOCK, study.pk])
        assert tasks.refresh_posterior(study.pk) is None
        assert [(name, args) for name, args, _ in sent] == [(REFRESH_POSTERIOR, [study.pk])]
        assert selectors.latest_snapshot(study).pk == refit.pk  # nothing written, the change still queued
        assert LedgerChange.objects.filter(study=study).count() == 1
        other.execute("SELECT pg_advisory_unlock(%s, %s)", [refresh._REFRESH_LOCK, study.pk])
    result = tasks.refresh_posterior(study.pk)
    assert result["version"] == refit.version + 1
    assert selectors.latest_snapshot(study).produced_by == "update"
    assert not LedgerChange.objects.filter(study=study).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("refresh_kind", ["live update", "refit"])
def test_a_change_committed_during_a_refresh_stays_queued_and_counts_once(monkeypatch, refresh_kind):
    """A grade recorded while a refresh runs is neither lost nor applied twice (repeatable read + the queue)."""
    import threading

    from django.db import connections

    study, agents, participants, episodes, refit = _refitted_study()
    _scored(study, participants[0], agents[0], 81.0)
    from django.conf import settings as django_settings

    if refresh_kind == "refit":  # components due: the refresh is a refit
        monkeypatch.setattr(django_settings, "RATING", {**django_settings.RATING, "REML_INTERVAL_SECONDS": 0.0})
    paused, resume = threading.Event(), threading.Event()
    # Pause the refresh after it has read: the live update after reading the queue, the refit after the ledger.
    target, name = (live, "_participants_before") if refresh_kind == "live update" else (selectors, "study_ledger")
    original = getattr(target, name)

    def pausing(*args, **kwargs):
        result = original(*args, **kwargs)
        paused.set()
        assert resume.wait(30)
        return result

    monkeypatch.setattr(target, name, pausing)
    outcome = {}

    def run():
        try:
            outcome["snapshot"] = live.posterior_update(study_id=study.pk)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    assert paused.wait(30)
    late = _scored(study, participants[7], agents[2], 23.0)  # commits while the refresh holds its snapshot
    resume.set()
    thread.join(60)
    first = outcome["snapshot"]
    assert first.produced_by == ("update" if refresh_kind == "live update" else "refit")
    assert list(LedgerChange.objects.filter(study=study).values_list("observation_id", flat=True)) == [
        late.observation.pk]
    assert first.n_observations == selectors.active_observations(study).count() - 1  # the late grade is not in it
    monkeypatch.setattr(target, name, original)
    if refresh_kind == "refit":
        monkeypatch.setattr(django_settings, "RATING", {**django_settings.RATING, "REML_INTERVAL_SECONDS": 3600.0})
    second = live.posterior_update(study_id=study.pk)
    assert second.produced_by == "update" and second.n_observations == selectors.active_observations(study).count()
    assert not LedgerChange.objects.filter(study=study).exists()
    _assert_snapshot_is_the_solve(study, second)


def test_staff_see_the_queue_and_the_state_in_the_admin_without_the_blob(client, django_user_model):
    study, agents, participants, _, refit = _refitted_study()
    _scored(study, participants[2], agents[1], 44.0)
    client.force_login(django_user_model.objects.create_user("root", is_staff=True, is_superuser=True))
    state = PosteriorState.objects.get(study=study)
    page = client.get(f"/admin/rating/posteriorstate/{state.pk}/change/")
    assert page.status_code == 200 and b"Live updates since the refit" in page.content
    assert b"Data" not in page.content
    queue = client.get("/admin/rating/ledgerchange/")
    assert queue.status_code == 200 and str(participants[2].pk).encode() in queue.content
