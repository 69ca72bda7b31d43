"""manage.py code_processes (--pending | --study SLUG | --episode ID) [--instrument …] [--force] [--sync]."""

from __future__ import annotations

from collections import Counter

from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading import task_names
from grading.exceptions import GradingError
from grading.models import ProcessCoding
from grading.selectors import episodes_owing_process_coding
from grading.services.process_coding import INSTRUMENTS, episode_code_process, study_tom_coders
from studies.models import Episode, Study
from studies.task_sending import send_task_now


class Command(BaseCommand):
    help = ("Code episodes for theory of mind in the worker's prompts and the quality of the agent's responses, by "
            "the study's two judges: --pending (every ToM-coding study's episodes that owe a coding, including "
            "ones the sweep gave up on), --study SLUG (that study's owing episodes) or --episode ID. Queues Celery "
            "tasks unless --sync; --force (with --sync) adds a new current coding even where one exists.")

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--pending", action="store_true")
        target.add_argument("--study", metavar="SLUG")
        target.add_argument("--episode", type=int, metavar="ID")
        parser.add_argument("--instrument", action="append", choices=INSTRUMENTS,
                            help="Only this instrument (repeatable); default: both.")
        parser.add_argument("--force", action="store_true", help="Code again even when a current coding exists.")
        parser.add_argument("--sync", action="store_true", help="Code in this process and print each result.")

    def _ids(self, pending: bool, study: str | None, episode: int | None) -> list[int]:
        if episode is not None:
            if not Episode.objects.filter(pk=episode).exists():
                raise CommandError(f"No episode {episode}.")
            return [episode]
        if study is not None:
            found = Study.objects.filter(slug=study).first()
            if found is None:
                raise CommandError(f"No study {study!r}.")
            if not found.tom_coding:
                raise CommandError(f"Study {study!r} does not code theory of mind; turn ToM coding on first.")
            studies = [found]
        else:
            studies = list(Study.objects.filter(tom_coding=True).order_by("pk"))
        ids: list[int] = []
        for item in studies:
            try:
                coders = [(c.provider, c.model) for c in study_tom_coders(item)]
            except GradingError as exc:
                raise CommandError(f"Study {item.slug}: {exc.reason}") from exc
            ids += episodes_owing_process_coding(item, coders, limit=10**9, with_follow_up=True)
        return ids

    def handle(self, *args, pending: bool, study: str | None, episode: int | None, instrument: list[str] | None,
               force: bool, sync: bool, **options) -> None:
        ids = self._ids(pending, study, episode)
        if not sync:
            if force or instrument:
                raise CommandError("--force and --instrument need --sync (queued codings code every owed one).")
            for pk in ids:
                send_task_now(task_names.CODE_PROCESS, [pk])
            self.stdout.write(f"Queued ToM and response-quality coding for {len(ids)} episode(s).")
            return
        counts: Counter[str] = Counter()
        for pk in ids:
            try:
                codings = episode_code_process(episode_id=pk, instruments=tuple(instrument or INSTRUMENTS),
                                               force=force)
            except GradingError as exc:
                counts["skipped"] += 1
                self.stdout.write(self.style.WARNING(f"episode {pk}: skipped: {exc.reason}"))
                continue
            for coding in codings:
                counts[coding.status] += 1
                detail = (f"score {coding.score}" if coding.status == ProcessCoding.Status.SUCCEEDED
                          else coding.error)
                self.stdout.write(f"episode {pk}: {coding.instrument} by {coding.provider}/{coding.model}: "
                                  f"{coding.status} — {detail}")
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "nothing to code"
        self.stdout.write(f"ToM and response-quality coding: {summary}.")
