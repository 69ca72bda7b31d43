"""Registered names of the study domain's Celery tasks, and of the tasks it sends to the apps above it.

The domain imports no other app, so a follow-up it starts (grading a submission, retracting a withdrawn
participant's observations) is sent by a name declared here; the app that does the work registers its task
under this same constant.
"""

# studies/tasks.py
SYSTEM_CHECK = "studies.tasks.system_check"
EXPIRE_ABANDONED_EPISODES = "studies.tasks.expire_abandoned_episodes"

# Sent by the domain, registered above it (the names are unchanged, so queued messages survive a deploy):
# a submission (or a staff retry) asks for grading; a withdrawal asks for the participant's observations to be
# retracted.
GRADE_EPISODE = "grading.tasks.grade_episode"
# An uploaded or removed collaboration-log file asks for the episode's log files to be parsed again (no LLM).
PARSE_LOG = "grading.tasks.parse_log"
RETRACT_PARTICIPANT = "rating.tasks.retract_participant"
