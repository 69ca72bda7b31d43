"""manage.py export_study SLUG [--output PATH] [--include-pii --actor USERNAME] [--exported-at ISO]: write a study
export ZIP."""

from __future__ import annotations

from argparse import ArgumentTypeError
from datetime import datetime
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from console.exports import build_export
from studies.models import Study
from studies.roles import can_export_pii
from studies.services.audit import audit_record


def _instant(value: str) -> datetime:
    parsed = parse_datetime(value)
    if parsed is None or parsed.tzinfo is None:
        raise ArgumentTypeError(f"not an ISO 8601 date-time with a UTC offset: {value!r}")
    return parsed


class Command(BaseCommand):
    help = (
        "Write a study's export ZIP (tidy CSVs, data dictionary, sessions.json in the released CollabSkill "
        "format). Pseudonymous unless --include-pii is given with --actor naming a user allowed to view "
        "participant identities. Every export is recorded in the audit log."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug", help="study slug")
        parser.add_argument("--output", "-o", help="ZIP path to write (default: ./<slug>-export.zip)")
        parser.add_argument("--include-pii", action="store_true", help="include identities and typed free text")
        parser.add_argument("--actor", metavar="USERNAME", help="staff user the export is recorded against")
        parser.add_argument("--force", action="store_true", help="overwrite an existing output file")
        parser.add_argument("--exported-at", metavar="ISO", type=_instant,
                            help="the time written in the export and on its files (default: now); the same data "
                                 "exported with the same time gives the same bytes")

    def handle(self, *args, **options) -> None:
        study = Study.objects.filter(slug=options["slug"]).first()
        if study is None:
            raise CommandError(f"no study with slug {options['slug']!r}")
        actor = None
        if options["actor"]:
            actor = get_user_model().objects.filter(username=options["actor"], is_active=True).first()
            if actor is None:
                raise CommandError(f"no active user {options['actor']!r}")
        if options["include_pii"] and not can_export_pii(actor):
            raise CommandError(
                "--include-pii needs --actor naming a user with the studyapp.view_participantidentity permission"
            )
        output = Path(options["output"] or f"{study.slug}-export.zip")
        if output.exists() and not options["force"]:
            raise CommandError(f"{output} exists; pass --force to overwrite it")
        audit_record(
            actor=actor, action="export.requested", obj=study, study=study,
            after={"include_pii": options["include_pii"], "via": "manage.py export_study"},
        )
        partial = output.with_name(output.name + ".partial")
        with partial.open("wb") as handle:
            summary = build_export(study, handle, include_pii=options["include_pii"],
                                   exported_at=options["exported_at"])
        partial.replace(output)
        audit_record(
            actor=actor, action="export.completed", obj=study, study=study,
            after={"include_pii": options["include_pii"], "tables": summary["tables"], "via": "manage.py export_study",
                   "path": str(output)},
        )
        rows = ", ".join(f"{name} {count}" for name, count in summary["tables"].items())
        self.stdout.write(f"wrote {output} ({rows})")
