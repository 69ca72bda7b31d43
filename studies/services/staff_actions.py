"""What study staff can do from the dashboard's live monitor and grading queue, each audited.

Remind a participant by email, extend a task's deadline, skip a task, reassign a task to another agent,
and mark a participant withdrawn (retrying a grading is
`grading.services.pipeline.episode_grading_retry`). Every action checks the state it expects under a
row lock and refuses clearly otherwise, so two staff members acting at once cannot undo each other.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from studies.models import Agent, Episode, Participant, ParticipantIdentity
from studies.services.audit import audit_record

OPEN_STATUSES = (Episode.Status.ASSIGNED, Episode.Status.IN_PROGRESS)
MAX_EXTENSION = timedelta(days=30)
REMINDABLE = (
    Participant.Status.CONSENTED, Participant.Status.PRE_SURVEY, Participant.Status.WORKING,
    Participant.Status.POST_SURVEY,
)


class StaffActionError(Exception):
    """A staff action that cannot be carried out; the message is shown to the staff member."""


def _stamp(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _state_message(episode: Episode, rule: str) -> str:
    return f"Task {episode.pk} is “{episode.get_status_display()}”; {rule}."


def _recipient(participant: Participant) -> str:
    email = ParticipantIdentity.objects.filter(participant=participant).values_list("email", flat=True).first()
    if not email and participant.user is not None:
        email = participant.user.email
    return (email or "").strip()


def participant_remind(*, participant: Participant, actor: Any, message: str = "") -> None:
    """Email the participant a reminder to continue where they stopped. The address is never audited."""
    if participant.status not in REMINDABLE:
        raise StaffActionError(f"{participant.pseudonym} is “{participant.get_status_display()}”; nothing to remind.")
    recipient = _recipient(participant)
    if not recipient:
        raise StaffActionError(f"{participant.pseudonym} has no email address on file.")
    study = participant.study
    body = (
        f"Hello,\n\nThank you for taking part in “{study.name}”. You have not finished yet: your next step is "
        f"“{participant.get_status_display()}”. Please sign in again to continue where you stopped.\n"
    )
    if message.strip():
        body += f"\nA note from the study team:\n{message.strip()}\n"
    body += "\nIf you no longer wish to take part, you can withdraw at any time from your study page.\n"
    send_mail(
        subject=f"Reminder: your study “{study.name}” is waiting for you",
        message=body,
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[recipient],
    )
    audit_record(
        actor=actor, action="staff.remind", obj=participant, study=study,
        after={"step": participant.status, "with_note": bool(message.strip())},
    )


def episode_extend_deadline(*, episode: Episode, actor: Any, hours: float) -> Episode:
    """Move an open task's deadline later by ``hours``; a deadline already past is extended from now."""
    if not 0 < hours <= MAX_EXTENSION.total_seconds() / 3600:
        raise StaffActionError(f"Extend by more than 0 and at most {MAX_EXTENSION.days * 24} hours.")
    with transaction.atomic():
        locked = Episode.objects.select_for_update().get(pk=episode.pk)
        if locked.status not in OPEN_STATUSES:
            raise StaffActionError(_state_message(locked, "only open tasks have a deadline"))
        now = timezone.now()
        before = locked.deadline_at
        base = before if before is not None and before > now else now
        locked.deadline_at = base + timedelta(hours=hours)
        locked.save(update_fields=["deadline_at", "updated_at"])
        audit_record(
            actor=actor, action="staff.extend_deadline", obj=locked, study=locked.study,
            before={"deadline_at": _stamp(before)}, after={"deadline_at": _stamp(locked.deadline_at), "hours": hours},
        )
    return locked


def episode_skip(*, episode: Episode, actor: Any, reason: str) -> Episode:
    """Skip an open task on the participant's behalf (e.g. the agent cannot run on their machine)."""
    reason = (reason or "").strip()
    if not reason:
        raise StaffActionError("Say why the task is skipped; the participant and the record will show it.")
    with transaction.atomic():
        locked = Episode.objects.select_for_update().get(pk=episode.pk)
        if locked.status not in OPEN_STATUSES:
            raise StaffActionError(_state_message(locked, "only open tasks can be skipped"))
        before = locked.status
        locked.status = Episode.Status.SKIPPED
        locked.skip_reason = Episode.SkipReason.STAFF
        locked.skip_description = reason[:2000]
        locked.save(update_fields=["status", "skip_reason", "skip_description", "updated_at"])
        audit_record(
            actor=actor, action="staff.skip_task", obj=locked, study=locked.study,
            before={"status": before}, after={"status": locked.status, "skip_reason": locked.skip_reason}, note=reason,
        )
    return locked


def episode_reassign(*, episode: Episode, actor: Any, agent: Agent) -> Episode:
    """Pair an open task with another agent; the participant sets the new agent up from the start."""
    with transaction.atomic():
        locked = Episode.objects.select_for_update().get(pk=episode.pk)
        if locked.status not in OPEN_STATUSES:
            raise StaffActionError(_state_message(locked, "only open tasks can move to another agent"))
        if locked.condition == Episode.Condition.SOLO:
            raise StaffActionError(f"Task {locked.pk} is a solo task (done without an agent); it has no agent to "
                                   "change.")
        if agent.pk == locked.agent_id:
            raise StaffActionError(f"Task {locked.pk} is already paired with {agent.name}.")
        if not agent.is_active:
            raise StaffActionError(f"{agent.name} is not active.")
        if not agent.studies.filter(pk=locked.study_id).exists():
            raise StaffActionError(f"{agent.name} is not one of this study's agents.")
        before = {"agent": locked.agent_id, "status": locked.status, "design_mode": locked.design_mode,
                  "assignment_probability": locked.assignment_probability}
        locked.agent = agent
        # Readiness and prior experience were about the old agent.
        locked.ready_at = None
        locked.prior_experience = ""
        locked.status = Episode.Status.ASSIGNED
        # A staff choice is not a random draw: the pairing is no longer the design's, and weighted analyses
        # must not treat it as one.
        locked.design_mode = "staff"
        locked.assignment_probability = None
        locked.save(update_fields=["agent", "ready_at", "prior_experience", "status", "design_mode",
                                   "assignment_probability", "updated_at"])
        audit_record(
            actor=actor, action="staff.reassign_agent", obj=locked, study=locked.study,
            before=before, after={"agent": agent.pk, "status": locked.status, "design_mode": "staff"},
        )
    return locked


def participant_mark_withdrawn(*, participant: Participant, actor: Any, reason: str) -> Participant:
    """Withdraw a participant on their request to staff; the withdrawal service audits and retracts ratings."""
    from studies.services.participants import participant_withdraw

    reason = (reason or "").strip()
    if not reason:
        raise StaffActionError("Record why (e.g. “asked by email on 3 May”); it is kept with the withdrawal.")
    if participant.status == Participant.Status.WITHDRAWN:
        raise StaffActionError(f"{participant.pseudonym} has already withdrawn.")
    return participant_withdraw(participant=participant, actor=actor, reason=reason)
