"""The rating ledger's services: recording, regrades, retraction, re-recording, snapshots and debounce."""

from __future__ import annotations

import time

import numpy as np
import pytest
from django.core.cache import cache
from django.db import connection

from rating.exceptions import InvalidScore
from rating.models import EntityRating, Observation, PendingRatingRows, RatingSnapshot
from rating.services import ledger, refresh
from studies.models import AuditEvent, Episode, Participant, Study
from studyapp.celery import app
from tests.factories import AgentFactory, EpisodeFactory, ParticipantFactory, StudyFactory
from tests.rating.ledger import assert_snapshot_matches_batch, ledger_study

pytestmark = pytest.mark.django_db


def _record_all(episodes) -> None:
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk)


def _episode(study: Study | None = None, **fields) -> Episode:
    study = study or StudyFactory()
    fields.setdefault("status", Episode.Status.GRADED)
    return EpisodeFactory(participant=ParticipantFactory(study=study), study=study, **fields)


def _rating_queue_size() -> int:
    with app.connection_for_write() as conn:
        return conn.default_channel.queue_declare(queue="rating").message_count


def _purge_rating_queue() -> None:
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("rating")


# ---- score source --------------------------------------------------------------------------------------


def test_recording_takes_y_from_the_auto_score_by_default():
    episode = _episode(auto_score=71.5, expert_score=40.0)
    observation = ledger.observation_record(episode_id=episode.pk)
    episode.refresh_from_db()
    assert (episode.score, episode.score_source) == (71.5, "auto")
    assert (observation.y, observation.source, observation.active) == (71.5, "auto", True)
    assert (observation.agent_id, observation.participant_id, observation.task_id, observation.task_uuid) == (
        episode.agent_id,
        episode.participant_id,
        episode.task_id,
        episode.task.uuid,
    )


def test_recording_takes_the_expert_score_when_the_study_rates_on_expert_grades():
    episode = _episode(StudyFactory(score_source=Study.ScoreSource.EXPERT), auto_score=71.5, expert_score=40.0)
    observation = ledger.observation_record(episode_id=episode.pk)
    episode.refresh_from_db()
    assert (episode.score, episode.score_source, observation.y, observation.source) == (40.0, "expert", 40.0, "expert")


def test_blended_source_weights_the_expert_score_by_the_study_setting():
    study = StudyFactory(score_source=Study.ScoreSource.BLENDED, blend_expert_weight=0.25)
    episode = _episode(study, auto_score=70.0, expert_score=40.0)
    observation = ledger.observation_record(episode_id=episode.pk)
    assert observation.y == pytest.approx(0.25 * 40.0 + 0.75 * 70.0)
    assert observation.source == "blended"
    episode.refresh_from_db()
    assert episode.score_source == "blended"


def test_blended_source_falls_back_to_the_only_score_and_says_which():
    study = StudyFactory(score_source=Study.ScoreSource.BLENDED, blend_expert_weight=0.25)
    auto_only = _episode(study, auto_score=70.0)
    expert_only = _episode(study, expert_score=40.0)
    assert (
        ledger.observation_record(episode_id=auto_only.pk).y,
        auto_only.__class__.objects.get(pk=auto_only.pk).score_source,
    ) == (70.0, "auto")
    assert ledger.observation_record(episode_id=expert_only.pk).source == "expert"


def test_a_score_outside_0_to_100_is_refused_and_nothing_is_written():
    episode = _episode(auto_score=140.0)
    with pytest.raises(InvalidScore, match="between 0 and 100"):
        ledger.observation_record(episode_id=episode.pk)
    episode.refresh_from_db()
    assert episode.score is None
    assert not Observation.objects.exists()


def test_recording_an_unknown_episode_returns_none():
    assert ledger.observation_record(episode_id=987654) is None


# ---- idempotency and regrades --------------------------------------------------------------------------


def test_recording_the_same_score_again_writes_nothing_and_schedules_nothing(django_capture_on_commit_callbacks):
    episode = _episode(auto_score=66.0)
    with django_capture_on_commit_callbacks() as first:
        observation = ledger.observation_record(episode_id=episode.pk)
    audits = AuditEvent.objects.count()
    stamp = Observation.objects.get(pk=observation.pk).updated_at
    with django_capture_on_commit_callbacks() as again:
        ledger.observation_record(episode_id=episode.pk)
        ledger.observation_record(episode_id=episode.pk)
    assert len(first) == 1 and len(again) == 0
    assert AuditEvent.objects.count() == audits
    assert Observation.objects.get(pk=observation.pk).updated_at == stamp
    assert Observation.objects.count() == 1


def test_regrade_replaces_the_old_observation_and_the_refresh_equals_a_fresh_model():
    study, _, _, episodes = ledger_study(seed=1)
    _record_all(episodes)
    first = refresh.posterior_refresh(study_id=study.pk)
    regraded = episodes[4]
    old_y = regraded.auto_score
    Episode.objects.filter(pk=regraded.pk).update(auto_score=12.25)
    observation = ledger.observation_record(episode_id=regraded.pk)
    assert observation.y == 12.25 and observation.active
    assert Observation.objects.filter(episode=regraded).count() == 1
    audit = AuditEvent.objects.filter(action="episode.score_set", object_id=str(regraded.pk)).order_by("-pk")[0]
    assert (audit.before["score"], audit.after["score"]) == (old_y, 12.25)
    second = refresh.posterior_refresh(study_id=study.pk)
    assert second.version == first.version + 1
    assert_snapshot_matches_batch(second, study)
    changed = EntityRating.objects.get(snapshot=second, entity_kind="human", entity_id=regraded.participant_id)
    before = EntityRating.objects.get(snapshot=first, entity_kind="human", entity_id=regraded.participant_id)
    assert changed.mu < before.mu


def test_a_removed_score_deactivates_the_observation_and_a_new_score_reactivates_it():
    episode = _episode(auto_score=55.0)
    ledger.observation_record(episode_id=episode.pk)
    Episode.objects.filter(pk=episode.pk).update(auto_score=None)
    observation = ledger.observation_record(episode_id=episode.pk)
    assert (observation.active, observation.retraction_reason) == (False, "no score")
    Episode.objects.filter(pk=episode.pk).update(auto_score=61.0)
    observation = ledger.observation_record(episode_id=episode.pk)
    assert (observation.active, observation.y, observation.retraction_reason) == (True, 61.0, "")
    assert Observation.objects.filter(episode=episode).count() == 1


@pytest.mark.parametrize(
    ("episode_fields", "participant_status", "reason"),
    [
        ({"status": Episode.Status.SKIPPED}, Participant.Status.WORKING, "episode skipped"),
        ({"is_gold": True}, Participant.Status.WORKING, "gold QA episode"),
        ({}, Participant.Status.WITHDRAWN, "participant withdrawn"),
    ],
)
def test_excluded_episodes_do_not_count(episode_fields, participant_status, reason):
    episode = _episode(auto_score=80.0)
    ledger.observation_record(episode_id=episode.pk)
    Episode.objects.filter(pk=episode.pk).update(**episode_fields)
    Participant.objects.filter(pk=episode.participant_id).update(status=participant_status)
    observation = ledger.observation_record(episode_id=episode.pk)
    assert (observation.active, observation.retraction_reason) == (False, reason)
    assert not Observation.objects.filter(active=True).exists()


def test_an_unscored_or_excluded_episode_gets_no_observation():
    assert ledger.observation_record(episode_id=_episode().pk) is None
    assert ledger.observation_record(episode_id=_episode(auto_score=50.0, status=Episode.Status.SKIPPED).pk) is None
    assert not Observation.objects.exists()


# ---- retraction and re-recording -----------------------------------------------------------------------


def test_retracting_a_participant_removes_exactly_their_contribution(django_capture_on_commit_callbacks):
    study, _, participants, episodes = ledger_study(seed=2)
    _record_all(episodes)
    leaving = participants[1]
    with django_capture_on_commit_callbacks() as scheduled:
        count = ledger.observations_retract_participant(participant_id=leaving.pk, reason="withdrew consent")
    assert count == 3 and len(scheduled) == 1
    assert not Observation.objects.filter(participant=leaving, active=True).exists()
    assert Observation.objects.filter(participant=leaving).first().retraction_reason == (
        "participant retracted: withdrew consent"
    )
    snapshot = refresh.posterior_refresh(study_id=study.pk)
    assert not snapshot.ratings.filter(entity_kind="human", entity_id=leaving.pk).exists()
    assert_snapshot_matches_batch(snapshot, study)
    assert AuditEvent.objects.filter(action="observation.retract_participant", object_id=str(leaving.pk)).exists()
    assert ledger.observations_retract_participant(participant_id=leaving.pk, reason="again") == 0


def test_a_late_regrade_cannot_bring_back_a_retracted_participant():
    study, _, participants, episodes = ledger_study(seed=3)
    _record_all(episodes)
    ledger.observations_retract_participant(participant_id=participants[0].pk, reason="excluded by staff")
    mine = [e for e in episodes if e.participant_id == participants[0].pk]
    Episode.objects.filter(pk=mine[0].pk).update(auto_score=99.0)
    observation = ledger.observation_record(episode_id=mine[0].pk)
    assert observation.active is False
    assert observation.retraction_reason.startswith("participant retracted")
    assert not Observation.objects.filter(participant=participants[0], active=True).exists()


def test_rerecording_after_a_score_source_switch_equals_the_batch_solution():
    study, _, _, episodes = ledger_study(seed=4, expert_share=0.5, n_participants=8)
    _record_all(episodes)
    refresh.posterior_refresh(study_id=study.pk)
    Study.objects.filter(pk=study.pk).update(score_source=Study.ScoreSource.EXPERT)
    assert ledger.study_rerecord(study_id=study.pk) == len(episodes)
    with_expert = {e.pk: e.expert_score for e in episodes if e.expert_score is not None}
    active = dict(Observation.objects.filter(study=study, active=True).values_list("episode_id", "y"))
    assert active == with_expert
    assert Observation.objects.filter(study=study, active=False, retraction_reason="no score").count() == (
        len(episodes) - len(with_expert)
    )
    study.refresh_from_db()
    assert_snapshot_matches_batch(refresh.posterior_refresh(study_id=study.pk), study)


# ---- snapshots ----------------------------------------------------------------------------------------


def test_snapshots_count_up_and_rate_every_entity_of_the_active_ledger():
    study, agents, participants, episodes = ledger_study(seed=5, rating_k=2.0)
    _record_all(episodes)
    first = refresh.posterior_refresh(study_id=study.pk)
    second = refresh.posterior_refresh(study_id=study.pk)
    assert (first.version, second.version) == (1, 2)
    assert RatingSnapshot.objects.filter(study=study).count() == 2
    agent_rows = list(second.ratings.filter(entity_kind="agent").order_by("rank"))
    human_rows = list(second.ratings.filter(entity_kind="human").order_by("rank"))
    assert {r.entity_id: r.label for r in agent_rows} == {a.pk: a.name for a in agents}
    assert {r.entity_id: r.label for r in human_rows} == {p.pk: p.pseudonym for p in participants}
    for rows in (agent_rows, human_rows):
        assert [r.rank for r in rows] == list(range(1, len(rows) + 1))
        scores = [r.conservative for r in rows]
        assert scores == sorted(scores, reverse=True)
        for r in rows:
            assert r.conservative == pytest.approx(r.mu - 2.0 * r.sigma)
    assert sum(r.n for r in agent_rows) == len(episodes) == second.n_observations
    assert second.config == {
        "kind": "paper",
        "k": 2.0,
        "paper": {
            "mu0": 0.0,
            "sigma0": 1.0,
            "beta": 1.0,
            "k": 2.0,
            "agent_mu0": None,
            "agent_sigma0": None,
            "human_mu0": None,
            "human_sigma0": None,
        },
        "integrate_hyper": True,
    }
    assert second.fit["model"] == second.config and second.fit["diagnostics"]["beta"] == 1.0
    assert set(second.timings) == {
        "read_ms",
        "solve_ms",
        "participants_ready_ms",
        "participants_write_ms",
        "connectivity_ms",
        "write_ms",
        "state_ms",
        "total_ms",
    }
    assert second.connectivity["connected"] is True
    assert_snapshot_matches_batch(second, study)


def test_snapshot_labels_with_copy_control_characters_are_written_verbatim():
    study, agents, participants, episodes = ledger_study(seed=6)
    _record_all(episodes)
    awkward = ["tab\there", "back\\slash \\N", "new\nline\r", "plain é"]
    for agent, name in zip(agents, awkward, strict=False):
        agent.name = name
        agent.save(update_fields=["name"])
    participants[0].pseudonym = "p\t\\0"
    participants[0].save(update_fields=["pseudonym"])
    snapshot = refresh.posterior_refresh(study_id=study.pk)
    labels = dict(snapshot.ratings.filter(entity_kind="agent").values_list("entity_id", "label"))
    assert labels == {a.pk: a.name for a in agents}
    human = snapshot.ratings.get(entity_kind="human", entity_id=participants[0].pk)
    assert human.label == "p\t\\0"
    assert_snapshot_matches_batch(snapshot, study)


def test_a_calibrated_refit_writes_its_participants_before_the_fit_ends(monkeypatch):
    """The fit hands the participants' posterior over before its leverages and diagnostics; the rows written
    then are the final fit's, ranked and labelled like the rest.

    The leverages wait until the participants' rows are written: a refit that wrote them only after the fit
    ended would leave the leverages waiting, and fail.
    """
    import threading

    import rating.fit as fit_module

    study, agents, participants, episodes = ledger_study(
        seed=8, n_participants=12, per_participant=4, rating_model=Study.RatingModel.CALIBRATED, rating_k=1.5
    )
    _record_all(episodes)
    order: list[str] = []
    written = threading.Event()
    original_write, original_leverages = refresh._participants_write, fit_module._dense_leverages

    def write(*args, **kwargs):
        result = original_write(*args, **kwargs)
        order.append("participants written")
        written.set()
        return result

    def leverages(*args, **kwargs):
        if not written.wait(timeout=60):
            raise AssertionError("the participants' rows were not written while the fit was still running")
        order.append("leverages")
        return original_leverages(*args, **kwargs)

    monkeypatch.setattr(refresh, "_participants_write", write)
    monkeypatch.setattr(fit_module, "_dense_leverages", leverages)
    snapshot = refresh.posterior_refresh(study_id=study.pk)
    assert order == ["participants written", "leverages"]
    humans = list(snapshot.ratings.filter(entity_kind="human").order_by("rank"))
    assert {r.entity_id: r.label for r in humans} == {p.pk: p.pseudonym for p in participants}
    assert [r.rank for r in humans] == list(range(1, len(humans) + 1))
    for r in humans:
        assert r.conservative == pytest.approx(r.mu - 1.5 * r.sigma, abs=1e-12)
    assert snapshot.fit["diagnostics"]["leverage_mean"] > 0 and snapshot.connectivity["connected"] is True
    assert RatingSnapshot.objects.get(pk=snapshot.pk).fit == snapshot.fit
    assert_snapshot_matches_batch(snapshot, study)


def _fail_after_the_participants_are_written(monkeypatch) -> list[int]:
    """Make the fit fail in its leverages once the refit has written the participants' rows; return the list
    that receives the snapshot id they were written for."""
    import rating.fit as fit_module

    written: list[int] = []
    original_write = refresh._participants_write

    def write(snapshot, *args, **kwargs):
        original_write(snapshot, *args, **kwargs)
        written.append(snapshot.pk)

    def broken(*args, **kwargs):
        for _ in range(1000):  # fail only once the participants' rows are in
            if written:
                break
            time.sleep(0.01)
        raise RuntimeError("leverages failed")

    monkeypatch.setattr(refresh, "_participants_write", write)
    monkeypatch.setattr(fit_module, "_dense_leverages", broken)
    return written


def test_a_fit_that_fails_after_the_participants_were_written_leaves_no_snapshot(monkeypatch):
    study, _, _, episodes = ledger_study(seed=9, rating_model=Study.RatingModel.CALIBRATED)
    _record_all(episodes)
    written = _fail_after_the_participants_are_written(monkeypatch)
    with pytest.raises(RuntimeError, match="leverages failed"):
        refresh.posterior_refresh(study_id=study.pk)
    assert written
    assert not RatingSnapshot.objects.filter(study=study).exists()
    assert not EntityRating.objects.filter(snapshot_id__in=written).exists()


def test_refreshing_an_empty_ledger_writes_an_empty_snapshot():
    study = StudyFactory()
    snapshot = refresh.posterior_refresh(study_id=study.pk)
    assert (snapshot.version, snapshot.n_observations, snapshot.ratings.count()) == (1, 0, 0)
    assert snapshot.connectivity["n_components"] == 0


def test_agents_that_share_no_participant_are_flagged_in_the_snapshot():
    study = StudyFactory()
    alpha, beta = AgentFactory(name="Alpha"), AgentFactory(name="Beta")
    for agent in (alpha, alpha, beta):
        ledger.observation_record(episode_id=_episode(study, agent=agent, auto_score=60.0).pk)
    snapshot = refresh.posterior_refresh(study_id=study.pk)
    assert snapshot.connectivity["connected"] is False
    assert "Alpha" in snapshot.connectivity["warning"] and "Beta" in snapshot.connectivity["warning"]


def test_the_beat_sweep_refreshes_only_studies_whose_ledger_changed():
    changed, _, _, changed_episodes = ledger_study(seed=6)
    quiet, _, _, quiet_episodes = ledger_study(seed=7)
    _record_all(changed_episodes + quiet_episodes)
    assert set(refresh.posteriors_refresh_stale()) >= {changed.pk, quiet.pk}
    assert refresh.posteriors_refresh_stale() == []
    Episode.objects.filter(pk=changed_episodes[0].pk).update(auto_score=1.0)
    ledger.observation_record(episode_id=changed_episodes[0].pk)
    assert refresh.posteriors_refresh_stale() == [changed.pk]
    assert RatingSnapshot.objects.filter(study=quiet).count() == 1


def test_repeated_refresh_requests_write_one_snapshot_per_ledger_change():
    from rating.tasks import refresh_posterior

    study, _, _, episodes = ledger_study(seed=8)
    _record_all(episodes)
    for _ in range(3):
        refresh_posterior(study.pk)
    assert RatingSnapshot.objects.filter(study=study).count() == 1
    Episode.objects.filter(pk=episodes[0].pk).update(auto_score=3.0)
    ledger.observation_record(episode_id=episodes[0].pk)
    for _ in range(3):
        refresh_posterior(study.pk)
    assert list(RatingSnapshot.objects.filter(study=study).values_list("version", flat=True)) == [2, 1]
    study.rating_k = 1.5  # a settings change is a change too
    study.save()
    refresh_posterior(study.pk)
    assert RatingSnapshot.objects.filter(study=study).count() == 3


# ---- debounce -----------------------------------------------------------------------------------------


@pytest.fixture
def rating_queue(settings):
    """The real broker's rating queue, emptied before and after the test."""
    settings.RATING = {**settings.RATING, "REFRESH_DEBOUNCE_SECONDS": 1}
    _purge_rating_queue()
    yield _rating_queue_size
    _purge_rating_queue()


def test_a_burst_of_schedule_calls_enqueues_one_refresh(rating_queue):
    study = StudyFactory()
    cache.delete(refresh.refresh_key(study.pk))
    decisions = [refresh.posterior_schedule_refresh(study_id=study.pk) for _ in range(5)]
    assert decisions == [True, False, False, False, False]
    assert rating_queue() == 1
    assert cache.get(refresh.refresh_key(study.pk)) == 1


def test_a_change_after_the_window_expires_schedules_another_refresh(rating_queue):
    study = StudyFactory()
    cache.delete(refresh.refresh_key(study.pk))
    assert refresh.posterior_schedule_refresh(study_id=study.pk) is True
    time.sleep(1.3)
    assert refresh.posterior_schedule_refresh(study_id=study.pk) is True
    assert rating_queue() == 2


def test_a_refresh_reopens_the_window_before_it_reads_the_ledger(rating_queue):
    study = StudyFactory()
    cache.delete(refresh.refresh_key(study.pk))
    assert refresh.posterior_schedule_refresh(study_id=study.pk) is True
    refresh.posterior_refresh(study_id=study.pk)
    assert cache.get(refresh.refresh_key(study.pk)) is None
    assert refresh.posterior_schedule_refresh(study_id=study.pk) is True
    assert rating_queue() == 2


def test_recording_schedules_the_refresh_only_after_commit(rating_queue, django_capture_on_commit_callbacks):
    episode = _episode(auto_score=42.0)
    cache.delete(refresh.refresh_key(episode.study_id))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        ledger.observation_record(episode_id=episode.pk)
        assert rating_queue() == 0
    for callback in callbacks:
        callback()
    assert rating_queue() == 1


def test_the_sweep_logs_a_study_that_fails_and_refreshes_the_others(caplog):
    good, _, _, good_episodes = ledger_study(seed=8)
    bad, _, _, bad_episodes = ledger_study(seed=9)
    _record_all(good_episodes + bad_episodes)
    Study.objects.filter(pk=bad.pk).update(rating_sigma0=0.0)  # the form validator would refuse this
    assert refresh.posteriors_refresh_stale() == [good.pk]
    assert f"refreshing study {bad.pk} failed" in caplog.text
    assert not RatingSnapshot.objects.filter(study=bad).exists()


@pytest.mark.parametrize("seed", range(5))
def test_the_snapshot_connectivity_equals_the_analysis_of_the_full_ledger(seed):
    from rating.connectivity import connectivity
    from rating.services.refresh import _connectivity_summary

    rng = np.random.default_rng(seed)
    n_agents, n_humans = 8, 30
    # Agents 0-3 and 4-7 each share participants among themselves only; agent 7 sometimes works alone.
    agents, humans = [], []
    for human in range(n_humans):
        group = (0, 1, 2, 3) if human % 2 else (4, 5, 6)
        for agent in rng.choice(group, size=rng.integers(1, 3), replace=False):
            agents.append(int(agent))
            humans.append(human)
    agents.append(7)
    humans.append(n_humans)
    agent_codes, human_codes = np.array(agents), np.array(humans)
    labels = np.array([f"Agent {i}" for i in range(n_agents)], dtype=object)
    order = np.unique(agent_codes, return_index=True)[1]
    first_seen = agent_codes[np.sort(order)]  # the fit numbers agents by first appearance
    codes = np.argsort(first_seen)[agent_codes]
    reduced = _connectivity_summary(codes, labels[first_seen], human_codes)
    full = connectivity(labels[agent_codes], human_codes.astype(str)).to_dict()
    assert reduced == full
    assert reduced["n_components"] >= 2


# ---- the ratings' binary COPY --------------------------------------------------------------------------


def _stored_ratings(snapshot: RatingSnapshot, kind: str) -> dict[int, tuple]:
    rows = EntityRating.objects.filter(snapshot=snapshot, entity_kind=kind).values_list(
        "entity_id", "label", "mu", "sigma", "conservative", "n", "rank"
    )
    return {row[0]: row[1:] for row in rows}


def _write(snapshot: RatingSnapshot, kind: str, keys, labels, mu, sigma, conservative, n) -> None:
    refresh.entity_ratings_write(snapshot_id=snapshot.pk, kind=kind, keys=keys, labels=labels, mu=mu, sigma=sigma,
                                 conservative=conservative, n=n)


@pytest.mark.django_db(transaction=True)
def test_rows_written_in_streams_of_their_own_are_the_given_ones_in_any_key_order(monkeypatch):
    """The streams take contiguous key ranges: keys given out of order are sorted first, in order sliced."""
    monkeypatch.setattr(refresh, "SEPARATE_STREAMS", 3)
    study = StudyFactory()
    rng = np.random.default_rng(5)
    for version, keys in enumerate((rng.permutation(np.arange(1, 41)), np.arange(1, 41)), start=1):
        snapshot = RatingSnapshot.objects.create(study=study, version=version)
        labels = [f"p{key}-" + "é" * int(key % 3) for key in keys.tolist()]  # labels of several byte lengths
        mu, sigma = rng.normal(size=40), rng.random(40)
        refresh.entity_ratings_write(snapshot_id=snapshot.pk, kind="human", keys=keys, labels=labels, mu=mu,
                                     sigma=sigma, conservative=mu - sigma, n=keys % 7, separately=True)
        stored = _stored_ratings(snapshot, "human")
        assert sorted(stored) == list(range(1, 41))
        for i, key in enumerate(keys.tolist()):
            assert stored[key][:5] == (labels[i], mu[i], sigma[i], mu[i] - sigma[i], key % 7)
        assert sorted(row[5] for row in stored.values()) == list(range(1, 41))
        assert PendingRatingRows.objects.filter(snapshot_id=snapshot.pk, rows=40).exists()


def test_the_ratings_write_stores_exactly_the_given_values_labels_and_non_finite_floats():
    study = StudyFactory()
    snapshot = RatingSnapshot.objects.create(study=study, version=1)
    rng = np.random.default_rng(3)
    labels = ["tab\there", "back\\slash \\N", "new\nline\r", "plain é", "日本語 ✓", "", "x" * 200, "a", "b", "\\."]
    keys = rng.permutation(np.arange(10, 10 + 10 * len(labels), 10)).astype(np.int64)
    mu = rng.normal(0, 1e6, len(labels)) / 3.0
    sigma = np.abs(rng.normal(0, 1, len(labels))) * 1e-300
    mu[1], mu[2], sigma[3] = np.nan, np.inf, -np.inf
    conservative = mu - 2.0 * sigma
    n = rng.integers(0, 2**31 - 1, len(labels))
    _write(snapshot, "human", keys, labels, mu, sigma, conservative, n)
    stored = _stored_ratings(snapshot, "human")
    assert sorted(stored) == sorted(keys.tolist())
    for i, key in enumerate(keys.tolist()):
        label, m, s, c, count, _ = stored[key]
        assert label == labels[i]
        assert count == int(n[i])
        for got, want in ((m, mu[i]), (s, sigma[i]), (c, conservative[i])):
            assert np.array([got]).tobytes() == np.array([want]).tobytes()  # the same bits, nan included


def test_the_ratings_write_ranks_by_conservative_score_then_mu_then_key():
    study = StudyFactory()
    snapshot = RatingSnapshot.objects.create(study=study, version=1)
    keys = np.array([7, 3, 5, 9, 1, 4], dtype=np.int64)
    mu = np.array([1.0, 2.0, 2.0, 0.5, 3.0, 2.0])
    conservative = np.array([0.0, 1.0, 1.0, 1.0, -1.0, 1.0])
    labels = [f"agent {k}" + "!" * int(k % 3) for k in keys.tolist()]  # labels of three different lengths
    _write(snapshot, "agent", keys, labels, mu, np.ones(6), conservative, np.arange(6))
    expected = sorted(range(6), key=lambda i: (-conservative[i], -mu[i], keys[i]))
    stored = _stored_ratings(snapshot, "agent")
    assert [stored[int(keys[i])][5] for i in expected] == [1, 2, 3, 4, 5, 6]
    assert {key: row[0] for key, row in stored.items()} == dict(zip(keys.tolist(), labels, strict=True))


def test_the_ratings_write_refuses_counts_beyond_the_integer_column():
    study = StudyFactory()
    snapshot = RatingSnapshot.objects.create(study=study, version=1)
    with pytest.raises(ValueError, match="n:"):
        _write(snapshot, "agent", np.array([1]), ["a"], np.zeros(1), np.ones(1), np.zeros(1), np.array([2**31]))
    assert not EntityRating.objects.filter(snapshot=snapshot).exists()


def test_the_ratings_write_stores_sorted_keys_with_labels_of_one_length_as_given():
    study = StudyFactory()
    snapshot = RatingSnapshot.objects.create(study=study, version=1)
    keys = np.arange(100, 150, dtype=np.int64)
    labels = [f"p\t{k:04d}é" for k in keys.tolist()]
    mu = np.linspace(-1.0, 1.0, 50)
    _write(snapshot, "human", keys, labels, mu, np.full(50, 0.5), mu - 1.5, np.arange(50))
    stored = _stored_ratings(snapshot, "human")
    assert stored == {k: (labels[i], mu[i], 0.5, mu[i] - 1.5, i, 50 - i) for i, k in enumerate(keys.tolist())}


@pytest.mark.parametrize("ties", [False, True])
def test_ranks_order_by_conservative_score_then_mu_then_key(ties):
    rng = np.random.default_rng(4)
    conservative = rng.normal(size=500)
    mu = rng.normal(size=500)
    if ties:
        conservative = np.round(conservative, 1)
        conservative[:3] = [np.nan, np.inf, -0.0]
        mu = np.round(mu)
    keys = rng.permutation(1000)[:500].astype(np.int64)
    ranks = refresh._ranks(conservative, mu, keys)
    expected = sorted(range(500), key=lambda i: (-conservative[i], -mu[i], keys[i]))
    if ties:  # lexsort puts nan last
        expected = sorted(
            range(500),
            key=lambda i: (np.isnan(conservative[i]), np.nan_to_num(-conservative[i], nan=0.0), -mu[i], keys[i]),
        )
    assert ranks[expected].tolist() == list(range(1, 501))


# ---- a refit's participants written on connections of their own -------------------------------------------------


def _separately_written_study(seed: int) -> Study:
    study, _, _, episodes = ledger_study(
        seed=seed, n_participants=14, per_participant=4, rating_model=Study.RatingModel.CALIBRATED
    )
    _record_all(episodes)
    return study


@pytest.mark.django_db(transaction=True)
def test_a_refit_writes_a_large_participant_set_in_streams_of_its_own(monkeypatch):
    monkeypatch.setattr(refresh, "SEPARATE_MIN_ROWS", 1)
    streams: list[int] = []
    original = refresh._copy_stream

    def counted(conn, sql, chunks):
        streams.append(1)
        return original(conn, sql, chunks)

    monkeypatch.setattr(refresh, "_copy_stream", counted)
    study = _separately_written_study(seed=21)
    snapshot = refresh.posterior_refresh(study_id=study.pk)
    assert len(streams) == refresh.SEPARATE_STREAMS
    humans = list(snapshot.ratings.filter(entity_kind="human").order_by("rank"))
    assert len(humans) == 14 and [r.rank for r in humans] == list(range(1, 15))
    assert_snapshot_matches_batch(snapshot, study)
    # The marker committed before the streams is cleared by the sweep; a committed snapshot's rows stay.
    assert list(PendingRatingRows.objects.values_list("snapshot_id", "rows")) == [(snapshot.pk, 14)]
    assert refresh.orphaned_ratings_delete() == 0
    assert not PendingRatingRows.objects.exists()
    assert snapshot.ratings.filter(entity_kind="human").count() == 14


@pytest.mark.django_db(transaction=True)
def test_rows_of_a_refit_that_failed_after_writing_them_are_swept_once_no_refit_holds_them(monkeypatch):
    import psycopg

    monkeypatch.setattr(refresh, "SEPARATE_MIN_ROWS", 1)
    study = _separately_written_study(seed=22)
    written = _fail_after_the_participants_are_written(monkeypatch)
    with pytest.raises(RuntimeError, match="leverages failed"):
        refresh.posterior_refresh(study_id=study.pk)
    (orphan,) = written
    assert not RatingSnapshot.objects.filter(pk=orphan).exists()
    assert EntityRating.objects.filter(snapshot_id=orphan).count() == 14  # committed by their own streams
    assert PendingRatingRows.objects.filter(snapshot_id=orphan).exists()
    # While a refit holds the snapshot's pending lock its rows are left alone.
    from rating.selectors import part_connection_params

    with psycopg.connect(**part_connection_params(), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock_shared(%s)", [refresh._pending_key(orphan)])
        assert refresh.orphaned_ratings_delete() == 0
        other.execute("SELECT pg_advisory_unlock_shared(%s)", [refresh._pending_key(orphan)])
    assert EntityRating.objects.filter(snapshot_id=orphan).count() == 14
    assert PendingRatingRows.objects.filter(snapshot_id=orphan).exists()  # kept for a later sweep
    assert refresh.orphaned_ratings_delete() == 1
    assert not EntityRating.objects.filter(snapshot_id=orphan).exists()
    assert not PendingRatingRows.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_when_the_server_refuses_the_stream_connections_the_refit_writes_in_its_own_transaction(monkeypatch, caplog):
    import socket

    from rating import selectors

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    params = selectors.part_connection_params()
    monkeypatch.setattr(
        selectors,
        "part_connection_params",
        lambda: {**params, "host": "127.0.0.1", "port": closed, "connect_timeout": 2},
    )
    monkeypatch.setattr(refresh, "SEPARATE_MIN_ROWS", 1)
    study = _separately_written_study(seed=23)
    with caplog.at_level("WARNING", logger="rating.services.refresh"):
        snapshot = refresh.posterior_refresh(study_id=study.pk)
    assert "rows written in the refit's transaction" in caplog.text
    assert snapshot.ratings.filter(entity_kind="human").count() == 14
    assert_snapshot_matches_batch(snapshot, study)


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_marks_the_orphans_earlier_releases_left_and_every_sweep_deletes_them(monkeypatch):
    from importlib import import_module

    monkeypatch.setattr(refresh, "SEPARATE_MIN_ROWS", 1)
    study = _separately_written_study(seed=24)
    kept = refresh.posterior_refresh(study_id=study.pk)
    PendingRatingRows.objects.all().delete()  # as before markers existed
    orphan = kept.pk + 1000  # an id no snapshot has
    EntityRating.objects.bulk_create(
        EntityRating(snapshot_id=orphan, entity_kind="human", entity_id=i, label=f"p{i}", mu=0.0, sigma=1.0,
                     conservative=-3.0, n=1, rank=i + 1)
        for i in range(5)
    )
    migration = import_module("rating.migrations.0009_pending_rating_rows")
    with connection.schema_editor() as editor:
        migration.mark_orphans(None, editor)
    assert list(PendingRatingRows.objects.values_list("snapshot_id", flat=True)) == [orphan]
    refresh.posteriors_refresh_stale()  # the beat task's sweep
    assert not EntityRating.objects.filter(snapshot_id=orphan).exists()
    assert not PendingRatingRows.objects.exists()
    assert kept.ratings.filter(entity_kind="human").count() == 14
