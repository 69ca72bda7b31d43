"""Celery tasks of the pairing design."""

from __future__ import annotations

from pairing import services, task_names
from studies.instrumented_task import instrumented_task


@instrumented_task(name=task_names.REFRESH_DESIGN_POSTERIOR)
def refresh_design_posterior(study_id: int) -> int | None:
    """Cache the calibrated agent posterior adaptive pairing reads; return the observation count."""
    value = services.design_posterior_refresh(study_id=study_id)
    return None if value is None else value["n_observations"]
