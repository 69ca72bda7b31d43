"""Background jobs behind the staff dashboard: analyses, exports and payout files.

A page asks for a job (``*_request``); the request creates a :class:`BackgroundJob` row and enqueues a
Celery task on commit; the task calls ``job_run`` here, which reports progress into the row and stores the
result (or the file) on it. Analyses are cached by ``cache_key``: asking again for the same data returns
the existing job instead of computing twice.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.core.files import File
from django.db import transaction
from django.utils import timezone

from console import task_names
from console.dashboard import selectors
from console.dashboard.collaboration import collaboration_analysis
from console.dashboard.exceptions import JobRefused
from console.dashboard.stability import study_stability
from experts import selectors as expert_selectors
from experts.services.gate import study_gate_evaluate
from experts.services.preferences import study_preferences
from grading.services.theory_of_mind import study_tom
from rating import selectors as rating_selectors
from rating.services import analysis as rating_analysis
from rating.services.synergy import study_synergy, synergy_plan
from studies.models import BackgroundJob, Study
from studies.roles import can_export_pii
from studies.services.audit import audit_record
from studies.task_sending import send_task_on_commit
from surveys.study_statistics import survey_statistics

logger = logging.getLogger(__name__)

# A queued job nobody picked up within this time (worker down) no longer blocks a new request.
ABANDONED_AFTER = timedelta(minutes=30)
PROGRESS_INTERVAL_SECONDS = 0.2


def _enqueue(task_name: str, job: BackgroundJob) -> None:
    job_id = job.pk
    send_task_on_commit(task_name, [job_id])


# -------------------------------------------------------------------------------------------- requests


def analysis_request(*, study: Study, kind: str, actor: Any, cluster: str = "observation") -> BackgroundJob:
    """Return the job computing ``kind`` for the study's current data, creating and enqueuing it if needed.

    ``cluster`` (stability only) is the bootstrap's resampling unit: ``observation`` or ``human``.
    """
    if kind not in selectors.ANALYSIS_KINDS:
        raise JobRefused(f"Unknown analysis “{kind}”.")
    if cluster not in rating_analysis.STABILITY_CLUSTERS:
        raise JobRefused(f"Unknown resampling unit “{cluster}”.")
    snapshot = rating_selectors.latest_snapshot(study)
    key = selectors.analysis_cache_key(study, kind, snapshot, cluster=cluster)
    if key is None:
        raise JobRefused("There is no data to analyse yet.")
    with transaction.atomic():
        # Lock the study row so two staff clicking at once create one job, not two.
        Study.objects.select_for_update().filter(pk=study.pk).first()
        existing = (
            BackgroundJob.objects.filter(study=study, kind=kind, cache_key=key)
            .exclude(status=BackgroundJob.Status.FAILED)
            .order_by("-created_at")
            .first()
        )
        abandoned = (
            existing is not None
            and existing.status == BackgroundJob.Status.QUEUED
            and existing.created_at < timezone.now() - ABANDONED_AFTER
        )
        if existing is not None and not abandoned:
            return existing
        if abandoned and existing is not None:
            BackgroundJob.objects.filter(pk=existing.pk).update(
                status=BackgroundJob.Status.FAILED, error="No worker picked this job up; it was requested again.",
                finished_at=timezone.now(),
            )
        params: dict[str, Any] = {"snapshot_version": snapshot.version if snapshot else None}
        if kind == "stability":
            params.update(rounds=selectors.bootstrap_rounds(), seed=0, cluster=cluster)
        job = BackgroundJob.objects.create(
            kind=kind, study=study, requested_by=_user_or_none(actor), params=params, cache_key=key
        )
        _enqueue(task_names.RUN_ANALYSIS, job)
    return job


def gate_evaluation_request(*, study: Study, actor: Any) -> BackgroundJob:
    """Queue the study's expert-gate evaluation as a job like the others (a progress bar that reloads the page
    when it is done), audited; while one is queued or running, that one is returned instead of a second."""
    with transaction.atomic():
        Study.objects.select_for_update().filter(pk=study.pk).first()
        existing = (
            BackgroundJob.objects.filter(
                study=study, kind="gate", status__in=(BackgroundJob.Status.QUEUED, BackgroundJob.Status.RUNNING),
                created_at__gte=timezone.now() - ABANDONED_AFTER,
            ).order_by("-created_at").first()
        )
        if existing is not None:
            return existing
        audit_record(actor=actor, action="study.expert_gate_request", obj=study, study=study)
        job = BackgroundJob.objects.create(kind="gate", study=study, requested_by=_user_or_none(actor), params={})
        _enqueue(task_names.RUN_ANALYSIS, job)
    return job


def export_request(*, study: Study, actor: Any, include_pii: bool = False) -> BackgroundJob:
    """Create and enqueue a study export; identities only for users allowed to see them. Audited."""
    if include_pii and not can_export_pii(actor):
        raise JobRefused("You do not have permission to export participants' identities.")
    with transaction.atomic():
        job = BackgroundJob.objects.create(
            kind="export", study=study, requested_by=_user_or_none(actor), params={"include_pii": bool(include_pii)}
        )
        audit_record(
            actor=actor, action="export.requested", obj=job, study=study, after={"include_pii": bool(include_pii)}
        )
        _enqueue(task_names.RUN_EXPORT, job)
    return job


def payouts_request(*, study: Study, actor: Any, file_format: str, include_pii: bool = False) -> BackgroundJob:
    """Create and enqueue a payout CSV; platform worker ids only for users allowed to see identities. Audited."""
    from console.payouts import PAYOUT_FORMATS, PAYOUT_FORMATS_NEEDING_IDS

    if file_format not in PAYOUT_FORMATS:
        raise JobRefused(f"Unknown payout format “{file_format}”.")
    if include_pii and not can_export_pii(actor):
        raise JobRefused("You do not have permission to export recruitment-platform ids.")
    if file_format in PAYOUT_FORMATS_NEEDING_IDS and not can_export_pii(actor):
        raise JobRefused("A Prolific bulk-bonus file needs the participants' Prolific ids, which only users with the "
                         "“view participant identity” permission may export: choose the detailed file.")
    if file_format in PAYOUT_FORMATS_NEEDING_IDS and not include_pii:
        raise JobRefused("A Prolific bulk-bonus file needs the participants' Prolific ids: tick “Use "
                         "recruitment-platform worker ids”.")
    with transaction.atomic():
        job = BackgroundJob.objects.create(
            kind="payouts", study=study, requested_by=_user_or_none(actor),
            params={"format": file_format, "include_pii": bool(include_pii)},
        )
        audit_record(actor=actor, action="payouts.requested", obj=job, study=study, after=dict(job.params))
        _enqueue(task_names.RUN_PAYOUTS, job)
    return job


def _user_or_none(actor: Any) -> Any:
    return actor if getattr(actor, "is_authenticated", False) else None


# ----------------------------------------------------------------------------------------------- running


class ProgressReporter:
    """Write progress into the job row, at most every ``interval`` seconds (always the last step)."""

    def __init__(self, job_id: int, interval: float = PROGRESS_INTERVAL_SECONDS) -> None:
        self.job_id = job_id
        self.interval = interval
        self._last = 0.0
        self.writes = 0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._last < self.interval:
            return
        self._last = now
        self.writes += 1
        BackgroundJob.objects.filter(pk=self.job_id).update(progress_done=done, progress_total=total)


def _job_execute(job_id: int, work: Callable[[BackgroundJob, ProgressReporter], Any]) -> BackgroundJob | None:
    """Run ``work`` for a job once: mark it running, store its result or the failure reason."""
    with transaction.atomic():
        job = BackgroundJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            logger.warning("background job %s no longer exists", job_id)
            return None
        if job.status in (BackgroundJob.Status.DONE, BackgroundJob.Status.FAILED):
            return job  # a redelivered message after the job finished
        job.status = BackgroundJob.Status.RUNNING
        job.started_at = timezone.now()
        job.save(update_fields=["status", "started_at"])
    reporter = ProgressReporter(job.pk)
    try:
        result = work(job, reporter)
    except Exception as exc:
        logger.exception("background job %s (%s) failed", job.pk, job.kind)
        BackgroundJob.objects.filter(pk=job.pk).update(
            status=BackgroundJob.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000],
            finished_at=timezone.now(),
        )
        job.refresh_from_db()
        return job
    job.refresh_from_db(fields=["progress_total"])
    total = job.progress_total or 1
    BackgroundJob.objects.filter(pk=job.pk).update(
        status=BackgroundJob.Status.DONE, result=result, finished_at=timezone.now(), progress_done=total,
        progress_total=total,
    )
    job.refresh_from_db()
    return job


def _study_of(job: BackgroundJob) -> Study:
    """The study an analysis, export or payout job was requested for (the column is nullable, these jobs never are)."""
    if job.study is None:
        raise JobRefused("This job names no study.")
    return job.study


def analysis_job_run(*, job_id: int) -> BackgroundJob | None:
    """Compute a stored analysis (stability, surveys, collaboration, graders, synergy, preferences) or evaluate
    the expert gate for its job."""

    def work(job: BackgroundJob, progress: ProgressReporter) -> dict[str, Any]:
        study = _study_of(job)
        if job.kind == "stability":
            snapshot = rating_selectors.latest_snapshot(study)
            if snapshot is None:
                raise JobRefused("The study has no posterior snapshot yet.")
            return study_stability(
                study, snapshot, rounds=int(job.params.get("rounds", selectors.bootstrap_rounds())),
                seed=int(job.params.get("seed", 0)), cluster=job.params.get("cluster", "observation"),
                progress=progress,
            )
        progress(0, 1)
        if job.kind == "surveys":
            result = survey_statistics(study)
        elif job.kind == "graders":
            result = rating_analysis.study_grader_report(study)
            if result is None:
                raise JobRefused("No grade is recorded for this study yet.")
        elif job.kind == "collaboration":
            result = collaboration_analysis(study)
        elif job.kind == "synergy":
            result = study_synergy(study)
        elif job.kind == "tom":
            gold = expert_selectors.study_tom_gold(study.pk)
            result = study_tom(study, gold=[(g.episode_id, g.expert_id, float(g.score)) for g in gold],
                               gold_strata={g.episode_id: (g.stratum, g.stratum_population) for g in gold})
        elif job.kind == "preferences":
            result = study_preferences(study)
        elif job.kind == "synergy_plan":
            result = synergy_plan(job.params)
        elif job.kind == "gate":
            result = {"judge_gates": len(study_gate_evaluate(study_id=study.pk))}
        else:
            raise JobRefused(f"Job kind “{job.kind}” is not an analysis.")
        progress(1, 1)
        return result

    return _job_execute(job_id, work)


def _store_file(job: BackgroundJob, handle: Any, name: str) -> dict[str, Any]:
    handle.seek(0)
    digest = hashlib.sha256()
    size = 0
    while chunk := handle.read(1 << 20):
        digest.update(chunk)
        size += len(chunk)
    handle.seek(0)
    job.file.save(name, File(handle), save=False)
    BackgroundJob.objects.filter(pk=job.pk).update(file=job.file.name)
    return {"file_name": name, "size": size, "sha256": digest.hexdigest()}


def export_job_run(*, job_id: int) -> BackgroundJob | None:
    """Build a study's export ZIP for its job, store it privately and audit the result."""
    from console.exports import build_export

    def work(job: BackgroundJob, progress: ProgressReporter) -> dict[str, Any]:
        include_pii = bool(job.params.get("include_pii")) and can_export_pii(job.requested_by)
        if job.params.get("include_pii") and not include_pii:
            raise JobRefused("The requester may no longer export identities.")
        study = _study_of(job)
        with tempfile.TemporaryFile() as handle:
            summary = build_export(study, handle, include_pii=include_pii, progress=progress)
            stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
            stored = _store_file(job, handle, f"{study.slug}-export-{stamp}.zip")
        result = {**summary, **stored, "include_pii": include_pii}
        audit_record(
            actor=job.requested_by, action="export.completed", obj=job, study=job.study,
            after={"include_pii": include_pii, "sha256": stored["sha256"], "size": stored["size"],
                   "tables": summary.get("tables", {})},
        )
        return result

    return _job_execute(job_id, work)


def payouts_job_run(*, job_id: int) -> BackgroundJob | None:
    """Build a payout CSV for its job, store it privately and audit the result."""
    from console.payouts import payout_rows, write_payout_csv

    def work(job: BackgroundJob, progress: ProgressReporter) -> dict[str, Any]:
        include_pii = bool(job.params.get("include_pii")) and can_export_pii(job.requested_by)
        if job.params.get("include_pii") and not include_pii:
            raise JobRefused("The requester may no longer export recruitment-platform ids.")
        file_format = job.params.get("format", "detailed")
        progress(0, 2)
        study = _study_of(job)
        rows = payout_rows(study, include_pii=include_pii)
        progress(1, 2)
        with tempfile.TemporaryFile() as handle:
            summary = write_payout_csv(rows, file_format, handle)
            stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
            stored = _store_file(job, handle, f"{study.slug}-payouts-{file_format}-{stamp}.csv")
        progress(2, 2)
        result = {**summary, **stored, "include_pii": include_pii, "format": file_format}
        audit_record(
            actor=job.requested_by, action="payouts.completed", obj=job, study=job.study,
            after={k: v for k, v in result.items() if k != "file_name"},
        )
        return result

    return _job_execute(job_id, work)


def job_download_record(*, job: BackgroundJob, actor: Any) -> None:
    """Audit that a staff member downloaded a job's file."""
    audit_record(
        actor=actor, action=f"{job.kind}.downloaded", obj=job, study=job.study,
        after={"include_pii": bool((job.result or {}).get("include_pii")), "sha256": (job.result or {}).get("sha256")},
    )
