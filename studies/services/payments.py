"""Payment ledger lines for the worker journey.

A task counts as *completed* for pay when its deliverables are submitted (on time or late). Grading
outcomes never change pay, and a task skipped because the agent could not be set up earns no task line;
staff add an ``adjustment`` line in the admin when they decide to compensate the time spent. A task skipped
as outside the worker's expertise earns an ``adjustment`` line at the task rate only when the study's
``pay_outside_expertise_skips`` setting says so, and at most ``max_paid_outside_expertise_skips`` of them per
worker (later skips are recorded, not paid).
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


OUTSIDE_EXPERTISE_NOTE = "skipped as outside your expertise (paid by the study's rule)"


def paid_outside_expertise_skips(*, participant_id: int) -> int:
    """How many outside-expertise skips this worker has been paid for."""
    return Payment.objects.filter(participant_id=participant_id, kind=Payment.Kind.ADJUSTMENT,
                                  note__endswith=OUTSIDE_EXPERTISE_NOTE).count()


def outside_expertise_skip_is_paid(*, episode: Episode) -> bool:
    """Whether skipping this episode as outside expertise earns the task rate: the study pays such skips and the
    worker is still under the study's cap (`max_paid_outside_expertise_skips`). The caller holds the
    participant's row lock, so two skips at once cannot both take the last paid one."""
    study = episode.study
    return study.pay_outside_expertise_skips and (
        paid_outside_expertise_skips(participant_id=episode.participant_id) < study.max_paid_outside_expertise_skips)


def payment_record_outside_expertise(*, episode: Episode) -> Payment:
    """Add the task-rate adjustment line for a task skipped as outside the worker's expertise, once."""
    note = f"Task {episode.position} {OUTSIDE_EXPERTISE_NOTE}"
    existing = Payment.objects.filter(episode=episode, kind=Payment.Kind.ADJUSTMENT, note=note).first()
    if existing is not None:
        return existing
    study = episode.study
    return Payment.objects.create(
        participant_id=episode.participant_id, episode=episode, kind=Payment.Kind.ADJUSTMENT,
        amount=study.compensation_per_task, currency=study.currency, note=note,
    )
