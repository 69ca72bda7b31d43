"""manage.py code_logs [--pending | --episode ID] [--force] [--sync]: code collaboration logs (App. H)."""

from __future__ import annotations

from collections import Counter

from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading import task_names
from grading.exceptions import GradingError
from grading.selectors import episodes_pending_log_coding
from grading.services.fluency import episode_code_log
from studies.models import Episode
from studies.task_sending import send_task_now


class Command(BaseCommand):
    help = ("Code collaboration logs for the 11 AI-fluency behaviours: --pending (submitted or graded episodes "
            "without a current coding) or --episode ID. Queues Celery tasks unless --sync.")

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--pending", action="store_true")
        target.add_argument("--episode", type=int, metavar="ID")
        parser.add_argument("--force", action="store_true", help="Code again even when a current coding exists.")
        parser.add_argument("--sync", action="store_true", help="Code in this process and print each result.")

    def handle(self, *args, pending: bool, episode: int | None, force: bool, sync: bool, **options) -> None:
        if episode is not None:
            if not Episode.objects.filter(pk=episode).exists():
                raise CommandError(f"No episode {episode}.")
            ids = [episode]
        else:
            ids = list(episodes_pending_log_coding().values_list("pk", flat=True))
        if not sync:
            if force:
                raise CommandError("--force needs --sync (queued codings never replace a current one).")
            for pk in ids:
                send_task_now(task_names.CODE_LOG, [pk])
            self.stdout.write(f"Queued log coding for {len(ids)} episode(s).")
            return
        counts: Counter[str] = Counter()
        for pk in ids:
            try:
                coding = episode_code_log(episode_id=pk, force=force)
            except GradingError as exc:
                counts["skipped"] += 1
                self.stdout.write(self.style.WARNING(f"episode {pk}: skipped: {exc.reason}"))
                continue
            counts[coding.status] += 1
            detail = (f"{coding.behaviour_count}/11 behaviours" if coding.status == "succeeded" else coding.error)
            self.stdout.write(f"episode {pk}: {coding.status} — {detail}")
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "nothing to code"
        self.stdout.write(f"Log coding: {summary}.")
