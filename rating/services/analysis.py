"""Fits of a study's model on demand: the posterior fit, the stability report and the model checks.

Each reads the whole active ledger and fits (seconds on a large study), so none of them is a selector: the
refresh stores the fit as a snapshot, and the dashboard's background job stores the stability report and
model checks, which pages then read. ``rating_report`` calls them directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.stats

from rating.fit import FitResult, compare_models, fit_model, heldout_coverage
from rating.selectors import (
    ObservationArrays,
    agent_names,
    observations_arrays,
    participant_pseudonyms,
    study_model_spec,
)
from rating.stability import stability
from studies.models import Study


def study_fit(study: Study, arrays: ObservationArrays | None = None) -> FitResult:
    """Return the study's rating model fitted to its active ledger (ids: Agent / Participant pks as text).

    The one place that turns the ledger into :func:`rating.fit.fit_model` arguments, so the snapshot,
    ``rating_report --json`` and the model checks see the same fit.
    """
    arrays = observations_arrays(study) if arrays is None else arrays
    spec = study_model_spec(study)
    return fit_model(
        arrays.agent_ids,
        arrays.participant_ids,
        arrays.y,
        arrays.task_groups() if spec.kind == "calibrated_task" else None,
        spec=spec,
        weights=None if bool(np.all(arrays.w == 1.0)) else arrays.w,
    )


STABILITY_CLUSTERS = ("observation", "human")


def study_stability_report(
    study: Study,
    *,
    rounds: int,
    seed: int = 0,
    cluster: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any] | None:
    """Return the paper's Tables 2-4 for the study's active ledger under the study's rating model.

    The one stability path of the project: ``rating_report`` and the dashboard job both call this, and it
    calls :func:`rating.stability.stability` once. Agents are identified by primary key (as text) and named in
    ``report["agent_names"]``; humans by pseudonym. ``cluster="human"`` resamples people instead of
    observations. ``None`` when the study has no active observation.

    Observations without a task (sessions imported without a task id) stay in every leave-one-task-out fit
    and never form a "task" of their own: the table asks how much the ranking rests on any one task, and a
    task-less observation belongs to no task that could be removed. Grouping them as one pseudo-task would
    drop unrelated sessions together; making each its own group would turn part of the table into a
    leave-one-observation-out. Leave-one-task-out is skipped only when no observation names a task.
    """
    if cluster not in (None, *STABILITY_CLUSTERS):
        raise ValueError(f"cluster must be one of {STABILITY_CLUSTERS}, got {cluster!r}")
    arrays = observations_arrays(study)
    if arrays.n == 0:
        return None
    pseudonyms = participant_pseudonyms(study, arrays.participant_ids)
    keys, inverse = np.unique(arrays.participant_ids, return_inverse=True)
    human_labels = np.array([pseudonyms.get(int(pk), f"participant {pk}") for pk in keys.tolist()], dtype=object)
    report = stability(
        arrays.agent_ids,
        human_labels[inverse.reshape(-1)],
        arrays.y,
        arrays.task_groups(),
        None if bool(np.all(arrays.w == 1.0)) else arrays.w,
        spec=study_model_spec(study),
        rounds=rounds,
        seed=seed,
        cluster=None if cluster == "observation" else cluster,
        progress=progress,
    )
    names = agent_names(arrays.agent_ids)
    report["agent_names"] = {str(pk): name for pk, name in names.items()}
    report["cluster"] = cluster or "observation"
    report["rounds"] = rounds
    report["seed"] = seed
    return report


RESIDUAL_PLOT_POINTS = 200


def _residual_qq(standardized: np.ndarray) -> dict[str, list[float]]:
    """Return at most RESIDUAL_PLOT_POINTS (normal quantile, standardized residual) pairs for the QQ plot."""
    values = np.sort(np.asarray(standardized, dtype=float)[np.isfinite(standardized)])
    n = values.size
    if n == 0:
        return {"theoretical": [], "observed": []}
    positions = np.unique(np.linspace(0, n - 1, min(n, RESIDUAL_PLOT_POINTS)).round().astype(int))
    probabilities = (positions + 0.5) / n
    return {
        "theoretical": scipy.stats.norm.ppf(probabilities).tolist(),
        "observed": values[positions].tolist(),
    }


def study_model_checks(study: Study, *, folds: int = 5, seed: int = 0) -> dict[str, Any] | None:
    """Return the checks staff need to decide whether to believe the leaderboard.

    Residual SD against the model's β and the fitted hyperparameters (from one fit of the study's model),
    a standardized-residual QQ sample, k-fold held-out coverage of the 95 % predictive interval, and the
    calibrated vs calibrated + task comparison (AIC, likelihood ratio) when observations name tasks.
    ``None`` without active observations.
    """
    arrays = observations_arrays(study)
    if arrays.n == 0:
        return None
    spec = study_model_spec(study)
    fit = study_fit(study, arrays)
    agents, humans = arrays.agent_ids, arrays.participant_ids
    weights = None if bool(np.all(arrays.w == 1.0)) else arrays.w
    tasks = arrays.task_groups()
    summary = fit.to_dict()
    checks: dict[str, Any] = {
        "model": spec.to_dict(),
        "hyper": summary["hyper"],
        "diagnostics": summary["diagnostics"],
        "residual_qq": _residual_qq(fit.standardized_residuals),
        "coverage": None,
        "coverage_note": "",
        "comparison": None,
        "comparison_note": "",
    }
    try:
        checks["coverage"] = heldout_coverage(
            agents, humans, arrays.y, tasks if spec.kind == "calibrated_task" else None,
            spec=spec, folds=folds, seed=seed,
        )
    except ValueError as exc:
        checks["coverage_note"] = f"Held-out coverage not computed: {exc}"
    if tasks is None:
        checks["comparison_note"] = "No observation names its task, so the task-difficulty model cannot be compared."
    else:
        try:
            checks["comparison"] = compare_models(agents, humans, arrays.y, tasks, weights=weights)
        except ValueError as exc:
            checks["comparison_note"] = f"Model comparison not computed: {exc}"
    return checks
