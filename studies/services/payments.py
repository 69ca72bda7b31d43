"""Payment ledger lines for the worker journey.

A task counts as *completed* for pay when its deliverables are submitted (on time or late). Grading
outcomes never change pay, and a task skipped because the agent could not be set up earns no task line;
staff add an ``adjustment`` line in the admin when they decide to compensate the time spent. A task skipped
as outside the worker's expertise earns an ``adjustment`` line at the task rate only when the study's
``pay_outside_expertise_skips`` setting says so.
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


def payment_record_outside_expertise(*, episode: Episode) -> Payment:
    """Add the task-rate adjustment line for a task skipped as outside the worker's expertise, once."""
    note = f"Task {episode.position} skipped as outside your expertise (paid by the study's rule)"
    existing = Payment.objects.filter(episode=episode, kind=Payment.Kind.ADJUSTMENT, note=note).first()
    if existing is not None:
        return existing
    study = episode.study
    return Payment.objects.create(
        participant_id=episode.participant_id, episode=episode, kind=Payment.Kind.ADJUSTMENT,
        amount=study.compensation_per_task, currency=study.currency, note=note,
    )
