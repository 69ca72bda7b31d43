"""File transfer for workers: uploads (one request per file for progress bars, or several without script),
removal before submission, and permission-checked downloads as attachments."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.files.uploadhandler import FileUploadHandler, SkipFile
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods, require_POST

from grading.selectors import LogFileNote, episode_log_file_notes
from journey.forms import UploadForm
from journey.views.task_page import task_url
from journey.views.worker import error_response, wants_json
from studies.conf import upload_limits
from studies.exceptions import StudyError, UploadRejected
from studies.files import sanitize_filename, serve_private_file
from studies.models import Episode, EpisodeFile, TaskFile
from studies.selectors import episode_for_user, reference_file, reference_files
from studies.services.uploads import (
    ensure_editable,
    episode_file_add,
    episode_file_remove,
    reference_zip_chunks,
)

_MULTIPART_SLACK = 1 << 20  # boundaries and form fields around the file bytes


class FileSizeLimitHandler(FileUploadHandler):
    """Stop receiving a file the moment it passes the per-file limit, instead of spooling gigabytes to disk."""

    def __init__(self, request: HttpRequest, limit: int) -> None:
        super().__init__(request)
        self.limit = limit
        self.too_large: list[str] = []

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        if start + len(raw_data) > self.limit:
            self.too_large.append(self.file_name or "file")
            raise SkipFile
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def _episode(request: HttpRequest, episode_id: int) -> Episode:
    try:
        return episode_for_user(user=request.user, episode_id=episode_id)
    except Episode.DoesNotExist:
        raise Http404("No such task.")


@csrf_exempt  # the CSRF check runs in _upload, after the size-limiting handler is installed
@login_required
@require_POST
def upload(request: HttpRequest, episode_id: int) -> HttpResponse:
    episode = _episode(request, episode_id)  # ownership is checked before a single body byte is read
    limits = upload_limits()
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if declared > limits["MAX_EPISODE_BYTES"] + _MULTIPART_SLACK:
        return _upload_refused(request, episode, UploadRejected(
            f"This upload is {filesizeformat(declared)}, above the {filesizeformat(limits['MAX_EPISODE_BYTES'])} "
            "limit per task."), status=413)
    limiter = FileSizeLimitHandler(request, limits["MAX_FILE_BYTES"])
    request.upload_handlers.insert(0, limiter)
    return _upload(request, episode, limiter)


@csrf_protect
def _upload(request: HttpRequest, episode: Episode, limiter: FileSizeLimitHandler) -> HttpResponse:
    form = UploadForm(request.POST)
    uploads = request.FILES.getlist("file")
    refused = [UploadRejected(f"“{name}” is larger than the {filesizeformat(limiter.limit)} limit per file.")
               for name in limiter.too_large]
    if not form.is_valid():
        return _upload_refused(request, episode, UploadRejected("Unknown kind of upload."))
    if not uploads and not refused:
        return _upload_refused(request, episode, UploadRejected("Please choose a file to upload."))
    try:
        ensure_editable(episode)
    except StudyError as exc:
        return _upload_refused(request, episode, exc)
    saved: list[EpisodeFile] = []
    for item in uploads:
        try:
            saved.append(episode_file_add(episode=episode, kind=form.cleaned_data["kind"], upload=item,
                                          replace=form.cleaned_data["replace"]))
        except StudyError as exc:
            refused.append(exc)
    notes = episode_log_file_notes(episode, saved)  # told at once; submitting stays allowed
    if wants_json(request):
        if refused:
            return error_response(request, refused[0], fallback_url=task_url(episode))
        return JsonResponse({"ok": True, "files": [{**_file_json(episode, f), **_note_json(notes.get(f.pk))}
                                                   for f in saved]})
    for record in saved:
        messages.success(request, f"“{record.name}” uploaded ({filesizeformat(record.size)}).")
        if (note := notes.get(record.pk)) is not None and note.warning:
            messages.warning(request, f"“{record.name}”: {note.text}")
    for problem in refused:
        messages.error(request, problem.message)
    return redirect(task_url(episode) + "#uploads")


def _upload_refused(request: HttpRequest, episode: Episode, error: StudyError, status: int | None = None):
    response = error_response(request, error, fallback_url=task_url(episode) + "#uploads")
    if status is not None and wants_json(request):
        response.status_code = status
    return response


def _note_json(note: LogFileNote | None) -> dict:
    """A log file's warning (not the agent's session file) or confirmation (recognised), for the page script."""
    return {"warning": note.text if note and note.warning else "",
            "recognised": note.text if note and not note.warning else ""}


def _file_json(episode: Episode, record: EpisodeFile) -> dict:
    return {
        "id": record.pk, "name": record.name, "size": record.size, "size_label": filesizeformat(record.size),
        "kind": record.kind,
        "download_url": reverse("worker:episode-file", args=[episode.pk, record.pk]),
        "delete_url": reverse("worker:episode-file-delete", args=[episode.pk, record.pk]),
    }


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def remove(request: HttpRequest, episode_id: int, file_id: int) -> HttpResponse:
    """Remove an uploaded file once the worker confirms it.

    A removal cannot be undone, so the table's "Remove" opens a confirmation (this page, GET; the page script asks
    in the row instead) and only a post with ``confirm=1`` removes; the worker is then told which file went.
    """
    episode = _episode(request, episode_id)
    record = EpisodeFile.objects.filter(episode=episode, pk=file_id).first()
    if record is None:
        raise Http404("No such file.")
    back = task_url(episode) + ("#log" if record.kind == EpisodeFile.Kind.LOG else "#uploads")
    if request.method != "POST" or request.POST.get("confirm") != "1":
        return _remove_confirmation(request, episode, record, back)
    try:
        episode_file_remove(episode=episode, file_id=file_id)
    except StudyError as exc:
        return error_response(request, exc, fallback_url=back)
    done = f"“{record.name}” removed."
    if wants_json(request):
        return JsonResponse({"ok": True, "message": done})
    messages.success(request, done)
    return redirect(back)


def _remove_confirmation(request: HttpRequest, episode: Episode, record: EpisodeFile, back: str) -> HttpResponse:
    """Ask before removing (an unconfirmed post, e.g. a script that skipped the question, is asked the same)."""
    if wants_json(request):
        return JsonResponse({"ok": False, "confirm_needed": True,
                             "error": f"Please confirm that “{record.name}” should be removed."}, status=400)
    try:
        ensure_editable(episode)
    except StudyError as exc:
        return error_response(request, exc, fallback_url=back)
    return render(request, "journey/file_remove_confirm.html", {
        "episode": episode, "participant": episode.participant, "study": episode.participant.study,
        "file": record, "back": back,
    })


@login_required
def download(request: HttpRequest, episode_id: int, file_id: int) -> HttpResponse:
    """One of the worker's own uploaded files."""
    episode = _episode(request, episode_id)
    record = EpisodeFile.objects.filter(episode=episode, pk=file_id).first()
    if record is None:
        raise Http404("No such file.")
    return serve_private_file(record.file, record.name)


@login_required
def reference_download(request: HttpRequest, episode_id: int, file_id: int) -> HttpResponse:
    """One reference file of the episode's task (hidden evaluator files answer 404)."""
    episode = _episode(request, episode_id)
    try:
        task_file = reference_file(task_id=episode.task_id, file_id=file_id)
    except TaskFile.DoesNotExist:
        raise Http404("No such file.")
    return serve_private_file(task_file.file, sanitize_filename(task_file.name))


@login_required
def reference_zip(request: HttpRequest, episode_id: int) -> HttpResponse:
    """All reference files as one ZIP, written while it is sent (never built in memory)."""
    episode = _episode(request, episode_id)
    files = reference_files(episode.task_id)
    if not files:
        raise Http404("This task has no reference files.")
    name = f"task-{episode.position}-reference-files.zip"
    response = StreamingHttpResponse(reference_zip_chunks(files), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response["Cache-Control"] = "private, no-store"
    return response
