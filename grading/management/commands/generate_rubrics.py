"""manage.py generate_rubrics [--task UUID] [--force] [--enqueue]: create rubrics for tasks that lack one."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading import task_names
from grading.exceptions import GradingWaiting, RetryLater, RubricGenerationFailed
from grading.selectors import rubric_for_grading
from grading.services.rubric_generation import rubric_generate
from studies.models import TaskInstance
from studies.task_sending import send_task_now


class Command(BaseCommand):
    help = ("Generate a rubric for every active task without a usable one (or for --task), with the configured "
            "rubric generator. Runs here by default; --enqueue hands the work to Celery instead.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--task", metavar="UUID", help="Only this task (by its UUID).")
        parser.add_argument("--force", action="store_true",
                            help="Generate a new version even when the task already has a usable rubric.")
        parser.add_argument("--enqueue", action="store_true", help="Queue Celery tasks instead of running here.")

    def handle(self, *args, task: str | None, force: bool, enqueue: bool, **options) -> None:
        if task:
            try:
                tasks = list(TaskInstance.objects.filter(uuid=task))
            except ValidationError as exc:
                raise CommandError(f"{task!r} is not a task UUID") from exc
            if not tasks:
                raise CommandError(f"No task with UUID {task}.")
        else:
            tasks = list(TaskInstance.objects.filter(is_active=True).order_by("title"))
        todo = [t for t in tasks if force or rubric_for_grading(t) is None]
        skipped = len(tasks) - len(todo)
        if enqueue:
            for t in todo:
                send_task_now(task_names.GENERATE_RUBRIC, [t.pk])
            self.stdout.write(f"Queued rubric generation for {len(todo)} task(s); {skipped} already had a rubric.")
            return
        generated = failed = waiting = 0
        for t in todo:
            try:
                rubric = rubric_generate(task=t)
            except GradingWaiting as exc:
                waiting += 1
                self.stdout.write(self.style.WARNING(f"waiting   {t.uuid}  {t.title}: {exc.reason}"))
                if "No judge is configured" in exc.reason:
                    break  # every other task would wait for the same reason
                continue
            except (RubricGenerationFailed, RetryLater) as exc:
                failed += 1
                self.stdout.write(self.style.ERROR(f"failed    {t.uuid}  {t.title}: {exc.reason}"))
                continue
            generated += 1
            self.stdout.write(self.style.SUCCESS(
                f"generated {t.uuid}  {t.title}: v{rubric.version}, {rubric.criteria.count()} criteria (draft)"))
        self.stdout.write(f"Rubrics: {generated} generated, {failed} failed, {waiting} waiting, "
                          f"{skipped} task(s) already had one.")
