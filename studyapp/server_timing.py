"""Per-request server cost in a ``Server-Timing`` header: CPU time of the serving thread and database queries.

Wall-clock latency on a shared machine says as much about the neighbours as about the code; the CPU the
request's own thread used and the number of queries it sent do not depend on the load, so load benches
(``bench/launch.py``, ``bench/worker_flow.py``) read them from this header. Off unless ``SERVER_TIMING`` is
set, so production answers do not tell clients how long the server worked.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.db import connections
from django.http import HttpRequest, HttpResponse


class _QueryCounter:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)


class ServerTimingMiddleware:
    """Add ``Server-Timing: cpu;dur=<ms>, db;dur=<queries>`` (thread CPU in ms, query count) to each answer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        counter = _QueryCounter()
        # thread_time, not process_time: a gthread worker serves other requests on its other threads meanwhile.
        started = time.thread_time()
        wrappers = [connection.execute_wrapper(counter) for connection in connections.all()]
        for wrapper in wrappers:
            wrapper.__enter__()
        try:
            response = self.get_response(request)
        finally:
            for wrapper in reversed(wrappers):
                wrapper.__exit__(None, None, None)
        cpu_ms = (time.thread_time() - started) * 1000
        response["Server-Timing"] = f'cpu;dur={cpu_ms:.2f}, db;desc="queries";dur={counter.count}'
        return response
