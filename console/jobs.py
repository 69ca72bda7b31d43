"""Reads of the console's stored background-job results that more than one console surface shows."""

from __future__ import annotations

from typing import Any

from experts.comparison_selectors import preferences_fingerprint
from rating.models import RatingSnapshot
from rating.synergy_episodes import synergy_fingerprint
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


def finished_synergy_result(study: Study) -> dict[str, Any] | None:
    """Return the stored synergy fit of the study's current episodes, or ``None`` when none was computed for them.

    An export carries only a fit of the data it exports: a fit of earlier episodes would disagree with its rows.
    """
    stamp = synergy_fingerprint(study)
    if stamp is None:
        return None
    job = (BackgroundJob.objects.filter(study=study, kind="synergy", status=BackgroundJob.Status.DONE,
                                        cache_key=f"synergy:{study.pk}:{stamp}"[:128])
           .order_by("-finished_at", "-created_at").first())
    return job.result if job else None


def finished_preferences_result(study: Study) -> dict[str, Any] | None:
    """Return the stored preference fit of the study's current rankings and scores, or ``None`` when none was
    computed for them (a fit of earlier data would disagree with the rows it is shown beside)."""
    stamp = preferences_fingerprint(study)
    if stamp is None:
        return None
    job = (BackgroundJob.objects.filter(study=study, kind="preferences", status=BackgroundJob.Status.DONE,
                                        cache_key=f"preferences:{study.pk}:{stamp}"[:128])
           .order_by("-finished_at", "-created_at").first())
    return job.result if job else None
