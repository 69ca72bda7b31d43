"""Registered names of the experts app's Celery tasks: the one place a task name is spelled out."""

ROUTE_EXPERT_REVIEWS = "experts.tasks.route_expert_reviews"
