"""The reconciliation sweep: the database says what must happen next, and this does whatever is left undone.

Messages are the fast path; this is the guarantee. Run every minute by beat (`grading.tasks.reconcile`), it
is cheap (indexed queries over open work only) and idempotent, and it finishes what a lost message, a dead
worker or a broker outage left behind:

- submissions owed a grading pass (submitted, or grading with no judge call under a live lease and no task
  retry scheduled) are sent to grading again — this re-sends a submission whose message never reached the
  broker, and takes over a claim whose worker died once its lease lapsed;
- open follow-up rows a grade wrote in its own transaction (the message path closes them when it does the
  work): the rating observation is recorded here directly (the same idempotent service the message calls),
  the log coding is re-sent with backoff from its last send, never while a coding of it holds its lease;
- episodes of studies that code theory of mind and still owe a coding (graded before the study turned it on,
  or before a new instrument version) get a follow-up row, re-sent like the log coding's;
- submissions whose judges wait for a failing provider are sent again once a probe finds it answering
  (`grading.services.outages`: one free probe per waiting provider per sweep);
- a withdrawn participant's still-active observations are retracted (a lost retraction message);
- an episode whose stored transcript does not match its log files is parsed again (a lost parse message).

Rating refreshes need no row of their own: the rating sweep refreshes every study whose ledger is newer than
its latest snapshot. Expert routing is derived from the rows by its own sweep.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.core.exceptions import ImproperlyConfigured
from django.db.models import F
from django.utils import timezone

from grading.conf import grading_settings
from grading.models import GradingFollowUp
from grading.providers import tom_coders
from grading.selectors import (
    GAVE_UP,
    current_fluency_coding,
    episodes_owing_process_coding,
    episodes_owing_transcript,
    episodes_pending_grading,
    process_coding_in_flight,
    process_codings_missing,
    solo_runs_pending_grading,
)
from grading.services.outages import provider_outages_recheck
from grading.task_names import CODE_LOG, CODE_PROCESS, GRADE_EPISODE, GRADE_SOLO_RUN, PARSE_LOG
from rating import selectors as rating_selectors
from rating.services.ledger import observation_record, observations_retract_participant
from studies.models import Episode, Study
from studies.task_sending import send_task_now

logger = logging.getLogger(__name__)

BATCH = 500


@dataclass
class ReconcileReport:
    """What one sweep did; `send_errors` counts messages the broker refused (tried again next sweep)."""

    grading_sent: int = 0
    solo_runs_sent: int = 0
    observations_recorded: int = 0
    codings_sent: int = 0
    process_codings_opened: int = 0
    process_codings_sent: int = 0
    follow_ups_closed: int = 0
    retractions: int = 0
    parses_sent: int = 0
    provider_probes: int = 0
    outage_grading_sent: int = 0
    send_errors: int = 0


def _send(name: str, args: list, report: ReconcileReport) -> bool:
    try:
        send_task_now(name, args)  # stores no result: nobody reads it, so never wait on a backend
    except Exception:
        report.send_errors += 1
        logger.warning("reconcile: could not send %s%s", name, tuple(args), exc_info=True)
        return False
    return True


def _resend_grading(report: ReconcileReport) -> None:
    conf = grading_settings()
    pending = episodes_pending_grading(quiet_for=float(conf["REQUEUE_AFTER_SECONDS"]),
                                       waiting_quiet_for=float(conf["WAITING_RECHECK_SECONDS"]))
    for pk in list(pending.values_list("pk", flat=True)[:BATCH]):
        if not _send(GRADE_EPISODE, [pk], report):
            return  # the broker is down: stop here, the next sweep tries again
        # Touching the row keeps the next sweeps from sending it again while this message waits in a queue.
        Episode.objects.filter(pk=pk).update(updated_at=timezone.now())
        report.grading_sent += 1
    recent = timezone.now() - timedelta(seconds=float(conf["REQUEUE_AFTER_SECONDS"]))
    for pk in list(solo_runs_pending_grading().filter(created_at__lte=recent).values_list("pk", flat=True)[:BATCH]):
        if not _send(GRADE_SOLO_RUN, [pk], report):
            return
        report.solo_runs_sent += 1


def _close(follow_up: GradingFollowUp, note: str = "") -> None:
    GradingFollowUp.objects.filter(pk=follow_up.pk).update(done_at=timezone.now(), lease_expires_at=None,
                                                           note=note[:2000])


def _finish_follow_ups(report: ReconcileReport) -> None:
    """Do or re-send the work of open follow-up rows.

    An observation (idempotent, no paid call) is recorded at once, whatever the row's age. A log coding is
    re-sent only when its last send (the grade's own message at creation, then each re-send) has had its
    backoff, `grace · 2^attempts`, and no coding of it is in flight under a lease: a backlog of sweeps after an
    outage sends it once, not once per sweep. It is given up only after the last send's backoff ran out too.
    """
    conf = grading_settings()
    grace = float(conf["FOLLOW_UP_GRACE_SECONDS"])
    limit = int(conf["FOLLOW_UP_MAX_ATTEMPTS"])
    now = timezone.now()
    open_rows = (GradingFollowUp.objects.filter(done_at__isnull=True).select_related("episode__study")
                 .order_by("created_at")[:BATCH])
    for row in open_rows:
        if row.kind == GradingFollowUp.Kind.OBSERVATION:
            try:
                observation_record(episode_id=row.episode_id)
            except Exception as exc:
                logger.exception("reconcile: recording episode %s failed", row.episode_id)
                GradingFollowUp.objects.filter(pk=row.pk).update(attempts=F("attempts") + 1, note=str(exc)[:2000])
                continue
            report.observations_recorded += 1
            _close(row)
            report.follow_ups_closed += 1
            continue
        if row.kind == GradingFollowUp.Kind.PROCESS:
            if not _process_owed(row):
                _close(row)
                report.follow_ups_closed += 1
            elif not process_coding_in_flight(row.episode_id) and not _resend(
                    row, CODE_PROCESS, report, now=now, grace=grace, limit=limit):
                return
            continue
        if current_fluency_coding(row.episode) is not None:
            _close(row)
            report.follow_ups_closed += 1
            continue
        if row.lease_expires_at is not None and row.lease_expires_at >= now:
            continue  # a coding is in flight; it closes the row when it is stored
        if not _resend(row, CODE_LOG, report, now=now, grace=grace, limit=limit):
            return


def _resend(row: GradingFollowUp, task: str, report: ReconcileReport, *, now, grace: float, limit: int) -> bool:
    """Re-send a coding row's message once its backoff ran out (or give it up); False when the broker is down."""
    due = (row.last_sent_at or row.created_at) + timedelta(seconds=grace * 2 ** row.attempts)
    if now < due:
        return True
    if row.attempts >= limit:
        command = "code_processes" if task == CODE_PROCESS else "code_logs"
        _close(row, f"{GAVE_UP} after {limit} sends; run `manage.py {command}` once the coder works")
        report.follow_ups_closed += 1
        return True
    if not _send(task, [row.episode_id], report):
        return False
    GradingFollowUp.objects.filter(pk=row.pk).update(attempts=F("attempts") + 1, last_sent_at=now)
    if task == CODE_PROCESS:
        report.process_codings_sent += 1
    else:
        report.codings_sent += 1
    return True


def _process_owed(row: GradingFollowUp) -> bool:
    """Whether the row's episode still owes a ToM / response-quality coding (False once the study stopped)."""
    study = row.episode.study
    if not study.tom_coding:
        return False
    try:
        coders = tom_coders(study)
    except ImproperlyConfigured:
        return True  # kept open (and given up in time): staff fix the pair, the row's work is still owed
    return bool(process_codings_missing(episode_id=row.episode_id, coders=[(c.provider, c.model) for c in coders]))


def _open_process_codings(report: ReconcileReport) -> None:
    """Open a follow-up row for each episode of a ToM-coding study that owes a coding and has none on its way.

    This finds episodes graded before the study turned coding on, or before a new instrument version; the rows
    are then sent (with backoff) by `_finish_follow_ups` like any coding the grade itself asked for.
    """
    for study in Study.objects.filter(tom_coding=True).order_by("pk"):
        try:
            coders = [(c.provider, c.model) for c in tom_coders(study)]
        except ImproperlyConfigured as exc:
            logger.warning("reconcile: study %s cannot code theory of mind: %s", study.slug, exc)
            continue
        for pk in episodes_owing_process_coding(study, coders, limit=BATCH):
            GradingFollowUp.objects.create(episode_id=pk, kind=GradingFollowUp.Kind.PROCESS)
            report.process_codings_opened += 1


def _retract_withdrawn(report: ReconcileReport) -> None:
    for participant_id in rating_selectors.withdrawn_participants_with_active_observations(limit=BATCH):
        report.retractions += observations_retract_participant(
            participant_id=participant_id, reason="participant withdrew (completed by the reconciliation sweep)")


def _resend_parses(report: ReconcileReport) -> None:
    """Send a parse for every episode whose transcript does not match its log files (idempotent if doubled)."""
    now = timezone.now()
    settled = now - timedelta(seconds=float(grading_settings()["REQUEUE_AFTER_SECONDS"]))
    for pk in episodes_owing_transcript(settled_before=settled, recent_since=now - timedelta(days=1), limit=BATCH):
        if not _send(PARSE_LOG, [pk], report):
            return
        report.parses_sent += 1


def _recheck_outages(report: ReconcileReport) -> None:
    """Send grading again for submissions whose judges wait for a provider that answers again (outages.py)."""
    report.provider_probes, report.outage_grading_sent = provider_outages_recheck(
        send=lambda pk: _send(GRADE_EPISODE, [pk], report), limit=BATCH)


def grading_reconcile() -> ReconcileReport:
    """Run one reconciliation sweep and report what it did."""
    report = ReconcileReport()
    _open_process_codings(report)
    _finish_follow_ups(report)
    _retract_withdrawn(report)
    _resend_grading(report)
    _recheck_outages(report)
    _resend_parses(report)
    if any(v for k, v in vars(report).items()):
        logger.info("reconcile: %s", report)
    return report

