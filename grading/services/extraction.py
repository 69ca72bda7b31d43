"""Run deliverable extraction on stored files and keep a judge-ready copy for audit."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any, cast

from django.db import IntegrityError, transaction
from django.db.models.fields.files import FieldFile

from grading import extract
from grading.conf import grading_settings
from grading.models import Extraction as ExtractionRow
from studies.models import Episode, EpisodeFile, SoloRun, SoloRunFile, TaskFile, TaskInstance


def extraction_limits(*, max_chars: int | None = None) -> extract.ExtractLimits:
    return extract.ExtractLimits(max_chars=max_chars or int(grading_settings()["EXTRACT_MAX_CHARS"]))


def stored_files_extract(files: Sequence[tuple[str, FieldFile]], *,
                         limits: extract.ExtractLimits) -> extract.Extraction:
    """Extract stored files, streaming from disk when the storage has local paths."""
    with ExitStack() as stack:
        sources: list[tuple[str, Any]] = []
        for name, field_file in files:
            try:
                sources.append((name, Path(field_file.path)))
            except (NotImplementedError, AttributeError):  # remote storage (S3): read through the storage
                sources.append((name, stack.enter_context(
                    # .path raised no ValueError, so the row names a file
                    field_file.storage.open(cast(str, field_file.name), "rb"))))
            except ValueError:  # a row whose file is missing
                sources.append((name, b""))
        return extract.extract_files(sources, limits=limits)


def _store(*, episode: Episode | None = None, solo_run: SoloRun | None = None,
           result: extract.Extraction) -> None:
    """Keep the text (not image bytes) of what the judges were shown, replacing any older copy."""
    lookup = {"episode": episode} if episode is not None else {"solo_run": solo_run}
    values = {"content": result.to_json(), "total_chars": result.total_chars, "truncated": result.truncated}
    try:
        with transaction.atomic():
            ExtractionRow.objects.update_or_create(**lookup, defaults=values)
    except IntegrityError:  # two workers judging the same submission both created it; keep the latest text
        ExtractionRow.objects.filter(**lookup).update(**values)


def episode_extract(*, episode: Episode) -> extract.Extraction:
    """Extract an episode's deliverables (images included, for vision judges) and store the text."""
    files = [(f.name, f.file) for f in episode.files.filter(kind=EpisodeFile.Kind.DELIVERABLE).order_by("name")]
    result = stored_files_extract(files, limits=extraction_limits())
    _store(episode=episode, result=result)
    return result


def solo_run_extract(*, solo_run: SoloRun) -> extract.Extraction:
    """Extract a solo run's deliverables (its session files are read for usage only, never judged)."""
    files = [(f.name, f.file) for f in solo_run.files.filter(kind=SoloRunFile.Kind.DELIVERABLE).order_by("name")]
    result = stored_files_extract(files, limits=extraction_limits())
    _store(solo_run=solo_run, result=result)
    return result


def episode_log_extract(*, episode: Episode) -> extract.Extraction:
    """Extract the collaboration-log files (text, transcripts, screenshots) of an episode."""
    files = [(f.name, f.file) for f in episode.files.filter(kind=EpisodeFile.Kind.LOG).order_by("name")]
    return stored_files_extract(files, limits=extraction_limits())


def _task_files_text(files: Iterable[TaskFile], max_chars: int) -> str:
    stored = [(f.name, f.file) for f in files]
    if not stored:
        return ""
    result = stored_files_extract(stored, limits=extraction_limits(max_chars=max_chars))
    text = result.as_prompt_text(images_attached=False)
    # The renderer speaks of submissions; these are the task's own files.
    return text.replace("Submitted files:", "Task files:", 1)


def task_reference_text(task: TaskInstance) -> str:
    """The reference files workers were given, as text, for the rubric writer."""
    return _task_files_text(task.files.filter(kind=TaskFile.Kind.REFERENCE).order_by("name"),
                            int(grading_settings()["EXTRACT_MAX_CHARS"]))


def task_hidden_text(task: TaskInstance) -> str:
    """Evaluator-only information: the hidden notes and hidden (gold) files, bounded in size."""
    parts = []
    if task.hidden_info.strip():
        parts.append(task.hidden_info.strip())
    hidden_files = task.files.filter(kind=TaskFile.Kind.HIDDEN).order_by("name")
    if hidden_files.exists():
        parts.append(_task_files_text(hidden_files, int(grading_settings()["HIDDEN_MAX_CHARS"])))
    return "\n\n".join(parts)
