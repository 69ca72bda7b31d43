"""manage.py parse_transcripts [--episode ID | --study SLUG | --all] [--force]: parse collaboration logs."""

from __future__ import annotations

from collections import Counter

from django.core.management.base import BaseCommand, CommandError, CommandParser

from grading.services.transcripts import episode_transcript_build
from studies.models import Episode, EpisodeFile


class Command(BaseCommand):
    help = ("Parse episodes' collaboration-log files into normalised transcripts and store the process metrics "
            "(prompts, agent turns, tool calls, time, initiative, effort). Logs are parsed when they are "
            "uploaded and the reconciliation sweep catches up on any parse that was lost or is outdated; use "
            "this to parse at once without a worker. Files unchanged since the last parse are skipped unless "
            "--force.")

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--episode", type=int, metavar="ID")
        target.add_argument("--study", metavar="SLUG")
        target.add_argument("--all", action="store_true", help="Every submitted episode with a log file.")
        parser.add_argument("--force", action="store_true", help="Parse again even when the files are unchanged.")

    def handle(self, *args, episode: int | None, study: str | None, all: bool, force: bool, **options) -> None:
        episodes = Episode.objects.filter(submitted_at__isnull=False)
        if episode is not None:
            if not Episode.objects.filter(pk=episode).exists():
                raise CommandError(f"No episode {episode}.")
            episodes = Episode.objects.filter(pk=episode)
        elif study is not None:
            episodes = episodes.filter(study__slug=study)
            if not episodes.exists():
                raise CommandError(f"No submitted episode in a study {study!r}.")
        else:
            episodes = episodes.filter(files__kind=EpisodeFile.Kind.LOG).distinct()
        counts: Counter[str] = Counter()
        for pk in episodes.order_by("pk").values_list("pk", flat=True).iterator():
            row = episode_transcript_build(episode_id=pk, force=force)
            counts[row.status] += 1
            prompts = "—" if row.user_prompts is None else row.user_prompts
            self.stdout.write(f"episode {pk}: {row.get_status_display().lower()}, {prompts} prompt(s)")
        summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no episode"
        self.stdout.write(f"Transcripts: {summary}.")
