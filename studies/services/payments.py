"""Payment ledger lines for the worker journey.

A task counts as *completed* for pay when its deliverables are submitted (on time or late). Grading
outcomes never change pay, and a task skipped because the agent could not be set up earns no task line;
staff add an ``adjustment`` line in the admin when they decide to compensate the time spent.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from studies.models import Episode, Payment


def payment_record_task(*, episode: Episode) -> Payment:
    """Add the base-pay line for a submitted episode once; a second call returns the existing line."""
    existing = Payment.objects.filter(episode=episode, kind=Payment.Kind.TASK).first()
    if existing is not None:
        return existing
    study = episode.study
    try:
        with transaction.atomic():
            return Payment.objects.create(
                participant_id=episode.participant_id, episode=episode, kind=Payment.Kind.TASK,
                amount=study.compensation_per_task, currency=study.currency,
                note=f"Task {episode.position} submitted",
            )
    except IntegrityError:
        # uniq_task_payment_per_episode: a concurrent call wrote it first.
        return Payment.objects.get(episode=episode, kind=Payment.Kind.TASK)
