"""Solo-agent baselines: staff attach an autonomous run's deliverables; the same pipeline grades them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from grading.services.pipeline import GradingOutcome, Subject, subject_grade
from grading.task_names import GRADE_SOLO_RUN
from studies.byte_format import human_bytes
from studies.conf import upload_limits
from studies.files import FileRejected, check_type, sanitize_filename, sha256_and_size
from studies.models import Agent, SoloRun, SoloRunFile, Study, TaskInstance
from studies.services.audit import audit_record
from studies.task_sending import send_task_on_commit


def solo_run_files_check(files: Sequence[UploadedFile], taken: Iterable[str] = ()
                         ) -> list[tuple[str, UploadedFile, str, int]]:
    """Validate every file before saving any (FileRejected names the problem), so nothing is half-attached."""
    limits = upload_limits()
    checked = []
    names = set(taken)
    for upload in files:
        name = sanitize_filename(upload.name or "")
        upload.seek(0)
        check_type(name, upload.read(2048), limits["ALLOWED_EXTENSIONS"])
        digest, size = sha256_and_size(upload)
        if size > limits["MAX_FILE_BYTES"]:
            raise FileRejected(f"“{name}” is larger than the {human_bytes(limits['MAX_FILE_BYTES'])} limit per file.")
        if name in names:
            raise FileRejected(f"“{name}” is attached twice; rename one of the files.")
        names.add(name)
        checked.append((name, upload, digest, size))
    return checked


def solo_run_add_files(*, solo_run: SoloRun, files: Sequence[UploadedFile], actor: Any) -> list[SoloRunFile]:
    """Attach deliverable files to a solo run; raises FileRejected (nothing saved) on any bad file."""
    checked = solo_run_files_check(files, set(solo_run.files.values_list("name", flat=True)))
    with transaction.atomic():
        rows = []
        for name, upload, digest, size in checked:
            row = SoloRunFile(run=solo_run, name=name, size=size, sha256=digest)
            row.file.save(name, upload, save=False)
            row.save()
            rows.append(row)
        audit_record(actor=actor, action="solo_run.files_added", obj=solo_run, study=solo_run.study,
                     after={"files": [r.name for r in rows]})
    return rows


def solo_run_attach(*, study: Study, task: TaskInstance, agent: Agent, files: Sequence[UploadedFile],
                    actor: Any, system_prompt: str = "", grade: bool = True,
                    model_cost_usd: Decimal | None = None) -> SoloRun:
    """Create a solo run of `agent` on `task` with its deliverables and (by default) queue its grading."""
    if not files:
        raise FileRejected("Attach at least one deliverable file.")
    checked = solo_run_files_check(files)
    with transaction.atomic():
        solo_run = SoloRun.objects.create(study=study, task=task, agent=agent, system_prompt=system_prompt,
                                          model_cost_usd=model_cost_usd,
                                          status=SoloRun._meta.get_field("status").default)
        for name, upload, digest, size in checked:
            row = SoloRunFile(run=solo_run, name=name, size=size, sha256=digest)
            row.file.save(name, upload, save=False)
            row.save()
        audit_record(actor=actor, action="solo_run.attached", obj=solo_run, study=study,
                     after={"task": str(task.uuid), "agent": agent.name, "files": [c[0] for c in checked]})
        if grade:
            send_task_on_commit(GRADE_SOLO_RUN, [solo_run.pk])
    return solo_run


def solo_run_grade(*, solo_run_id: int, final_attempt: bool = True) -> GradingOutcome:
    """Grade a solo run with the study's judges and the task's rubric (the body of `grade_solo_run`)."""
    return subject_grade(Subject.for_solo_run(solo_run_id), final_attempt=final_attempt)
