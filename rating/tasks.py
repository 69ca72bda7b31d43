"""Celery entry points of the rating ledger: ids in, one service call, retries on database hiccups.

Every task is safe to run twice (the services are idempotent), so late acknowledgement is safe: a worker
that dies mid-task leaves the message to be delivered again rather than lost.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db import OperationalError

from rating import task_names
from rating.services import ledger, live, refresh
from studies.models import Study

logger = logging.getLogger(__name__)

# Deadlocks, serialisation failures, "database is locked" and dropped connections are all worth a retry.
RETRY = {
    "acks_late": True,
    "autoretry_for": (OperationalError,),
    "retry_backoff": 2,
    "retry_backoff_max": 120,
    "retry_jitter": True,
    "max_retries": 8,
}


@shared_task(name=task_names.RECORD_OBSERVATION, **RETRY)
def record_observation(episode_id: int) -> int | None:
    """Record an episode's score in the ledger; return the observation id (``None`` when it has none)."""
    observation = ledger.observation_record(episode_id=episode_id)
    return None if observation is None else observation.pk


@shared_task(name=task_names.RETRACT_PARTICIPANT, **RETRY)
def retract_participant(participant_id: int, reason: str) -> int:
    """Retract a withdrawn participant's observations; return how many were active."""
    return ledger.observations_retract_participant(participant_id=participant_id, reason=reason)


@shared_task(name=task_names.REFRESH_POSTERIOR, **RETRY)
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


@shared_task(name=task_names.RERECORD_STUDY, **RETRY)
def rerecord_study(study_id: int) -> int:
    """Re-record every scored episode of the study (after a score-source switch)."""
    return ledger.study_rerecord(study_id=study_id)


@shared_task(name=task_names.REFRESH_ALL_POSTERIORS, **RETRY)
def refresh_all_posteriors() -> list[int]:
    """Beat sweep: refresh the studies whose ledger changed since their latest snapshot (and delete the rating rows
    of refits that never committed)."""
    return refresh.posteriors_refresh_stale()
