"""Bench of the synergy model (rating/synergy.py) on simulated studies with known truth. Prints, never asserts.

    .venv/bin/python bench/synergy.py [--reps 200] [--reps-large 20] [--only coverage,time,lme4]

* coverage: the paper's design (100 workers, 5 tasks each, 2 alone, 30 tasks, 5 agents, solo first) and 10×
  (1 000 workers, 300 tasks), then counterbalanced order with a planted position effect: coverage of the true
  agent boosts, of their pairwise differences and of the workers' boosts by the 95 % intervals, the level bias
  of the boosts, the size of the θ = κ test at 5 % when θ = κ and its power when corr(θ, κ) = 0.6.
* time: the fit at 10⁵ episodes (20 000 workers, 300 tasks), CPU and wall, with and without the θ = κ test.
* lme4: CPU time (time.process_time) of the fit against lme4's user + system time measured inside R
  (system.time around lmer), same model and episodes, 10⁴ episodes (2 000 workers, 100 tasks).

Each line prints the figure, the target and the load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rating.synergy import synergy_fit  # noqa: E402
from rating.synergy_sim import StudyDesign, Truth, simulate  # noqa: E402

PAPER = StudyDesign(workers=100, tasks_per_worker=5, solo_per_worker=2, n_tasks=30, n_agents=5, order="solo_first")
LARGE = StudyDesign(workers=1000, tasks_per_worker=5, solo_per_worker=2, n_tasks=300, n_agents=5, order="solo_first")
TRUTH = Truth()
NULL = Truth(sd_kappa=TRUTH.sd_theta, rho=1.0)                     # θ_h = κ_h exactly
LEARNING = (2.0, 3.0, 4.0, 4.0)                                    # positions 2..5 against position 1


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _covered(row: dict, value: float) -> bool:
    return row["lower"] <= value <= row["upper"]


def _replicate(design: StudyDesign, truth: Truth, rng: np.random.Generator) -> dict[str, list]:
    sim = simulate(design, truth, rng)
    fit = synergy_fit(sim.data, folds=0)
    labels = sim.data.arm_labels[1:]
    true = dict(zip(labels, truth.boosts, strict=True))
    out: dict[str, list] = {"boost": [], "pair": [], "worker": [], "bias": [], "se": [], "pos": []}
    for label in labels:
        out["boost"].append(_covered(fit.boosts[label], true[label]))
        out["bias"].append(fit.boosts[label]["estimate"] - true[label])
        out["se"].append(fit.boosts[label]["se"])
    for row in fit.pairwise:
        out["pair"].append(_covered(row, true[row["agent"]] - true[row["versus"]]))
    for w in fit.workers:
        if w["boost"] is not None:
            out["worker"].append(_covered(w["boost"], sim.kappa[w["human"]] - sim.theta[w["human"]]))
    for k, value in enumerate(truth.positions):
        if str(k + 2) in fit.positions:
            out["pos"].append(_covered(fit.positions[str(k + 2)], value))
    out["reject"] = [fit.theta_kappa_test["p_value"] < 0.05]
    return out


def _scenario(name: str, design: StudyDesign, truth: Truth, reps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    acc: dict[str, list] = {}
    t0 = time.perf_counter()
    for _ in range(reps):
        for key, values in _replicate(design, truth, rng).items():
            acc.setdefault(key, []).extend(values)
    bias = np.array(acc["bias"]).reshape(reps, -1).mean(axis=0)
    print(f"[{name}] {reps} replicates of {design.workers * design.tasks_per_worker} episodes "
          f"({time.perf_counter() - t0:.0f} s wall, {load()})")
    print(f"  agent boosts covered by 95 % intervals: {np.mean(acc['boost']):.3f} (target >= 0.93)")
    print(f"  pairwise boost differences covered:      {np.mean(acc['pair']):.3f} (target >= 0.93)")
    print(f"  worker boosts covered (prediction):      {np.mean(acc['worker']):.3f} (target >= 0.90)")
    mc_se = float(np.mean(acc["se"])) / np.sqrt(reps)
    print(f"  level bias of the boosts, worst agent:   {np.max(np.abs(bias)):.3f} points (target < 0.5; "
          f"Monte Carlo SE of each agent's mean {mc_se:.3f})")
    if acc["pos"]:
        print(f"  position effects covered:                {np.mean(acc['pos']):.3f} (target >= 0.93)")
    label = "size when theta = kappa" if truth.rho == 1.0 and truth.sd_kappa == truth.sd_theta else "power"
    print(f"  theta = kappa test, {label} at 5 %:     {np.mean(acc['reject']):.3f}"
          + (" (target 0.03-0.07)" if label.startswith("size") else f" (corr {truth.rho})"))


def coverage(reps: int, reps_large: int) -> None:
    _scenario("paper design, solo first", PAPER, TRUTH, reps, 1)
    _scenario("paper design, solo first, theta = kappa", PAPER, NULL, reps, 2)
    _scenario("paper design, counterbalanced, position effect", _with(PAPER, "counterbalanced"),
              Truth(positions=LEARNING), reps, 3)
    _scenario("paper design, counterbalanced, position effect, theta = kappa", _with(PAPER, "counterbalanced"),
              Truth(sd_kappa=TRUTH.sd_theta, rho=1.0, positions=LEARNING), reps, 4)
    _scenario("10x design, solo first", LARGE, TRUTH, reps_large, 5)
    _scenario("10x design, counterbalanced, position effect", _with(LARGE, "counterbalanced"),
              Truth(positions=LEARNING), reps_large, 6)


def _with(design: StudyDesign, order: str) -> StudyDesign:
    return StudyDesign(design.workers, design.tasks_per_worker, design.solo_per_worker, design.n_tasks,
                       design.n_agents, order)


def timing() -> None:
    design = StudyDesign(workers=20_000, tasks_per_worker=5, solo_per_worker=2, n_tasks=300, n_agents=5,
                         order="counterbalanced")
    data = simulate(design, Truth(positions=LEARNING), np.random.default_rng(7)).data
    for name, kwargs in (("fit", {"test": False}), ("fit + theta = kappa test", {"folds": 0}),
                         ("fit + test + 5-fold held-out", {})):
        cpu, wall = time.process_time(), time.perf_counter()
        synergy_fit(data, **kwargs)
        print(f"[time] {name} at {data.n} episodes (20 000 workers, 300 tasks): "
              f"{time.process_time() - cpu:.2f} s CPU, {time.perf_counter() - wall:.2f} s wall "
              f"(target <= 5 s for the fit; {load()})")


def against_lme4() -> None:
    from tests.rating.synergy_lme4 import lme4_available, run_lme4

    if not lme4_available():
        print("[lme4] Rscript with lme4 is not installed: skipped")
        return
    design = StudyDesign(workers=2_000, tasks_per_worker=5, solo_per_worker=2, n_tasks=100, n_agents=5,
                         order="counterbalanced")
    data = simulate(design, Truth(positions=LEARNING), np.random.default_rng(8)).data
    synergy_fit(simulate(PAPER, TRUTH, np.random.default_rng(0)).data, test=False)   # warm imports and caches
    cpu = time.process_time()
    fit = synergy_fit(data, test=False)
    ours = time.process_time() - cpu
    ref = run_lme4(data, tight=False)
    print(f"[lme4] {data.n} episodes: synergy fit {ours:.2f} s CPU, lme4 (default control) {ref['cpu']:.2f} s CPU "
          f"(user + system inside R): {ref['cpu'] / ours:.1f}x (target >= 10x; {load()})")
    print(f"[lme4] REML criterion {fit.reml_criterion:.6f} vs lme4 {ref['reml']:.6f} "
          f"(difference {fit.reml_criterion - ref['reml']:+.2e})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--reps-large", type=int, default=20)
    parser.add_argument("--only", default="coverage,time,lme4")
    args = parser.parse_args()
    only = set(args.only.split(","))
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, {load()}")
    if "time" in only:
        timing()
    if "lme4" in only:
        against_lme4()
    if "coverage" in only:
        coverage(args.reps, args.reps_large)


if __name__ == "__main__":
    main()
