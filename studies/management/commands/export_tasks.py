"""manage.py export_tasks DEST — write tasks as bundles (a folder, or DEST.zip) that import_tasks reads back."""

from __future__ import annotations

import uuid
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from studies.models import Study, TaskInstance
from studies.services.task_bundles import task_bundles_export


class Command(BaseCommand):
    help = (
        "Export tasks as task bundles (one folder per task UUID) into DEST, a new or empty folder, or into a "
        "ZIP archive when DEST ends in .zip. By default every task is exported, with hidden evaluator files."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("destination", type=Path)
        parser.add_argument("--study", metavar="SLUG", help="Only the tasks of this study.")
        parser.add_argument("--uuid", action="append", default=[], metavar="UUID", help="Only this task (repeatable).")
        parser.add_argument("--source", choices=[c for c, _ in TaskInstance.Source.choices], help="Only this source.")
        parser.add_argument("--without-hidden", action="store_true",
                            help="Leave out hidden evaluator information and files (e.g. to share prompts).")

    def handle(self, *args, destination: Path, study: str | None, uuid: list[str], source: str | None,
               without_hidden: bool, **options) -> None:
        tasks = TaskInstance.objects.select_related("sector").prefetch_related("occupations", "files")
        if study:
            target = Study.objects.filter(slug=study).first()
            if target is None:
                raise CommandError(f"No study with the slug “{study}”.")
            tasks = tasks.filter(studies=target)
        if uuid:
            try:
                wanted = [_uuid(value) for value in uuid]
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            tasks = tasks.filter(uuid__in=wanted)
            missing = {str(u) for u in wanted} - {str(u) for u in tasks.values_list("uuid", flat=True)}
            if missing:
                raise CommandError(f"No task with the UUID {', '.join(sorted(missing))}.")
        if source:
            tasks = tasks.filter(source=source)
        tasks = tasks.order_by("uuid")
        if not tasks.exists():
            raise CommandError("No tasks match; nothing was written.")
        try:
            report = task_bundles_export(tasks=tasks, destination=destination, include_hidden=not without_hidden)
        except FileExistsError as exc:
            raise CommandError(f"{exc}; choose a new destination.") from exc
        self.stdout.write(self.style.SUCCESS(
            f"Exported {report.tasks} task(s) with {report.files} file(s) to {report.destination}."
        ))


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise ValueError(f"“{value}” is not a UUID.") from None
