"""Building and fitting the preference model: which terms the data identify, the fit given the variance
components, their Laplace estimate, and the covariance of the reported parameters.

Gauge: a group of arm cells linked only by comparisons and never scored has no level on the points scale;
its first cell is pinned at 0 so the others are measured against it (their differences stay identified).
Without any rubric score the scale is logits (rho fixed at 1). Pure numpy/scipy.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.optimize
import scipy.sparse

from rating.preferences_data import Coded, PreferenceInputError, cell_components
from rating.preferences_jackknife import jackknife_influence
from rating.preferences_lik import (
    Problem,
    comparison_hessian,
    evaluate,
    maximise,
    pair_scores,
    pairs_at,
    scores_gram,
)
from rating.preferences_solve import Factor, factor

__all__ = ["Built", "Core", "build", "covariance", "held_rho", "rho_put_back", "with_rho"]

GROUPS = ("worker", "task")
# Bounds of the estimated random-effect SDs, in the quality unit (points, or logits without scores).
SD_BOUNDS = (1e-3, 1e3)
# A preference parameter beyond this many log-odds means the rankings are separated.
SEPARATED = 12.0
# The outer objective where the inner fit fails (far larger than any attainable -log likelihood).
FAILED = 1e20
# The inner fit's tolerance during the search (the last Newton step's size): Newton converges quadratically, so
# the maximum is then off by ~tol², and the objective, stationary in it, by ~tol⁴; the final fit uses 1e-10.
INNER_TOL = 1e-3
NOT_CONVERGED = ("cannot estimate: the preference model did not converge; the rankings are probably separated "
                 "(too few of them, or one kind of deliverable always wins) or its terms are confounded")


@dataclass(frozen=True, eq=False)
class Built:
    problem: Problem
    coded: Coded
    cell_col: np.ndarray                      # per cell: its column, or -1 when pinned at 0
    component: np.ndarray                     # per cell: its component of the comparison graph
    scored_component: np.ndarray              # per component: whether a cell in it is scored
    groups: tuple[str, ...]                   # random-effect groups in the model
    units: str                                # "points" or "logits"
    reasons: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Core:
    problem: Problem                          # with the score noise SD fixed at its estimate
    theta: np.ndarray
    sds: dict[str, float]
    estimated: tuple[str, ...]
    at_bound: tuple[str, ...]
    log_likelihood: float
    laplace: float
    converged: bool
    iterations: int
    rho_slope: float | None = None            # dL/dρ at the estimate, where the search took it there


def _random_groups(coded: Coded, worker_sd: float | None, task_sd: float | None,
                   reasons: dict[str, str]) -> tuple[str, ...]:
    groups = []
    if worker_sd != 0.0:
        per_worker = np.bincount(coded.worker[coded.worker >= 0], minlength=coded.n_workers)
        if coded.n_workers >= 2 and np.any(per_worker >= 2):
            groups.append("worker")
        else:
            reasons["worker_sd"] = ("no worker has two deliverables: a worker's skill cannot be told apart from "
                                    "a deliverable's own quality, so worker effects are left out")
    if task_sd != 0.0:
        if coded.n_tasks >= 2 and coded.score.size:
            groups.append("task")
        else:
            reasons["task_sd"] = ("task effects need rubric scores on two or more tasks (a comparison is within "
                                  "one task, where the task's difficulty cancels); left out")
    return tuple(groups)


def _identified_extras(coded: Coded, reasons: dict[str, str]) -> list[str]:
    """Position bias and length preference count only if the comparisons can tell them from the arms: a design
    that always shows the same arm first cannot say whether the first shown or that arm wins."""
    extras = []
    pairs = coded.outcome.size
    if coded.score.size and pairs:
        extras.append("rho")
    if not pairs:
        return extras
    m = np.zeros((pairs, len(coded.cells)))
    np.add.at(m, (np.arange(pairs), coded.cell[coded.pe]), 1.0)
    np.add.at(m, (np.arange(pairs), coded.cell[coded.pf]), -1.0)
    rank = np.linalg.matrix_rank(m) if m.size else 0
    with_first = np.column_stack([m, coded.first])
    if np.linalg.matrix_rank(with_first) > rank:
        extras.append("first")
        m, rank = with_first, rank + 1
    else:
        reasons["position_bias"] = ("which deliverable was shown first is confounded with its arm (or nobody saw "
                                    "a shown-first item against another): position bias cannot be estimated")
    if np.linalg.matrix_rank(np.column_stack([m, coded.log_length])) > rank:
        extras.append("length")
    else:
        reasons["length_preference"] = ("the lengths do not vary apart from the arms (or were not given): the "
                                        "length preference cannot be estimated")
    if np.any(coded.outcome == 0):
        extras.append("tie")
    else:
        reasons["tie"] = "no pair was tied: the model has no tie term (Davidson's ν = 0, plain Bradley-Terry)"
    return extras


def _pinned(coded: Coded, component: np.ndarray, scored: np.ndarray) -> np.ndarray:
    pinned = np.zeros(len(coded.cells), dtype=bool)
    for c in np.flatnonzero(~scored):
        pinned[np.flatnonzero(component == c)[0]] = True
    return pinned


def _design(coded: Coded, cell_col: np.ndarray, groups: tuple[str, ...]) -> tuple[scipy.sparse.csr_matrix,
                                                                                  np.ndarray, np.ndarray]:
    """Episodes x linear terms; the random columns and their groups."""
    n_free = int(np.sum(cell_col >= 0))
    rows, cols, rand, group = [], [], [], []
    ep = np.arange(coded.cell.size)
    col = cell_col[coded.cell]
    rows.append(ep[col >= 0])
    cols.append(col[col >= 0])
    base = n_free
    for g, (codes, count) in enumerate(((coded.worker, coded.n_workers), (coded.task, coded.n_tasks))):
        if GROUPS[g] not in groups:
            continue
        rows.append(ep[codes >= 0])
        cols.append(base + codes[codes >= 0])
        rand.append(base + np.arange(count))
        group.append(np.full(count, g))
        base += count
    r, c = np.concatenate(rows), np.concatenate(cols)
    a = scipy.sparse.csr_matrix((np.ones(r.size), (r, c)), shape=(coded.cell.size, base))
    empty = np.zeros(0, dtype=np.int64)
    return a, np.concatenate(rand) if rand else empty, np.concatenate(group) if group else empty


def _pair_weights(coded: Coded) -> np.ndarray | None:
    """2/k for each of the k(k-1)/2 pairs of a ranking of k: the ranking then counts as k - 1 comparisons (its
    successive choices of a best item), not as k(k-1)/2 independent ones. The estimating equations stay unbiased
    (a weight per ranking), and the worker effects and their SD are no longer pulled as if the pairs of one
    ranking were separate evidence. None when every ranking is a pair (all weights 1)."""
    if not coded.cluster.size:
        return None
    pairs = np.bincount(coded.cluster)[coded.cluster].astype(float)
    if np.all(pairs == 1.0):
        return None
    return 4.0 / (1.0 + np.sqrt(1.0 + 8.0 * pairs))      # 2/k with k(k-1)/2 = pairs


def build(coded: Coded, worker_sd: float | None, task_sd: float | None) -> Built:
    """Decide the model's terms from what the rows identify, and assemble the parameter-free arrays."""
    reasons: dict[str, str] = {}
    component, scored = cell_components(coded)
    pinned = _pinned(coded, component, scored)
    cell_col = np.full(len(coded.cells), -1, dtype=np.int64)
    cell_col[~pinned] = np.arange(int(np.sum(~pinned)))
    groups = _random_groups(coded, worker_sd, task_sd, reasons)
    a, random_cols, random_group = _design(coded, cell_col, groups)
    extras = _identified_extras(coded, reasons)
    if coded.score.size:
        scored_cells = np.unique(coded.cell[coded.score_episode]).size
        if coded.score.size <= scored_cells:
            raise PreferenceInputError(f"{coded.score.size} rubric score(s) on {scored_cells} arm(s): too few to "
                                       "estimate the scores' noise (each arm needs a second score)")
    n_lin = a.shape[1]
    problem = Problem(
        n_lin=n_lin, columns={name: n_lin + i for i, name in enumerate(extras)}, a=a,
        a_scores=a[coded.score_episode], y=coded.score, d_a=(a[coded.pe] - a[coded.pf]).tocsr(),
        outcome=coded.outcome, first=coded.first, log_length=coded.log_length, random_cols=random_cols,
        random_group=random_group, diagonal_cols=random_cols[random_group == 1], weight=_pair_weights(coded))
    problem = dataclasses.replace(problem, gram=scores_gram(problem))
    units = "points" if coded.score.size else "logits"
    if units == "logits":
        reasons["points_scale"] = ("no rubric score: qualities are on the logit scale of the comparisons, "
                                   "not in rubric points")
    return Built(problem, coded, cell_col, component, scored, groups, units, reasons)


def _start(built: Built) -> np.ndarray:
    """Starting values: arm means of the scores, 15 points per logit, the observed tie share."""
    pb, coded = built.problem, built.coded
    theta = np.zeros(pb.n_params)
    if coded.score.size:
        cells = coded.cell[coded.score_episode]
        mean = float(coded.score.mean())
        for c in range(len(coded.cells)):
            if built.cell_col[c] >= 0:
                mine = coded.score[cells == c]
                theta[built.cell_col[c]] = float(mine.mean()) if mine.size else mean
    if "rho" in pb.columns:
        theta[pb.columns["rho"]] = 1.0 / 15.0
    if "tie" in pb.columns:
        share = float(np.mean(coded.outcome == 0))
        theta[pb.columns["tie"]] = math.log(2.0 * share / (1.0 - share)) if share < 1 else 0.0
    return theta


def _precisions(pb: Problem, sds: dict[str, float], groups: tuple[str, ...]) -> np.ndarray:
    return np.array([1.0 / sds[GROUPS[g]] ** 2 for g in pb.random_group], dtype=float) \
        if groups else np.zeros(0)


def _with_sd(pb: Problem, sds: dict[str, float]) -> Problem:
    """The problem with the rubric-score noise SD held at its current value."""
    return dataclasses.replace(pb, fixed={**pb.fixed, "log_sd": math.log(sds["score"])}) if "score" in sds else pb


def held_rho(pb: Problem) -> Problem:
    """The inner problem where ρ is estimated outside it: ρ's column dropped, its value in ``fixed`` (set with
    `with_rho`). With ρ held, every term is concave in the rest, so the inner maximum is unique."""
    names = sorted((k for k in pb.columns if k != "rho"), key=pb.columns.__getitem__)
    inner = dataclasses.replace(pb, columns={k: pb.n_lin + i for i, k in enumerate(names)},
                                fixed={**pb.fixed, "rho": 1.0}, gram=None)
    return dataclasses.replace(inner, gram=scores_gram(inner))


def with_rho(pb: Problem, rho: float) -> Problem:
    return dataclasses.replace(pb, fixed={**pb.fixed, "rho": float(rho)})


def rho_put_back(full: Problem, theta: np.ndarray, rho: float) -> np.ndarray:
    """The inner fit's parameters with the held ρ put in at its column of ``full``."""
    return np.insert(theta, full.columns["rho"], rho) if "rho" in full.columns else theta


def _laplace(pb: Problem, theta: np.ndarray, sds: dict[str, float], groups: tuple[str, ...],
             tol: float = 1e-10) -> tuple[float, np.ndarray, Any, bool, int]:
    """The inner maximum and the Laplace approximation of the likelihood with every inner parameter integrated
    out (flat on the fixed ones). For rubric scores alone this is exactly the REML likelihood."""
    value, theta, ev, converged, iterations, _ = _laplace_factored(pb, theta, sds, groups, tol)
    return value, theta, ev, converged, iterations


def _laplace_factored(pb: Problem, theta: np.ndarray, sds: dict[str, float], groups: tuple[str, ...],
                      tol: float) -> tuple[float, np.ndarray, Any, bool, int, Factor]:
    prec = _precisions(pb, sds, groups)
    problem = _with_sd(pb, sds)
    theta, ev, converged, iterations = maximise(problem, theta, prec, tol=tol)
    f = factor(ev.neg_hessian, problem.diagonal_cols)
    value = ev.value + 0.5 * float(np.sum(np.log(prec))) - 0.5 * f.logdet() \
        + 0.5 * (problem.n_params - prec.size) * math.log(2.0 * math.pi)
    return value, theta, ev, converged, iterations, f


def _check_separation(pb: Problem, theta: np.ndarray) -> None:
    """A position, length or tie term beyond ±SEPARATED log-odds is the optimiser running off to infinity."""
    for name in ("first", "length", "tie"):
        if name in pb.columns and abs(float(theta[pb.columns[name]])) > SEPARATED:
            raise PreferenceInputError(
                f"cannot estimate: the rankings are separated in the {name} term (its estimate runs off to "
                "infinity); there are too few rankings, or one kind of deliverable always wins")


def covariance(built: Built, core: Core, params: np.ndarray, kind: str,
               at: tuple[Any, Factor] | None = None) -> np.ndarray:
    """Covariance of ``params`` (columns). ``model``: the inverse penalised information. ``sandwich``: pairs
    broken out of one ranking are not independent, so the comparisons' information is replaced by the outer
    products of their scores summed by ranking (H⁻¹ M H⁻¹; equal to H⁻¹ in expectation for single pairs).
    ``jackknife``: the same with each ranking's influence taken as the one-step move of the estimate without it
    (`rating/preferences_jackknife.py`); the plain sandwich where H was factored by sparse LU."""
    pb = core.problem
    if at is None:         # the problem evaluated and its H factored at the estimate, unless the caller has them
        ev = evaluate(pb, core.theta, _precisions(pb, core.sds, built.groups))
        at = ev, factor(ev.neg_hessian, pb.diagonal_cols)
    ev, f = at
    e = np.zeros((pb.n_params, params.size))
    e[params, np.arange(params.size)] = 1.0
    x = f.solve(e)
    if kind == "model" or not pb.outcome.size:
        return x[params]
    pairs = pairs_at(pb, core.theta)
    meat = ev.neg_hessian - comparison_hessian(pb, core.theta, pairs)
    c = f.rest_inverse() if kind == "jackknife" else None
    if c is not None:
        gx = jackknife_influence(pb, pairs, built.coded.cluster, f.rest, c, x[f.rest])
        return x.T @ (meat @ x) + gx.T @ gx
    clusters = built.coded.cluster
    _, inv = np.unique(clusters, return_inverse=True)
    sums = scipy.sparse.csr_matrix((np.ones(inv.size), (inv.ravel(), np.arange(inv.size))),
                                   shape=(int(inv.max()) + 1, inv.size)) @ pair_scores(pb, core.theta, pairs)
    gx = sums @ x
    return x.T @ (meat @ x) + gx.T @ gx
