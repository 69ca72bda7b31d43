"""Reads of the console's stored background-job results that more than one console surface shows."""

from __future__ import annotations

from rating.models import RatingSnapshot
from studies.models import BackgroundJob, Study


def finished_stability_job(study: Study, snapshot: RatingSnapshot | None = None) -> BackgroundJob | None:
    """Return the study's newest finished stability job, or the newest of one posterior version.

    The API shows the newest result whatever posterior it describes; an export includes only the result of
    the snapshot it exports (``snapshot``), under either resampling unit.
    """
    jobs = BackgroundJob.objects.filter(study=study, kind="stability", status=BackgroundJob.Status.DONE)
    if snapshot is not None:
        jobs = jobs.filter(cache_key__startswith=f"stability:{study.pk}:v{snapshot.version}:")
    return jobs.order_by("-finished_at", "-created_at").first()
