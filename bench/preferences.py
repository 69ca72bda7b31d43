"""Bench of the preference model (rating/preferences.py) on simulated studies with known truth. Prints, never
asserts.

    .venv/bin/python bench/preferences.py [--reps 1000] [--hours-reps 100] [--only coverage,hours,time]
                                          [--grade-minutes 20] [--comparison-minutes 12]

* coverage: 60 tasks x 5 arm cells (worker alone, two agents with a worker, the same two alone), 40 workers,
  one rubric score per deliverable, 4 comparison sets per task by 8 experts with a position bias of 0.3 and a
  length preference of 0.4 log-odds per doubling (agents write longer). (A) pairs with ties (Davidson exactly);
  (B) sets of 2-4 deliverables without ties (Plackett-Luce). Coverage by the 95 % intervals of the true
  quality differences and win / tie rates of all 10 pairs of arms, and the position bias against its truth;
  the ± is 1.96 Monte Carlo SE by study (one study's intervals share its estimates, so they are not independent).
* hours: at equal expert hours, rubric grades only against half the hours on grades and half on pairwise
  comparisons (the minutes per grade and per comparison are flags): the variance of the arms' quality
  differences over replicates, relative.
* time: process CPU time of a fit of 10⁴ comparisons (2 000 tasks, 500 workers) and 10⁴ rubric scores, with
  the variance components estimated and with them given: the fastest, median and slowest of --time-repeats runs
  (the fastest is the code's own cost; the spread is the machine's).

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

from rating.preferences import PreferenceInputError, PreferenceSpec, preference_fit  # noqa: E402
from rating.preferences_sim import SimDesign, SimTruth, simulate, true_win_rates  # noqa: E402

DESIGN = SimDesign()
TRUTH = SimTruth()
SCENARIOS = {
    "A: pairs, with ties": (DESIGN, TRUTH),
    "B: 2-4 per set, no ties": (SimDesign(set_sizes=(2, 3, 4)), SimTruth(nu=0.0)),
}


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _inside(row: dict, value: float) -> bool:
    return row["lower"] <= value <= row["upper"]


def _replicate(design: SimDesign, truth: SimTruth, rng: np.random.Generator) -> dict[str, list] | None:
    sim = simulate(design, truth, rng)
    try:
        fit = preference_fit(sim.episodes, sim.scores, sim.comparisons)
    except PreferenceInputError:
        return None
    out: dict[str, list] = {"diff": [], "win": [], "tie": [], "first": [], "first_est": [], "length": [],
                            "width": [], "rho": [], "rho_est": [], "diff_err": []}
    for row in fit.differences:
        true = sim.levels[row["cell"]] - sim.levels[row["versus"]]
        out["diff"].append(_inside(row, true))
        out["diff_err"].append(abs(row["estimate"]) - abs(true))
        out["width"].append(row["upper"] - row["lower"])
    for row in fit.win_rates:
        true = true_win_rates(truth, sim.levels, row["cell"], row["versus"])
        out["win"].append(_inside(row["win"], true["win"]))
        if truth.nu > 0:
            out["tie"].append(_inside(row["tie"], true["tie"]))
    first, length = fit.effects["position_first"], fit.effects["length_per_doubling"]
    out["first"].append(_inside(first, truth.first))
    out["first_est"].append(first["estimate"])
    out["length"].append(_inside(length, truth.length))
    rho = fit.effects["scale"]["logits_per_point"]
    out["rho"].append(_inside(rho, 1.0 / truth.points_per_logit))
    out["rho_est"].append(rho["estimate"])
    return out


def _share(per_study: list[list]) -> str:
    """The pooled share, with a Monte Carlo margin by study: the intervals of one study share its ρ, ν and
    variance components, so they are not independent and a binomial margin over intervals would be too narrow."""
    hits = np.array([float(np.sum(v)) for v in per_study])
    sizes = np.array([float(len(v)) for v in per_study])
    p = float(hits.sum() / sizes.sum())
    g = hits.size
    se = float(np.sqrt(np.sum((hits - p * sizes) ** 2) * g / max(g - 1, 1)) / sizes.sum())
    return f"{p:.3f} (± {1.96 * se:.3f} by study, {int(sizes.sum())} intervals)"


def coverage(reps: int, seed: int) -> None:
    for name, (design, truth) in SCENARIOS.items():
        rng = np.random.default_rng(seed)
        results, failed, t0 = [], 0, time.process_time()
        for _ in range(reps):
            r = _replicate(design, truth, rng)
            if r is None:
                failed += 1
            else:
                results.append(r)
        pooled = {k: [v for r in results for v in r[k]] for k in results[0]}
        studies = {k: [r[k] for r in results] for k in results[0]}
        cpu = time.process_time() - t0
        print(f"[coverage] {name}: {len(results)} studies ({failed} not fitted), {cpu:.0f} s CPU, {load()}")
        print(f"  quality differences covered: {_share(studies['diff'])}   target >= 0.93")
        print(f"  win rates covered:           {_share(studies['win'])}   target >= 0.93")
        if pooled["tie"]:
            print(f"  tie rates covered:           {_share(studies['tie'])}   target >= 0.93")
        est = np.array(pooled["first_est"])
        mc_se = est.std(ddof=1) / np.sqrt(est.size)
        print(f"  position bias: truth {truth.first:.3f}, mean estimate {est.mean():.3f} (MC SE {mc_se:.3f}), "
              f"SD {est.std(ddof=1):.3f}, covered {_share(studies['first'])}")
        print(f"  length preference covered:   {_share(studies['length'])}")
        rho = np.array(pooled["rho_est"])
        print(f"  scale (logits per point): truth {1.0 / truth.points_per_logit:.4f}, mean estimate {rho.mean():.4f} "
              f"(MC SE {rho.std(ddof=1) / np.sqrt(rho.size):.4f}), covered {_share(studies['rho'])}")
        shrink = np.array(pooled["diff_err"])
        print(f"  differences' mean |estimate| - |truth|: {shrink.mean():+.3f} points "
              f"(MC SE {shrink.std(ddof=1) / np.sqrt(shrink.size):.3f}; negative = shrunk towards no difference)")
        print(f"  mean width of a difference's interval: {np.mean(pooled['width']):.2f} points")


def _hours_design(hours: float, grade_min: float, comp_min: float, share_comparisons: float) -> SimDesign:
    """Expert hours split between rubric grades (one per deliverable, a share of them) and pairwise sets."""
    n_deliverables = DESIGN.n_tasks * 5
    grades = hours * 60 * (1 - share_comparisons) / grade_min
    comparisons = hours * 60 * share_comparisons / comp_min
    return SimDesign(score_fraction=min(1.0, grades / n_deliverables),
                     sets_per_task=int(round(comparisons / DESIGN.n_tasks)))


def hours(reps: int, seed: int, grade_min: float, comp_min: float) -> None:
    budget = DESIGN.n_tasks * 5 * grade_min / 60        # enough hours to grade every deliverable once
    designs = {"rubric only": _hours_design(budget, grade_min, comp_min, 0.0),
               "half rubric, half comparisons": _hours_design(budget, grade_min, comp_min, 0.5)}
    errors: dict[str, list[np.ndarray]] = {k: [] for k in designs}
    failed = dict.fromkeys(designs, 0)
    rng = np.random.default_rng(seed)
    for _ in range(reps):
        for name, design in designs.items():
            sim = simulate(design, TRUTH, rng)
            try:
                fit = preference_fit(sim.episodes, sim.scores, sim.comparisons if design.sets_per_task else [],
                                     PreferenceSpec())
            except PreferenceInputError:
                failed[name] += 1
                continue
            errors[name].append(np.array([row["estimate"] - (sim.levels[row["cell"]] - sim.levels[row["versus"]])
                                          for row in fit.differences]))
    print(f"[hours] {budget:.0f} expert hours per study: {grade_min:g} min per rubric grade, {comp_min:g} min per "
          f"pairwise comparison; {reps} studies per design, {load()}")
    mse = {}
    for name, design in designs.items():
        e = np.array(errors[name])
        mse[name] = (e ** 2).mean(axis=0)
        print(f"  {name}: {design.score_fraction * DESIGN.n_tasks * 5:.0f} grades, "
              f"{design.sets_per_task * DESIGN.n_tasks} comparisons, {len(e)} studies ({failed[name]} not fitted); "
              f"RMSE of the arms' differences "
              f"{np.sqrt(mse[name].mean()):.2f} points, mean bias {e.mean():+.2f}")
    gain = mse["rubric only"] / mse["half rubric, half comparisons"]
    print(f"  precision gain (MSE rubric only / MSE with comparisons), mean over the 10 differences: "
          f"{gain.mean():.2f}x (range {gain.min():.2f}-{gain.max():.2f})")


def _timed(run, repeats: int) -> tuple[float, float, float]:
    """Process CPU seconds of ``repeats`` runs: the fastest (the code's own cost: a run is only ever slowed by
    what else the machine does), the median and the slowest."""
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        run()
        times.append(time.process_time() - t0)
    return min(times), float(np.median(times)), max(times)


def fit_time(seed: int, repeats: int) -> None:
    sim = simulate(SimDesign(n_tasks=2000, n_workers=500, sets_per_task=5), TRUTH, np.random.default_rng(seed))
    n_pairs = sum(len(c.episode_ids) * (len(c.episode_ids) - 1) // 2 for c in sim.comparisons)
    fit = preference_fit(sim.episodes, sim.scores, sim.comparisons)
    fastest, median, slowest = _timed(lambda: preference_fit(sim.episodes, sim.scores, sim.comparisons), repeats)
    print(f"[time] {len(sim.comparisons)} comparisons ({n_pairs} pairs), {len(sim.scores)} rubric scores, "
          f"500 workers, 2000 tasks; variance components and scale estimated, CPU s over {repeats} runs: fastest "
          f"{fastest:.2f}, median {median:.2f}, slowest {slowest:.2f}; target <= 1 s, {load()}")
    vc = fit.variance_components
    spec = PreferenceSpec(worker_sd=vc["worker_sd"]["estimate"], task_sd=vc["task_sd"]["estimate"],
                          score_sd=vc["score_sd"]["estimate"])
    fastest, median, slowest = _timed(lambda: preference_fit(sim.episodes, sim.scores, sim.comparisons, spec),
                                      repeats)
    print(f"[time] same data, variance components given (the scale still estimated): fastest {fastest:.2f}, "
          f"median {median:.2f}, slowest {slowest:.2f} s CPU; target <= 1 s, {load()}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--hours-reps", type=int, default=100)
    parser.add_argument("--grade-minutes", type=float, default=20.0)
    parser.add_argument("--comparison-minutes", type=float, default=12.0)
    parser.add_argument("--only", default="coverage,hours,time")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--time-repeats", type=int, default=7)
    args = parser.parse_args()
    only = set(args.only.split(","))
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if "time" in only:
        fit_time(args.seed, args.time_repeats)
    if "coverage" in only:
        coverage(args.reps, args.seed)
    if "hours" in only:
        hours(args.hours_reps, args.seed, args.grade_minutes, args.comparison_minutes)


if __name__ == "__main__":
    main()
