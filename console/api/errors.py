"""One error body for the whole API: ``{"error": {"code": ..., "message": ..., "fields": {...}}}``.

DRF's own exceptions, Django's 404/403/validation errors and the apps' domain errors all come out in this
shape; ``fields`` maps a field (or, for task bundles, ``path:field``) to its messages and is empty when the
error is not about particular fields. Domain errors are mapped here, in one place.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import resolve
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from console.dashboard.exceptions import DashboardError, JobRefused
from grading.exceptions import GradingError
from rating.exceptions import RatingError
from studies.error_body import error_body
from studies.exceptions import StudyError
from studies.files import FileRejected
from studies.task_bundle_format import TaskBundleInvalid

# Domain error base classes → (HTTP status, error code). Subclasses inherit the mapping; the first matching
# entry wins, so list subclasses before their bases.
DOMAIN_ERRORS: tuple[tuple[type[Exception], int, str], ...] = (
    (TaskBundleInvalid, status.HTTP_400_BAD_REQUEST, "invalid_task_bundle"),
    (FileRejected, status.HTTP_400_BAD_REQUEST, "file_rejected"),
    (JobRefused, status.HTTP_403_FORBIDDEN, "job_refused"),
    (DashboardError, status.HTTP_409_CONFLICT, "dashboard_error"),
    (StudyError, status.HTTP_409_CONFLICT, "study_error"),
    (GradingError, status.HTTP_409_CONFLICT, "grading_error"),
    (RatingError, status.HTTP_400_BAD_REQUEST, "rating_error"),
)


class Conflict(exceptions.APIException):
    """The request is valid but the object is not in a state that allows it (e.g. an export still running)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The object is not in a state that allows this request."
    default_code = "conflict"


_GENERIC_MESSAGES = {
    "invalid": "Some fields are invalid.",
    "parse_error": "The request body could not be parsed.",
}


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """Turn DRF's nested error detail into {"field.sub[0]": ["message", ...]}."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            for field_name, messages in _flatten(value, name).items():
                out.setdefault(field_name, []).extend(messages)
    elif isinstance(detail, list):
        if all(not isinstance(item, (dict, list)) for item in detail):
            out[prefix or "non_field_errors"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                for field_name, messages in _flatten(item, f"{prefix}[{index}]").items():
                    out.setdefault(field_name, []).extend(messages)
    else:
        out[prefix or "non_field_errors"] = [str(detail)]
    return out


def _drf_body(exc: exceptions.APIException) -> dict[str, Any]:
    detail = exc.detail
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(detail)
        general = fields.pop("non_field_errors", [])
        if isinstance(detail, list) and not fields:
            # A list of problems not tied to one field stays under non_field_errors.
            fields = {"non_field_errors": general} if len(general) > 1 else {}
        message = general[0] if general else _GENERIC_MESSAGES["invalid"]
        return error_body("invalid", message, fields)
    code = exc.default_code
    if isinstance(detail, (dict, list)):
        return error_body(code, _GENERIC_MESSAGES.get(code, str(exc.default_detail)), _flatten(detail))
    specific = exc.get_codes()
    return error_body(specific if isinstance(specific, str) else code, str(detail))


def _domain_response(exc: BaseException) -> Response | None:
    for cls, http_status, code in DOMAIN_ERRORS:
        if isinstance(exc, cls):
            fields = getattr(exc, "fields", None) or getattr(exc, "errors", None)
            if not isinstance(fields, dict):
                problems = getattr(exc, "problems", None)
                fields = {"non_field_errors": [str(p) for p in problems]} if problems else {}
            fields = {str(k): v if isinstance(v, list) else [str(v)] for k, v in fields.items()}
            return Response(error_body(code, str(exc), fields), status=http_status)
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler: keep DRF's status codes and headers, rewrite every body to the API shape."""
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
        exc = exceptions.ValidationError(detail)
    elif isinstance(exc, (ProtectedError, RestrictedError)):
        return Response(error_body("protected", "Other records still refer to this object, so it cannot be "
                                                "deleted."), status=status.HTTP_409_CONFLICT)
    domain = _domain_response(exc)
    if domain is not None:
        return domain
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.APIException):
        response.data = _drf_body(exc)
    elif isinstance(exc, Http404):
        response.data = error_body("not_found", "Not found.")
    elif isinstance(exc, DjangoPermissionDenied):
        response.data = error_body("permission_denied", "You do not have permission to perform this action.")
    return response


@csrf_exempt  # changes nothing; without it a POST to an unknown path got Django's HTML CSRF page, not a 404
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Answer unknown /api/ paths in the API's error shape instead of an HTML page."""
    message = f"No API endpoint at {request.path}."
    if not request.path.endswith("/"):
        match = resolve(request.path + "/", urlconf=getattr(request, "urlconf", None))
        if match.func is not not_found:
            message += f" Did you mean {request.path}/ (with the trailing slash)?"
    return JsonResponse(error_body("not_found", message), status=404)


# Django's own error views (handler400/403/404/500 in the root URL conf) answer /api/ paths in the API's shape
# too: a request refused before any view runs (too many form fields, a disallowed host) or an unexpected
# exception would otherwise get the site's HTML page.
def _site_or_api(request: HttpRequest, status_code: int, code: str, message: str,
                 site_view: Any, *args: Any) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse(error_body(code, message), status=status_code)
    return site_view(request, *args)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _site_or_api(request, 400, "bad_request", "The request could not be understood.",
                        defaults.bad_request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _site_or_api(request, 403, "permission_denied", "You do not have permission to perform this action.",
                        defaults.permission_denied, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _site_or_api(request, 404, "not_found", "Not found.", defaults.page_not_found, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    return _site_or_api(request, 500, "server_error", "The server failed to answer this request; it has been "
                                                      "logged.", defaults.server_error)
