"""Benchmark the task model (``calibrated_task``) with many tasks against lme4, by CPU time.

Usage::

    python bench/rating_tasks.py             # lme4's InstEval data, connected, blocked and large scales
    python bench/rating_tasks.py --quick     # the connected InstEval shape only
    python bench/rating_tasks.py --only insteval,large   # some of: insteval, connected, blocked, large
    python bench/rating_tasks.py --no-lme4   # our fits only (and no InstEval data, which comes from R)

Scales (agents are fixed, participants and tasks random: ``y ~ agent + (1|human) + (1|task)``):

* lme4's own ``InstEval`` data (exported by Rscript, where R has lme4): ``y ~ dept + (1|s) + (1|d)``, one
  connected block of 1 128 lecturers. Target: at least 10x lme4 by CPU time.

* ``connected`` (the default, the shape of real data): InstEval's sizes, 14 departments as agents, 2 972
  students, 1 128 lecturers as random tasks, 73 421 ratings. Every lecturer belongs to a department (the
  rating's agent); a student rates mostly lecturers of their home department but a fifth of their ratings go
  to any lecturer, so students couple the departments and the participant x task graph is **one block**
  (as in InstEval itself). Target: at least 10x lme4 by CPU time.
* ``blocked``: the same sizes, but every participant rates the lecturers of one group only and the agent is
  drawn independently of the task, so the core splits into 14 independent task blocks
  (``rating.task_blocks``): the cost is 14 small blocks, not one large one.
* ``large``: 10^5 participants x 10^4 tasks x 10^6 episodes, blocked like ``blocked`` (14 blocks of ~714
  tasks). Target: at most 10 s CPU. (One connected block of 10^4 tasks is a dense 10^4 x 10^4 Cholesky
  factor per likelihood evaluation; no exact fit of that fits in 10 s on this machine.)

CPU time, not wall time: on a shared machine wall times move 3-5x with the load while CPU time moves little.
Our figure is ``time.process_time`` of ``fit_model`` (read nothing, fit, every per-participant and per-task
output) in a fresh subprocess, best and median of 3, plug-in (REML point estimate) and default (integrated
over the variance components); lme4's is the user + system time of ``system.time(lmer(...))`` in an
Rscript started by this run on the same data (CSV), REML, default control. The REML log-likelihoods of both
are printed (they agree to about 1e-6). The machine load is printed with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# name: (participants, tasks, episodes, agents, task groups (0: connected), what the target is)
SCALES: dict[str, tuple[int, int, int, int, int, str]] = {
    "connected": (2_972, 1_128, 73_421, 14, 0, "lme4"),
    "blocked": (2_972, 1_128, 73_421, 14, 14, "lme4"),
    "large": (100_000, 10_000, 1_000_000, 14, 14, "seconds"),
}
LME4_SPEEDUP = 10.0  # target: our CPU time at most a tenth of lme4's
LARGE_SECONDS = 10.0  # target at the large scale, CPU seconds
REPEATS = 3
HOME_SHARE = 0.8  # connected shape: share of a student's ratings given to lecturers of their home department

R_SCRIPT = r"""
suppressMessages(library(lme4))
args <- commandArgs(trailingOnly = TRUE)
d <- read.csv(args[1])
d$agent <- factor(d$agent); d$human <- factor(d$human); d$task <- factor(d$task)
tm <- system.time(m <- lmer(y ~ agent + (1 | human) + (1 | task), data = d, REML = TRUE))
vc <- as.data.frame(VarCorr(m))
cat(sprintf("%.6f %.6f %.6f %.10f %.10f %.10f %.10f\n", tm[["user.self"]], tm[["sys.self"]], tm[["elapsed"]],
    as.numeric(logLik(m)), vc$sdcor[vc$grp == "human"], vc$sdcor[vc$grp == "task"], sigma(m)))
"""
R_EXPORT = r"""
suppressMessages(library(lme4))
data(InstEval)
write.csv(data.frame(agent = as.integer(InstEval$dept) - 1, human = as.integer(InstEval$s) - 1,
    task = as.integer(InstEval$d) - 1, y = InstEval$y), commandArgs(trailingOnly = TRUE)[1], row.names = FALSE)
"""


def blocked(n_humans: int, n_tasks: int, n_obs: int, n_agents: int, n_groups: int, seed: int = 0) -> tuple:
    """Return agent, participant, task codes and scores: each participant rates the tasks of one group only."""
    rng = np.random.default_rng(seed)
    group_of = rng.integers(0, n_groups, n_humans)
    human = np.concatenate([np.arange(n_humans), rng.integers(0, n_humans, n_obs - n_humans)])
    rng.shuffle(human)
    per = n_tasks // n_groups
    task = group_of[human] * per + rng.integers(0, per, n_obs)
    agent = rng.integers(0, n_agents, n_obs)
    return agent, human, task, _scores(rng, agent, human, task, n_agents, n_humans, n_tasks)


def connected(n_humans: int, n_tasks: int, n_obs: int, n_agents: int, seed: int = 0) -> tuple:
    """Return InstEval-like codes and scores whose participant x task graph is one connected block.

    Lecturers (tasks) belong to departments (agents); a student rates lecturers of their home department with
    probability ``HOME_SHARE`` and any lecturer otherwise, so departments are coupled through students.
    """
    rng = np.random.default_rng(seed)
    dept = rng.integers(0, n_agents, n_tasks)
    home = rng.integers(0, n_agents, n_humans)
    human = np.concatenate([np.arange(n_humans), rng.integers(0, n_humans, n_obs - n_humans)])
    rng.shuffle(human)
    task = rng.integers(0, n_tasks, n_obs)
    own = rng.random(n_obs) < HOME_SHARE
    for a in range(n_agents):
        lecturers = np.flatnonzero(dept == a)
        rows = np.flatnonzero(own & (home[human] == a))
        if lecturers.size:
            task[rows] = lecturers[rng.integers(0, lecturers.size, rows.size)]
    agent = dept[task]
    return agent, human, task, _scores(rng, agent, human, task, n_agents, n_humans, n_tasks)


def _scores(rng: np.random.Generator, agent, human, task, n_agents: int, n_humans: int, n_tasks: int) -> np.ndarray:
    return (
        3.2
        + rng.normal(0.0, 0.3, n_agents)[agent]
        + rng.normal(0.0, 0.33, n_humans)[human]
        + rng.normal(0.0, 0.5, n_tasks)[task]
        + rng.normal(0.0, 1.2, agent.shape[0])
    )


def design(name: str, csv: str | None = None) -> tuple:
    if csv:
        table = np.loadtxt(csv, delimiter=",", skiprows=1)
        return tuple(table[:, i].astype(np.int64) for i in range(3)) + (table[:, 3],)
    n_h, n_t, n, n_a, groups, _ = SCALES[name]
    return connected(n_h, n_t, n, n_a) if groups == 0 else blocked(n_h, n_t, n, n_a, groups)


def run(name: str, integrate: bool, csv: str | None) -> dict[str, Any]:
    """Time ``fit_model`` by CPU (this process's user + system time) and wall clock."""
    from rating.fit import ModelSpec, fit_model

    agent, human, task, y = design(name, csv)
    spec = ModelSpec(kind="calibrated_task", integrate_hyper=integrate)
    fit_model(agent[:2000], human[:2000], y[:2000], task[:2000], spec=spec)  # warm the code path
    cpu, wall, loads = [], [], []
    fit = None
    for _ in range(REPEATS):
        fit = None
        c0, t0 = time.process_time(), time.perf_counter()
        fit = fit_model(agent, human, y, task, spec=spec)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
        loads.append(os.getloadavg()[0])
    assert fit is not None
    return {
        "cpu_best": min(cpu),
        "cpu_median": float(np.median(cpu)),
        "wall_median": float(np.median(wall)),
        "blocks": fit.diagnostics.get("task_blocks"),
        "loglik": fit.log_likelihood,
        "sigma_task": fit.hyper["sigma_task"]["estimate"],
        "load": max(loads),
    }


def lme4(csv: str) -> dict[str, float] | None:
    """Fit the same model with lme4 in Rscript; return its CPU time (user + system) and estimates."""
    with tempfile.NamedTemporaryFile("w", suffix=".R", delete=False) as handle:
        handle.write(R_SCRIPT)
    try:
        done = subprocess.run(["Rscript", handle.name, csv], capture_output=True, text=True, check=False)
    finally:
        os.unlink(handle.name)
    if done.returncode != 0:
        print(f"    lme4 failed: {done.stderr.strip()[-400:]}")
        return None
    user, system, elapsed, loglik, sd_h, sd_t, beta = map(float, done.stdout.split()[-7:])
    return {"cpu": user + system, "wall": elapsed, "loglik": loglik, "sigma_task": sd_t, "load": os.getloadavg()[0]}


def has_lme4() -> bool:
    if shutil.which("Rscript") is None:
        return False
    done = subprocess.run(["Rscript", "-e", "library(lme4)"], capture_output=True, check=False)
    return done.returncode == 0


def ours(name: str, integrate: bool, csv: str | None) -> dict[str, Any]:
    command = [sys.executable, __file__, "--case", name, *(["--integrate"] if integrate else [])]
    done = subprocess.run(command + (["--csv", csv] if csv else []), capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(name: str, label: str, csv: str | None, with_lme4: bool) -> None:
    """Print our CPU times (plug-in and default) and lme4's, with the target and the load."""
    kind = SCALES[name][5]
    figs = {integrate: ours(name, integrate, csv) for integrate in (False, True)}
    print(f"  {label}; blocks {figs[False]['blocks']}")
    ref = None
    if kind == "lme4" and with_lme4 and csv:
        ref = lme4(csv)
        if ref is not None:
            print(
                f"    lme4 lmer: {ref['cpu']:.2f} s CPU ({ref['wall']:.1f} s wall), REML log-lik {ref['loglik']:.6f}, "
                f"sigma_task {ref['sigma_task']:.6f}; load {ref['load']:.1f}"
            )
    for integrate, fig in figs.items():
        variant = "default (integrated)" if integrate else "plug-in"
        line = (
            f"    ours {variant}: {fig['cpu_best']:.2f} s CPU best, {fig['cpu_median']:.2f} s median "
            f"({fig['wall_median']:.2f} s wall median); REML log-lik {fig['loglik']:.6f}"
        )
        if ref is not None:
            ratio = ref["cpu"] / fig["cpu_median"]
            mark = "PASS" if ratio >= LME4_SPEEDUP else "MISS"
            line += f"; {ratio:.1f}x lme4 by CPU (median), target >= {LME4_SPEEDUP:.0f}x {mark}"
        elif kind == "seconds":
            mark = "PASS" if fig["cpu_median"] <= LARGE_SECONDS else "MISS"
            line += f"; target <= {LARGE_SECONDS:.0f} s CPU {mark}"
        print(line + f"; load {fig['load']:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the connected InstEval shape only")
    parser.add_argument("--no-lme4", action="store_true", help="do not run lme4")
    parser.add_argument("--only", help="comma-separated scales: insteval, connected, blocked, large")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--csv", help=argparse.SUPPRESS)
    parser.add_argument("--integrate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run(args.case, args.integrate, args.csv)))
        return
    with_lme4 = not args.no_lme4 and has_lme4()
    print(f"calibrated_task, y ~ agent + (1|human) + (1|task): {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"CPU seconds (user + system), ours best and median of {REPEATS}; lme4 {'once' if with_lme4 else 'not run'}")
    names = ["connected"] + ([] if args.quick else ["blocked", "large"])
    real = with_lme4 and not args.quick
    if args.only:
        chosen = {name.strip() for name in args.only.split(",")}
        unknown = chosen - {"insteval", *SCALES}
        if unknown:
            raise SystemExit(f"--only: unknown scales {', '.join(sorted(unknown))}")
        names, real = [name for name in SCALES if name in chosen], with_lme4 and "insteval" in chosen
    with tempfile.TemporaryDirectory() as tmp:
        if real:
            path = os.path.join(tmp, "insteval.csv")
            script = os.path.join(tmp, "export.R")
            Path(script).write_text(R_EXPORT)
            subprocess.run(["Rscript", script, path], check=True, capture_output=True)
            report("connected", "lme4's InstEval data (one connected block)", path, with_lme4)
        for name in names:
            n_h, n_t, n, n_a, groups, _ = SCALES[name]
            shape = "one connected block" if groups == 0 else f"blocked: {groups} independent task groups"
            label = f"{name}: {n_h:,} participants x {n_t:,} tasks x {n:,} episodes, {n_a} agents ({shape})"
            csv = None
            if SCALES[name][5] == "lme4" and with_lme4:
                csv = os.path.join(tmp, f"{name}.csv")
                agent, human, task, y = design(name)
                np.savetxt(csv, np.c_[agent, human, task, y], delimiter=",", header="agent,human,task,y",
                           comments="", fmt=["%d", "%d", "%d", "%.17g"])  # fmt: skip
            report(name, label, csv, with_lme4)


if __name__ == "__main__":
    main()
