"""Solo-agent baselines: staff attach an autonomous run's deliverables and session files; the same pipeline
grades the deliverables, and the session files' recorded usage prices the run's model calls."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from grading.services.pipeline import GradingOutcome, Subject, subject_grade
from grading.services.transcripts import stored_log_parse
from grading.task_names import GRADE_SOLO_RUN
from grading.transcripts.usage import merge_usage
from grading.transcripts.version import files_fingerprint
from studies.byte_format import human_bytes
from studies.conf import upload_limits
from studies.files import FileRejected, check_type, extension_of, sanitize_filename, sha256_and_size
from studies.models import Agent, SoloRun, SoloRunFile, Study, TaskInstance
from studies.services.audit import audit_record
from studies.task_sending import send_task_on_commit

DELIVERABLE, SESSION = SoloRunFile.Kind.DELIVERABLE, SoloRunFile.Kind.LOG
# What the supported CLIs write (JSON Lines, JSON, a terminal capture); a deliverable in this field is refused.
SESSION_EXTENSIONS = frozenset({"json", "jsonl", "txt", "log"})


def _session_extensions() -> list[str]:
    return sorted(SESSION_EXTENSIONS & {ext.lower() for ext in upload_limits()["ALLOWED_EXTENSIONS"]})


def solo_run_files_check(files: Sequence[UploadedFile], taken: Iterable[str] = (), *, kind: str = DELIVERABLE
                         ) -> list[tuple[str, UploadedFile, str, int]]:
    """Validate every file before saving any (FileRejected names the problem), so nothing is half-attached.

    ``taken`` holds the names already used on the run, by deliverables and session files alike.
    """
    limits = upload_limits()
    allowed = _session_extensions() if kind == SESSION else limits["ALLOWED_EXTENSIONS"]
    checked = []
    names = set(taken)
    for upload in files:
        name = sanitize_filename(upload.name or "")
        if kind == SESSION and extension_of(name) not in allowed:
            raise FileRejected(f"“{name}” is not a session file: attach the agent's own log "
                               f"({', '.join('.' + ext for ext in allowed)}); deliverables go in their own field.")
        upload.seek(0)
        check_type(name, upload.read(2048), allowed)
        digest, size = sha256_and_size(upload)
        if size > limits["MAX_FILE_BYTES"]:
            raise FileRejected(f"“{name}” is larger than the {human_bytes(limits['MAX_FILE_BYTES'])} limit per file.")
        if name in names:
            raise FileRejected(f"“{name}” is attached twice; rename one of the files.")
        names.add(name)
        checked.append((name, upload, digest, size))
    return checked


def _store(solo_run: SoloRun, checked: list[tuple[str, UploadedFile, str, int]], kind: str) -> list[SoloRunFile]:
    rows = []
    for name, upload, digest, size in checked:
        row = SoloRunFile(run=solo_run, kind=kind, name=name, size=size, sha256=digest)
        row.file.save(name, upload, save=False)
        row.save()
        rows.append(row)
    return rows


def solo_run_usage_build(*, solo_run: SoloRun, force: bool = False) -> SoloRun:
    """Read the model usage of the run's session files into `SoloRun.usage` (None: none recorded any).

    Skipped when the files and the parser version are those the stored usage was read from (the fingerprint);
    attaching another session file, or a newer parser, changes it, so the files are read again.
    """
    files = list(solo_run.files.filter(kind=SESSION).order_by("name", "pk"))
    fingerprint = files_fingerprint((f.name, f.sha256) for f in files) if files else ""
    if not force and fingerprint == solo_run.usage_fingerprint:
        return solo_run
    solo_run.usage = merge_usage([stored_log_parse(f, f"solo run {f.run_id}").usage for f in files])
    solo_run.usage_fingerprint = fingerprint
    SoloRun.objects.filter(pk=solo_run.pk).update(usage=solo_run.usage, usage_fingerprint=fingerprint)
    return solo_run


def solo_run_add_files(*, solo_run: SoloRun, files: Sequence[UploadedFile], actor: Any,
                       kind: str = DELIVERABLE) -> list[SoloRunFile]:
    """Attach deliverables (or session files, whose usage is then read again) to a solo run.

    Raises FileRejected, saving nothing, on any bad file.
    """
    checked = solo_run_files_check(files, set(solo_run.files.values_list("name", flat=True)), kind=kind)
    with transaction.atomic():
        rows = _store(solo_run, checked, kind)
        if kind == SESSION:
            solo_run_usage_build(solo_run=solo_run)
        action = "solo_run.session_files_added" if kind == SESSION else "solo_run.files_added"
        audit_record(actor=actor, action=action, obj=solo_run, study=solo_run.study,
                     after={"files": [r.name for r in rows]})
    return rows


def solo_run_attach(*, study: Study, task: TaskInstance, agent: Agent, files: Sequence[UploadedFile],
                    actor: Any, system_prompt: str = "", grade: bool = True,
                    model_cost_usd: Decimal | None = None,
                    session_files: Sequence[UploadedFile] = ()) -> SoloRun:
    """Create a solo run of `agent` on `task` with its deliverables (and the session files its usage is read
    from), and (by default) queue its grading."""
    if not files:
        raise FileRejected("Attach at least one deliverable file.")
    checked = solo_run_files_check(files)
    sessions = solo_run_files_check(session_files, {c[0] for c in checked}, kind=SESSION)
    with transaction.atomic():
        solo_run = SoloRun.objects.create(study=study, task=task, agent=agent, system_prompt=system_prompt,
                                          model_cost_usd=model_cost_usd,
                                          status=SoloRun._meta.get_field("status").default)
        _store(solo_run, checked, DELIVERABLE)
        after: dict[str, Any] = {"task": str(task.uuid), "agent": agent.name, "files": [c[0] for c in checked]}
        if sessions:
            _store(solo_run, sessions, SESSION)
            solo_run_usage_build(solo_run=solo_run)
            after["session_files"] = [c[0] for c in sessions]
        audit_record(actor=actor, action="solo_run.attached", obj=solo_run, study=study, after=after)
        if grade:
            send_task_on_commit(GRADE_SOLO_RUN, [solo_run.pk])
    return solo_run


def solo_run_grade(*, solo_run_id: int, final_attempt: bool = True) -> GradingOutcome:
    """Grade a solo run with the study's judges and the task's rubric (the body of `grade_solo_run`)."""
    return subject_grade(Subject.for_solo_run(solo_run_id), final_attempt=final_attempt)
