"""manage.py code_tom_pairs --study SLUG [--seed N]: the study's pairwise ToM robustness run."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.exceptions import GradingError
from grading.services.tom_pairwise import study_tom_pairs_code
from studies.models import Study


class Command(BaseCommand):
    help = ("Compare pairs of a study's ToM-coded episodes (which worker's prompts show more theory of mind) by "
            "both ToM judges in both orders: up to the study's pairwise pairs cap, drawn from --seed. Re-running "
            "pays for nothing already stored; in-flight pairs are left to the worker holding them.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", metavar="SLUG", required=True)
        parser.add_argument("--seed", type=int, default=0, help="Seed of the pair draw (default 0).")

    def handle(self, *args, study: str, seed: int, **options) -> None:
        found = Study.objects.filter(slug=study).first()
        if found is None:
            raise CommandError(f"No study {study!r}.")
        try:
            counts = study_tom_pairs_code(study=found, seed=seed)
        except GradingError as exc:
            raise CommandError(f"Study {study}: {exc.reason}") from exc
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no pair to compare"
        self.stdout.write(f"Pairwise ToM comparisons of {study} (seed {seed}): {summary}.")
