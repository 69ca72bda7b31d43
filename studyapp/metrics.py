"""Prometheus metrics (prometheus-client): request latency, queue depth, grading outcomes, sweep repairs.

``GET /metrics`` answers in the Prometheus text format to a staff session or to ``Authorization: Bearer
<METRICS_TOKEN>`` when that variable is set (the way a scraper authenticates); anyone else gets 403 (401 without
credentials). What it exposes:

- ``collabskill_http_request_duration_seconds{method,route,status}``: a histogram per URL pattern (the route,
  not the path, so object ids do not multiply the series). Every label comes from a closed set, so no request
  can add series: the method is one of ``KNOWN_METHODS`` or ``other``, the route a pattern of the URLconf or
  ``unmatched``, the status its class (``2xx`` … ``5xx``). Under gunicorn, set ``PROMETHEUS_MULTIPROC_DIR`` to
  an empty folder so the workers' histograms are added up (gunicorn.conf.py marks dead workers).
- ``collabskill_broker_queue_messages{queue}`` and ``collabskill_broker_up``: messages waiting per Celery queue.
- ``collabskill_episodes{status}``, ``collabskill_judge_runs{status}``,
  ``collabskill_grading_follow_ups_open{kind}``: grading outcomes and backlog, counted in the database at
  scrape time, so what every worker did is included.
- ``collabskill_sweep_repairs_total{action}``: what the reconciliation sweep repaired (grading.sweep_counts).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import time
from collections.abc import Callable, Iterator

from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CollectorRegistry, Histogram, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

REQUEST_LATENCY = Histogram(
    "collabskill_http_request_duration_seconds", "Time to answer a request, by URL pattern.",
    ["method", "route", "status"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
_QUEUE_CHECK_SECONDS = 2.0
# The methods a route of this site answers; any other name (a client may send anything) is counted as "other".
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def request_labels(method: str | None, match, status_code: int) -> tuple[str, str, str]:
    """(method, route, status class) of a request: each from a closed set, never from what the client sent."""
    route = match.route if match is not None and match.route else "unmatched"
    status = f"{status_code // 100}xx" if 100 <= status_code <= 599 else "other"
    return (method if method in KNOWN_METHODS else "other"), route, status


class MetricsMiddleware:
    """Time every request by its URL pattern (after the probes: /healthz and /readyz are not timed)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        labels = request_labels(request.method, getattr(request, "resolver_match", None), response.status_code)
        REQUEST_LATENCY.labels(*labels).observe(time.perf_counter() - started)
        return response


class StudyStateCollector(Collector):
    """Read the queues, the database and the sweep totals at scrape time."""

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield from _broker_queues()
        yield from _grading_state()
        repairs = CounterMetricFamily("collabskill_sweep_repairs", "Repairs made by the reconciliation sweep.",
                                      labels=["action"])
        from grading.sweep_counts import sweep_counts

        for action, total in sweep_counts().items():
            repairs.add_metric([action], total)
        yield repairs


def _broker_queues() -> Iterator[GaugeMetricFamily]:
    from celery import current_app
    from django.conf import settings

    depth = GaugeMetricFamily("collabskill_broker_queue_messages", "Messages waiting in a Celery queue.",
                              labels=["queue"])
    up = GaugeMetricFamily("collabskill_broker_up", "1 when the broker answered the queue-depth check.")
    try:
        with current_app.connection_for_read() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0,
                                         timeout=_QUEUE_CHECK_SECONDS)
            for queue in settings.CELERY_QUEUES:
                depth.add_metric([queue], _queue_size(connection, queue))
        up.add_metric([], 1)
    except Exception:
        up.add_metric([], 0)
    yield up
    yield depth


def _queue_size(connection, queue: str) -> int:
    """Messages waiting in one queue; a queue the broker does not know yet holds none (Redis drops the key of
    an empty list). A channel of its own, since AMQP closes a channel whose passive declare fails."""
    from kombu.exceptions import ChannelError  # also AMQP's NOT_FOUND (amqp.exceptions.NotFound)

    channel = connection.channel()
    try:
        return channel.queue_declare(queue=queue, passive=True).message_count
    except ChannelError:
        return 0
    finally:
        with contextlib.suppress(Exception):  # the channel is gone already (AMQP closed it)
            channel.close()


def _grading_state() -> Iterator[GaugeMetricFamily]:
    from django.db.models import Count

    from grading.models import GradingFollowUp, JudgeRun
    from studies.models import Episode

    for name, help_text, model, field, queryset in (
        ("collabskill_episodes", "Episodes by status.", Episode, "status", Episode.objects.all()),
        ("collabskill_judge_runs", "Judge runs by status.", JudgeRun, "status", JudgeRun.objects.all()),
        ("collabskill_grading_follow_ups_open", "Follow-ups a grade owes that are not done yet.", GradingFollowUp,
         "kind", GradingFollowUp.objects.filter(done_at__isnull=True)),
    ):
        family = GaugeMetricFamily(name, help_text, labels=[field])
        counts = dict(queryset.order_by().values_list(field).annotate(n=Count("pk")))
        model_field = model._meta.get_field(field)
        for value in getattr(model_field, "choices", None) or []:
            family.add_metric([value[0]], counts.get(value[0], 0))
        yield family


def _registries() -> list[CollectorRegistry]:
    from prometheus_client import REGISTRY

    requests_registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        requests_registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(requests_registry)
    state = CollectorRegistry()
    state.register(StudyStateCollector())
    return [requests_registry, state]


def _allowed(request: HttpRequest) -> bool | None:
    """True for a staff session or the scrape token, False for other credentials, None for none at all."""
    token = os.environ.get("METRICS_TOKEN", "")
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        return bool(token) and hmac.compare_digest(header.removeprefix("Bearer ").encode(), token.encode())
    from console.api.permissions import is_staff

    if request.user.is_authenticated:
        return is_staff(request.user)
    return None


def metrics_view(request: HttpRequest) -> HttpResponse:
    if request.method not in ("GET", "HEAD"):
        return JsonResponse({"error": "Use GET."}, status=405, headers={"Allow": "GET, HEAD"})
    allowed = _allowed(request)
    if not allowed:
        status = 401 if allowed is None else 403
        response = JsonResponse({"error": "Metrics are for staff, or for a scraper sending the METRICS_TOKEN."},
                                status=status)
        if status == 401:
            response["WWW-Authenticate"] = "Bearer"
        return response
    body = b"".join(generate_latest(registry) for registry in _registries())
    # The classic 0.0.4 text format, which every Prometheus version reads.
    return HttpResponse(body, content_type=CONTENT_TYPE_PLAIN_0_0_4)
