"""manage.py invite_links — signed personal invitation links for a list of recruitment-platform ids."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from studies.csv_safety import csv_writer
from studies.exceptions import InvalidInvitation
from studies.invitations import personal_invite_path
from studies.models import Study


class Command(BaseCommand):
    help = ("Print a CSV of personal invitation links (worker_id,link), one per platform worker id read from FILE "
            "(one id per line; '-' reads standard input). Every id is checked before anything is printed.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="file with one worker id per line, or - for standard input")
        parser.add_argument("--study", required=True, help="study slug")
        parser.add_argument("--platform", required=True, help="recruitment platform, e.g. upwork or prolific")
        parser.add_argument("--base-url", required=True, help="public address of the site, e.g. https://study.org")

    def handle(self, *args, file: str, study: str, platform: str, base_url: str, **options) -> None:
        target = Study.objects.filter(slug=study).first()
        if target is None:
            raise CommandError(f"no study with slug {study!r}")
        lines = sys.stdin.read().splitlines() if file == "-" else self._read(Path(file))
        ids = list(dict.fromkeys(line.strip() for line in lines if line.strip()))
        if not ids:
            raise CommandError("no worker ids found")
        rows, problems = [], []
        for number, worker_id in enumerate(ids, start=1):
            try:
                rows.append((worker_id, base_url.rstrip("/") + personal_invite_path(
                    study=target, platform=platform, worker_id=worker_id)))
            except InvalidInvitation as exc:
                problems.append(f"id {number} ({worker_id!r}): {exc}")
        if problems:
            raise CommandError("no links written; fix these ids first:\n" + "\n".join(problems))
        writer = csv_writer(self.stdout)
        writer.writerow(["worker_id", "link"])
        writer.writerows(rows)

    @staticmethod
    def _read(path: Path) -> list[str]:
        if not path.is_file():
            raise CommandError(f"{path} does not exist or is not a file")
        return path.read_text(encoding="utf-8-sig").splitlines()
