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
from rating.preferences_grad import laplace_gradient
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

__all__ = ["Built", "Core", "build", "covariance", "fit_core"]

GROUPS = ("worker", "task")
# Bounds of the estimated random-effect SDs, in the quality unit (points, or logits without scores).
SD_BOUNDS = (1e-3, 1e3)
# A preference parameter beyond this many log-odds means the rankings are separated.
SEPARATED = 12.0
# The outer objective where the inner fit fails (far larger than any attainable -log likelihood).
FAILED = 1e20
# The inner fit's tolerance during the search (the last Newton step's size): Newton converges quadratically, so
# the maximum is then off by ~tol², and the objective, stationary in it, by ~tol⁴; the final fit uses 1e-10.
INNER_TOL = 1e-4
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
    return dataclasses.replace(pb, fixed={"log_sd": math.log(sds["score"])}) if "score" in sds else pb


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


class _Outer:
    """The outer objective −L(log SDs) and, where H's Schur block is dense, its exact gradient
    (`rating/preferences_grad.py`). Each trial starts the inner fit from the best trial's maximum moved along
    dθ̂/dφ: a trial that lands in a lower maximum of the inner fit (see `_settle`) does not carry it on."""

    def __init__(self, built: Built, sds: dict[str, float], free: tuple[str, ...]) -> None:
        self.built, self.sds, self.free = built, sds, free
        self.theta = _start(built)
        self.x: np.ndarray | None = None
        self.direction: np.ndarray | None = None
        self.best = math.inf
        self.first: np.ndarray | None = None      # the first trial's maximum, reached from the starting values
        self.has_gradient = True
        self._last: tuple[bytes, tuple[float, np.ndarray, Any, Factor] | None] | None = None

    def restart(self, theta: np.ndarray) -> None:
        self.theta, self.x, self.direction, self.best = theta, None, None, math.inf
        self._last = None

    def trial(self, x: np.ndarray) -> dict[str, float]:
        return dict(self.sds, **{g: float(math.exp(v)) for g, v in zip(self.free, x, strict=True)})

    def _warm(self, x: np.ndarray) -> np.ndarray:
        if self.x is None or self.direction is None:
            return self.theta
        return self.theta + self.direction @ (x - self.x)

    def _inner(self, x: np.ndarray) -> tuple[float, np.ndarray, Any, Factor] | None:
        """The inner fit at x; the last one is kept, as the search ends where it last evaluated."""
        key = np.asarray(x, dtype=float).tobytes()
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        got = self._inner_fit(x)
        self._last = (key, got)
        return got

    def _inner_fit(self, x: np.ndarray) -> tuple[float, np.ndarray, Any, Factor] | None:
        pb, groups = self.built.problem, self.built.groups
        value, theta, ev, converged, _, f = _laplace_factored(pb, self._warm(x), self.trial(x), groups, INNER_TOL)
        if not (converged and math.isfinite(value)) and self.direction is not None:
            value, theta, ev, converged, _, f = _laplace_factored(pb, self.theta, self.trial(x), groups, INNER_TOL)
        if not (converged and math.isfinite(value)):
            return None       # a trial far out (the search's first steps can reach the bounds): back off
        return value, theta, ev, f

    def value(self, x: np.ndarray) -> float:
        got = self._inner(x)
        if got is None:
            return FAILED
        if -got[0] < self.best:
            self.theta, self.best = got[1], -got[0]
        return -got[0]

    def value_and_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        got = self._inner(x)
        if got is None:
            return FAILED, np.zeros_like(x)
        value, theta, _, f = got
        sds = self.trial(x)
        pb = _with_sd(self.built.problem, sds)
        grad = laplace_gradient(pb, theta, _precisions(pb, sds, self.built.groups), self.free, f)
        if grad is None:
            self.has_gradient = False
            return -value, np.zeros_like(x)
        if self.first is None:
            self.first = theta
        if -value < self.best:
            self.theta, self.x, self.direction, self.best = theta, np.array(x, dtype=float), grad.direction, -value
        return -value, -grad.value


def _curvature_scale(built: Built, free: tuple[str, ...]) -> np.ndarray:
    """About √(−∂²L/∂φ²) per free log SD (twice the levels of a random effect, twice the rubric scores): the
    search runs on φ times this, so its first step is about a Newton step instead of a leap to a bound."""
    pb = built.problem
    sizes = [pb.y.size if g == "score" else int(np.sum(pb.random_group == GROUPS.index(g))) for g in free]
    return np.sqrt(2.0 * np.maximum(np.array(sizes, dtype=float), 1.0))


def _search(outer: _Outer, x0: np.ndarray, bounds: list[tuple[float, float]]) -> np.ndarray:
    """L-BFGS-B on the exact gradient; by finite differences where there is none; Nelder-Mead where the
    gradient searches stranded where the inner fit fails."""
    scale = _curvature_scale(outer.built, outer.free)
    scaled = [(lo * s, hi * s) for (lo, hi), s in zip(bounds, scale, strict=True)]
    options = {"ftol": 1e-13, "gtol": 1e-8}

    def with_gradient(y: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = outer.value_and_gradient(y / scale)
        return value, grad / scale

    res = scipy.optimize.minimize(with_gradient, x0 * scale, jac=True, method="L-BFGS-B", bounds=scaled,
                                  options=options)
    x = res.x / scale
    if not outer.has_gradient:
        outer.restart(_start(outer.built))
        res = scipy.optimize.minimize(outer.value, x0, method="L-BFGS-B", bounds=bounds, options=options)
        x = res.x
    if not res.fun < FAILED / 2:
        outer.restart(_start(outer.built))
        res = scipy.optimize.minimize(outer.value, x0, method="Nelder-Mead", bounds=bounds,
                                      options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})
        x = res.x
    return np.asarray(x, dtype=float)


def _settle(outer: _Outer, x: np.ndarray, bounds: list[tuple[float, float]]) -> np.ndarray:
    """The inner fit can have a second maximum (the bilinear ρ·q: a large ρ with the random effects absorbing
    the rankings), and a search that passed near a bound can carry its warm start into the lower one. At the
    found components the inner fit is redone from the first trial's maximum (reached from the starting values, not
    along the search); where that maximum is higher, the search resumes from it."""
    for _ in range(2):
        warm = outer._inner(x)
        pb, groups = outer.built.problem, outer.built.groups
        origin = _start(outer.built) if outer.first is None else outer.first
        cold = _laplace_factored(pb, origin, outer.trial(x), groups, INNER_TOL)
        if warm is None or not (cold[3] and math.isfinite(cold[0])) or cold[0] <= warm[0] + 1e-6:
            return x
        outer.restart(cold[1])
        x = _search(outer, x, bounds)
    return x


def _given(value: float | None, default: float) -> float:
    return default if value is None else float(value)


def _pair_covariance(codes: np.ndarray, r: np.ndarray) -> float:
    """Mean product of the residuals of two scores that share a group (a worker, a task): their covariance."""
    has = codes >= 0
    codes, r = codes[has], r[has]
    if not codes.size:
        return 0.0
    sums = np.bincount(codes, weights=r)
    squares = np.bincount(codes, weights=r * r)
    counts = np.bincount(codes).astype(float)
    pairs = float(np.sum(counts * (counts - 1.0)))
    return float(np.sum(sums * sums - squares)) / pairs if pairs else 0.0


def _moment_sds(built: Built, sds: dict[str, float]) -> dict[str, float]:
    """Starting SDs from the rubric scores alone: residuals from the arm means split into what two scores of
    one worker or of one task share (their covariance) and the rest. Only a start (the search moves on from it),
    but one near the maximum, so the search needs a few evaluations instead of crawling down from 10 points."""
    pb, coded = built.problem, built.coded
    cells = coded.cell[coded.score_episode]
    means = np.bincount(cells, weights=pb.y) / np.maximum(np.bincount(cells), 1)
    r = pb.y - means[cells]
    total = float(np.mean(r * r))
    if not total > 0.0:
        return sds
    floor = 0.05 * total
    shared = {"worker": coded.worker, "task": coded.task}
    out = dict(sds)
    for g in built.groups:
        out[g] = math.sqrt(max(_pair_covariance(shared[g][coded.score_episode], r), floor))
    rest = total - sum(out[g] ** 2 for g in built.groups)
    out["score"] = math.sqrt(max(rest, floor))
    return out


def fit_core(built: Built, fixed_sds: dict[str, float | None]) -> Core:
    """Maximise the penalised likelihood in the quality terms and the preference parameters; the variance
    components (the score noise and the free random-effect SDs) maximise its Laplace approximation."""
    pb, groups = built.problem, built.groups
    unit = 10.0 if built.units == "points" else 0.5
    with_scores = ("score",) if pb.y.size else ()
    free = tuple(g for g in groups + with_scores if fixed_sds.get(g) is None)
    sds: dict[str, float] = {g: _given(fixed_sds.get(g), unit) for g in groups}
    if pb.y.size:
        sds["score"] = fixed_sds.get("score") or max(float(np.std(pb.y)), 1.0)
        moments = _moment_sds(built, sds)
        sds.update({g: moments[g] for g in free})
    outer = _Outer(built, sds, free)
    if free:
        bounds = [(math.log(SD_BOUNDS[0] * unit), math.log(SD_BOUNDS[1] * unit))] * len(free)
        x = _settle(outer, _search(outer, np.array([math.log(sds[g]) for g in free]), bounds), bounds)
        sds = outer.trial(x)
    value, theta, ev, converged, iterations = _laplace(pb, outer.theta, sds, groups)
    if not converged or not np.all(np.isfinite(theta)) or not math.isfinite(value):
        raise PreferenceInputError(NOT_CONVERGED)
    _check_separation(pb, theta)
    at_bound = tuple(g for g in free if min(abs(math.log(sds[g] / (b * unit))) for b in SD_BOUNDS) < 1e-3)
    prec = _precisions(pb, sds, groups)
    u = theta[pb.random_cols]
    loglik = ev.value + 0.5 * float(prec @ (u * u))
    return Core(_with_sd(pb, sds), theta, sds, free, at_bound, loglik, value, converged, iterations)


def _check_separation(pb: Problem, theta: np.ndarray) -> None:
    """A position, length or tie term beyond ±SEPARATED log-odds is the optimiser running off to infinity."""
    for name in ("first", "length", "tie"):
        if name in pb.columns and abs(float(theta[pb.columns[name]])) > SEPARATED:
            raise PreferenceInputError(
                f"cannot estimate: the rankings are separated in the {name} term (its estimate runs off to "
                "infinity); there are too few rankings, or one kind of deliverable always wins")


def covariance(built: Built, core: Core, params: np.ndarray, kind: str) -> np.ndarray:
    """Covariance of ``params`` (columns). ``model``: the inverse penalised information. ``sandwich``: pairs
    broken out of one ranking are not independent, so the comparisons' information is replaced by the outer
    products of their scores summed by ranking (H⁻¹ M H⁻¹; equal to H⁻¹ in expectation for single pairs).
    ``jackknife``: the same with each ranking's influence taken as the one-step move of the estimate without it
    (`rating/preferences_jackknife.py`); the plain sandwich where H was factored by sparse LU."""
    pb = core.problem
    prec = _precisions(pb, core.sds, built.groups)
    ev = evaluate(pb, core.theta, prec)
    e = np.zeros((pb.n_params, params.size))
    e[params, np.arange(params.size)] = 1.0
    f = factor(ev.neg_hessian, pb.diagonal_cols)
    x = f.solve(e)
    if kind == "model" or not pb.outcome.size:
        return x[params]
    at = pairs_at(pb, core.theta)
    meat = ev.neg_hessian - comparison_hessian(pb, core.theta, at)
    c = f.rest_inverse() if kind == "jackknife" else None
    if c is not None:
        gx = jackknife_influence(pb, at, built.coded.cluster, f.rest, c, x[f.rest])
        return x.T @ (meat @ x) + gx.T @ gx
    clusters = built.coded.cluster
    _, inv = np.unique(clusters, return_inverse=True)
    sums = scipy.sparse.csr_matrix((np.ones(inv.size), (inv.ravel(), np.arange(inv.size))),
                                   shape=(int(inv.max()) + 1, inv.size)) @ pair_scores(pb, core.theta, at)
    gx = sums @ x
    return x.T @ (meat @ x) + gx.T @ gx
