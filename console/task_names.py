"""Registered names of the staff console's Celery tasks (dashboard jobs): one spelling to declare and send."""

# console/dashboard/tasks.py
RUN_ANALYSIS = "console.dashboard.tasks.run_analysis"
RUN_EXPORT = "console.dashboard.tasks.run_export"
RUN_PAYOUTS = "console.dashboard.tasks.run_payouts"
RUN_POWER = "console.dashboard.tasks.run_power"
