"""Per expert and per judge: each expert's own position bias and length preference, and how often preferences
agree with rubric scores (the higher-scored deliverable preferred), per expert and per grader of the rubric.

An expert's own effects are fitted given the joint fit's qualities, scale and tie term (a small Newton on one
or two parameters): the intervals leave out the uncertainty of the qualities, which the many other rankings
pin down far better than one expert's few. Agreement intervals are cluster-robust by ranking, because the
pairs broken out of one ranking are not independent. Pure numpy/scipy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rating.preferences_data import Coded
from rating.preferences_lik import davidson, pair_terms
from rating.preferences_report import Estimates

__all__ = ["agreement_by_expert", "agreement_by_grader", "expert_effects"]

# An expert's effect beyond this many log-odds means their choices are perfectly predicted (separation).
SEPARATED = 10.0


def _proportion(hit: np.ndarray, cluster: np.ndarray, z: float) -> dict[str, Any]:
    """Share of hits with a cluster-robust (ratio estimator) normal interval clipped to 0-1."""
    n = hit.size
    p = float(hit.mean())
    _, inv = np.unique(cluster, return_inverse=True)
    a = np.bincount(inv.ravel(), weights=hit.astype(float))
    m = np.bincount(inv.ravel())
    k = a.size
    var = float(np.sum((a - p * m) ** 2)) / n ** 2 * (k / (k - 1)) if k > 1 else float("nan")
    se = math.sqrt(var) if math.isfinite(var) else float("nan")
    out = {"agreement": p, "pairs": n, "rankings": k}
    if math.isfinite(se):
        out.update({"se": se, "lower": max(0.0, p - z * se), "upper": min(1.0, p + z * se)})
    else:
        out["note"] = "one ranking only: no interval"
    return out


def _agreement(coded: Coded, mask: np.ndarray, se: np.ndarray, sf: np.ndarray, z: float) -> dict[str, Any]:
    """Among ``mask`` pairs: strict preferences between deliverables with different scores (se, sf: NaN =
    unscored), and the share where the higher-scored one was preferred."""
    scored = mask & np.isfinite(se) & np.isfinite(sf)
    strict = scored & (coded.outcome != 0) & (se != sf)
    counts = {"pairs_with_scores": int(scored.sum()), "tied_preferences": int(np.sum(scored & (coded.outcome == 0))),
              "tied_scores": int(np.sum(scored & (coded.outcome != 0) & (se == sf)))}
    if not strict.any():
        return counts | {"not_identifiable": "no strict preference between two deliverables with different "
                                             "rubric scores: agreement cannot be estimated"}
    hit = np.sign(se[strict] - sf[strict]) == coded.outcome[strict]
    return counts | _proportion(hit, coded.cluster[strict], z)


def _mean_scores(coded: Coded, rows: np.ndarray) -> np.ndarray:
    n = coded.cell.size
    total = np.bincount(coded.score_episode[rows], weights=coded.score[rows], minlength=n)
    count = np.bincount(coded.score_episode[rows], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def agreement_by_expert(coded: Coded, z: float) -> list[dict[str, Any]]:
    """Per comparing expert: does their preference follow the mean rubric score over all graders?"""
    mean = _mean_scores(coded, np.arange(coded.score.size))
    out = []
    for x, expert in enumerate(coded.experts):
        out.append({"expert": expert} | _agreement(coded, coded.pair_expert == x, mean[coded.pe], mean[coded.pf], z))
    for expert, reason in coded.excluded_experts.items():
        out.append({"expert": expert, "not_identifiable": reason})
    return out


def agreement_by_grader(coded: Coded, z: float) -> list[dict[str, Any]]:
    """Per rubric grader (judge or expert): are the deliverables it scored higher the ones experts preferred?"""
    out = []
    everyone = np.ones(coded.outcome.size, dtype=bool)
    for g, grader in enumerate(coded.graders):
        mine = _mean_scores(coded, np.flatnonzero(coded.score_grader == g))
        out.append({"grader": grader} | _agreement(coded, everyone, mine[coded.pe], mine[coded.pf], z))
    return out


def _newton(offset: np.ndarray, x: np.ndarray, outcome: np.ndarray, tie: float | None,
            cluster: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Maximise Σ ℓ(offset + x β) over β; return β, its cluster-robust covariance and whether it converged."""
    beta = np.zeros(x.shape[1])
    for _ in range(100):
        dv = davidson(offset + x @ beta, tie, outcome)
        g, h = x.T @ dv.lz, (x * -dv.lzz[:, None]).T @ x
        try:
            step = np.linalg.solve(h, g)
        except np.linalg.LinAlgError:
            return beta, np.full((x.shape[1],) * 2, np.nan), False
        beta = beta + step
        if np.max(np.abs(beta)) > SEPARATED:
            return beta, np.full((x.shape[1],) * 2, np.nan), False
        if np.max(np.abs(step)) < 1e-10:
            break
    dv = davidson(offset + x @ beta, tie, outcome)
    h_inv = np.linalg.inv((x * -dv.lzz[:, None]).T @ x)
    _, inv = np.unique(cluster, return_inverse=True)
    sums = np.zeros((int(inv.max()) + 1, x.shape[1]))
    np.add.at(sums, inv.ravel(), x * dv.lz[:, None])
    return beta, h_inv @ (sums.T @ sums) @ h_inv, True


def _one_expert(est: Estimates, mask: np.ndarray, z_off: np.ndarray, tie: float | None) -> dict[str, Any]:
    coded = est.built.coded
    names, cols = [], []
    for name, values in (("position_first", coded.first[mask]), ("length_per_doubling", coded.log_length[mask])):
        if np.any(values != 0) and np.linalg.matrix_rank(np.column_stack([*cols, values])) > len(cols):
            names.append(name)
            cols.append(values)
    out: dict[str, Any] = {"pairs": int(mask.sum()), "ties": int(np.sum(coded.outcome[mask] == 0))}
    for name in ("position_first", "length_per_doubling"):
        if name not in names:
            out[name] = {"not_identifiable": "the expert's pairs do not vary in this (all shown in one order, "
                                             "or lengths not given or equal)"}
    if not names:
        return out
    beta, cov, ok = _newton(z_off[mask], np.column_stack(cols), coded.outcome[mask], tie, coded.cluster[mask])
    for k, name in enumerate(names):
        if not ok:
            out[name] = {"not_identifiable": "the expert's choices are perfectly predicted by it (or by the "
                                             "qualities): the estimate is infinite"}
        else:
            se = math.sqrt(max(cov[k, k], 0.0))
            out[name] = est.interval(float(beta[k]), se)
    return out


def expert_effects(est: Estimates) -> list[dict[str, Any]]:
    """Each expert's own position bias and length preference (log-odds), given the joint fit."""
    pb, coded, theta = est.built.problem, est.built.coded, est.core.theta
    if not coded.outcome.size:
        return []
    _, _, dq = pair_terms(pb, theta)
    z_off = pb.value(theta, "rho") * dq
    tie = pb.value(theta, "tie") if "tie" in pb.columns else None
    return [{"expert": expert} | _one_expert(est, coded.pair_expert == x, z_off, tie)
            for x, expert in enumerate(coded.experts)]
