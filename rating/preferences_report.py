"""What the preference fit reports: each arm's level, the arms' quality differences, win / tie rates of every
arm against every other, and the expert effects, each with its interval or, where the data do not identify
it, no number and the reason. Pure numpy/scipy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import expit, logit
from scipy.stats import norm

from rating.preferences_data import WORKER_ALONE
from rating.preferences_fit import Built, Core
from rating.preferences_lik import davidson

__all__ = ["Estimates", "cell_levels", "differences", "effects", "win_rates", "z_value"]


@dataclass(frozen=True, eq=False)
class Estimates:
    """The reported parameters' values and covariance; ``index`` maps a theta column to its row in ``cov``."""

    built: Built
    core: Core
    cov: np.ndarray
    index: dict[int, int]
    z: float

    def gradient_value(self, weights: dict[int, float]) -> tuple[float, float]:
        """Estimate and SE of Σ w_j θ_j over theta columns j."""
        g = np.zeros(self.cov.shape[0])
        est = 0.0
        for col, w in weights.items():
            g[self.index[col]] += w
            est += w * float(self.core.theta[col])
        return est, float(math.sqrt(max(float(g @ self.cov @ g), 0.0)))

    def column(self, name: str) -> int | None:
        return self.built.problem.columns.get(name)

    def interval(self, est: float, se: float) -> dict[str, float]:
        return {"estimate": est, "se": se, "lower": est - self.z * se, "upper": est + self.z * se}


def _cell_weights(est: Estimates, c: int, sign: float = 1.0) -> dict[int, float]:
    col = int(est.built.cell_col[c])
    return {} if col < 0 else {col: sign}


def _linked(built: Built, i: int, j: int) -> bool:
    """A contrast is identified when both arms are in one comparison component, or both components are scored
    (the rubric scores then put both on the points scale)."""
    ci, cj = built.component[i], built.component[j]
    return bool(ci == cj or (built.scored_component[ci] and built.scored_component[cj]))


def _contrast(est: Estimates, i: int, j: int) -> dict[int, float]:
    w = _cell_weights(est, i)
    for col, v in _cell_weights(est, j, -1.0).items():
        w[col] = w.get(col, 0.0) + v
    return w


def cell_levels(est: Estimates) -> list[dict[str, Any]]:
    """Each arm's quality for an average worker and task: rubric points where the arm's group is scored."""
    built, coded = est.built, est.built.coded
    n_scores = np.bincount(coded.cell[coded.score_episode], minlength=len(coded.cells))
    compared = np.bincount(np.concatenate([coded.cell[coded.pe], coded.cell[coded.pf]]), minlength=len(coded.cells))
    out = []
    for c, label in enumerate(coded.cells):
        row: dict[str, Any] = {"cell": label, "n_scores": int(n_scores[c]), "n_pairs": int(compared[c])}
        if built.scored_component[built.component[c]]:
            row.update(est.interval(*est.gradient_value(_cell_weights(est, c))))
        else:
            row["not_identifiable"] = ("no arm it is compared with has a rubric score: only its differences with "
                                       "those arms are known, not its level")
        out.append(row)
    return out


def _orient(cells: list[str], i: int, j: int) -> tuple[int, int]:
    """Rows read "arm against the worker alone" where the worker alone is one side."""
    return (j, i) if cells[i] == WORKER_ALONE else (i, j)


def differences(est: Estimates) -> list[dict[str, Any]]:
    """Quality differences of every pair of arms (points, or logits without scores)."""
    cells = est.built.coded.cells
    out = []
    for i in range(len(cells)):
        for j in range(i + 1, len(cells)):
            a, b = _orient(cells, i, j)
            row: dict[str, Any] = {"cell": cells[a], "versus": cells[b], "units": est.built.units}
            if _linked(est.built, a, b):
                row.update(est.interval(*est.gradient_value(_contrast(est, a, b))))
            else:
                row["not_identifiable"] = ("no chain of comparisons or rubric scores links these arms: the "
                                           "comparison graph is disconnected between them")
            out.append(row)
    return out


def _probabilities(est: Estimates, a: int, b: int) -> dict[str, Any]:
    """Win / tie / loss of a against b at no position or length advantage, with delta-method intervals on the
    logit of each probability (so they stay within 0-1)."""
    pb, theta = est.built.problem, est.core.theta
    diff_w = _contrast(est, a, b)
    dq = sum(w * float(theta[c]) for c, w in diff_w.items())
    rho = pb.value(theta, "rho")
    tie_col = est.column("tie")
    tie = float(theta[tie_col]) if tie_col is not None else None
    z = np.array([rho * dq])
    dv = davidson(z, tie, np.zeros(1, dtype=np.int64))
    a_z = float(dv.p_win[0] - dv.p_loss[0]) / 2.0      # ∂ log D / ∂z
    b_k = float(dv.p_tie[0])                           # ∂ log D / ∂ log ν
    out: dict[str, Any] = {}
    for name, p, dz, dk in (("win", dv.p_win[0], 0.5 - a_z, -b_k), ("tie", dv.p_tie[0], -a_z, 1.0 - b_k),
                            ("loss", dv.p_loss[0], -0.5 - a_z, -b_k)):
        p = float(p)
        if name == "tie" and tie is None:
            out[name] = {"estimate": 0.0, "note": "no tie was observed: the model has no ties"}
            continue
        weights = {c: w * rho * dz for c, w in diff_w.items()}     # d log p / d theta
        rho_col = est.column("rho")
        if rho_col is not None:
            weights[rho_col] = dq * dz
        if tie_col is not None:
            weights[tie_col] = dk
        _, se = est.gradient_value(weights)
        se_logit = se / (1.0 - p) if 0 < p < 1 else float("inf")
        centre = float(logit(p)) if 0 < p < 1 else float("nan")
        out[name] = {"estimate": p, "lower": float(expit(centre - est.z * se_logit)),
                     "upper": float(expit(centre + est.z * se_logit))}
    return out


def _observed(est: Estimates, a: int, b: int) -> dict[str, int]:
    coded = est.built.coded
    ce, cf = coded.cell[coded.pe], coded.cell[coded.pf]
    fwd, back = (ce == a) & (cf == b), (ce == b) & (cf == a)
    o = coded.outcome
    return {"wins": int(np.sum(fwd & (o > 0)) + np.sum(back & (o < 0))), "ties": int(np.sum((fwd | back) & (o == 0))),
            "losses": int(np.sum(fwd & (o < 0)) + np.sum(back & (o > 0)))}


def win_rates(est: Estimates) -> list[dict[str, Any]]:
    """Model win / tie / loss rates of every arm against every other, beside the raw counts of ranked pairs."""
    cells = est.built.coded.cells
    out = []
    for i in range(len(cells)):
        for j in range(i + 1, len(cells)):
            a, b = _orient(cells, i, j)
            row: dict[str, Any] = {"cell": cells[a], "versus": cells[b], "observed": _observed(est, a, b)}
            if _linked(est.built, a, b):
                row.update(_probabilities(est, a, b))
            else:
                row["not_identifiable"] = ("no chain of comparisons or rubric scores links these arms: the "
                                           "comparison graph is disconnected between them")
            out.append(row)
    return out


def _exp(x: float) -> float:
    """e^x, infinite rather than an overflow (a bound of a very wide interval)."""
    return math.exp(x) if x < 700.0 else math.inf


def _effect(est: Estimates, name: str, meaning: str) -> dict[str, Any] | None:
    col = est.column(name)
    if col is None:
        return None
    row = est.interval(*est.gradient_value({col: 1.0}))
    row.update({"odds_ratio": _exp(row["estimate"]), "odds_ratio_lower": _exp(row["lower"]),
                "odds_ratio_upper": _exp(row["upper"]), "meaning": meaning})
    rho_col = est.column("rho")
    if rho_col is not None and est.core.theta[rho_col] > 0:     # the same effect in rubric points
        rho = float(est.core.theta[rho_col])
        value = row["estimate"] / rho
        _, se = est.gradient_value({col: 1.0 / rho, rho_col: -row["estimate"] / rho ** 2})
        row["points"] = est.interval(value, se)
    return row


def effects(est: Estimates) -> dict[str, Any]:
    """Position bias, length preference, tie propensity and the scale linking points to preferences."""
    out: dict[str, Any] = {
        "position_first": _effect(est, "first", "log-odds of winning added by being shown first"),
        "length_per_doubling": _effect(est, "length", "log-odds of winning added by being twice as long"),
    }
    tie_col, rho_col = est.column("tie"), est.column("rho")
    if tie_col is not None:
        row = est.interval(*est.gradient_value({tie_col: 1.0}))
        out["tie"] = {"log_nu": row, "nu": math.exp(row["estimate"]),
                      "tie_rate_at_equal_quality": math.exp(row["estimate"]) / (2.0 + math.exp(row["estimate"]))}
    if rho_col is not None:
        rho = est.interval(*est.gradient_value({rho_col: 1.0}))
        out["scale"] = {"logits_per_point": rho, "meaning": "how many log-odds one rubric point is worth"}
        if rho["estimate"] > 0:
            out["scale"]["points_per_logit"] = 1.0 / rho["estimate"]
    return out


def z_value(level: float) -> float:
    return float(norm.ppf(0.5 + level / 2.0))
