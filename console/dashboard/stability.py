"""The leaderboard's stored analysis: ranking stability (paper Tables 2-4) plus the model checks.

Runs inside a Celery job, never on a page request. The numbers come from
:func:`rating.services.analysis.study_stability_report` -- the same function ``rating_report`` prints -- so the
page and the command cannot disagree; this module only adds what the page needs (the posterior version
it belongs to and the model checks of :func:`rating.services.analysis.study_model_checks`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rating.models import RatingSnapshot
from rating.services import analysis as rating_analysis
from studies.models import Study

Progress = Callable[[int, int], None]


def study_stability(
    study: Study,
    snapshot: RatingSnapshot,
    *,
    rounds: int,
    seed: int = 0,
    cluster: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Return the study's stability report and model checks, labelled with the snapshot they belong to.

    ``progress(done, total)`` follows the stability computation and counts the model checks as one last step.
    """
    report = progress or (lambda done, total: None)
    steps = {"total": 1}

    def forward(done: int, total: int) -> None:
        steps["total"] = total + 1
        report(done, total + 1)

    result = rating_analysis.study_stability_report(study, rounds=rounds, seed=seed, cluster=cluster, progress=forward)
    if result is None:
        raise ValueError("data: the study has no active observation to analyse")
    result["model_checks"] = rating_analysis.study_model_checks(study, seed=seed)
    report(steps["total"], steps["total"])
    result["snapshot_version"] = snapshot.version
    result["snapshot_n_observations"] = snapshot.n_observations
    return result
