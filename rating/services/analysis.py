"""Fits of a study's model on demand: the posterior fit, the stability report and the model checks.

Each reads the whole active ledger and fits (seconds on a large study), so none of them is a selector: the
refresh stores the fit as a snapshot, and the dashboard's background job stores the stability report and
model checks, which pages then read. ``rating_report`` calls them directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.stats

from rating.fit import (
    FitResult,
    ModelSpec,
    ParticipantsReady,
    compare_models,
    fit_model,
    heldout_coverage,
    json_safe,
)
from rating.grader_fit import REFERENCE_WEIGHTING, fit_graded
from rating.selectors import (
    GradeArrays,
    ObservationArrays,
    agent_names,
    grade_arrays,
    observations_arrays,
    participant_pseudonyms,
    study_ledger,
    study_model_spec,
)
from rating.stability import stability
from studies.model_families import KNOWN_FAMILIES, unknown_families
from studies.models import Study


def study_fit(
    study: Study,
    arrays: ObservationArrays | GradeArrays | None = None,
    on_participants: ParticipantsReady | None = None,
) -> FitResult:
    """Return the study's rating model fitted to its active ledger (ids: Agent / Participant pks as text).

    The one place that turns the ledger into :func:`rating.fit.fit_model` (or, for the judge-aware model,
    :func:`rating.grader_fit.fit_graded`) arguments, so the snapshot, ``rating_report --json`` and the model
    checks see the same fit. ``on_participants`` (see :func:`rating.fit.fit_model`) hears of the participants'
    posterior before the fit ends; the judge-aware model does not call it.
    """
    spec = study_model_spec(study)
    arrays = study_ledger(study, spec) if arrays is None else arrays
    if isinstance(arrays, GradeArrays):
        return fit_graded(
            arrays.agent_ids, arrays.participant_ids, arrays.y, episode=arrays.episode_ids, grader=arrays.graders,
            agent_family=arrays.agent_families, grader_family=arrays.grader_families, spec=spec,
            reference=str(study.grade_reference), reference_weighting=REFERENCE_WEIGHTING,
        )
    return fit_model(
        arrays.agent_ids,
        arrays.participant_ids,
        arrays.y,
        arrays.task_groups() if spec.kind == "calibrated_task" else None,
        spec=spec,
        weights=None if bool(np.all(arrays.w == 1.0)) else arrays.w,
        on_participants=on_participants,
    )


JUDGE_AWARE_BASIS = (
    "Judge-aware model: each grade is corrected by its grader's fitted leniency and, where measured, "
    "self-preference; an episode's corrected grades are averaged and the averages resampled with those "
    "corrections held at their estimates (as the variance components are), so the uncertainty of the "
    "corrections themselves is in the leaderboard's intervals, not in these tables."
)


def judge_aware_episode_arrays(study: Study, fit: FitResult | None = None) -> tuple[ObservationArrays, ModelSpec]:
    """Return the judge-aware model's episode scores as an observation ledger, and the model to analyse it.

    Each grade minus its grader's leniency (relative to the study's reference) and minus the grader's
    self-preference when it grades its own family's agent (only terms the design identifies), averaged over
    the episode. An average of m grades has variance sigma_episode^2 + beta^2 / m under the judge-aware fit, so
    it carries the weight proportional to the inverse of that (mean weight 1). The stability tables and the
    held-out checks of the per-episode models then apply unchanged; ``fit`` (the judge-aware fit of the same
    grades) is refitted when not given.
    """
    ledger = grade_arrays(study)
    spec = study_model_spec(study)
    basis = dataclasses.replace(spec, kind="calibrated")
    if ledger.n == 0:
        empty = np.zeros(0)
        return ObservationArrays(empty.astype(np.int64), empty.astype(np.int64), empty.astype(object), empty,
                                 empty), basis
    fit = study_fit(study, ledger) if fit is None else fit
    graders = fit.diagnostics.get("graders", {})
    leniency = {row["grader"]: row["leniency"] or 0.0 for row in graders.get("leniency", [])}
    preference = {row["grader"]: row["estimate"] for row in graders.get("self_preference", [])
                  if row["identifiable"] and row["estimate"] is not None}
    own = (ledger.grader_families == ledger.agent_families) & (ledger.grader_families != "")
    shift = np.array([leniency.get(g, 0.0) for g in ledger.graders.tolist()], dtype=float)
    shift += own * np.array([preference.get(g, 0.0) for g in ledger.graders.tolist()], dtype=float)
    _, first, inverse = np.unique(ledger.episode_ids, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    counts = np.bincount(inverse).astype(float)
    means = np.bincount(inverse, weights=ledger.y - shift) / counts
    hyper = fit.hyper or {}
    beta = float(hyper.get("beta", {}).get("estimate", 1.0))
    sigma_episode = float(hyper.get("sigma_episode", {}).get("estimate", 0.0))
    precision = 1.0 / (sigma_episode**2 + beta**2 / counts)
    arrays = ObservationArrays(
        agent_ids=ledger.agent_ids[first], participant_ids=ledger.participant_ids[first],
        task_ids=np.full(first.shape[0], "", dtype=object), y=means, w=precision / precision.mean(),
    )
    return arrays, basis


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
    spec = study_model_spec(study)
    basis = None
    if spec.kind == "judge_aware":
        arrays, spec = judge_aware_episode_arrays(study)
        basis = JUDGE_AWARE_BASIS
    else:
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
        spec=spec,
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
    report["basis"] = basis
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
    For the judge-aware model the fit, residuals and hyperparameters are its own (per grade) and the held-out
    coverage is of its corrected episode scores (:func:`judge_aware_episode_arrays`). ``None`` without active
    observations.
    """
    spec = study_model_spec(study)
    basis = None
    if spec.kind == "judge_aware":
        ledger = grade_arrays(study)
        if ledger.n == 0:
            return None
        fit = study_fit(study, ledger)
        arrays, spec = judge_aware_episode_arrays(study, fit)
        basis = JUDGE_AWARE_BASIS
    else:
        arrays = observations_arrays(study)
        if arrays.n == 0:
            return None
        fit = study_fit(study, arrays)
    agents, humans = arrays.agent_ids, arrays.participant_ids
    weights = None if bool(np.all(arrays.w == 1.0)) else arrays.w
    tasks = arrays.task_groups()
    summary = fit.to_dict()
    checks: dict[str, Any] = {
        "model": study_model_spec(study).to_dict(),
        "basis": basis,
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
    if basis is not None:
        checks["comparison_note"] = ("The judge-aware model is set against today's panel mean in the graders panel; "
                                     "the held-out coverage above is of its corrected episode scores.")
    elif tasks is None:
        checks["comparison_note"] = "No observation names its task, so the task-difficulty model cannot be compared."
    else:
        try:
            checks["comparison"] = compare_models(agents, humans, arrays.y, tasks, weights=weights)
        except ValueError as exc:
            checks["comparison_note"] = f"Model comparison not computed: {exc}"
    return checks


# --------------------------------------------------------------------------------------------------------
# The graders: leniency, self-preference, and the leaderboard with and without the correction
# --------------------------------------------------------------------------------------------------------

GRADER_SIGNIFICANCE = 0.05


def _agent_rows(fit: FitResult, names: dict[int, str]) -> dict[str, dict[str, Any]]:
    sigma = fit.agent_sigma()
    conservative = fit.conservative()
    order = np.lexsort((fit.agent_ids.astype(str), -fit.agent_mu, -conservative))
    rank = np.empty(order.shape[0], dtype=int)
    rank[order] = np.arange(1, order.shape[0] + 1)
    return {
        str(a): {"mu": float(fit.agent_mu[i]), "sigma": float(sigma[i]), "conservative": float(conservative[i]),
                 "rank": int(rank[i]), "name": names.get(int(a), f"agent {a}")}
        for i, a in enumerate(fit.agent_ids.tolist())
    }


def _grader_verdict(report: dict[str, Any]) -> str:
    """One plain sentence on what the graders do to the scores."""
    if report["n_graders"] < 2:
        return ("Only one grader has graded this study's episodes, so there is nothing to compare: leniency and "
                "self-preference cannot be measured.")
    terms = report["self_preference"]
    measured = [t for t in terms if t["identifiable"]]
    clear = [t for t in measured if t["p_value"] is not None and t["p_value"] < GRADER_SIGNIFICANCE]
    if clear:
        worst = max(clear, key=lambda t: abs(t["estimate"]))
        direction = "higher" if worst["estimate"] > 0 else "lower"
        sentence = (f"The {worst['grader']} judge scores {worst['family']} agents {abs(worst['estimate']):.1f} points "
                    f"({worst['ci_low']:.1f} to {worst['ci_high']:.1f}) {direction} than the other graders do")
        if len(clear) > 1:
            more = len(clear) - 1
            sentence += (f" (and {more} more judge{'s' if more > 1 else ''} with a clear preference for "
                         f"{'their' if more > 1 else 'its'} own family)")
    elif measured:
        largest = max(measured, key=lambda t: abs(t["estimate"]))
        sentence = (f"No judge measurably favours its own family's agents (largest: {largest['grader']}, "
                    f"{largest['estimate']:+.1f} points, {largest['ci_low']:.1f} to {largest['ci_high']:.1f})")
    else:
        sentence = "No judge grades an agent of its own family in a way these grades can separate from its leniency"
    moved = [a for a in report["agents"] if a["rank_corrected"] != a["rank_uncorrected"]]
    if moved:
        sentence += "; corrected, the ranking changes (below)."
    else:
        sentence += "; the ranking is the same with and without the correction."
    unknown = [t for t in terms if not t["identifiable"]]
    if unknown:
        sentence += (f" The self-preference of {', '.join(t['grader'] for t in unknown)} cannot be measured with "
                     "these grades (details below).")
    return sentence


def _family_notes(ledger: GradeArrays) -> list[str]:
    """Warn of model families the project does not know: a misspelt family matches no judge or agent, so a
    self-preference term would silently not be considered."""
    notes = []
    names = agent_names(np.unique(ledger.agent_ids))
    for family in unknown_families(set(ledger.agent_families.tolist()) | set(ledger.grader_families.tolist())):
        agents = sorted({names.get(int(a), f"agent {a}") for a in ledger.agent_ids[ledger.agent_families == family]})
        judges = sorted(set(ledger.graders[ledger.grader_families == family].tolist()))
        who = "; ".join(part for part in (f"agents {', '.join(agents)}" if agents else "",
                                          f"judges {', '.join(judges)}" if judges else "") if part)
        known = ", ".join(sorted(KNOWN_FAMILIES))
        notes.append(f"Model family {family!r} ({who}) is not one this platform knows ({known}): check its "
                     "spelling. A judge's self-preference is only considered for agents of exactly its family.")
    return notes


def study_grader_report(study: Study) -> dict[str, Any] | None:
    """Return what the study's graders do to its scores: each grader's leniency, each judge's self-preference
    for its own family's agents (with intervals and a test, or why it cannot be measured), and the agent
    leaderboard with the correction (the judge-aware model) beside today's panel mean (the calibrated model on
    each episode's mean judge grade). ``None`` without grades.

    Fits both models on the active grade ledger, so it is a background job's work, never a page's.
    """
    ledger = grade_arrays(study)
    if ledger.n == 0:
        return None
    spec = ModelSpec(kind="judge_aware", k=study.rating_k)
    reference = str(study.grade_reference)
    notes = _family_notes(ledger)
    if reference == "experts" and not ledger.expert_graders():
        notes.append("The study takes the experts as the reference, but no expert grade is in the ledger yet: the "
                     "levels below are on the judge panel's average instead.")
        reference = "panel"
    try:
        corrected = fit_graded(
            ledger.agent_ids, ledger.participant_ids, ledger.y, episode=ledger.episode_ids, grader=ledger.graders,
            agent_family=ledger.agent_families, grader_family=ledger.grader_families, spec=spec,
            reference=reference, reference_weighting=REFERENCE_WEIGHTING,
        )
    except ValueError as exc:
        # Too few grades, or a design that identifies no agent level yet: say so instead of failing the job.
        return json_safe({
            "verdict": f"The graders' effects cannot be estimated from these grades yet: {exc}.",
            "reference": {}, "leniency": [], "self_preference": [], "agents": [], "hyper": {}, "notes": notes,
            "n_grades": ledger.n, "n_episodes": int(np.unique(ledger.episode_ids).shape[0]),
            "n_graders": int(np.unique(ledger.graders).shape[0]), "n_experts": len(ledger.expert_graders()),
        })
    # Today's number: each episode's mean over its judges (experts left out), through the calibrated model.
    judges = ledger.grader_families != ""
    episodes, first, inverse = np.unique(ledger.episode_ids[judges], return_index=True, return_inverse=True)
    panel_mean = np.bincount(inverse, weights=ledger.y[judges]) / np.bincount(inverse)
    uncorrected = fit_model(
        ledger.agent_ids[judges][first], ledger.participant_ids[judges][first], panel_mean,
        spec=ModelSpec(kind="calibrated", k=study.rating_k),
    ) if episodes.shape[0] > 1 else None
    names = agent_names(ledger.agent_ids)
    with_rows = _agent_rows(corrected, names)
    without_rows = _agent_rows(uncorrected, names) if uncorrected is not None else {}
    agents = []
    for agent_id, row in sorted(with_rows.items(), key=lambda item: item[1]["rank"]):
        before = without_rows.get(agent_id, {})
        agents.append({
            "agent_id": agent_id, "name": row["name"],
            "mu_corrected": row["mu"], "sigma_corrected": row["sigma"], "rank_corrected": row["rank"],
            "mu_uncorrected": before.get("mu"), "sigma_uncorrected": before.get("sigma"),
            "rank_uncorrected": before.get("rank"),
        })
    diagnostics = corrected.diagnostics
    graders = diagnostics.get("graders", {})
    report: dict[str, Any] = {
        "reference": diagnostics.get("reference", {}),
        "leniency": graders.get("leniency", []),
        "self_preference": graders.get("self_preference", []),
        "agents": agents,
        "hyper": corrected.hyper,
        "n_grades": ledger.n,
        "n_episodes": int(np.unique(ledger.episode_ids).shape[0]),
        "n_graders": int(np.unique(ledger.graders).shape[0]),
        "n_experts": len(ledger.expert_graders()),
        "notes": notes + list(diagnostics.get("notes", [])),
    }
    report["verdict"] = _grader_verdict(report)
    return json_safe(report)
