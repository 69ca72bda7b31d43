"""Parse an episode's collaboration-log files into normalised transcripts and store its process metrics."""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction

from grading.models import EpisodeTranscript
from grading.transcripts import FileStatus, FileTranscript, Format, parse_log, transcript_metrics
from grading.transcripts.metrics import METRIC_FIELDS
from grading.transcripts.model import unreadable
from grading.transcripts.usage import merge_usage
from grading.transcripts.version import PARSER_VERSION, files_fingerprint
from studies.models import Episode, EpisodeFile, SoloRunFile

logger = logging.getLogger(__name__)


def _fingerprint(files: list[EpisodeFile]) -> str:
    return files_fingerprint((f.name, f.sha256) for f in files)


def stored_log_parse(f: EpisodeFile | SoloRunFile, owner: str) -> FileTranscript:
    """Parse one stored log or session file (of ``owner``, for the log); a file the storage cannot open is
    reported, not raised."""
    try:
        with f.file.storage.open(f.file.name, "rb") as handle:
            return parse_log(f.name, handle, size=f.size)
    except (OSError, ValueError) as exc:
        logger.warning("log file %s of %s could not be opened: %s", f.pk, owner, exc)
        return unreadable(f.name, Format.UNKNOWN, f"the stored file could not be opened ({type(exc).__name__})")


def _status(results: list[FileTranscript]) -> str:
    if not results:
        return EpisodeTranscript.Status.NO_LOG
    read = [r for r in results if r.status in (FileStatus.PARSED, FileStatus.PARTIAL)]
    if read:
        clean = all(r.status in (FileStatus.PARSED, FileStatus.SCREENSHOT) for r in results)
        return EpisodeTranscript.Status.PARSED if clean else EpisodeTranscript.Status.PARTIAL
    if any(r.status == FileStatus.SCREENSHOT for r in results):
        return EpisodeTranscript.Status.SCREENSHOTS_ONLY
    return EpisodeTranscript.Status.UNREADABLE


def _values(results: list[FileTranscript], fingerprint: str) -> dict[str, Any]:
    status = _status(results)
    metrics = transcript_metrics(results)
    has_dialogue = status in (EpisodeTranscript.Status.PARSED, EpisodeTranscript.Status.PARTIAL)
    values: dict[str, Any] = {
        "status": status,
        "parser_version": PARSER_VERSION,
        "files_fingerprint": fingerprint,
        "formats": sorted({str(r.format) for r in results}),
        "files": [{**r.report(), "turns": [t.to_json() for t in r.turns]} for r in results],
        "heuristic": metrics.heuristic,
        "truncated": metrics.truncated,
        "screenshots": metrics.screenshots,
        "usage": merge_usage([r.usage for r in results]),
    }
    # Metrics exist only where a transcript was read: no log is missing data, not zero prompts.
    values.update({name: getattr(metrics, name) if has_dialogue else None for name in METRIC_FIELDS})
    return values


def episode_transcript_build(*, episode_id: int, force: bool = False) -> EpisodeTranscript:
    """Parse the episode's log files and store the transcript; unchanged files are not parsed again."""
    episode = Episode.objects.get(pk=episode_id)
    files = list(episode.files.filter(kind=EpisodeFile.Kind.LOG).order_by("name"))
    fingerprint = _fingerprint(files)
    existing = EpisodeTranscript.objects.filter(episode=episode).first()
    if existing is not None and not force and existing.files_fingerprint == fingerprint \
            and existing.parser_version == PARSER_VERSION:
        newest = max((f.uploaded_at for f in files), default=None)
        if newest is not None and newest > existing.parsed_at:
            # The web server's clock ran ahead of this worker's: mark these files read, or the sweep
            # (a file uploaded after the parse) would send this episode again every minute.
            EpisodeTranscript.objects.filter(pk=existing.pk).update(parsed_at=newest)
            existing.parsed_at = newest
        return existing
    values = _values([stored_log_parse(f, f"episode {f.episode_id}") for f in files], fingerprint)
    try:
        with transaction.atomic():
            row, _created = EpisodeTranscript.objects.update_or_create(episode=episode, defaults=values)
    except IntegrityError:  # two workers parsed the same episode at once; keep the latest
        EpisodeTranscript.objects.filter(episode=episode).update(**values)
        row = EpisodeTranscript.objects.get(episode=episode)
    return row
