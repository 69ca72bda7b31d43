"""Bench of the ToM analysis (rating/tom_*.py) on simulated studies with known truth. Prints, never asserts.

    .venv/bin/python bench/theory_of_mind.py [--reps 1000] [--seed 0] [--only paper,missing]

Each replicate simulates a study (rating/tom_sim.py: ToM raises κ by a known amount per ToM point and θ not at
all, two noisy judges code the with-agent prompts 0–5) and fits:

* the Eq. 3 moderation with the calibrated leave-one-out trait (the default), with the raw leave-one-out mean and
  with the calibrated mean of all the worker's codes (constant within the worker, own code included):
  coverage of the true δ_κ and of δ_θ = 0 by the 95 % intervals, the false-positive rate on θ at 5 % and the
  power on κ;
* the moderation with the within-worker deviation (no true within effect on scores): its rejection rate at 5 %
  with the Mundlak split (the default) and with the paper's leave-one-out pair;
* ICC(2,1) and ICC(2,k) of the two judges against the loop formula written below (largest difference);
* the response-quality regression (trait, deviation, effort, errors clustered by worker): mean estimates.

Every line prints the figure, the target, the Monte-Carlo SE where it applies, and the load average.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import f as f_dist

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rating.synergy_sim import StudyDesign  # noqa: E402
from rating.tom_moderation import TomModerationData, tom_moderation  # noqa: E402
from rating.tom_quality import QualityData, tom_quality  # noqa: E402
from rating.tom_reliability import RatingTable, icc_agreement  # noqa: E402
from rating.tom_sim import TomStudy, TomTruth, simulate_tom  # noqa: E402

PAPER = StudyDesign(workers=100, tasks_per_worker=5, solo_per_worker=2, n_tasks=30, n_agents=5, order="solo_first")
MORE_AGENT = StudyDesign(workers=100, tasks_per_worker=6, solo_per_worker=2, n_tasks=30, n_agents=5,
                         order="counterbalanced")
SCENARIOS = {
    "paper": (PAPER, TomTruth(kappa_per_tom=3.0, theta_per_tom=0.0)),
    "missing": (MORE_AGENT, TomTruth(kappa_per_tom=3.0, theta_per_tom=0.0, uncoded_share=0.25, sd_judge=0.8)),
}


TRAITS = {"calibrated": "calibrated leave-one-out trait (default)", "loo_mean": "raw leave-one-out mean",
          "mundlak_trait": "calibrated worker mean (own code included)"}


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.1f} {five:.1f} {fifteen:.1f} ({os.cpu_count()} cores)"


def icc_by_loops(x: list[list[float]], level: float = 0.95) -> tuple[float, float, float, float]:
    """Independent ICC(2,1), ICC(2,k) and McGraw & Wong's ICC(A,1) interval from sums written out by loops."""
    n, k = len(x), len(x[0])
    grand = sum(sum(row) for row in x) / (n * k)
    rows = [sum(row) / k for row in x]
    cols = [sum(x[i][j] for i in range(n)) / n for j in range(k)]
    msr = sum(k * (m - grand) ** 2 for m in rows) / (n - 1)
    msc = sum(n * (m - grand) ** 2 for m in cols) / (k - 1)
    mse = sum((x[i][j] - rows[i] - cols[j] + grand) ** 2 for i in range(n) for j in range(k)) / ((n - 1) * (k - 1))
    single = (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n)
    average = (msr - mse) / (msr + (msc - mse) / n)
    a, b = k * single / (n * (1 - single)), 1 + k * single * (n - 1) / (n * (1 - single))
    v = (a * msc + b * mse) ** 2 / ((a * msc) ** 2 / (k - 1) + (b * mse) ** 2 / ((n - 1) * (k - 1)))
    fs, fl = f_dist.ppf(0.5 + level / 2, n - 1, v), f_dist.ppf(0.5 + level / 2, v, n - 1)
    low = n * (msr - fs * mse) / (fs * (k * msc + (k * n - k - n) * mse) + n * msr)
    high = n * (fl * msr - mse) / (k * msc + (k * n - k - n) * mse + n * fl * msr)
    return single, average, low, high


def _icc_diff(study: TomStudy) -> tuple[float, float, float]:
    table = RatingTable(items=tuple(map(str, range(study.data.n))), raters=("a", "b"), scores=study.codes)
    res = icc_agreement(table)
    complete = study.codes[~np.isnan(study.codes).any(axis=1)]
    ref = icc_by_loops(complete.tolist())
    ours = (res.icc_single, res.icc_average, *res.icc_single_interval)
    return max(abs(a - b) for a, b in zip(ours, ref, strict=True)), res.icc_single, res.icc_average


def _replicate(study: TomStudy, truth: TomTruth, acc: dict[str, list], timing: list[float]) -> None:
    data = TomModerationData(study.data, study.tom)
    for kind in TRAITS:
        t0 = time.perf_counter()
        if kind == "mundlak_trait":
            fit = tom_moderation(data, decomposition="mundlak")
        else:
            fit = tom_moderation(data, trait_kind=kind)
        timing.append(time.perf_counter() - t0)
        acc[f"{kind}:kappa_cover"].append(fit.kappa["lower"] <= truth.kappa_per_tom <= fit.kappa["upper"])
        acc[f"{kind}:theta_cover"].append(fit.theta["lower"] <= truth.theta_per_tom <= fit.theta["upper"])
        acc[f"{kind}:kappa_power"].append(fit.kappa["lower"] > 0)
        acc[f"{kind}:kappa_est"].append(fit.kappa["estimate"])
        acc[f"{kind}:theta_est"].append(fit.theta["estimate"])
    for decomposition in ("mundlak", "loo"):
        fit = tom_moderation(data, within=True, decomposition=decomposition)
        acc[f"{decomposition}:dev_reject"].append(fit.deviation["p_value"] < 0.05)
        acc[f"{decomposition}:dev_est"].append(fit.deviation["estimate"])
    diff, single, average = _icc_diff(study)
    acc["icc_diff"].append(diff)
    acc["icc_single"].append(single)
    acc["icc_average"].append(average)
    team = study.data.team
    q = tom_quality(QualityData(study.quality[team], study.data.human[team], study.tom[team], study.turns[team],
                                study.characters[team], study.edit_ratio[team]))
    acc["q_trait"].append(q.coefficients["tom_trait"]["estimate"])
    acc["q_dev"].append(q.coefficients["tom_deviation"]["estimate"])


def _rate(values: list[bool]) -> str:
    p = float(np.mean(values))
    return f"{p:.3f} (MC SE {math.sqrt(p * (1 - p) / len(values)):.3f})"


def _report(name: str, design: StudyDesign, truth: TomTruth, acc: dict[str, list], timing: list[float],
            reps: int, wall: float) -> None:
    n = design.workers * design.tasks_per_worker
    print(f"[{name}] {reps} replicates, {design.workers} workers x {design.tasks_per_worker} tasks "
          f"({design.solo_per_worker} alone, {design.order}), {n} episodes; true delta_kappa "
          f"{truth.kappa_per_tom} and delta_theta {truth.theta_per_tom} points per ToM point; judge SD "
          f"{truth.sd_judge}, uncoded {truth.uncoded_share:.0%}; {wall:.0f} s wall, {load()}")
    for kind, label in TRAITS.items():
        print(f"  {label}: kappa covered {_rate(acc[f'{kind}:kappa_cover'])} (target >= 0.93); "
              f"theta false positives at 5 % {_rate([not c for c in acc[f'{kind}:theta_cover']])} "
              f"(target 0.03-0.07); power on kappa {_rate(acc[f'{kind}:kappa_power'])}; mean delta_kappa "
              f"{np.mean(acc[f'{kind}:kappa_est']):.2f} (truth {truth.kappa_per_tom}), mean delta_theta "
              f"{np.mean(acc[f'{kind}:theta_est']):+.2f}")
    for dec, label in (("mundlak", "Mundlak split (default)"), ("loo", "paper's leave-one-out pair")):
        print(f"  within-worker deviation, no true effect, {label}: rejected at 5 % {_rate(acc[f'{dec}:dev_reject'])}"
              f" (target 0.03-0.07), mean {np.mean(acc[f'{dec}:dev_est']):+.2f}")
    print(f"  ICC vs loop formula: largest |difference| {max(acc['icc_diff']):.2e} (target <= 1e-9); mean "
          f"ICC(2,1) {np.mean(acc['icc_single']):.3f}, ICC(2,k) {np.mean(acc['icc_average']):.3f}")
    print(f"  response quality (per code point, true trait {truth.quality_trait}, deviation "
          f"{truth.quality_deviation} per latent point; codes rounded): mean trait {np.mean(acc['q_trait']):.3f}, "
          f"deviation {np.mean(acc['q_dev']):.3f}")
    t = np.array(timing)
    print(f"  moderation fit time: median {np.median(t) * 1000:.0f} ms, 95th percentile "
          f"{np.percentile(t, 95) * 1000:.0f} ms (target < 1 s at this size), {load()}")


def run(name: str, reps: int, seed: int) -> None:
    design, truth = SCENARIOS[name]
    rng = np.random.default_rng(seed)
    acc: dict[str, list] = {key: [] for key in (
        *(f"{k}:{m}" for k in TRAITS for m in ("kappa_cover", "theta_cover", "kappa_power",
                                                                  "kappa_est", "theta_est")),
        *(f"{d}:{m}" for d in ("mundlak", "loo") for m in ("dev_reject", "dev_est")),
        "icc_diff", "icc_single", "icc_average", "q_trait", "q_dev")}
    timing: list[float] = []
    t0 = time.perf_counter()
    for _ in range(reps):
        _replicate(simulate_tom(design, truth, rng), truth, acc, timing)
    _report(name, design, truth, acc, timing, reps, time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=",".join(SCENARIOS))
    args = parser.parse_args()
    for k, name in enumerate(args.only.split(",")):
        run(name, args.reps, args.seed + k)


if __name__ == "__main__":
    main()
