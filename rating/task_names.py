"""Registered names of the rating Celery tasks: the one spelling used to declare, send and schedule them."""

RECORD_OBSERVATION = "rating.tasks.record_observation"
RETRACT_PARTICIPANT = "rating.tasks.retract_participant"
REFRESH_POSTERIOR = "rating.tasks.refresh_posterior"
RERECORD_STUDY = "rating.tasks.rerecord_study"
REFRESH_ALL_POSTERIORS = "rating.tasks.refresh_all_posteriors"
