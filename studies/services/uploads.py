"""Episode files (deliverables, collaboration logs, setup-failure screenshots) and the reference-file ZIP.

Large uploads never sit in memory: Django spools anything above ``FILE_UPLOAD_MAX_MEMORY_SIZE`` to a
temporary file, hashing reads it in 1 MB chunks, and local storage moves the temporary file into place.
Limits come from `studies.conf.upload_limits`. A rejected file leaves every file already attached untouched.
"""

from __future__ import annotations

import mimetypes
import zipfile
from collections.abc import Iterable, Iterator

from django.core.files.storage import default_storage
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Count, Sum
from django.template.defaultfilters import filesizeformat

from studies.conf import upload_limits
from studies.exceptions import DuplicateFileName, EpisodeLocked, UploadRejected
from studies.files import FileRejected, check_type, sanitize_filename, sha256_and_size
from studies.models import Episode, EpisodeFile, TaskFile
from studies.task_names import PARSE_LOG
from studies.task_sending import send_task_on_commit

SCREENSHOT_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "gif", "webp", "pdf"})
EDITABLE_STATUSES = (Episode.Status.ASSIGNED, Episode.Status.IN_PROGRESS)
_HEAD_BYTES = 8192
_CHUNK = 1 << 20


def allowed_extensions(kind: str) -> list[str]:
    allowed = [ext.lower() for ext in upload_limits()["ALLOWED_EXTENSIONS"]]
    if kind == EpisodeFile.Kind.SKIP_SCREENSHOT:
        allowed = [ext for ext in allowed if ext in SCREENSHOT_EXTENSIONS]
    return sorted(allowed)


def ensure_editable(episode: Episode) -> None:
    if episode.status not in EDITABLE_STATUSES:
        raise EpisodeLocked("This task was already submitted or skipped, so its files can no longer change.")
    if episode.participant.status == episode.participant.Status.WITHDRAWN:
        raise EpisodeLocked("You have withdrawn from the study, so files can no longer be added.")


def validate_upload(*, kind: str, upload: UploadedFile) -> tuple[str, str, int]:
    """Check name, size and type of one upload; return (safe name, sha256, size). Nothing is stored."""
    limits = upload_limits()
    try:
        name = sanitize_filename(upload.name or "")
    except FileRejected as exc:
        raise UploadRejected(str(exc))
    if kind not in EpisodeFile.Kind.values:
        raise UploadRejected("Unknown kind of file.")
    size = upload.size or 0
    if size <= 0:
        raise UploadRejected(f"“{name}” is empty. Please choose the file again or upload the finished version.")
    if size > limits["MAX_FILE_BYTES"]:
        raise UploadRejected(f"“{name}” is {filesizeformat(size)}; the limit per file is "
                             f"{filesizeformat(limits['MAX_FILE_BYTES'])}. Please compress or split it.")
    upload.seek(0)
    head = upload.read(_HEAD_BYTES)
    try:
        check_type(name, head, allowed_extensions(kind))
    except FileRejected as exc:
        raise UploadRejected(str(exc))
    digest, measured = sha256_and_size(upload, chunk_size=_CHUNK)
    if measured <= 0:
        raise UploadRejected(f"“{name}” is empty.")
    return name, digest, measured


def episode_file_add(*, episode: Episode, kind: str, upload: UploadedFile, replace: bool = False) -> EpisodeFile:
    """Attach one uploaded file to an open episode, or replace the same-named file when ``replace``."""
    ensure_editable(episode)
    name, digest, size = validate_upload(kind=kind, upload=upload)
    _check_limits(episode=episode, kind=kind, name=name, size=size, replace=replace)  # fail fast, before storing
    record = EpisodeFile(episode=episode, kind=kind, name=name, size=size, sha256=digest,
                         content_type=mimetypes.guess_type(name)[0] or "application/octet-stream")
    upload.seek(0)
    record.file.save(name, upload, save=False)
    try:
        with transaction.atomic():
            locked = Episode.objects.select_for_update(of=("self",)).select_related("participant").get(pk=episode.pk)
            ensure_editable(locked)
            replaced = _check_limits(episode=locked, kind=kind, name=name, size=size, replace=replace)
            if replaced is not None:
                old_path = replaced.file.name
                replaced.delete()
                transaction.on_commit(lambda: default_storage.delete(old_path))
            record.save()
            if kind == EpisodeFile.Kind.LOG:
                # Parsed at once, not at grading: the worker sees a format warning and staff the metrics.
                send_task_on_commit(PARSE_LOG, [locked.pk])
    except BaseException:
        default_storage.delete(record.file.name)
        raise
    return record


def _check_limits(*, episode: Episode, kind: str, name: str, size: int, replace: bool) -> EpisodeFile | None:
    """Raise if the file would break a limit; return the same-named file it replaces, if any."""
    limits = upload_limits()
    existing = EpisodeFile.objects.filter(episode=episode, kind=kind, name=name).first()
    if existing is not None and not replace:
        raise DuplicateFileName(
            f"A file named “{name}” is already attached. Choose “Replace” to upload the new version instead, "
            "or rename the file.", name=name,
        )
    others = EpisodeFile.objects.filter(episode=episode)
    if existing is not None:
        others = others.exclude(pk=existing.pk)
    totals = others.aggregate(n=Count("id"), total=Sum("size"))
    if (totals["n"] or 0) + 1 > limits["MAX_FILES_PER_EPISODE"]:
        raise UploadRejected(f"A task can hold at most {limits['MAX_FILES_PER_EPISODE']} files. Remove one you "
                             "no longer need, or combine several into a ZIP.")
    if (totals["total"] or 0) + size > limits["MAX_EPISODE_BYTES"]:
        raise UploadRejected(f"“{name}” would bring this task's files above the "
                             f"{filesizeformat(limits['MAX_EPISODE_BYTES'])} limit per task.")
    return existing


def episode_file_remove(*, episode: Episode, file_id: int) -> None:
    """Remove a file before the final submission."""
    with transaction.atomic():
        locked = Episode.objects.select_for_update(of=("self",)).select_related("participant").get(pk=episode.pk)
        ensure_editable(locked)
        record = EpisodeFile.objects.filter(episode=locked, pk=file_id).first()
        if record is None:
            return
        path = record.file.name
        record.delete()
        transaction.on_commit(lambda: default_storage.delete(path))
        if record.kind == EpisodeFile.Kind.LOG:
            send_task_on_commit(PARSE_LOG, [locked.pk])


class _ChunkSink:
    """A write-only, non-seekable file object: zipfile then writes data descriptors and never seeks back."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._position = 0

    def write(self, data: bytes) -> int:
        self._buffer += data
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        pass

    def close(self) -> None:
        """ZipFile never closes a file object it was handed; typeshed's writable protocol still asks for it."""

    def take(self) -> bytes:
        data = bytes(self._buffer)
        self._buffer.clear()
        return data


def reference_zip_chunks(files: Iterable[TaskFile]) -> Iterator[bytes]:
    """Yield a ZIP of the given reference files piece by piece; memory stays at about one chunk."""
    sink = _ChunkSink()
    used: set[str] = set()
    with zipfile.ZipFile(sink, mode="w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as archive:
        for task_file in files:
            if task_file.kind != TaskFile.Kind.REFERENCE:
                continue  # defence in depth: hidden evaluator files never leave through this path
            name = _unique(sanitize_filename(task_file.name), used)
            info = zipfile.ZipInfo(name, date_time=task_file.task.updated_at.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            with default_storage.open(task_file.file.name, "rb") as source, \
                    archive.open(info, mode="w", force_zip64=True) as target:
                while chunk := source.read(_CHUNK):
                    target.write(chunk)
                    if data := sink.take():
                        yield data
            if data := sink.take():
                yield data
    yield sink.take()


def _unique(name: str, used: set[str]) -> str:
    candidate, n = name, 1
    stem, dot, ext = name.rpartition(".")
    while candidate in used:
        n += 1
        candidate = f"{stem} ({n}).{ext}" if dot else f"{name} ({n})"
    used.add(candidate)
    return candidate
