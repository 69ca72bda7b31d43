"""Apply checked plans in one transaction, or report what a dry run would change."""

from __future__ import annotations

import contextlib
import dataclasses
import mimetypes
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from django.core.files import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction

from studies.models import Study, TaskFile, TaskInstance
from studies.services.audit import audit_record
from studies.services.task_bundles.checks import Plan, PlannedFile, resolve_drafts
from studies.services.task_bundles.drafts import drafts_from_bundles, find_table
from studies.services.task_bundles.sources import open_tree
from studies.services.task_bundles.table import drafts_from_table
from studies.task_bundle_format import TASK_FILE, BundleLimits, Problem, TaskBundleInvalid


@dataclass
class TaskOutcome:
    """What an import did (or, in a dry run, would do) to one task."""

    uuid: str
    title: str
    action: str  # created | updated | unchanged
    files_added: list[str] = field(default_factory=list)
    files_replaced: list[str] = field(default_factory=list)
    files_removed: list[str] = field(default_factory=list)
    files_unchanged: int = 0
    attached_to_study: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class ImportReport:
    dry_run: bool
    study: str | None
    tasks: list[TaskOutcome]

    def count(self, action: str) -> int:
        return sum(1 for outcome in self.tasks if outcome.action == action)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "study": self.study,
            "created": self.count("created"),
            "updated": self.count("updated"),
            "unchanged": self.count("unchanged"),
            "tasks": [outcome.to_dict() for outcome in self.tasks],
        }



def _field_values(plan: Plan) -> dict[str, Any]:
    spec = plan.spec
    values: dict[str, Any] = {
        "title": spec.title,
        "prompt": spec.prompt,
        "source": spec.source,
        "sector": plan.sector,
        "required_software": spec.required_software,
        "expected_deliverables": spec.expected_deliverables,
        "time_limit_minutes": spec.time_limit_minutes,
    }
    if plan.replace_hidden:
        values["hidden_info"] = spec.hidden_info or ""
    return values


def _diff(plan: Plan, task: TaskInstance | None, study: Study | None) -> tuple[TaskOutcome, dict[str, Any]]:
    """Compare a plan with the stored task; return the outcome and the changed field values."""
    outcome = TaskOutcome(uuid=str(plan.spec.uuid), title=plan.spec.title, action="created")
    values = _field_values(plan)
    desired = {(f.kind, f.name): f for f in plan.files}
    if task is None:
        outcome.files_added = sorted(f"{kind}/{name}" for kind, name in desired)
        outcome.attached_to_study = study is not None
        return outcome, values
    changed = {k: v for k, v in values.items() if getattr(task, k if k != "sector" else "sector_id")
               != (v.pk if k == "sector" else v)}
    wanted_occupations = {o.pk for o in plan.occupations}
    if set(task.occupations.values_list("pk", flat=True)) != wanted_occupations:
        changed["occupations"] = plan.occupations
    for stored in task.files.all():
        if stored.kind == TaskFile.Kind.HIDDEN and not plan.replace_hidden:
            continue
        label = f"{stored.kind}/{stored.name}"
        wanted = desired.pop((stored.kind, stored.name), None)
        if wanted is None:
            outcome.files_removed.append(label)
        elif wanted.sha256 != stored.sha256 or wanted.size != stored.size:
            outcome.files_replaced.append(label)
        else:
            outcome.files_unchanged += 1
    outcome.files_added = sorted(f"{kind}/{name}" for kind, name in desired)
    outcome.attached_to_study = study is not None and not task.studies.filter(pk=study.pk).exists()
    touched = changed or outcome.files_added or outcome.files_removed or outcome.files_replaced
    outcome.action = "updated" if touched else "unchanged"
    return outcome, changed


def _store(task_file: TaskFile, planned: PlannedFile, saved: list[str]) -> None:
    with planned.entry.opener() as handle:
        task_file.file.save(planned.name, File(handle, name=planned.name), save=False)
    saved.append(task_file.file.name)
    task_file.size = planned.size
    task_file.sha256 = planned.sha256
    task_file.content_type = mimetypes.guess_type(planned.name)[0] or ""
    task_file.save()


def _apply(plan: Plan, study: Study | None, saved: list[str], doomed: list[str]) -> TaskOutcome:
    task = TaskInstance.objects.select_for_update().filter(uuid=plan.spec.uuid).first()
    outcome, values = _diff(plan, task, study)
    if task is None:
        occupations = values.pop("occupations", plan.occupations)
        task = TaskInstance.objects.create(uuid=plan.spec.uuid, **values)
        task.occupations.set(occupations)
    elif values:
        occupations = values.pop("occupations", None)
        for name, value in values.items():
            setattr(task, name, value)
        if values:
            task.save()
        if occupations is not None:
            task.occupations.set(occupations)
    if outcome.action != "unchanged":
        _apply_files(task, plan, saved, doomed)
    if study is not None:
        task.studies.add(study)
    return outcome


def _apply_files(task: TaskInstance, plan: Plan, saved: list[str], doomed: list[str]) -> None:
    desired = {(f.kind, f.name): f for f in plan.files}
    for stored in list(task.files.all()):
        if stored.kind == TaskFile.Kind.HIDDEN and not plan.replace_hidden:
            continue
        wanted = desired.pop((stored.kind, stored.name), None)
        if wanted is None:
            doomed.append(stored.file.name)
            stored.delete()
        elif wanted.sha256 != stored.sha256 or wanted.size != stored.size:
            doomed.append(stored.file.name)
            _store(stored, wanted, saved)
    for (kind, name), planned in sorted(desired.items()):
        _store(TaskFile(task=task, kind=kind, name=name), planned, saved)


def task_bundles_import(
    *,
    source: Path | IO[bytes],
    name: str | None = None,
    study: Study | None = None,
    actor: Any = None,
    dry_run: bool = False,
    limits: BundleLimits | None = None,
) -> ImportReport:
    """Validate a bundle source completely, then create or update its tasks in one transaction.

    ``source`` is a path (bundle folder, folder of bundles, .zip, or .csv/.jsonl table) or an open binary
    upload whose ``name`` ends in .zip, .csv or .jsonl. Raises :class:`TaskBundleInvalid` listing every
    problem; in that case nothing has been written. With ``dry_run`` the report says what would change.
    """
    limits = limits or BundleLimits.from_settings()
    problems: list[Problem] = []
    with open_tree(source, name, limits, problems) as (tree, table_path):
        plans: list[Plan] = []
        if tree is not None:
            if table_path is not None:
                drafts = drafts_from_table(tree, table_path, problems)
            else:
                entries = tree.entries()
                if any(PurePosixPath(e.path).name == TASK_FILE for e in entries):
                    drafts = drafts_from_bundles(tree, entries, problems)
                else:
                    found = find_table(entries, problems)
                    drafts = drafts_from_table(tree, found, problems) if found else []
            if not drafts and not problems:
                problems.append(Problem("", "", "the upload holds no tasks"))
            plans = resolve_drafts(drafts, limits, problems)
        if problems:
            raise TaskBundleInvalid(sorted(problems, key=lambda p: p.path))
        if dry_run:
            outcomes = []
            for plan in plans:
                task = TaskInstance.objects.filter(uuid=plan.spec.uuid).prefetch_related("files").first()
                outcomes.append(_diff(plan, task, study)[0])
            return ImportReport(dry_run=True, study=study.slug if study else None, tasks=outcomes)
        return _write(plans, study=study, actor=actor)


def _write(plans: list[Plan], *, study: Study | None, actor: Any) -> ImportReport:
    saved: list[str] = []
    doomed: list[str] = []
    try:
        with transaction.atomic():
            outcomes = [_apply(plan, study, saved, doomed) for plan in plans]
            changed = [o for o in outcomes if o.action != "unchanged" or o.attached_to_study]
            if changed:
                audit_record(
                    actor=actor, action="tasks.import", object_type="task_import",
                    object_id=study.slug if study else "", study=study,
                    after={"created": [o.uuid for o in outcomes if o.action == "created"],
                           "updated": [o.uuid for o in outcomes if o.action == "updated"],
                           "attached": [o.uuid for o in outcomes if o.attached_to_study]},
                    note=f"{len(plans)} task(s) in the import",
                )
            # Replaced and removed files leave storage only once the rows pointing at them are gone for good.
            transaction.on_commit(lambda: _delete_stored(doomed))
    except IntegrityError:
        _delete_stored(saved)
        # Two imports creating the same task at once: the loser writes nothing and can simply run again.
        raise TaskBundleInvalid([Problem("", "", "another import changed the same tasks at the same time; "
                                                 "run this import again")]) from None
    except BaseException:
        _delete_stored(saved)
        raise
    return ImportReport(dry_run=False, study=study.slug if study else None, tasks=outcomes)


def _delete_stored(names: Iterable[str]) -> None:
    for stored_name in names:
        with contextlib.suppress(OSError):
            default_storage.delete(stored_name)
