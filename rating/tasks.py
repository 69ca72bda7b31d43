"""Celery entry points of the rating ledger: ids in, one service call, retries on database hiccups.

Every task is safe to run twice (the services are idempotent), so late acknowledgement is safe: a worker
that dies mid-task leaves the message to be delivered again rather than lost.
"""

from __future__ import annotations

import logging
from typing import Any

from rating import task_names
from rating.services import ledger, live, refresh
from studies.instrumented_task import DATABASE_RETRY, instrumented_task
from studies.models import Study

logger = logging.getLogger(__name__)

# Deadlocks, serialisation failures, "database is locked" and dropped connections are all worth a retry.
RETRY = DATABASE_RETRY


@instrumented_task(name=task_names.RECORD_OBSERVATION, retry=RETRY)
def record_observation(episode_id: int) -> int | None:
    """Record an episode's score in the ledger; return the observation id (``None`` when it has none)."""
    observation = ledger.observation_record(episode_id=episode_id)
    return None if observation is None else observation.pk


@instrumented_task(name=task_names.RETRACT_PARTICIPANT, retry=RETRY)
def retract_participant(participant_id: int, reason: str) -> int:
    """Retract a withdrawn participant's observations; return how many were active."""
    return ledger.observations_retract_participant(participant_id=participant_id, reason=reason)


@instrumented_task(name=task_names.REFRESH_POSTERIOR, retry=RETRY)
def refresh_posterior(study_id: int) -> dict[str, Any] | None:
    """Write the study's next posterior snapshot (a live update or a refit), unless the ledger is unchanged."""
    try:
        snapshot = live.posterior_update(study_id=study_id, wait=False)
    except Study.DoesNotExist:
        logger.info("rating refresh skipped: study %s no longer exists", study_id)
        return None
    except refresh.RefreshBusy:
        # The running refresh read the ledger before this request's change: ask again rather than hold a worker
        # process behind it. Deleting the debounce key first keeps exactly this request pending.
        refresh.cache.delete(refresh.refresh_key(study_id))
        refresh.posterior_schedule_refresh(study_id=study_id)
        return None
    return {"study_id": study_id, "version": snapshot.version, "n_observations": snapshot.n_observations}


@instrumented_task(name=task_names.RERECORD_STUDY, retry=RETRY)
def rerecord_study(study_id: int) -> int:
    """Re-record every scored episode of the study (after a score-source switch)."""
    return ledger.study_rerecord(study_id=study_id)


@instrumented_task(name=task_names.REFRESH_ALL_POSTERIORS, retry=RETRY)
def refresh_all_posteriors() -> list[int]:
    """Beat sweep: refresh the studies whose ledger changed since their latest snapshot (and delete the rating rows
    of refits that never committed)."""
    return refresh.posteriors_refresh_stale()
