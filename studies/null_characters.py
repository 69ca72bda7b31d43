"""Refuse NUL characters in what a client sends, in one place, before any view runs.

PostgreSQL cannot store U+0000 in text, so a NUL that reaches a query or a save is a 500 (Django's and DRF's
``CharField`` refuse it, but raw ``request.GET`` reads, JSON bodies parsed by views and fields an operation
ignores do not). The middleware checks the path, every query parameter, url-encoded form fields and every
string (keys included) of a JSON body, and answers 400 naming each offending field: the API's error shape
under ``/api/``, ``{"ok": false, "error", "fields"}`` for JSON clients, a short text otherwise.

Multipart bodies are checked just before the view, and only for views that are not CSRF-exempt: Django's
CSRF check parses those bodies at that point anyway, while CSRF-exempt views parse their own bodies after
checking who may send them: the upload view reads its fields through a Django form (whose fields refuse NUL),
and the API parses forms and uploads with ``console.api.parsers``, which apply :func:`form_nul_fields` to
every field, value and file name. ``tests/studies/test_null_characters.py`` walks every URL to keep it so.
Uploaded task bundles are checked by the bundle format (``studies.task_bundle_format``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse, QueryDict

MESSAGE = "Null characters are not allowed."  # Django's and DRF's wording for the same problem
NUL = "\x00"
_JSON_TYPES = ("application/json",)


def nul_fields(data: Any, prefix: str = "") -> dict[str, list[str]]:
    """Return {field path: [MESSAGE]} for every string holding a NUL in a JSON-like value."""
    found: dict[str, list[str]] = {}
    if isinstance(data, str):
        if NUL in data:
            found[prefix or "non_field_errors"] = [MESSAGE]
    elif isinstance(data, dict):
        for key, value in data.items():
            name = _printable(str(key))
            path = f"{prefix}.{name}" if prefix else name
            if NUL in str(key):
                found[path] = [MESSAGE]
            found.update(nul_fields(value, path))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            found.update(nul_fields(item, f"{prefix}[{index}]"))
    return found


def _printable(name: str) -> str:
    return name.replace(NUL, "\\x00")


def _query_fields(query: QueryDict) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for key, values in query.lists():
        if NUL in key or any(NUL in value for value in values):
            found[_printable(key)] = [MESSAGE]
    return found


def form_nul_fields(data: QueryDict, files: Any = None) -> dict[str, list[str]]:
    """Return the fields of a parsed form or multipart body (names, values, file names) that hold a NUL."""
    found = _query_fields(data)
    for name, uploads in (files.lists() if files is not None else ()):
        if NUL in name or any(NUL in (upload.name or "") for upload in uploads):
            found[_printable(name)] = [MESSAGE]
    return found


def request_nul_fields(request: HttpRequest) -> dict[str, list[str]]:
    """Return the fields of the request (path, query, url-encoded or JSON body) that hold a NUL."""
    found: dict[str, list[str]] = {}
    if NUL in request.path_info:
        found["path"] = [MESSAGE]
    found.update(_query_fields(request.GET))
    content_type = request.content_type or ""
    if content_type == "application/x-www-form-urlencoded" and request.method not in ("GET", "HEAD"):
        form = request.POST if request.method == "POST" else QueryDict(request.body, encoding=request.encoding)
        found.update(_query_fields(form))
    elif content_type in _JSON_TYPES or content_type.endswith("+json"):
        try:
            data = json.loads(request.body or b"null")
        except (ValueError, UnicodeDecodeError):
            return found  # not JSON: the view reports it in its own words
        found.update(nul_fields(data))
    return found


class NullCharacterMiddleware:
    """Answer 400 (naming the fields) to any request whose text input holds a NUL character."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        fields = request_nul_fields(request)
        if fields:
            return refusal(request, fields)
        return self.get_response(request)

    def process_view(self, request: HttpRequest, view_func: Callable, view_args: Any, view_kwargs: Any
                     ) -> HttpResponse | None:
        if (request.method == "POST" and request.content_type == "multipart/form-data"
                and not getattr(view_func, "csrf_exempt", False)):
            fields = form_nul_fields(request.POST, request.FILES)
            if fields:
                return refusal(request, fields)
        return None


def refusal(request: HttpRequest, fields: dict[str, list[str]]) -> HttpResponse:
    if request.path_info.startswith("/api/"):
        from studies.error_body import error_body

        return JsonResponse(error_body("invalid", MESSAGE, fields), status=400)
    if "application/json" in request.headers.get("Accept", "") or (request.content_type or "") in _JSON_TYPES:
        return JsonResponse({"ok": False, "error": MESSAGE, "fields": fields}, status=400)
    names = ", ".join(sorted(fields))
    return HttpResponseBadRequest(f"{MESSAGE} Remove them from: {names}.\n", content_type="text/plain; charset=utf-8")
