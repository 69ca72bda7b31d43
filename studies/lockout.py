"""Sign-in lockout shared by the site form, the admin and the API token (django-axes, database-backed).

Failures are counted per user and client address in PostgreSQL rather than the cache, so the policy
holds, and sign-in keeps working, while Redis is down.
"""

from __future__ import annotations

import math
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_cool_off
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from studies.error_body import error_body

LOCKED_OUT_MESSAGE = "Too many failed sign-in attempts. Please wait {minutes} minutes and try again."


class LockoutBackend(AxesStandaloneBackend):
    """Refuse sign-ins for a locked-out user and address; calls without a request are not web sign-ins.

    Every web sign-in (login form, admin, API token) passes its request; only management commands and
    the test client's ``login()`` authenticate without one, and those are not guessing surfaces.
    """

    def authenticate(self, request: HttpRequest | None, username: str | None = None,
                     password: str | None = None, **kwargs: Any) -> None:
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def lockout_message(request: HttpRequest) -> tuple[str, int]:
    """Return the message for a locked-out sign-in and the seconds until it may try again."""
    cool_off = get_cool_off(request)
    seconds = max(1, math.ceil(cool_off.total_seconds())) if cool_off else 60
    return LOCKED_OUT_MESSAGE.format(minutes=max(1, math.ceil(seconds / 60))), seconds


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None,
                     credentials: dict | None = None) -> HttpResponse:
    """Answer 429: in the API's error shape under /api/, as a page elsewhere (site and admin)."""
    message, seconds = lockout_message(request)
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse(error_body("locked_out", message), status=429)
    else:
        response = render(request, "registration/locked_out.html", {"message": message}, status=429)
    response["Retry-After"] = str(seconds)
    return response
