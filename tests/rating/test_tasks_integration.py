"""The rating tasks through a real Celery worker process: re-delivery, regrade, retraction, debounced refresh."""

from __future__ import annotations

import pytest

from rating import selectors, tasks
from rating.models import Observation
from studies.models import Episode
from tests.conftest import requires_redis, wait_for
from tests.rating.ledger import latest_matches_batch, ledger_study

WORKER_ENV = {"RATING_REFRESH_DEBOUNCE_SECONDS": "1"}


def _get(result, worker):
    try:
        return result.get(timeout=90)
    except Exception as exc:  # pragma: no cover - diagnostic on failure only
        pytest.fail(f"worker did not answer: {exc}\n{worker.output()[-4000:]}")


@requires_redis
@pytest.mark.django_db(transaction=True)
def test_redelivery_and_regrade_through_a_worker_on_redis_keep_one_exact_observation(celery_worker_process, settings):
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    study, _, participants, episodes = ledger_study(seed=31)
    worker = celery_worker_process(queues="rating", extra_env=WORKER_ENV)
    target = episodes[0]

    first, second = (tasks.record_observation.delay(target.pk) for _ in range(2))
    observation_ids = {_get(first, worker), _get(second, worker)}
    assert len(observation_ids) == 1 and None not in observation_ids
    assert Observation.objects.filter(episode=target).count() == 1
    for result in [tasks.record_observation.delay(e.pk) for e in episodes[1:]]:
        _get(result, worker)
    assert Observation.objects.filter(study=study, active=True).count() == len(episodes)
    # Nobody calls refresh here: the worker's own recordings scheduled it through the debounce.
    wait_for(lambda: latest_matches_batch(study), timeout=60, message="the debounced refresh")

    Episode.objects.filter(pk=target.pk).update(auto_score=5.0)
    assert _get(tasks.record_observation.delay(target.pk), worker) in observation_ids
    observation = Observation.objects.get(episode=target)
    assert (observation.y, observation.active) == (5.0, True)
    assert Observation.objects.filter(study=study).count() == len(episodes)
    wait_for(lambda: latest_matches_batch(study), timeout=60, message="the refresh after the regrade")
    rating = selectors.leaderboard(study, kind="human").get(entity_id=target.participant_id)
    assert rating.n == 3

    leaving = participants[2]
    assert _get(tasks.retract_participant.delay(leaving.pk, "withdrew"), worker) == 3
    wait_for(lambda: latest_matches_batch(study), timeout=60, message="the refresh after the retraction")
    assert not selectors.leaderboard(study, kind="human").filter(entity_id=leaving.pk).exists()

    snapshot = _get(tasks.refresh_posterior.delay(study.pk), worker)
    assert snapshot["version"] == selectors.latest_snapshot(study).version
    assert snapshot["n_observations"] == len(episodes) - 3


@pytest.mark.django_db(transaction=True)
def test_the_embedded_profile_worker_records_rerecords_and_sweeps(celery_worker_process, settings):
    """Same tasks on whatever broker this run uses (the filesystem transport in the embedded profile)."""
    study, _, _, episodes = ledger_study(seed=32, expert_share=0.5)
    worker = celery_worker_process(queues="rating", extra_env=WORKER_ENV)
    for result in [tasks.record_observation.delay(e.pk) for e in episodes]:
        _get(result, worker)
    wait_for(lambda: latest_matches_batch(study), timeout=60, message="the debounced refresh")
    study.score_source = "expert"
    study.save(update_fields=["score_source"])
    assert _get(tasks.rerecord_study.delay(study.pk), worker) == len(episodes)
    expected = {e.pk: e.expert_score for e in episodes if e.expert_score is not None}
    assert dict(Observation.objects.filter(study=study, active=True).values_list("episode_id", "y")) == expected
    wait_for(lambda: latest_matches_batch(study), timeout=60, message="the refresh after re-recording")
    assert _get(tasks.refresh_all_posteriors.delay(), worker) == []
