"""manage.py refresh_ratings [--study SLUG] [--stale]: write a fresh posterior snapshot now."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from rating import selectors
from rating.management.study_option import studies_for_option
from rating.models import EntityRating
from rating.services import refresh


class Command(BaseCommand):
    help = "Recompute the rating posterior of one study, or of every study that has a rating ledger."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--study", metavar="SLUG", help="only this study (default: every study with ratings)")
        parser.add_argument(
            "--stale", action="store_true", help="only studies whose ledger changed since their latest snapshot"
        )

    def handle(self, *args, **options) -> None:
        studies = studies_for_option(options["study"])
        if options["stale"]:
            stale = set(selectors.studies_needing_refresh())
            studies = [study for study in studies if study.pk in stale]
        if not studies:
            self.stdout.write("Nothing to refresh.")
            return
        for study in studies:
            try:
                snapshot = refresh.posterior_refresh(study_id=study.pk)
            except ValueError as exc:  # the maths names the bad hyperparameter or what the data lack
                raise CommandError(f"{study.slug}: invalid rating settings: {exc}")
            agents = selectors.snapshot_ratings(snapshot, EntityRating.Kind.AGENT).count()
            humans = selectors.snapshot_ratings(snapshot, EntityRating.Kind.HUMAN).count()
            self.stdout.write(
                f"{study.slug}: snapshot v{snapshot.version} from {snapshot.n_observations} active observations "
                f"({agents} agents, {humans} humans) in {snapshot.timings['total_ms']:.1f} ms"
            )
            warning = (snapshot.connectivity or {}).get("warning")
            if warning:
                self.stdout.write(self.style.WARNING(f"  warning: {warning}"))
