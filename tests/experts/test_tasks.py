"""The routing sweep's Celery registration: its name, its queue and its beat entry."""

from __future__ import annotations

from celery import current_app

from experts import tasks
from experts.task_names import ROUTE_EXPERT_REVIEWS
from studyapp.celery import app


def test_the_routing_sweep_is_registered_under_its_name_and_acknowledges_late():
    assert tasks.route_expert_reviews.name == ROUTE_EXPERT_REVIEWS == "experts.tasks.route_expert_reviews"
    assert tasks.route_expert_reviews.acks_late
    assert ROUTE_EXPERT_REVIEWS in current_app.tasks


def test_the_routing_sweep_stays_on_the_grading_queue_and_runs_every_ten_minutes():
    assert app.amqp.router.route({}, ROUTE_EXPERT_REVIEWS)["queue"].name == "grading"
    [entry] = [e for e in app.conf.beat_schedule.values() if e["task"] == ROUTE_EXPERT_REVIEWS]
    assert entry["schedule"] == 10 * 60.0
