"""manage.py remove_participant_ratings --keep N [--study SLUG] [--grace-seconds S] [--dry-run]: delete the
participants' rating rows of superseded refits (their agents' rows, fit and diagnostics stay)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from rating.conf import rating_settings
from rating.management.study_option import studies_for_option
from rating.services import retention


class Command(BaseCommand):
    help = (
        "Delete the participants' rating rows of refits older than each study's latest KEEP refits (history only "
        "the admin shows: pages, exports, payouts and the API read the latest snapshot). The beat sweep does the "
        "same when RATING_KEEP_PARTICIPANT_REFITS is set."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--keep", type=int, required=True, metavar="N",
                            help="keep the participants' rows of each study's N latest refits (N >= 1)")
        parser.add_argument("--study", metavar="SLUG", help="only this study (default: every study with ratings)")
        parser.add_argument(
            "--grace-seconds", type=float, default=None, metavar="S",
            help="only refits superseded at least S seconds ago (default: RATING_RETENTION_GRACE_SECONDS)",
        )
        parser.add_argument("--dry-run", action="store_true", help="list what would be deleted; delete nothing")

    def handle(self, *args, **options) -> None:
        grace = options["grace_seconds"]
        if grace is None:
            grace = float(rating_settings()["RETENTION_GRACE_SECONDS"])
        study_id = studies_for_option(options["study"])[0].pk if options["study"] else None
        try:
            removed = retention.participant_rows_remove(
                keep=options["keep"], grace_seconds=grace, study_id=study_id, dry_run=options["dry_run"]
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        verb = "would delete" if options["dry_run"] else "deleted"
        for item in removed:
            self.stdout.write(
                f"study {item.study_id}: refit v{item.version} (superseded {item.superseded_at:%Y-%m-%d %H:%M}): "
                f"{verb} {item.rows} participants' rows"
            )
        total = sum(item.rows for item in removed)
        self.stdout.write(f"{verb} {total} rows of {len(removed)} refits.")
