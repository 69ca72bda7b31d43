"""Back-pressure: a request that already waited too long in front of the server is answered "busy" at once.

Under overload the queue in front of gunicorn grows and every request waits in it; serving a request that
waited 20 s only makes the next ones wait longer, and the participant sees a page that hangs. The proxy stamps
each request with the time it arrived (``X-Request-Start: t=<epoch seconds or milliseconds>``, see
``deploy/nginx.conf``); when a request reaches Django more than ``OVERLOAD_QUEUE_SECONDS`` later, it is
answered with 503 and ``Retry-After`` before any database work: a page that says the study is busy and
reloads itself a few seconds later (GET), says nothing was saved so the click can be repeated (POST), or a
JSON ``{"busy": true}`` for the pages' scripts. Without the header (no proxy) nothing is shed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

RETRY_AFTER_SECONDS = 5
# Shed requests are expected under overload, not errors: one WARNING per process at most this often, with the
# count since the last one (Django would otherwise log every 503 at ERROR, thousands of lines in one launch).
SHED_LOG_INTERVAL_SECONDS = 10.0

logger = logging.getLogger(__name__)


class _ShedLog:
    """Counts shed requests and logs a WARNING summary at most every ``SHED_LOG_INTERVAL_SECONDS``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._last = float("-inf")

    def record(self, waited: float) -> None:
        with self._lock:
            self._count += 1
            now = time.monotonic()
            if now - self._last < SHED_LOG_INTERVAL_SECONDS:
                return
            count, self._count, self._last = self._count, 0, now
        logger.warning("Overloaded: answered %d request(s) busy (503); the latest had queued %.1f s", count, waited)


_shed_log = _ShedLog()


def queued_seconds(header: str, *, now: float) -> float | None:
    """Seconds since the proxy's stamp (``t=1700000000.123`` in seconds, or milli/microseconds), or None."""
    value = header.strip().removeprefix("t=")
    try:
        stamp = float(value)
    except ValueError:
        return None
    for scale in (1.0, 1e3, 1e6):  # nginx's $msec is seconds; other proxies send milli- or microseconds
        if stamp / scale < now * 10:
            return max(0.0, now - stamp / scale)
    return None


class OverloadMiddleware:
    """Answer 503 + Retry-After to a request that queued longer than ``OVERLOAD_QUEUE_SECONDS``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = settings.OVERLOAD_QUEUE_SECONDS
        header = request.META.get("HTTP_X_REQUEST_START")
        if limit > 0 and header:
            waited = queued_seconds(header, now=time.time())
            if waited is not None and waited > limit:
                return _busy(request, waited)
        return self.get_response(request)


def _busy(request: HttpRequest, waited: float) -> HttpResponse:
    if "application/json" in request.headers.get("Accept", "") or request.path.endswith("/autosave/"):
        response: HttpResponse = JsonResponse({"ok": False, "busy": True, "retry_after": RETRY_AFTER_SECONDS,
                                               "error": "The study is very busy; please try again in a few "
                                                        "seconds. Nothing was changed."}, status=503)
    else:
        # Rendered without the request: no context processor, no session, no query.
        response = HttpResponse(render_to_string("busy.html", {
            "retry_after": RETRY_AFTER_SECONDS, "is_get": request.method in ("GET", "HEAD"),
        }), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    response["X-Queue-Seconds"] = f"{waited:.1f}"
    response._has_been_logged = True  # django.request would log it at ERROR
    _shed_log.record(waited)
    return response
