"""Registered names of the rating Celery tasks: the one spelling used to declare, send and schedule them.

A withdrawal in the study domain sends ``RETRACT_PARTICIPANT``, so that name is spelled in `studies.task_names`
(the domain imports no app above it) and only re-exported here.
"""

from studies.task_names import RETRACT_PARTICIPANT

__all__ = ["RECORD_OBSERVATION", "RETRACT_PARTICIPANT", "REFRESH_POSTERIOR", "RERECORD_STUDY",
           "REFRESH_ALL_POSTERIORS"]

RECORD_OBSERVATION = "rating.tasks.record_observation"
REFRESH_POSTERIOR = "rating.tasks.refresh_posterior"
RERECORD_STUDY = "rating.tasks.rerecord_study"
REFRESH_ALL_POSTERIORS = "rating.tasks.refresh_all_posteriors"
