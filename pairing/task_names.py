"""Registered names of the pairing app's Celery tasks: one spelling to declare, send and schedule."""

# pairing/tasks.py
REFRESH_DESIGN_POSTERIOR = "pairing.tasks.refresh_design_posterior"
