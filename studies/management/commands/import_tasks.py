"""manage.py import_tasks PATH — import task bundles or a GDPval-style task table (docs/task-bundles.md)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from studies.models import Study
from studies.services.task_bundles import task_bundles_import
from studies.task_bundle_format import TaskBundleInvalid


class Command(BaseCommand):
    help = (
        "Import tasks from a bundle folder, a folder of bundles, a .zip of bundles, or a .csv/.jsonl task table "
        "with its reference files beside it. Re-importing a task (same UUID) updates it. Every problem is "
        "listed and nothing is written unless the whole import is valid."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument("--study", metavar="SLUG", help="Also add the imported tasks to this study.")
        parser.add_argument("--dry-run", action="store_true", help="Validate and report; write nothing.")

    def handle(self, *args, path: Path, study: str | None, dry_run: bool, **options) -> None:
        target = None
        if study:
            target = Study.objects.filter(slug=study).first()
            if target is None:
                raise CommandError(f"No study with the slug “{study}”.")
        try:
            report = task_bundles_import(source=path, study=target, dry_run=dry_run)
        except TaskBundleInvalid as exc:
            for problem in exc.problems:
                where = problem.location or str(path)
                self.stderr.write(f"  {where}: {problem.message}")
            raise CommandError(str(exc)) from exc
        verb = "would be" if dry_run else "were"
        for outcome in report.tasks:
            files = []
            if outcome.files_added:
                files.append(f"+{len(outcome.files_added)} files")
            if outcome.files_replaced:
                files.append(f"~{len(outcome.files_replaced)} files")
            if outcome.files_removed:
                files.append(f"-{len(outcome.files_removed)} files")
            detail = f" ({', '.join(files)})" if files else ""
            self.stdout.write(f"  {outcome.action:9} {outcome.uuid}  {outcome.title}{detail}")
        self.stdout.write(self.style.SUCCESS(
            f"{len(report.tasks)} task(s): {report.count('created')} created, {report.count('updated')} updated, "
            f"{report.count('unchanged')} unchanged {verb} imported" + (f" into {target.slug}." if target else ".")
        ))
