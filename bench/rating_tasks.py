"""Benchmark the task model (``calibrated_task``) with many tasks: the block core against its targets.

Usage::

    python bench/rating_tasks.py            # both scales, plug-in and integrated, best of 3
    python bench/rating_tasks.py --quick    # the InstEval-shaped scale only

The simulation is shaped like InstEval with lecturers as random tasks: 14 agents (InstEval's fixed
departments), tasks nested in 14 groups (departments), every participant rating tasks of one group.
Participants couple the tasks of their group only, so the core splits into 14 blocks (``rating.task_blocks``).
A design in which every task is reachable from every other through shared participants is one block and
costs what the dense system does (``--connected`` times that case at the small scale).

Each scale runs in a fresh subprocess. Printed: wall time of ``fit_model`` (read nothing, fit, every
per-participant and per-task output), the block layout, the target and the machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# name: (participants, tasks, episodes, agents, task groups, target seconds)
SCALES: dict[str, tuple[int, int, int, int, int, float]] = {
    "insteval": (3_000, 1_000, 75_000, 14, 14, 1.0),
    "large": (100_000, 10_000, 1_000_000, 14, 14, 10.0),
    "connected": (3_000, 1_000, 75_000, 14, 1, 1.0),
}
REPEATS = 3


def synthetic(n_humans: int, n_tasks: int, n_obs: int, n_agents: int, n_groups: int, seed: int = 0) -> tuple:
    """Return agent, participant, task codes and scores with known variance components (InstEval-like)."""
    rng = np.random.default_rng(seed)
    group_of = rng.integers(0, n_groups, n_humans)
    human = np.concatenate([np.arange(n_humans), rng.integers(0, n_humans, n_obs - n_humans)])
    rng.shuffle(human)
    per = n_tasks // n_groups
    task = group_of[human] * per + rng.integers(0, per, n_obs)
    agent = rng.integers(0, n_agents, n_obs)
    y = (
        3.2
        + rng.normal(0.0, 0.3, n_agents)[agent]
        + rng.normal(0.0, 0.33, n_humans)[human]
        + rng.normal(0.0, 0.5, n_tasks)[task]
        + rng.normal(0.0, 1.2, n_obs)
    )
    return agent, human, task, y


def run(name: str, integrate: bool) -> dict[str, Any]:
    from rating.fit import ModelSpec, fit_model

    n_h, n_t, n, n_a, groups, _ = SCALES[name]
    agent, human, task, y = synthetic(n_h, n_t, n, n_a, groups)
    spec = ModelSpec(kind="calibrated_task", integrate_hyper=integrate)
    fit_model(agent[:2000], human[:2000], y[:2000], task[:2000], spec=spec)  # warm the code path
    times, loads = [], []
    fit = None
    for _ in range(REPEATS):
        fit = None
        t0 = time.perf_counter()
        fit = fit_model(agent, human, y, task, spec=spec)
        times.append(time.perf_counter() - t0)
        loads.append(os.getloadavg()[0])
    assert fit is not None
    return {
        "best_s": min(times),
        "median_s": float(np.median(times)),
        "blocks": fit.diagnostics.get("task_blocks"),
        "sigma_task": fit.hyper["sigma_task"]["estimate"],
        "beta": fit.hyper["beta"]["estimate"],
        "load": max(loads),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the InstEval-shaped scale only")
    parser.add_argument("--connected", action="store_true", help="also time one connected block (dense cost)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--integrate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run(args.case, args.integrate)))
        return
    print(f"calibrated_task with many tasks: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    print(f"times: fit_model wall seconds, best and median of {REPEATS} (the load is the highest seen during them)")
    names = ["insteval"] + ([] if args.quick else ["large"]) + (["connected"] if args.connected else [])
    for name in names:
        n_h, n_t, n, n_a, groups, target = SCALES[name]
        for integrate in (False, True):
            done = subprocess.run(
                [sys.executable, __file__, "--case", name, *(["--integrate"] if integrate else [])],
                capture_output=True, text=True, check=False, cwd=ROOT,
            )  # fmt: skip
            if done.returncode != 0:
                raise SystemExit(f"{name} failed:\n{done.stderr}")
            fig = json.loads(done.stdout.strip().splitlines()[-1])
            mark = "PASS" if fig["best_s"] <= target else "MISS"
            label = "integrated" if integrate else "plug-in"
            print(
                f"  {name}: {n_h:,} participants x {n_t:,} tasks x {n:,} episodes, {n_a} agents, {label}: "
                f"{fig['best_s']:.2f} s best, {fig['median_s']:.2f} s median; target <= {target:.0f} s {mark}; "
                f"blocks {fig['blocks']}; load {fig['load']:.1f}"
            )


if __name__ == "__main__":
    main()
