"""Bench of the synergy model (rating/synergy.py) on simulated studies with known truth. Prints, never asserts.

    .venv/bin/python bench/synergy.py [--reps 200] [--reps-large 20] [--only coverage,time,lme4]
    .venv/bin/python bench/synergy.py --only large --reps-large 200    # the 10x rows alone, more replicates
    .venv/bin/python bench/synergy.py --only size --reps 1000          # the theta = kappa test's size alone

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

from rating.synergy import synergy_fit, theta_kappa_lr  # noqa: E402
from rating.synergy_data import build_design  # noqa: E402
from rating.synergy_reml import fit_reml  # noqa: E402
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


def _replicate(design: StudyDesign, truth: Truth, rng: np.random.Generator, by_agent: bool) -> dict[str, list]:
    sim = simulate(design, truth, rng)
    fit = synergy_fit(sim.data, folds=0, by_agent=by_agent)
    labels = sim.data.arm_labels[1:]
    true = dict(zip(labels, truth.boosts, strict=True))
    out: dict[str, list] = {"boost": [], "pair": [], "worker": [], "bias": [], "se": [], "pos": [], "agent_slope": []}
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
    slope = truth.rho * truth.sd_kappa / truth.sd_theta - 1.0
    out["slope_given"] = [fit.ability_slope is not None]
    if fit.ability_slope is not None:
        out["slope"] = [_covered(fit.ability_slope["boost_per_point"], slope)]
    for row in (fit.agent_slopes or {}).get("agents", {}).values():
        if row["slope"] is not None:
            out["agent_slope"].append(_covered(row["slope"], slope))
    common = (fit.agent_slopes or {}).get("common_slope_test")
    if common is not None:
        out["common_reject"] = [common["p_value"] < 0.05]
    return out


def _mc(values: list, reps: int) -> str:
    """Mean and its Monte Carlo SE over replicates (a replicate's values are averaged first: they are correlated)."""
    per_rep = np.array(values, dtype=float).reshape(reps, -1).mean(axis=1)
    return f"{per_rep.mean():.3f} (MC SE {per_rep.std(ddof=1) / np.sqrt(reps):.3f})"


def _scenario(name: str, design: StudyDesign, truth: Truth, reps: int, seed: int, by_agent: bool = True) -> None:
    rng = np.random.default_rng(seed)
    acc: dict[str, list] = {}
    t0 = time.perf_counter()
    for _ in range(reps):
        for key, values in _replicate(design, truth, rng, by_agent).items():
            acc.setdefault(key, []).extend(values)
    bias = np.array(acc["bias"]).reshape(reps, -1).mean(axis=0)
    print(f"[{name}] {reps} replicates of {design.workers * design.tasks_per_worker} episodes "
          f"({time.perf_counter() - t0:.0f} s wall, {load()})")
    print(f"  agent boosts covered by 95 % intervals: {_mc(acc['boost'], reps)} (target >= 0.93)")
    print(f"  pairwise boost differences covered:      {_mc(acc['pair'], reps)} (target >= 0.93)")
    print(f"  worker boosts covered (prediction):      {np.mean(acc['worker']):.3f} (target >= 0.90)")
    mc_se = float(np.mean(acc["se"])) / np.sqrt(reps)
    print(f"  level bias of the boosts, worst agent:   {np.max(np.abs(bias)):.3f} points (target < 0.5; "
          f"Monte Carlo SE of each agent's mean {mc_se:.3f})")
    if acc["pos"]:
        print(f"  position effects covered:                {_mc(acc['pos'], reps)} (target >= 0.93)")
    print(f"  ability slope of the boost given:       {np.mean(acc['slope_given']):.3f} of replicates; covered "
          + (f"{np.mean(acc['slope']):.3f} of {len(acc['slope'])} (target >= 0.93)" if acc.get("slope") else "-"))
    if acc["agent_slope"]:
        print(f"  per-agent slopes covered:                {np.mean(acc['agent_slope']):.3f} of "
              f"{len(acc['agent_slope'])} given (target >= 0.93)")
    if acc.get("common_reject"):
        print(f"  one-common-slope test, size at 5 %:     {np.mean(acc['common_reject']):.3f} of "
              f"{len(acc['common_reject'])} (target 0.03-0.07; every agent has the same slope here)")
    label = "size when theta = kappa" if truth.rho == 1.0 and truth.sd_kappa == truth.sd_theta else "power"
    print(f"  theta = kappa test, {label} at 5 %:     {_mc(acc['reject'], reps)}"
          + (" (target 0.03-0.07)" if label.startswith("size") else f" (corr {truth.rho})"))


def coverage(reps: int, reps_large: int, which: set[str]) -> None:
    if which & {"coverage", "paper"}:
        _scenario("paper design, solo first", PAPER, TRUTH, reps, 1)
        _scenario("paper design, solo first, theta = kappa", PAPER, NULL, reps, 2)
        _scenario("paper design, counterbalanced, position effect", _with(PAPER, "counterbalanced"),
                  Truth(positions=LEARNING), reps, 3)
        _scenario("paper design, counterbalanced, position effect, theta = kappa", _with(PAPER, "counterbalanced"),
                  Truth(sd_kappa=TRUTH.sd_theta, rho=1.0, positions=LEARNING), reps, 4)
    if which & {"coverage", "large"}:
        # Without the per-agent slope fits (five more fits per replicate); the paper rows check those.
        _scenario("10x design, solo first", LARGE, TRUTH, reps_large, 5, by_agent=False)
        _scenario("10x design, counterbalanced, position effect", _with(LARGE, "counterbalanced"),
                  Truth(positions=LEARNING), reps_large, 6, by_agent=False)


def size(reps: int) -> None:
    """The θ = κ test alone under θ = κ, many replicates: its size at 1, 5 and 10 % with Monte Carlo SEs, and
    the statistic's mean and 95 % quantile against its reference ½χ²₁ + ½χ²₂ (mean 1.5, quantile 5.14)."""
    from scipy.stats import chi2

    ref = {"mean": 1.5, "q95": 5.138}
    for name, order, positions, seed in (("solo first", "solo_first", (), 12),
                                         ("counterbalanced, position effect", "counterbalanced", LEARNING, 11)):
        design = _with(PAPER, order)
        truth = Truth(sd_kappa=TRUTH.sd_theta, rho=1.0, positions=positions)
        rng = np.random.default_rng(seed)
        cpu = time.process_time()
        stats, p_values = [], []
        for _ in range(reps):
            data = simulate(design, truth, rng).data
            fitted = build_design(data, design.workers, design.n_tasks)
            test = theta_kappa_lr(fit_reml(fitted), fit_reml(fitted, restricted=True))
            stats.append(test["statistic"])
            p_values.append(test["p_value"])
        p = np.array(p_values)
        sizes = ", ".join(f"{np.mean(p < a):.3f} at {a:.0%} (MC SE {np.sqrt(a * (1 - a) / reps):.3f})"
                          for a in (0.01, 0.05, 0.10))
        print(f"[size, paper design, {name}, theta = kappa] {reps} replicates ({time.process_time() - cpu:.0f} s "
              f"CPU, {load()}): {sizes} (target 0.03-0.07 at 5 %); statistic mean {np.mean(stats):.3f} "
              f"(reference {ref['mean']}), 95 % quantile {np.quantile(stats, 0.95):.2f} (reference {ref['q95']}); "
              f"chi2(2) alone would give {np.mean(chi2.sf(stats, 2) < 0.05):.3f}")


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
    parser.add_argument("--reps", type=int, default=200, help="replicates of each paper-design scenario")
    parser.add_argument("--reps-large", type=int, default=20, help="replicates of each 10x scenario")
    parser.add_argument("--only", default="coverage,time,lme4",
                        help="some of: coverage (= paper,large), paper, large, size, time, lme4")
    args = parser.parse_args()
    only = set(args.only.split(","))
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}, {load()}")
    if "time" in only:
        timing()
    if "lme4" in only:
        against_lme4()
    if "size" in only:
        size(args.reps)
    if only & {"coverage", "paper", "large"}:
        coverage(args.reps, args.reps_large, only)


if __name__ == "__main__":
    main()
