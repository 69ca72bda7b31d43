"""Reads of the console's stored background-job results that more than one console surface shows."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.db.models import Count, Max, Sum

from experts.comparison_selectors import preferences_fingerprint
from experts.models import ToMGoldCode
from grading.models import ProcessCoding, ToMPairCoding
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
    return None if stamp is None else _done_result(study, "synergy", f"synergy:{study.pk}:{stamp}"[:128])


def _done_result(study: Study, kind: str, key: str) -> dict[str, Any] | None:
    """The result of the newest finished job of this kind computed for exactly this data (its cache key)."""
    job = (BackgroundJob.objects.filter(study=study, kind=kind, status=BackgroundJob.Status.DONE, cache_key=key)
           .order_by("-finished_at", "-created_at").first())
    return job.result if job else None


def tom_cache_key(study: Study) -> str | None:
    """Return the key of the ToM analysis of the study's current episodes and codings (``None`` without ToM coding
    or without the synergy model's data). It changes with the episodes, any current coding, the judge pair, the
    experts' submitted gold codes and the pairwise run's succeeded comparisons."""
    if not study.tom_coding:
        return None
    stamp = synergy_fingerprint(study)
    if stamp is None:
        return None
    codings = ProcessCoding.objects.filter(episode__study=study, is_current=True).aggregate(
        n=Count("pk"), s=Sum("score"), t=Max("finished_at"))
    when = int(codings["t"].timestamp()) if codings["t"] else 0
    pair = hashlib.sha256(json.dumps(study.tom_coders, sort_keys=True).encode()).hexdigest()[:8]
    gold = ToMGoldCode.objects.filter(item__sample__study=study, status=ToMGoldCode.Status.SUBMITTED).aggregate(
        n=Count("pk"), t=Max("submitted_at"))
    gold_when = int(gold["t"].timestamp()) if gold["t"] else 0
    pairs = ToMPairCoding.objects.filter(study=study, status=ToMPairCoding.Status.SUCCEEDED).aggregate(
        n=Count("pk"), t=Max("finished_at"))
    pairs_when = int(pairs["t"].timestamp()) if pairs["t"] else 0
    return (f"tom:{study.pk}:{stamp}:{codings['n']}.{codings['s'] or 0}.{when}:{pair}"
            f":{gold['n']}.{gold_when}:{pairs['n']}.{pairs_when}")[:128]


def finished_tom_result(study: Study) -> dict[str, Any] | None:
    """Return the stored ToM analysis of the study's current episodes and codings, or ``None`` when none was
    computed for them (an export carries only an analysis of the data it exports)."""
    key = tom_cache_key(study)
    return None if key is None else _done_result(study, "tom", key)


def converged_part(part: dict[str, Any] | None) -> dict[str, Any]:
    """A stored ToM moderation fit's estimates only when it converged; one that did not keeps its reasons and no
    estimate, so neither the page nor the export shows a number the verdict will not stand behind."""
    part = part or {}
    if part.get("converged") is False:
        return {"reasons": part.get("reasons") or {"convergence": "the fit did not converge"}}
    return part


def finished_preferences_result(study: Study) -> dict[str, Any] | None:
    """Return the stored preference fit of the study's current rankings and scores, or ``None`` when none was
    computed for them (a fit of earlier data would disagree with the rows it is shown beside)."""
    stamp = preferences_fingerprint(study)
    return None if stamp is None else _done_result(study, "preferences", f"preferences:{study.pk}:{stamp}"[:128])
