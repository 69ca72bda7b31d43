"""Registered names of the grading Celery tasks: the one spelling used to declare, send and schedule them.

Services send tasks by name (never by importing `grading.tasks`, which imports the services), so the names
live here, apart from both. The study domain sends ``GRADE_EPISODE`` on submit and ``PARSE_LOG`` on a log
upload, so those names are spelled in `studies.task_names` (the domain imports no app above it) and only
re-exported here.
"""

from studies.task_names import GRADE_EPISODE, PARSE_LOG

__all__ = ["GRADE_EPISODE", "PARSE_LOG", "GRADE_SOLO_RUN", "GENERATE_RUBRIC", "CODE_LOG", "CODE_PROCESS",
           "RECORD_OBSERVATION", "RECONCILE", "GRADE_PENDING"]

GRADE_SOLO_RUN = "grading.tasks.grade_solo_run"
GENERATE_RUBRIC = "grading.tasks.generate_rubric"
CODE_LOG = "grading.tasks.code_log"
# Codes theory of mind (worker prompts) and response quality (agent turns) by the study's two judges.
CODE_PROCESS = "grading.tasks.code_process"
# Records a grade's rating observation and closes the follow-up row the grade wrote for it.
RECORD_OBSERVATION = "grading.tasks.record_observation"
RECONCILE = "grading.tasks.reconcile"
GRADE_PENDING = "grading.tasks.grade_pending"
