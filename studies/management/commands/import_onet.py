"""manage.py import_onet PATH — load O*NET's official "Occupation Data" tab-separated file."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from studies.onet import OnetFileError, import_occupations


class Command(BaseCommand):
    help = "Load occupations from O*NET's 'Occupation Data.txt' (tab-separated); safe to run again."

    def add_arguments(self, parser) -> None:
        parser.add_argument("path", type=Path)

    def handle(self, *args, path: Path, **options) -> None:
        if not path.is_file():
            raise CommandError(f"{path} does not exist or is not a file.")
        try:
            summary = import_occupations(path)
        except OnetFileError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(self.style.SUCCESS(
            f"O*NET import: {summary.created} created, {summary.updated} updated, {summary.unchanged} unchanged; "
            f"{summary.sectors_created} new sectors."
        ))
