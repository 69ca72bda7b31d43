"""manage.py judge_comparisons --study SLUG [--retry-failed]: the study's judges rank its comparison sets."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from experts.services.judge_comparisons import study_comparisons_judge
from grading.exceptions import GradingError
from studies.models import Study


class Command(BaseCommand):
    help = ("Have each of the study's judges rank every comparison set's deliverables, in the set's recorded order "
            "and reversed. Re-running pays for nothing already stored; in-flight rankings are left to the worker "
            "holding them; --retry-failed calls again where a call failed.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", metavar="SLUG", required=True)
        parser.add_argument("--retry-failed", action="store_true",
                            help="Call again where a judge's call failed (a bad reply or a provider error).")

    def handle(self, *args, study: str, retry_failed: bool, **options) -> None:
        found = Study.objects.filter(slug=study).first()
        if found is None:
            raise CommandError(f"No study {study!r}.")
        try:
            counts = study_comparisons_judge(study=found, retry_failed=retry_failed)
        except GradingError as exc:
            raise CommandError(f"Study {study}: {exc.reason}") from exc
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no comparison set"
        self.stdout.write(f"Judge comparisons of {study}: {summary}.")
