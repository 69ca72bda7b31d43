"""The preference model's outer search: the variance components and the scale ρ maximise the Laplace
approximation of the likelihood, with every other parameter integrated out (flat on the fixed ones).

ρ multiplies the worker effects inside every comparison. At the joint mode of (ρ, worker effects) a larger ρ
lets smaller worker effects explain the same rankings, which lowers their penalty, so the joint mode overstates
ρ and, through it, understates the arms' differences (in the bench's simulated studies by about a fifth and 1 point
of an 18-point difference). Estimated like a variance component instead, from the integrated likelihood, ρ
is close to its truth. With ρ held, the inner fit is concave (the rubric scores are Gaussian and Davidson's
log-likelihood is concave in the linear predictor and log ν), so its maximum is unique. Pure numpy/scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize

from rating.preferences_data import PreferenceInputError
from rating.preferences_fit import (
    FAILED,
    GROUPS,
    INNER_TOL,
    NOT_CONVERGED,
    SD_BOUNDS,
    Built,
    Core,
    _check_separation,
    _laplace,
    _laplace_factored,
    _precisions,
    _start,
    _with_sd,
    held_rho,
    rho_put_back,
    with_rho,
)
from rating.preferences_grad import Gradient, laplace_gradient, laplace_gradient_rho
from rating.preferences_lik import evaluate, maximise
from rating.preferences_solve import Factor, factor

__all__ = ["fit_core"]

RHO = "rho"
# The joint fit that gives the search its start need not be precise: the start only has to be near.
START_TOL = 1e-2
# The longest first Newton step per coordinate, in the search's units (about one SE each).
MAX_FIRST_STEP = 5.0
# The random effects' SDs, relative to their starting values, in the joint fit that starts ρ.
START_SD = 1e-2
# ρ is searched within ± this many logits per rubric point: a point worth more is separation, not a scale.
RHO_BOUND = 2.0
# The largest gradient, in the search's units (about SEs), at which the search counts as converged.
STATIONARY = 1e-3
# Where L-BFGS-B stops: 1e-5 of an SE from the maximum. A tighter stop only chases the noise of the gradient,
# whose inner fits stop at INNER_TOL (the final fit is then redone at 1e-10).
GTOL = 1e-5


@dataclass(frozen=True)
class _Setup:
    """What the search runs over: ``coords`` are the free log SDs, then ``rho`` when it is estimated here."""

    inner: Any                                # the inner problem (ρ held when it is estimated here)
    free: tuple[str, ...]                     # free variance components
    coords: tuple[str, ...]
    sds: dict[str, float]                     # starting (and the given) SDs
    rho: float                                # starting ρ (1 and unused without a ρ column)
    rho_scale: float                          # about 1 / SE of ρ: the search's unit for it
    theta: np.ndarray                         # starting inner parameters


class _Outer:
    """The outer objective −L(log SDs, ρ) and, where H's Schur block is dense, its exact gradient
    (`rating/preferences_grad.py`). Each trial starts the inner fit from the best trial's maximum moved along
    dθ̂/dx."""

    def __init__(self, built: Built, setup: _Setup) -> None:
        self.built, self.setup = built, setup
        self.theta = setup.theta
        self.x: np.ndarray | None = None
        self.direction: np.ndarray | None = None
        self.best = math.inf
        self.has_gradient = True
        self._last: tuple[bytes, tuple[float, np.ndarray, Any, Factor] | None] | None = None
        self.slope: tuple[bytes, float] | None = None
        self._graded: tuple[bytes, float, np.ndarray] | None = None

    def restart(self) -> None:
        self.theta, self.x, self.direction, self.best, self._last = self.setup.theta, None, None, math.inf, None
        self._graded = None

    def trial(self, x: np.ndarray) -> tuple[dict[str, float], float]:
        """The SDs and ρ at x."""
        sds = dict(self.setup.sds, **{g: float(math.exp(v)) for g, v in zip(self.setup.free, x, strict=False)})
        rho = float(x[-1]) if self.setup.coords[-1:] == (RHO,) else self.setup.rho
        return sds, rho

    def problem(self, rho: float) -> Any:
        return with_rho(self.setup.inner, rho) if RHO in self.setup.coords else self.setup.inner

    def _warm(self, x: np.ndarray) -> np.ndarray:
        if self.x is None or self.direction is None:
            return self.theta
        return self.theta + self.direction @ (x - self.x)

    def inner(self, x: np.ndarray) -> tuple[float, np.ndarray, Any, Factor] | None:
        """The inner fit at x; the last one is kept, as the search ends where it last evaluated."""
        key = np.asarray(x, dtype=float).tobytes()
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        got = self._inner_fit(x)
        self._last = (key, got)
        return got

    def _inner_fit(self, x: np.ndarray) -> tuple[float, np.ndarray, Any, Factor] | None:
        (sds, rho), groups = self.trial(x), self.built.groups
        pb = self.problem(rho)
        value, theta, ev, converged, _, f = _laplace_factored(pb, self._warm(x), sds, groups, INNER_TOL)
        if not (converged and math.isfinite(value)) and self.direction is not None:
            value, theta, ev, converged, _, f = _laplace_factored(pb, self.theta, sds, groups, INNER_TOL)
        if not (converged and math.isfinite(value)):
            return None       # a trial far out (the search's first steps can reach the bounds): back off
        return value, theta, ev, f

    def value(self, x: np.ndarray) -> float:
        got = self.inner(x)
        if got is None:
            return FAILED
        if -got[0] < self.best:
            self.theta, self.best = got[1], -got[0]
        return -got[0]

    def _gradient(self, x: np.ndarray, theta: np.ndarray, ev: Any, f: Factor) -> Gradient | None:
        (sds, rho), groups = self.trial(x), self.built.groups
        free = self.setup.free
        if RHO not in self.setup.coords:
            pb = _with_sd(self.setup.inner, sds)
            return laplace_gradient(pb, theta, _precisions(pb, sds, groups), free, f)
        full = _with_sd(self.built.problem, sds)
        prec = _precisions(full, sds, groups)
        at = rho_put_back(full, theta, rho)
        return laplace_gradient_rho(full, at, prec, free, f, evaluate(full, at, prec))

    def value_and_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        key = np.asarray(x, dtype=float).tobytes()
        if self._graded is not None and self._graded[0] == key:
            return self._graded[1], self._graded[2].copy()
        value, grad = self._value_and_gradient(x)
        self._graded = (key, value, grad.copy())
        return value, grad

    def _value_and_gradient(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        got = self.inner(x)
        if got is None:
            return FAILED, np.zeros_like(x)
        value, theta, ev, f = got
        grad = self._gradient(x, theta, ev, f)
        if grad is None:
            self.has_gradient = False
            return -value, np.zeros_like(x)
        if -value < self.best:
            self.theta, self.x, self.direction, self.best = theta, np.array(x, dtype=float), grad.direction, -value
        self.slope = (np.asarray(x, dtype=float).tobytes(), float(grad.value[-1]))
        return -value, -grad.value

    def rho_slope(self, x: np.ndarray) -> float | None:
        """dL/dρ where the search last took the gradient, if that was at x."""
        if RHO not in self.setup.coords or self.slope is None:
            return None
        return self.slope[1] if self.slope[0] == np.asarray(x, dtype=float).tobytes() else None


def _curvature_scale(built: Built, setup: _Setup) -> np.ndarray:
    """About √(−∂²L/∂x²) per coordinate (twice the levels of a random effect, twice the rubric scores, 1/SE for
    ρ): the search runs on x times this, so its first step is about a Newton step instead of a leap to a bound."""
    pb = built.problem
    sizes = [pb.y.size if g == "score" else int(np.sum(pb.random_group == GROUPS.index(g))) for g in setup.free]
    scale = np.sqrt(2.0 * np.maximum(np.array(sizes, dtype=float), 1.0))
    return np.append(scale, setup.rho_scale) if RHO in setup.coords else scale


def _scaled(bounds: list[tuple[float | None, float | None]], scale: np.ndarray) -> list[tuple[Any, Any]]:
    return [(None if lo is None else lo * s, None if hi is None else hi * s)
            for (lo, hi), s in zip(bounds, scale, strict=True)]


def _first_step(with_gradient: Any, y0: np.ndarray, bounds: list[tuple[Any, Any]]) -> np.ndarray:
    """One Newton step with the expected curvature (the scaled objective's is about the identity) before the
    quasi-Newton search: L-BFGS-B's own first step is at most one unit long, one SE, and the start can be
    further off than that. Kept only where it lowers the objective; the search then starts there."""
    f0, g0 = with_gradient(y0)
    if not f0 < FAILED / 2 or not np.any(g0):
        return y0
    lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
    hi = np.array([np.inf if b[1] is None else b[1] for b in bounds])
    y1 = np.clip(y0 - np.clip(g0, -MAX_FIRST_STEP, MAX_FIRST_STEP), lo, hi)
    f1, _ = with_gradient(y1)
    return y1 if f1 < f0 else y0


def _stationary(outer: _Outer, x: np.ndarray, bounds: list[tuple[float | None, float | None]],
                scale: np.ndarray) -> bool:
    """Whether x is a maximum to within STATIONARY of a SE: the scaled gradient, projected on the bounds."""
    value, grad = outer.value_and_gradient(x)
    if not value < FAILED / 2:
        return False
    g = grad / scale
    for i, (lo, hi) in enumerate(bounds):
        if (lo is not None and x[i] <= lo + 1e-9 and g[i] > 0) or (hi is not None and x[i] >= hi - 1e-9 and g[i] < 0):
            g[i] = 0.0
    return float(np.max(np.abs(g), initial=0.0)) <= STATIONARY


def _search(outer: _Outer, x0: np.ndarray, bounds: list[tuple[float | None, float | None]]) -> np.ndarray:
    """L-BFGS-B on the exact gradient; by finite differences where there is none; Nelder-Mead where the
    gradient searches stranded where the inner fit fails."""
    scale = _curvature_scale(outer.built, outer.setup)
    options = {"ftol": 1e-13, "gtol": GTOL}

    def with_gradient(y: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = outer.value_and_gradient(y / scale)
        return value, grad / scale

    y = _first_step(with_gradient, x0 * scale, _scaled(bounds, scale))
    for _ in range(2):        # L-BFGS-B can end short of the maximum after a trial failed; then once more
        res = scipy.optimize.minimize(with_gradient, y, jac=True, method="L-BFGS-B", bounds=_scaled(bounds, scale),
                                      options=options)
        y = res.x
        if not outer.has_gradient or _stationary(outer, res.x / scale, bounds, scale):
            break
    else:
        raise PreferenceInputError(NOT_CONVERGED)
    x = res.x / scale
    if not outer.has_gradient:
        outer.restart()
        res = scipy.optimize.minimize(lambda y: outer.value(y / scale), x0 * scale, method="L-BFGS-B",
                                      bounds=_scaled(bounds, scale), options=options)
        x = res.x / scale
    if not res.fun < FAILED / 2:
        outer.restart()
        res = scipy.optimize.minimize(lambda y: outer.value(y / scale), x0 * scale, method="Nelder-Mead",
                                      bounds=_scaled(bounds, scale),
                                      options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})
        x = res.x / scale
    return np.asarray(x, dtype=float)


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
    rest = total
    for g in built.groups:
        codes = shared[g][coded.score_episode]
        out[g] = math.sqrt(max(_pair_covariance(codes, r), floor))
        rest -= out[g] ** 2 * float(np.mean(codes >= 0))     # an agent alone has no worker effect
    out["score"] = math.sqrt(max(rest, floor))
    return out


def _start_sds(built: Built, fixed_sds: dict[str, float | None], free: tuple[str, ...]) -> dict[str, float]:
    pb = built.problem
    unit = 10.0 if built.units == "points" else 0.5
    sds: dict[str, float] = {g: _given(fixed_sds.get(g), unit) for g in built.groups}
    if pb.y.size:
        sds["score"] = fixed_sds.get("score") or max(float(np.std(pb.y)), 1.0)
        moments = _moment_sds(built, sds)
        sds.update({g: moments[g] for g in free})
    return sds


def _rho_start(built: Built, sds: dict[str, float]) -> tuple[float, float, np.ndarray]:
    """ρ, about 1/SE of it, and the other parameters at the joint maximum with the random effects held near
    zero: a start that is always near (ρ somewhat attenuated by the worker effects left out) and unique. With
    the effects free, the joint fit can land in its second maximum, a large ρ the effects absorb."""
    full, groups = _with_sd(built.problem, sds), built.groups
    held = dict(sds, **{g: START_SD * sds[g] for g in groups})
    prec = _precisions(full, held, groups)
    theta, ev, converged, _ = maximise(full, _start(built), prec, tol=START_TOL)
    col = full.columns[RHO]
    rho, scale = 1.0 / 15.0, 15.0
    if converged and np.all(np.isfinite(theta)) and abs(float(theta[col])) < RHO_BOUND:
        f = factor(ev.neg_hessian, full.diagonal_cols)
        e = np.zeros(full.n_params)
        e[col] = 1.0
        var = float(f.solve(e)[col]) if f.ok else float("nan")
        if math.isfinite(var) and var > 0.0:
            rho, scale = float(theta[col]), 1.0 / math.sqrt(var)
    else:
        theta = _start(built)
    return rho, scale, np.delete(theta, col)


def _setup(built: Built, fixed_sds: dict[str, float | None]) -> _Setup:
    pb = built.problem
    with_scores = ("score",) if pb.y.size else ()
    free = tuple(g for g in built.groups + with_scores if fixed_sds.get(g) is None)
    sds = _start_sds(built, fixed_sds, free)
    if RHO not in pb.columns:
        return _Setup(pb, free, free, sds, 1.0, 1.0, _start(built))
    rho, scale, theta = _rho_start(built, sds)
    return _Setup(held_rho(pb), free, (*free, RHO), sds, rho, scale, theta)


def _bounds(built: Built, setup: _Setup) -> list[tuple[float | None, float | None]]:
    unit = 10.0 if built.units == "points" else 0.5
    sd: tuple[float | None, float | None] = (math.log(SD_BOUNDS[0] * unit), math.log(SD_BOUNDS[1] * unit))
    rho: list[tuple[float | None, float | None]] = [(-RHO_BOUND, RHO_BOUND)] if RHO in setup.coords else []
    return [sd] * len(setup.free) + rho


def fit_core(built: Built, fixed_sds: dict[str, float | None]) -> Core:
    """Maximise the penalised likelihood in the quality terms and the other preference parameters; the variance
    components (the score noise and the free random-effect SDs) and ρ maximise its Laplace approximation."""
    setup = _setup(built, fixed_sds)
    outer = _Outer(built, setup)
    sds, rho, slope = setup.sds, setup.rho, None
    if setup.coords:
        x0 = np.array([math.log(setup.sds[g]) for g in setup.free] + ([setup.rho] if RHO in setup.coords else []))
        x = _search(outer, x0, _bounds(built, setup))
        sds, rho, slope = *outer.trial(x), outer.rho_slope(x)
    value, theta, ev, converged, iterations = _laplace(outer.problem(rho), outer.theta, sds, built.groups)
    if not converged or not np.all(np.isfinite(theta)) or not math.isfinite(value):
        raise PreferenceInputError(NOT_CONVERGED)
    if RHO in setup.coords and abs(rho) >= RHO_BOUND * (1.0 - 1e-6):
        raise PreferenceInputError(f"cannot estimate: one rubric point would be worth {abs(rho):.1f} or more "
                                   "logits in the rankings; the rankings are separated from the scores")
    full = _with_sd(built.problem, sds)
    theta = rho_put_back(full, theta, rho)
    _check_separation(full, theta)
    unit = 10.0 if built.units == "points" else 0.5
    at_bound = tuple(g for g in setup.free if min(abs(math.log(sds[g] / (b * unit))) for b in SD_BOUNDS) < 1e-3)
    prec = _precisions(full, sds, built.groups)
    u = theta[full.random_cols]
    loglik = evaluate(full, theta, prec, hessian=False).value + 0.5 * float(prec @ (u * u))
    return Core(full, theta, sds, setup.free, at_bound, loglik, value, converged, iterations, rho_slope=slope)
