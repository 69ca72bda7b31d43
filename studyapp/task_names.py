"""Registered names of the studyapp and dashboard Celery tasks: one spelling to declare, send and schedule."""

# studyapp/tasks.py
SYSTEM_CHECK = "studyapp.tasks.system_check"
REFRESH_DESIGN_POSTERIOR = "studyapp.tasks.refresh_design_posterior"
EXPIRE_ABANDONED_EPISODES = "studyapp.tasks.expire_abandoned_episodes"
# studyapp/dashboard/tasks.py
RUN_ANALYSIS = "studyapp.dashboard.tasks.run_analysis"
RUN_EXPORT = "studyapp.dashboard.tasks.run_export"
RUN_PAYOUTS = "studyapp.dashboard.tasks.run_payouts"
RUN_POWER = "studyapp.dashboard.tasks.run_power"
