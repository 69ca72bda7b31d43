"""Participants: joining a study, profile, progress through the steps, time on each step, withdrawal.

Identity rule (one participant per recruitment-platform id per study): a platform id belongs to the first
account that joined with it. Reopening the link with that account resumes the same participant; another
account presenting the same id is refused (never a second participant, never a take-over), and an account
that already takes part under one id cannot switch to another. An account that joined without an id gets the
first id it later presents, unless another account holds it.
"""

from __future__ import annotations

import logging
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.files.storage import default_storage
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from studies.exceptions import IdentityConflict, StepNotAvailable, StudyNotOpen
from studies.invitations import PlatformClaim
from studies.models import Episode, EpisodeFile, Occupation, Participant, ParticipantIdentity, StepVisit, Study
from studies.roles import WORKER, grant_role
from studies.services.audit import audit_record
from studies.task_choice import task_available
from studies.task_names import RETRACT_PARTICIPANT
from studies.task_sending import send_task_on_commit

logger = logging.getLogger(__name__)

# A step visit continues while requests keep arriving within this gap; a longer pause starts a new visit,
# so a worker who leaves overnight is not counted as working all night.
STEP_VISIT_IDLE = timedelta(minutes=30)
# Step time and last_activity_at are written at most this often; reloads in between cost no write.
STEP_VISIT_RESOLUTION = timedelta(seconds=30)
ACTIVITY_RESOLUTION = timedelta(seconds=60)
FINISHED_EPISODE_STATUSES = (
    Episode.Status.SUBMITTED, Episode.Status.GRADING, Episode.Status.GRADED, Episode.Status.FAILED,
    Episode.Status.SKIPPED,
)
OPEN_EPISODE_STATUSES = (Episode.Status.ASSIGNED, Episode.Status.IN_PROGRESS)
INACTIVE_STATUSES = (Participant.Status.WITHDRAWN,)


def _platform_label(platform: str) -> str:
    return {"prolific": "Prolific", "upwork": "Upwork"}.get(platform, platform or "recruitment platform")


def participant_join(*, study: Study, user: Any, claim: PlatformClaim) -> Participant:
    """Return the account's participant in the study, creating it on first visit (see the module rule)."""
    for _attempt in range(2):
        participant = _join_existing(study=study, user=user, claim=claim)
        if participant is not None:
            return participant
        if study.status != Study.Status.RECRUITING:
            raise StudyNotOpen("This study is not taking new participants at the moment. Thank you for your interest.")
        try:
            with transaction.atomic():
                participant = Participant.objects.create(study=study, user=user)
                ParticipantIdentity.objects.create(
                    participant=participant, study=study, email=getattr(user, "email", "") or "",
                    platform=claim.platform, platform_worker_id=claim.worker_id,
                )
                audit_record(actor=user, action="participant.join", obj=participant, study=study,
                             after={"platform": claim.platform, "signed_invitation": claim.signed})
        except IntegrityError:
            # A concurrent request created the participant or took the platform id first: look again.
            continue
        grant_role(user, WORKER)
        return participant
    raise IdentityConflict("We could not register you because the same invitation was used twice at the same "
                           "moment. Please reload the page.")


def participant_signup(*, study: Study, claim: PlatformClaim, username: str, password: str | None,
                       email: str = "") -> Participant:
    """Create a worker account and its participant in one transaction (``password=None``: an account without a
    usable password, for recruits who arrive with a platform id -- signed, or filled in by the platform --
    whose personal links are their credential).

    When the join is refused (the platform id was taken by a concurrent sign-up, or the study closed), the
    new account is rolled back with it, so a race on one invitation never leaves orphan accounts.
    """
    if password is None and not claim.worker_id:
        raise ValueError("Only an invitation carrying a platform id can stand in for a password.")
    with transaction.atomic():
        # A recruit without a password signs in only through their links, so a user name is optional: a random
        # one (never the platform id, which stays in the separate identity row).
        username = username or f"w-{secrets.token_hex(6)}"
        user = get_user_model().objects.create_user(username=username, email=email, password=password)
        return participant_join(study=study, user=user, claim=claim)


def resume_link_send(*, participant: Participant, url: str) -> bool:
    """E-mail the participant their resume link (the only way back in for an account without a password).
    A mail server that fails does not fail the sign-up, whose page shows the same link; returns whether it went."""
    study, user = participant.study, participant.user
    if user is None or not user.email:
        return False
    try:
        send_mail(
            subject=f"Your link to “{study.name}”",
            message=(f"Hello,\n\nThank you for joining “{study.name}”. This personal link brings you back to the "
                     f"study on any device, signed in:\n\n{url}\n\nKeep it to yourself: anyone with it can "
                     "continue as you. It stays valid for "
                     f"{settings.PERSONAL_LINK_MAX_AGE_DAYS} days.\n"),
            from_email=settings.DEFAULT_FROM_EMAIL, recipient_list=[user.email],
        )
    except Exception:  # noqa: BLE001 - any mail transport error; the page shows the link anyway
        logger.warning("Could not e-mail the resume link of participant %s", participant.pk, exc_info=True)
        return False
    return True


def _join_existing(*, study: Study, user: Any, claim: PlatformClaim) -> Participant | None:
    if claim.worker_id:
        owner = (ParticipantIdentity.objects.filter(study=study, platform=claim.platform,
                                                    platform_worker_id=claim.worker_id)
                 .select_related("participant").first())
        if owner is not None and owner.participant.user_id != user.pk:
            raise IdentityConflict(
                f"This {_platform_label(claim.platform)} id is already registered in this study with another "
                "account. Please sign in with the account you used before; if you cannot, contact the study team."
            )
    participant = Participant.objects.filter(study=study, user=user).first()
    if participant is None:
        return None
    if claim.worker_id:
        identity, _ = ParticipantIdentity.objects.get_or_create(
            participant=participant, defaults={"study": study, "email": getattr(user, "email", "") or ""}
        )
        current = (identity.platform, identity.platform_worker_id)
        if identity.platform_worker_id and current != (claim.platform, claim.worker_id):
            raise IdentityConflict(
                "Your account already takes part in this study under a different recruitment-platform id. "
                "Please open the link from the account you were recruited with, or contact the study team."
            )
        if not identity.platform_worker_id:
            identity.platform, identity.platform_worker_id = claim.platform, claim.worker_id
            try:
                with transaction.atomic():
                    identity.save(update_fields=["platform", "platform_worker_id"])
            except IntegrityError:
                raise IdentityConflict("This recruitment-platform id is already registered with another account.")
    grant_role(user, WORKER)
    return participant


def participant_profile_update(*, participant: Participant, occupation: Occupation,
                               years_experience: float) -> Participant:
    """Save occupation and experience; frozen once tasks are matched to them (after the pre-survey)."""
    editable = (Participant.Status.INVITED, Participant.Status.CONSENTED, Participant.Status.PRE_SURVEY)
    with transaction.atomic():
        locked = Participant.objects.select_for_update().get(pk=participant.pk)
        if locked.status not in editable:
            raise StepNotAvailable("Your occupation can no longer change: your tasks were matched to it.")
        if locked.consent_version_id is None:
            raise StepNotAvailable("Please read and accept the consent form first.")
        locked.occupation = occupation
        locked.years_experience = years_experience
        locked.status = Participant.Status.PRE_SURVEY
        locked.save(update_fields=["occupation", "years_experience", "status"])
    return locked


def participant_pre_survey_done(*, participant: Participant) -> None:
    """Move to the task phase once the pre-survey is submitted."""
    if Participant.objects.filter(pk=participant.pk, status=Participant.Status.PRE_SURVEY).update(
        status=Participant.Status.WORKING
    ):
        participant.status = Participant.Status.WORKING


def participant_tasks_done(*, participant: Participant) -> None:
    """Unlock the post-survey."""
    if Participant.objects.filter(pk=participant.pk, status=Participant.Status.WORKING).update(
        status=Participant.Status.POST_SURVEY
    ):
        participant.status = Participant.Status.POST_SURVEY


def participant_complete(*, participant: Participant) -> Participant:
    """Mark the study complete after the post-survey; the completion code becomes visible."""
    now = timezone.now()
    Participant.objects.filter(pk=participant.pk, status=Participant.Status.POST_SURVEY).update(
        status=Participant.Status.COMPLETE, completed_at=now
    )
    participant.refresh_from_db(fields=["status", "completed_at"])
    return participant


def participant_withdraw(*, participant: Participant, actor: Any, reason: str) -> Participant:
    """Withdraw a participant at their (or staff's) request.

    Unsubmitted episodes become skipped and their draft files are deleted, which frees the task's capacity
    for someone else; submitted work keeps its payment lines but leaves the rating (retracted exactly by the
    rating service).
    """
    reason = (reason or "").strip()[:2000]
    with transaction.atomic():
        locked = Participant.objects.select_for_update().get(pk=participant.pk)
        if locked.status == Participant.Status.WITHDRAWN:
            return locked
        before = locked.status
        now = timezone.now()
        locked.status = Participant.Status.WITHDRAWN
        locked.withdrawn_at = now
        locked.withdrawal_reason = reason
        locked.save(update_fields=["status", "withdrawn_at", "withdrawal_reason"])
        open_episodes = Episode.objects.filter(participant=locked, status__in=OPEN_EPISODE_STATUSES)
        drafts = EpisodeFile.objects.filter(episode__in=open_episodes)
        paths = list(drafts.values_list("file", flat=True))
        drafts.delete()
        cancelled = open_episodes.update(
            status=Episode.Status.SKIPPED, skip_description="Cancelled: the participant withdrew before submitting.",
            updated_at=now,
        )
        audit_record(actor=actor, action="participant.withdraw", obj=locked, study=locked.study,
                     before={"status": before}, after={"status": locked.status, "cancelled_episodes": cancelled},
                     note=reason)
        participant_id = locked.pk
        transaction.on_commit(lambda: _delete_files(paths))
        send_task_on_commit(RETRACT_PARTICIPANT, [participant_id, reason])
    return locked


def _delete_files(paths: list[str]) -> None:
    for path in paths:
        if path:
            default_storage.delete(path)


def step_visit_record(*, participant: Participant, step: str, episode_id: int | None = None,
                      now: datetime | None = None) -> None:
    """Extend the current visit of a step (or start a new one after a pause) and note the activity.

    Writes at most once per STEP_VISIT_RESOLUTION per participant and step (remembered in the cache), so a
    worker reloading the task page costs no database write; the page's heartbeat keeps long visits timed.
    """
    now = now or timezone.now()
    key = f"step-visit:{participant.pseudonym}:{step}:{episode_id or 0}"
    last_write = cache.get(key)
    if last_write is not None and timedelta(0) <= now - last_write < STEP_VISIT_RESOLUTION:
        return
    extended = StepVisit.objects.filter(
        participant_id=participant.pk, step=step, episode_id=episode_id, last_seen_at__gte=now - STEP_VISIT_IDLE
    ).update(last_seen_at=now)  # type: ignore[misc]  # episode_id=None is IS NULL; the stubs reject None
    if not extended:
        StepVisit.objects.create(participant_id=participant.pk, step=step, episode_id=episode_id,
                                 started_at=now, last_seen_at=now)
    cache.set(key, now, timeout=int(STEP_VISIT_IDLE.total_seconds()))
    last = participant.last_activity_at
    if last is None or now - last >= ACTIVITY_RESOLUTION:
        Participant.objects.filter(pk=participant.pk).update(last_activity_at=now)
        participant.last_activity_at = now


def participant_finish_tasks_early(*, participant: Participant) -> None:
    """Go on to the post-survey with fewer tasks than planned, allowed only when no task fits any more."""
    with transaction.atomic():
        locked = Participant.objects.select_for_update(of=("self",)).select_related("study", "occupation").get(
            pk=participant.pk
        )
        if locked.status != Participant.Status.WORKING:
            raise StepNotAvailable("You can finish early only while working on tasks.")
        episodes = list(Episode.objects.filter(participant=locked).values_list("status", flat=True))
        if any(status in OPEN_EPISODE_STATUSES for status in episodes):
            raise StepNotAvailable("Please submit or skip your current task first.")
        if not any(status != Episode.Status.SKIPPED for status in episodes):
            raise StepNotAvailable("Finishing early needs at least one submitted task.")
        if task_available(participant=locked):
            raise StepNotAvailable("A new task is available for you, so please continue with it.")
        if locked.study.post_survey_gate == Study.PostSurveyGate.ALL_SUBMITTED:
            # The final survey is asked only of workers who submitted every task: the others complete here.
            locked.status = Participant.Status.COMPLETE
            locked.completed_at = timezone.now()
            locked.save(update_fields=["status", "completed_at"])
            return
        locked.status = Participant.Status.POST_SURVEY
        locked.save(update_fields=["status"])
