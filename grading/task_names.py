"""Registered names of the grading Celery tasks: the one spelling used to declare, send and schedule them.

Services send tasks by name (never by importing `grading.tasks`, which imports the services), so the names
live here, apart from both.
"""

GRADE_EPISODE = "grading.tasks.grade_episode"
GRADE_SOLO_RUN = "grading.tasks.grade_solo_run"
GENERATE_RUBRIC = "grading.tasks.generate_rubric"
CODE_LOG = "grading.tasks.code_log"
RECONCILE = "grading.tasks.reconcile"
GRADE_PENDING = "grading.tasks.grade_pending"
