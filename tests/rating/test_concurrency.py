"""Concurrent recording and refreshing on PostgreSQL: row locks keep every observation, exactly once."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection

from rating.models import Observation, RatingSnapshot
from rating.services import ledger, refresh
from studies.models import AuditEvent, Episode
from studyapp.celery import app
from tests.conftest import requires_postgres
from tests.rating.ledger import assert_snapshot_matches_batch, ledger_study

THREADS = 8
PER_THREAD = 25


@pytest.fixture(autouse=True)
def _empty_rating_queue():
    """Recordings commit for real here, so their scheduled refreshes reach the broker; drop them after."""
    yield
    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("rating")


def _run_concurrently(jobs: list[Callable[[], None]]) -> list[BaseException]:
    """Run each job in its own thread (and so its own database connection), all released at once."""
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def run(job: Callable[[], None]) -> None:
        try:
            barrier.wait(timeout=30)
            job()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not any(thread.is_alive() for thread in threads), "a recording thread hung"
    return errors


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_recording_loses_no_observation_and_duplicates_none():
    study, _, _, episodes = ledger_study(seed=41, n_agents=5, n_participants=50, per_participant=4)
    assert len(episodes) == THREADS * PER_THREAD
    ids = [e.pk for e in episodes]
    shares = [ids[t * PER_THREAD:(t + 1) * PER_THREAD] for t in range(THREADS)]
    # Every thread also records the first ten episodes of the next thread's share, at the same moment.
    work = [share + shares[(t + 1) % THREADS][:10] for t, share in enumerate(shares)]

    def recorder(episode_ids: list[int]) -> Callable[[], None]:
        return lambda: [ledger.observation_record(episode_id=pk) for pk in episode_ids]

    errors = _run_concurrently([recorder(w) for w in work])
    assert errors == []
    assert Observation.objects.filter(study=study).count() == len(episodes)
    assert set(Observation.objects.values_list("episode_id", flat=True)) == set(ids)
    assert dict(Observation.objects.values_list("episode_id", "y")) == {e.pk: e.auto_score for e in episodes}
    # The second recording of a duplicated episode saw the first's score and wrote no audit event.
    assert AuditEvent.objects.filter(action="episode.score_set").count() == len(episodes)
    assert Episode.objects.filter(study=study, score__isnull=True).count() == 0
    assert_snapshot_matches_batch(refresh.posterior_refresh(study_id=study.pk), study)


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_regrades_and_a_retraction_end_in_the_exact_ledger():
    study, _, participants, episodes = ledger_study(seed=42, n_agents=4, n_participants=24, per_participant=4)
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk)
    Episode.objects.filter(study=study).update(auto_score=50.0)
    leaving = participants[0]

    def regrade(chunk: list[int]) -> Callable[[], None]:
        return lambda: [ledger.observation_record(episode_id=pk) for pk in chunk]

    ids = [e.pk for e in episodes]
    jobs = [regrade(ids[i::6]) for i in range(6)]
    jobs.append(lambda: ledger.observations_retract_participant(participant_id=leaving.pk, reason="withdrew"))
    assert _run_concurrently(jobs) == []
    assert set(Observation.objects.filter(active=True).values_list("y", flat=True)) == {50.0}
    assert not Observation.objects.filter(participant=leaving, active=True).exists()
    assert Observation.objects.filter(active=True).count() == len(episodes) - 4
    assert_snapshot_matches_batch(refresh.posterior_refresh(study_id=study.pk), study)


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_refreshes_write_consecutive_versions():
    study, _, _, episodes = ledger_study(seed=43)
    for episode in episodes:
        ledger.observation_record(episode_id=episode.pk)
    errors = _run_concurrently([lambda: refresh.posterior_refresh(study_id=study.pk) for _ in range(6)])
    assert errors == []
    assert sorted(RatingSnapshot.objects.filter(study=study).values_list("version", flat=True)) == [1, 2, 3, 4, 5, 6]
    for snapshot in RatingSnapshot.objects.filter(study=study):
        assert_snapshot_matches_batch(snapshot, study)
