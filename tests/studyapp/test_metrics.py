"""/metrics: Prometheus text for staff or the scrape token, with latency, queues, grading and sweep repairs."""

from __future__ import annotations

import pytest
from celery import current_app
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from grading.models import GradingFollowUp
from grading.services.reconcile import ReconcileReport
from grading.sweep_counts import sweep_counts_add
from studies.models import Episode
from tests.factories import EpisodeFactory, UserFactory
from tests.factories.grading import JudgeRunFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_cache():
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


def _samples(response) -> dict[tuple[str, tuple], float]:
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.content.decode())
            for sample in family.samples}


@pytest.fixture
def staff() -> Client:
    client = Client()
    client.force_login(UserFactory(roles=["staff"], is_staff=True))
    return client


def test_metrics_need_staff_or_the_scrape_token(monkeypatch):
    anonymous = Client().get("/metrics")
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Bearer"
    worker = Client()
    worker.force_login(UserFactory(roles=["worker"]))
    assert worker.get("/metrics").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer anything").status_code == 403  # no token set
    monkeypatch.setenv("METRICS_TOKEN", "s3cret-scrape-token")
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape-token").status_code == 200


def test_request_latency_is_recorded_per_url_pattern_not_per_path(staff):
    before = _samples(staff.get("/metrics"))
    key = ("collabskill_http_request_duration_seconds_count",
           (("method", "GET"), ("route", "accounts/login/"), ("status", "2xx")))
    Client().get("/accounts/login/")
    Client().get("/accounts/login/")
    after = _samples(staff.get("/metrics"))
    assert after[key] - before.get(key, 0) == 2
    pattern = ("collabskill_http_request_duration_seconds_count",
               (("method", "GET"), ("route", "api/episodes/<int:pk>/"), ("status", "4xx")))
    Client().get("/api/episodes/12345/")
    latest = _samples(staff.get("/metrics"))
    assert latest[pattern] - after.get(pattern, 0) == 1
    assert not any("12345" in (dict(labels).get("route") or "") for _, labels in latest)


def _request_series(samples: dict[tuple[str, tuple], float]) -> set[tuple]:
    return {labels for name, labels in samples if name.startswith("collabskill_http_request_duration_seconds")}


def _random_requests(count: int, seed: int) -> None:
    """Requests with made-up method names and paths, some on real routes with made-up ids and slugs."""
    import random
    import string

    rng = random.Random(seed)
    client = Client()
    for _ in range(count):
        method = "".join(rng.choices(string.ascii_uppercase, k=rng.randint(3, 12)))
        if rng.random() < 0.3:
            method = rng.choice(["GET", "POST", "DELETE", "OPTIONS", "get"])
        word = "".join(rng.choices(string.ascii_lowercase + string.digits, k=rng.randint(1, 30)))
        path = rng.choice([f"/{word}/", f"/api/episodes/{rng.randint(1, 10**9)}/", f"/api/{word}", f"/{word}.php",
                           f"/accounts/{word}/"])
        client.generic(method, path)


def test_made_up_methods_and_paths_add_no_series(staff):
    """Labels come from closed sets: after a first wave, 1 000 more random requests leave the series unchanged."""
    _random_requests(300, seed=1)  # every (method class, route, status class) these can reach exists now
    staff.get("/metrics")  # and the scrape's own series
    before = _samples(staff.get("/metrics"))
    _random_requests(1000, seed=2)
    after = _samples(staff.get("/metrics"))
    assert _request_series(after) == _request_series(before)
    methods = {dict(labels)["method"] for labels in _request_series(after)}
    assert methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"} and "other" in methods
    statuses = {dict(labels)["status"] for labels in _request_series(after) if "status" in dict(labels)}
    assert statuses <= {"1xx", "2xx", "3xx", "4xx", "5xx"}


def test_grading_outcomes_and_backlog_are_counted_from_the_database(staff):
    graded = EpisodeFactory(status=Episode.Status.GRADED)
    EpisodeFactory(status=Episode.Status.SUBMITTED)
    EpisodeFactory(status=Episode.Status.SUBMITTED)
    JudgeRunFactory(episode=graded, status="succeeded")
    JudgeRunFactory(episode=graded, status="failed")
    GradingFollowUp.objects.create(episode=graded, kind=GradingFollowUp.Kind.FLUENCY)
    samples = _samples(staff.get("/metrics"))
    assert samples[("collabskill_episodes", (("status", "submitted"),))] == 2
    assert samples[("collabskill_episodes", (("status", "graded"),))] == 1
    assert samples[("collabskill_episodes", (("status", "failed"),))] == 0
    assert samples[("collabskill_judge_runs", (("status", "succeeded"),))] == 1
    assert samples[("collabskill_judge_runs", (("status", "failed"),))] == 1
    assert samples[("collabskill_grading_follow_ups_open", (("kind", "fluency"),))] == 1
    assert samples[("collabskill_grading_follow_ups_open", (("kind", "observation"),))] == 0


def test_sweep_repairs_add_up_across_sweeps(staff):
    sweep_counts_add(ReconcileReport(grading_sent=2, codings_sent=1))
    sweep_counts_add(ReconcileReport(grading_sent=1, observations_recorded=3))
    samples = _samples(staff.get("/metrics"))
    assert samples[("collabskill_sweep_repairs_total", (("action", "grading_sent"),))] == 3
    assert samples[("collabskill_sweep_repairs_total", (("action", "observations_recorded"),))] == 3
    assert samples[("collabskill_sweep_repairs_total", (("action", "codings_sent"),))] == 1
    assert samples[("collabskill_sweep_repairs_total", (("action", "retractions"),))] == 0


def test_the_sweep_task_reports_what_it_repaired(staff, monkeypatch):
    from grading import tasks
    from grading.services import reconcile

    monkeypatch.setattr(reconcile, "grading_reconcile", lambda: ReconcileReport(follow_ups_closed=4))
    assert tasks.reconcile.run()["follow_ups_closed"] == 4
    samples = _samples(staff.get("/metrics"))
    assert samples[("collabskill_sweep_repairs_total", (("action", "follow_ups_closed"),))] == 4


def test_queue_depth_counts_the_messages_waiting_in_each_queue(staff):
    with current_app.connection_for_write() as connection:
        for queue in ("default", "grading", "rating"):
            connection.default_channel.queue_declare(queue=queue, durable=True, auto_delete=False)
            connection.default_channel.queue_purge(queue)
    try:
        for _ in range(3):
            current_app.send_task("rating.tasks.not_consumed_here", queue="rating")
        samples = _samples(staff.get("/metrics"))
        assert samples[("collabskill_broker_up", ())] == 1
        assert samples[("collabskill_broker_queue_messages", (("queue", "rating"),))] == 3
        assert samples[("collabskill_broker_queue_messages", (("queue", "grading"),))] == 0
    finally:
        with current_app.connection_for_write() as connection:
            connection.default_channel.queue_purge("rating")
