"""Working on an episode: agent setup, the setup-failure skip, the log link and the final submission."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import UploadedFile
from django.core.validators import URLValidator
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from studies.exceptions import EpisodeLocked, InvalidShareUrl, SubmitRejected, UploadRejected
from studies.models import Agent, Episode, EpisodeFile, Participant, Study
from studies.services.audit import audit_record
from studies.services.participants import FINISHED_EPISODE_STATUSES, participant_tasks_done
from studies.services.payments import (
    outside_expertise_skip_is_paid,
    payment_record_outside_expertise,
    payment_record_task,
)
from studies.services.solo_episodes import ensure_with_agent
from studies.services.uploads import EDITABLE_STATUSES, ensure_editable, episode_file_add, validate_upload
from studies.task_names import GRADE_EPISODE
from studies.task_sending import send_task_on_commit

MAX_SCREENSHOTS = 10


def _locked(episode: Episode, *, with_participant: bool = False) -> Episode:
    """Lock the episode row (and first its participant's, when the caller may change the participant:
    participant before episode is the order withdrawal uses too, so the two can never deadlock)."""
    if with_participant:
        Participant.objects.select_for_update().filter(pk=episode.participant_id).first()
    return (Episode.objects.select_for_update(of=("self",))
            .select_related("participant", "participant__study", "agent", "study").get(pk=episode.pk))


def episode_setup_save(*, episode: Episode, prior_experience: str, ready: bool) -> Episode:
    """Save the 'have you used this agent' answer and, once given, the 'agent is ready' confirmation."""
    if prior_experience not in Episode.PriorExperience.values:
        raise SubmitRejected("Please say whether you have used this agent before.")
    ensure_with_agent(episode)
    with transaction.atomic():
        locked = _locked(episode)
        ensure_editable(locked)
        locked.prior_experience = prior_experience
        fields = ["prior_experience", "updated_at"]
        if ready and locked.ready_at is None:
            locked.ready_at = timezone.now()
            locked.status = Episode.Status.IN_PROGRESS
            fields += ["ready_at", "status"]
        locked.save(update_fields=fields)
    return locked


def episode_skip_setup_failed(*, episode: Episode, description: str, screenshots: list[UploadedFile],
                              actor: Any) -> Episode:
    """Skip a task whose agent could not be set up, keeping the worker's description and screenshots.

    Every screenshot is checked before anything is stored, so a bad file leaves the episode as it was.
    """
    ensure_with_agent(episode)
    description = (description or "").strip()
    if len(description) < 10:
        raise SubmitRejected("Please describe what went wrong during the setup (at least a sentence).")
    if not screenshots:
        raise SubmitRejected("Please attach at least one screenshot of the setup problem.")
    if len(screenshots) > MAX_SCREENSHOTS:
        raise SubmitRejected(f"Please attach at most {MAX_SCREENSHOTS} screenshots.")
    ensure_editable(episode)
    names = set()
    for shot in screenshots:
        name, _digest, _size = validate_upload(kind=EpisodeFile.Kind.SKIP_SCREENSHOT, upload=shot)
        if name in names:
            raise UploadRejected(f"Two screenshots are both named “{name}”. Please rename one of them.")
        names.add(name)
    stored: list[EpisodeFile] = []
    try:
        for shot in screenshots:
            stored.append(episode_file_add(episode=episode, kind=EpisodeFile.Kind.SKIP_SCREENSHOT, upload=shot,
                                           replace=True))
        with transaction.atomic():
            locked = _locked(episode, with_participant=True)
            ensure_editable(locked)
            locked.status = Episode.Status.SKIPPED
            locked.skip_reason = Episode.SkipReason.SETUP_FAILED
            locked.skip_description = description[:5000]
            locked.save(update_fields=["status", "skip_reason", "skip_description", "updated_at"])
            audit_record(actor=actor, action="episode.skip_setup_failed", obj=locked, study=locked.study,
                         after={"agent": locked.agent.slug if locked.agent else None, "position": locked.position})
            _unlock_post_survey_if_done(locked)
    except BaseException:
        for record in stored:
            if EpisodeFile.objects.filter(pk=record.pk).exists():
                record.delete()
                default_storage.delete(record.file.name)
        raise
    return locked


def episode_skip_outside_expertise(*, episode: Episode, reason: str, actor: Any) -> Episode:
    """Skip a task the worker cannot judge honestly (outside their expertise), recorded apart from setup failures.

    Whether the skip is paid is the study's ``pay_outside_expertise_skips`` setting, capped per worker by
    ``max_paid_outside_expertise_skips`` (a replaced skip must not become paid work); when it is, the task rate
    is added as an adjustment line tied to the episode (not a "completed task" line, so counts of submitted
    work stay true). The audit says whether this skip was paid.
    """
    reason = (reason or "").strip()
    if len(reason) < 10:
        raise SubmitRejected("Please say in a sentence why this task is outside your expertise.")
    with transaction.atomic():
        locked = _locked(episode, with_participant=True)
        ensure_editable(locked)
        paid = outside_expertise_skip_is_paid(episode=locked)  # before this skip: under the worker's cap
        locked.status = Episode.Status.SKIPPED
        locked.skip_reason = Episode.SkipReason.OUTSIDE_EXPERTISE
        locked.skip_description = reason[:2000]
        locked.save(update_fields=["status", "skip_reason", "skip_description", "updated_at"])
        if paid:
            payment_record_outside_expertise(episode=locked)
        audit_record(actor=actor, action="episode.skip_outside_expertise", obj=locked, study=locked.study,
                     after={"agent": locked.agent.slug if locked.agent else None, "position": locked.position,
                            "paid": paid})
        _unlock_post_survey_if_done(locked)
    return locked


def validate_share_url(*, agent: Agent, url: str) -> str:
    """Return the cleaned link if it is https and points to one of the agent's share hosts."""
    url = (url or "").strip()
    if not url:
        return ""
    hosts = [h.lower().strip() for h in agent.share_url_hosts or [] if h]
    expected = f" It should start with https:// and point to {' or '.join(hosts)}." if hosts else \
        " It should start with https://."
    try:
        URLValidator(schemes=["https"])(url)
    except ValidationError:
        raise InvalidShareUrl("That shared-session link is not a valid web address." + expected)
    if len(url) > 500:
        raise InvalidShareUrl("That shared-session link is longer than 500 characters.")
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.username or parts.password:
        raise InvalidShareUrl("Shared-session links must not contain a user name or password.")
    if hosts and not any(host == h or host.endswith("." + h) for h in hosts):
        raise InvalidShareUrl(f"That link points to {host}, not to {agent.name}'s sharing site." + expected)
    if _non_public_address(host):
        raise InvalidShareUrl(f"That link points to {host}, a private or reserved network address; share links "
                              f"must point to the agent's public sharing site." + expected)
    return url


def _non_public_address(host: str) -> bool:
    """Return whether the host is, or resolves to, an address outside the public internet.

    Staff open these links, so one pointing into a private, loopback, link-local or reserved range would
    aim their browser (or any later fetcher) at internal services. A name that does not resolve is kept:
    nothing is fetched here, and sharing sites may be reachable only from the worker's network.
    """
    try:
        addresses = {ipaddress.ip_address(host.strip("[]"))}
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, 443, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError):
            return False
        addresses = {ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos}
    return any(not address.is_global or address.is_multicast for address in addresses)


def episode_log_save(*, episode: Episode, share_url: str | None, notes: str | None) -> Episode:
    """Save the shared-session link and notes (a draft: nothing is submitted).

    ``None`` keeps the stored value, so a page can save the fields that are right while another one is corrected.
    """
    ensure_with_agent(episode)
    with transaction.atomic():
        locked = _locked(episode)
        ensure_editable(locked)
        agent = locked.agent
        if agent is None:  # a with-agent episode always has one (a database constraint); solo was refused above
            raise SubmitRejected("This task has no agent, so there is no session link to save. Nothing was changed.")
        if share_url is not None:
            locked.share_url = validate_share_url(agent=agent, url=share_url)
        if notes is not None:
            locked.notes = notes.strip()[:5000]
        locked.save(update_fields=["share_url", "notes", "updated_at"])
    return locked


@dataclass(frozen=True)
class Check:
    """One condition of the final submission, phrased as what the worker has to do."""

    key: str
    message: str
    done: bool


def submission_checklist(episode: Episode, files: list[EpisodeFile]) -> list[Check]:
    """Everything the final submission needs for this episode's agent, each marked done or not."""
    kinds = {f.kind for f in files}
    has_log_file = EpisodeFile.Kind.LOG in kinds
    if episode.condition == Episode.Condition.SOLO or episode.agent is None:
        # Done without any AI tool: nothing to set up and no collaboration log; the deliverables are the work.
        return [Check("deliverable", "Upload at least one deliverable file.", EpisodeFile.Kind.DELIVERABLE in kinds)]
    checks = [
        Check("prior", "Say whether you have used this agent before (setup panel).", bool(episode.prior_experience)),
        Check("ready", "Confirm that the agent is set up and ready (setup panel).", episode.ready_at is not None),
        Check("deliverable", "Upload at least one deliverable file.", EpisodeFile.Kind.DELIVERABLE in kinds),
    ]
    mode = episode.agent.log_mode
    if mode == Agent.LogMode.UPLOAD:
        checks.append(Check("log", "Upload your collaboration log (log files or screenshots of the session).",
                            has_log_file))
    elif mode == Agent.LogMode.SHARE_URL:
        checks.append(Check("share_url", "Paste the shared-session link of your conversation with the agent.",
                            bool(episode.share_url)))
    else:
        checks.append(Check("log_or_link", "Provide your collaboration log: upload log files/screenshots or paste a "
                                           "shared-session link.", has_log_file or bool(episode.share_url)))
    return checks


def submission_problems(episode: Episode, files: list[EpisodeFile]) -> list[str]:
    """List what still blocks the final submission, in words the worker can act on."""
    return [check.message for check in submission_checklist(episode, files) if not check.done]


# A task is done in at most a working week; a longer answer is a typo (seconds, or a date).
SELF_REPORT_MAX_MINUTES = 2400


def _check_self_report(minutes: int | None) -> None:
    if minutes is not None and not 1 <= minutes <= SELF_REPORT_MAX_MINUTES:
        raise SubmitRejected(f"Not submitted yet: the minutes you spent must be from 1 to "
                             f"{SELF_REPORT_MAX_MINUTES:,}, or left empty (you entered {minutes}).")


def _submit_audit(files: int, timed_out: bool, minutes: int | None) -> dict[str, Any]:
    after: dict[str, Any] = {"files": files, "timed_out": timed_out}
    if minutes is not None:
        after["self_reported_minutes"] = minutes
    return after


def episode_submit(*, episode: Episode, actor: Any, self_reported_minutes: int | None = None) -> Episode:
    """Submit the deliverables for grading: once, complete, late submissions kept and flagged.

    ``self_reported_minutes`` is the worker's own optional answer to how long the task took, stored beside the
    timestamps (the two measures are compared, never merged).
    """
    _check_self_report(self_reported_minutes)
    with transaction.atomic():
        locked = _locked(episode, with_participant=True)
        if locked.status not in EDITABLE_STATUSES:
            raise EpisodeLocked("This task was already submitted. Nothing was changed.")
        if locked.participant.status == Participant.Status.WITHDRAWN:
            raise EpisodeLocked("You have withdrawn from the study, so this task can no longer be submitted.")
        files = list(EpisodeFile.objects.filter(episode=locked))
        problems = submission_problems(locked, files)
        if problems:
            raise SubmitRejected("Not submitted yet: " + " ".join(problems))
        now = timezone.now()
        locked.status = Episode.Status.SUBMITTED
        locked.submitted_at = now
        locked.timed_out = bool(locked.deadline_at and now > locked.deadline_at)
        locked.self_reported_minutes = self_reported_minutes
        locked.save(update_fields=["status", "submitted_at", "timed_out", "self_reported_minutes", "updated_at"])
        payment_record_task(episode=locked)
        audit_record(actor=actor, action="episode.submit", obj=locked, study=locked.study,
                     after=_submit_audit(len(files), locked.timed_out, self_reported_minutes))
        _unlock_post_survey_if_done(locked)
        episode_id = locked.pk
        # Never a 500 for a saved submission: with the broker down the grading sweep sends it later.
        send_task_on_commit(GRADE_EPISODE, [episode_id])
    return locked


def _unlock_post_survey_if_done(episode: Episode) -> None:
    participant = episode.participant
    study = participant.study
    done = Episode.objects.filter(participant=participant, status__in=FINISHED_EPISODE_STATUSES)
    if study.post_survey_gate == Study.PostSurveyGate.ALL_SUBMITTED:
        done = done.exclude(status=Episode.Status.SKIPPED)
    if done.count() >= study.tasks_per_session:
        participant_tasks_done(participant=participant)


def episodes_expire_abandoned(*, now: datetime | None = None) -> int:
    """Skip open episodes whose worker has shown no activity for the study's ``abandon_after_hours``.

    An abandoned episode would otherwise hold its task's capacity forever. Activity is the latest of the
    episode's own changes and the participant's last request (the task page's heartbeat keeps it fresh).
    Draft files stay, so nothing the worker uploaded is lost; returns how many episodes expired.
    """
    now = now or timezone.now()
    expired = 0
    for study in Study.objects.filter(abandon_after_hours__gt=0).only("pk", "abandon_after_hours"):
        hours = study.abandon_after_hours
        if not hours:  # excluded by the filter; narrows the nullable field to int
            continue
        cutoff = now - timedelta(hours=hours)
        stale = (Episode.objects.filter(study=study, status__in=EDITABLE_STATUSES, is_simulated=False,
                                        updated_at__lt=cutoff, assigned_at__lt=cutoff)
                 .filter(Q(participant__last_activity_at__isnull=True) | Q(participant__last_activity_at__lt=cutoff)))
        for episode in stale.only("pk", "participant_id"):
            expired += _expire_one(episode, cutoff=cutoff, hours=hours)
    return expired


def _expire_one(episode: Episode, *, cutoff: datetime, hours: int) -> int:
    with transaction.atomic():
        locked = _locked(episode, with_participant=True)
        seen = locked.participant.last_activity_at
        # Checked again under the lock: the worker may have come back since the sweep listed the episode.
        if locked.status not in EDITABLE_STATUSES or locked.updated_at >= cutoff or (seen and seen >= cutoff):
            return 0
        locked.status = Episode.Status.SKIPPED
        locked.skip_reason = Episode.SkipReason.ABANDONED
        locked.skip_description = f"No activity for {hours} hours; the task was released for other workers."
        locked.save(update_fields=["status", "skip_reason", "skip_description", "updated_at"])
        audit_record(actor=None, action="episode.expire_abandoned", obj=locked, study=locked.study,
                     after={"position": locked.position, "hours": hours})
        _unlock_post_survey_if_done(locked)
    return 1
