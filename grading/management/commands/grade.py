"""manage.py grade [--episode ID | --pending] [--solo-run ID] [--sync]: (re)start automated grading."""

from __future__ import annotations

from collections import Counter

from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading import task_names
from grading.exceptions import GradingError, NotGradable
from grading.selectors import episodes_pending_grading, episodes_with_outdated_scores, solo_runs_pending_grading
from grading.services import pipeline, solo_runs
from studies.models import Episode, SoloRun
from studies.task_sending import send_task_now


class Command(BaseCommand):
    help = ("Queue grading for one episode (--episode; a failed one is reset first, a graded one is re-graded "
            "against the current rubric and judges) or for every pending submission (--pending: submitted, "
            "waiting for a key or budget, or stuck in grading) or --outdated (graded with an older rubric version, "
            "judge list or prompt). --sync grades here instead of via Celery.")

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--episode", type=int, metavar="ID")
        target.add_argument("--solo-run", type=int, metavar="ID", dest="solo_run")
        target.add_argument("--pending", action="store_true")
        target.add_argument("--outdated", action="store_true",
                            help="Re-grade graded episodes whose score used an older rubric, judge or prompt.")
        parser.add_argument("--sync", action="store_true", help="Grade in this process and print each outcome.")

    def handle(self, *args, episode: int | None, solo_run: int | None, pending: bool, outdated: bool,
               sync: bool, **options) -> None:
        episodes: list[int] = []
        runs: list[int] = []
        if episode is not None:
            obj = Episode.objects.filter(pk=episode).first()
            if obj is None:
                raise CommandError(f"No episode {episode}.")
            if obj.status == Episode.Status.FAILED:
                Episode.objects.filter(pk=obj.pk).update(status=Episode.Status.SUBMITTED, grading_note="")
            episodes = [obj.pk]
        elif solo_run is not None:
            if not SoloRun.objects.filter(pk=solo_run).exists():
                raise CommandError(f"No solo run {solo_run}.")
            SoloRun.objects.filter(pk=solo_run, status=Episode.Status.FAILED).update(
                status=Episode.Status.SUBMITTED, grading_note="")
            runs = [solo_run]
        elif outdated:
            episodes = episodes_with_outdated_scores()
        else:
            episodes = list(episodes_pending_grading().values_list("pk", flat=True))
            runs = list(solo_runs_pending_grading().values_list("pk", flat=True))
        if not sync:
            for pk in episodes:
                send_task_now(task_names.GRADE_EPISODE, [pk])
            for pk in runs:
                send_task_now(task_names.GRADE_SOLO_RUN, [pk])
            self.stdout.write(f"Queued grading for {len(episodes)} episode(s) and {len(runs)} solo run(s).")
            return
        counts: Counter[str] = Counter()
        jobs = [("episode", pk, lambda pk=pk: pipeline.episode_grade(episode_id=pk)) for pk in episodes]
        jobs += [("solo run", pk, lambda pk=pk: solo_runs.solo_run_grade(solo_run_id=pk)) for pk in runs]
        for kind, pk, run in jobs:
            try:
                outcome = run()
            except NotGradable as exc:
                counts["not gradable"] += 1
                self.stdout.write(f"{kind} {pk}: not gradable: {exc.reason}")
                continue
            except GradingError as exc:
                counts["retry later"] += 1
                self.stdout.write(self.style.WARNING(f"{kind} {pk}: try again later: {exc.reason}"))
                continue
            counts[outcome.status] += 1
            score = f" score {outcome.score:.2f}" if outcome.score is not None else ""
            style = {"graded": self.style.SUCCESS, "failed": self.style.ERROR,
                     "waiting": self.style.WARNING}.get(outcome.status, str)
            self.stdout.write(style(f"{kind} {pk}: {outcome.status}{score}" + (f" — {outcome.note}"
                                                                              if outcome.note else "")))
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "nothing to grade"
        self.stdout.write(f"Grading: {summary}.")
