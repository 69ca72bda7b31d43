"""Does a worker's ToM go with their ability with an agent (κ) and not alone (θ)? The paper's Eq. 3, linear.

The synergy model (`rating/synergy.py`) with the worker's ToM trait T (centred at the average code) as a
covariate on each ability:

    y = m_a + p_k + δ_θ·T·[solo] + δ_κ·T·[with agent] + θ_h·[solo] + κ_h·[with agent] + β_t + γ_t·[with agent] + ε

so δ_κ is the points of with-agent score per ToM point and δ_θ the same alone; δ_κ − δ_θ is ToM's association
with the boost. The paper writes θ × ToM inside a logit; on 0–100 scores the moderation is additive, and the
worker effects keep what ToM does not explain. T is the worker-level trait of `rating/tom_traits.py`
(calibrated by default, or the raw mean), the leave-one-out mean so an episode's own code never enters its
predictor.
``within=True`` adds the episode's deviation from the worker's trait on with-agent episodes (δ_dev): does a
worker score higher with the agent on the tasks where their prompts show more ToM than usual?

The covariates are extra fixed columns of the same exact REML (`build_design(covariates=...)`), so there is one
fit; intervals are normal at the REML variance components, like the synergy fit's. Pure numpy/scipy: no Django.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from rating.fit import json_safe
from rating.synergy_data import CollinearCovariates, SynergyData, build_design, subset
from rating.synergy_estimates import interval, variance_components
from rating.synergy_reml import fit_reml
from rating.tom_traits import DECOMPOSITIONS, CodeVariance, tom_traits

__all__ = ["MIN_WORKERS", "ModerationResult", "TomModerationData", "moderation_columns", "tom_moderation"]

# Fewer workers with a ToM trait than this and the slope rests on too few people to report.
MIN_WORKERS = 10
TRAIT_KINDS = ("calibrated", "loo_mean")
COLUMNS = {"theta": "tom_trait:solo", "kappa": "tom_trait:agent", "deviation": "tom_deviation:agent"}


@dataclass(frozen=True)
class TomModerationData:
    """The synergy model's episodes and each episode's ToM code (mean of the judges' 0–5 codes; NaN where the
    episode is not coded: solo episodes, logs that could not be parsed)."""

    synergy: SynergyData
    tom: np.ndarray

    def __post_init__(self) -> None:
        tom = np.asarray(self.tom, dtype=float)
        if tom.shape != (self.synergy.n,):
            raise ValueError(f"tom has {tom.size} values but there are {self.synergy.n} episodes")
        bad = np.flatnonzero(~np.isnan(tom) & ((tom < 0) | (tom > 5)))
        if bad.size:
            raise ValueError(f"ToM codes must be within 0-5 (or NaN when not coded); rows {bad[:5].tolist()} are not")
        object.__setattr__(self, "tom", tom)


@dataclass(frozen=True)
class ModerationResult:
    """δ_κ (``kappa``), δ_θ (``theta``), δ_κ − δ_θ (``boost``) and δ_dev (``deviation``) as interval dicts
    (estimate, se, lower, upper, p_positive, p_value), each None with the reason in ``reasons`` when not
    estimable."""

    trait_kind: str
    decomposition: str
    level: float
    within: bool
    n_episodes: int = 0
    n_workers: int = 0
    excluded: dict[str, int] = field(default_factory=dict)
    kappa: dict[str, float] | None = None
    theta: dict[str, float] | None = None
    boost: dict[str, float] | None = None
    deviation: dict[str, float] | None = None
    code_variance: dict[str, float] | None = None
    fixed_effects: dict[str, dict[str, float]] = field(default_factory=dict)
    variance_components: dict[str, float] = field(default_factory=dict)
    reml_criterion: float | None = None
    converged: bool | None = None
    reasons: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values."""
        return json_safe(asdict(self))


def _with_p(row: dict[str, float]) -> dict[str, float]:
    z = row["estimate"] / row["se"] if row["se"] > 0 else math.inf
    return row | {"p_value": math.erfc(abs(z) / math.sqrt(2.0))}


def moderation_columns(data: TomModerationData, trait_kind: str, within: bool,
                decomposition: str) -> tuple[np.ndarray, dict, dict, Any]:
    """Rows kept, the covariate columns on them, the exclusion counts, and the code variance."""
    syn = data.synergy
    traits = tom_traits(syn.human, data.tom, decomposition)
    trait = traits.calibrated if trait_kind == "calibrated" else traits.trait
    # Centred at the average code, so the arm levels are those of a worker of average ToM.
    centre = traits.variance.mean if traits.variance is not None else 0.0
    keep = ~np.isnan(trait)
    excluded = {"no_trait": int((~keep).sum())}
    if within:
        missing_dev = syn.team & np.isnan(traits.deviation) & keep
        excluded["agent_episode_not_coded"] = int(missing_dev.sum())
        keep &= ~missing_dev
    rows = np.flatnonzero(keep)
    team = syn.team[rows].astype(float)
    t = trait[rows] - centre
    cov = {COLUMNS["theta"]: t * (1.0 - team), COLUMNS["kappa"]: t * team}
    if within:
        cov[COLUMNS["deviation"]] = np.nan_to_num(traits.deviation[rows]) * team
    return rows, cov, excluded, traits.variance


def _thin(syn: SynergyData, rows: np.ndarray, variance: CodeVariance | None) -> dict[str, str]:
    """Reasons the moderation cannot be estimated from these episodes (empty when it can)."""
    reasons: dict[str, str] = {}
    workers = np.unique(syn.human[rows])
    if variance is None:
        reasons["tom"] = "too few ToM codes: fewer than two workers have codes, or no worker has two"
    elif variance.between <= 0.0:
        reasons["tom"] = ("the ToM codes show no stable difference between workers (between-worker variance "
                          "estimated at zero): there is no trait to relate to ability")
    if workers.size < MIN_WORKERS:
        reasons["workers"] = (f"only {workers.size} workers have a ToM trait (codes on at least one other episode); "
                              f"at least {MIN_WORKERS} are needed")
    team = syn.team[rows]
    if not np.any(team) or not np.any(~team):
        reasons["conditions"] = "the episodes with a ToM trait are not both alone and with an agent"
    return reasons


def tom_moderation(data: TomModerationData, *, trait_kind: str = "calibrated", within: bool = False,
                   decomposition: str | None = None, level: float = 0.95) -> ModerationResult:
    """Fit the moderation model (module docstring) and return δ_κ, δ_θ, their difference and δ_dev.

    ``decomposition`` defaults to the leave-one-out trait without the deviation and to the Mundlak split (worker
    mean, centred deviation) with it, since beside a leave-one-out mean the deviation carries trait signal
    (`rating/tom_traits.py`); pass "loo" with ``within=True`` to reproduce the paper's Eq. 4–5 pair.
    """
    decomposition = decomposition or ("mundlak" if within else "loo")
    if decomposition not in DECOMPOSITIONS:
        raise ValueError(f"decomposition must be one of {DECOMPOSITIONS}")
    if trait_kind not in TRAIT_KINDS:
        raise ValueError(f"trait_kind must be one of {TRAIT_KINDS}")
    if not 0.0 < level < 1.0:
        raise ValueError("level must be between 0 and 1")
    syn = data.synergy
    rows, cov, excluded, variance = moderation_columns(data, trait_kind, within, decomposition)
    base = {"trait_kind": trait_kind, "decomposition": decomposition, "level": level, "within": within,
            "excluded": excluded,
            "n_episodes": int(rows.size), "n_workers": int(np.unique(syn.human[rows]).size),
            "code_variance": None if variance is None else {
                "mean": variance.mean, "between": variance.between, "within": variance.within,
                "n_workers": variance.n_workers, "n_codes": variance.n_codes}}
    reasons = _thin(syn, rows, variance)
    if reasons:
        return ModerationResult(**base, reasons=reasons)
    part = subset(syn, rows)
    n_humans, n_tasks = int(syn.human.max()) + 1, int(syn.task.max()) + 1
    try:
        design = build_design(part, n_humans, n_tasks, covariates=cov)
    except CollinearCovariates as exc:
        return ModerationResult(**base, reasons={"tom": str(exc)})
    if part.n - design.p < 2:
        return ModerationResult(**base, reasons={"episodes": f"{part.n} episodes are too few for {design.p} "
                                                             "fixed effects"})
    with threadpool_limits(limits=1, user_api="blas"):
        core = fit_reml(design)
        small = core.small_cov()
    return _summarise(base, design, core, small, level, dict(design.dropped))


def _summarise(base: dict, design: Any, core: Any, small: np.ndarray, level: float,
               reasons: dict[str, str]) -> ModerationResult:
    col = {name: design.fixed_names.index(column) for name, column in COLUMNS.items()
           if column in design.fixed_names}
    sol = core.ev.solution

    def contrast(weights: dict[str, float]) -> dict[str, float]:
        vec = np.zeros(design.d)
        for name, w in weights.items():
            vec[col[name]] = w
        return _with_p(interval(float(vec @ sol), math.sqrt(max(float(vec @ small @ vec), 0.0)), level))

    fixed = {name: {"estimate": float(sol[j]), "se": math.sqrt(max(small[j, j], 0.0))}
             for j, name in enumerate(design.fixed_names)}
    if not core.converged:
        reasons["convergence"] = f"the REML search did not converge ({core.message})"
    return ModerationResult(
        **base, kappa=contrast({"kappa": 1.0}), theta=contrast({"theta": 1.0}),
        boost=contrast({"kappa": 1.0, "theta": -1.0}),
        deviation=contrast({"deviation": 1.0}) if "deviation" in col else None,
        fixed_effects=fixed, variance_components=variance_components(core), reml_criterion=core.deviance,
        converged=core.converged, reasons=reasons)
