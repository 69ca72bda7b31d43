"""Benchmark and check the calibrated rating models (rating/fit.py).

Usage::

    python bench/rating_calibrated.py            # everything except the 10^7-observation fit
    python bench/rating_calibrated.py --big      # also 100 agents x 10^6 humans x 10^7 observations
    python bench/rating_calibrated.py --only calibration   # one section: fits, statsmodels, task, stability,
                                                            # calibration

Sections (each scale runs in a fresh subprocess, so its max RSS is its own):

* ``fits``: REML fit + exact posterior (hyper-uncertainty integrated) at paper scale and 50 x 10^4 x 10^5;
* ``statsmodels``: the same estimates from statsmodels MixedLM (REML, BFGS) on designs it can handle, the
  largest relative difference and the speed ratio;
* ``task``: the task-difficulty model at 5 agents x 10^4 humans x 2 000 tasks x 10^5 observations;
* ``stability``: bootstrap (10 000 rounds, by observation and by participant) and both leave-one-out tables
  at 10^5 episodes over 20 000 participants;
* ``calibration``: simulated studies at paper scale -- coverage of 95 % intervals for agent gaps for the
  paper model, the calibrated model (agents fixed) and the same mixed model with agents as random effects,
  plus the level bias and the bias of an agent with a third of the sessions.

Targets are marked PASS or MISS. The machine's load is printed; timings are the best of a few runs (the
stability section prints best, median and worst of three and marks the worst). BLAS threads are left as
configured for the fits (set ``OPENBLAS_NUM_THREADS=1`` on a shared machine: oversubscribed BLAS threads
slow small factorisations many times over); ``stability`` pins its resampling to one BLAS thread itself.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FIT_SCALES: dict[str, tuple[int, int, int, float, float]] = {
    # agents, humans, observations, target seconds, target bytes
    "paper": (5, 93, 386, 0.05, 4 * 1024**3),
    "50x10k": (50, 10_000, 100_000, 1.0, 4 * 1024**3),
    "100x1M": (100, 1_000_000, 10_000_000, 20.0, 4 * 1024**3),
}
STATSMODELS_SCALES = {"paper": (5, 93, 386), "5x1k": (5, 1_000, 4_000), "10x3k": (10, 3_000, 12_000)}
TASK_SCALE = (5, 10_000, 2_000, 100_000)
TARGET_TASK_S = 5.0
STABILITY_SCALE = (5, 20_000, 100_000)
TARGET_STABILITY_S = 10.0


def synthetic(
    n_agents: int, n_humans: int, n_obs: int, n_tasks: int = 0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Return int32 ids and scores from y = 70 + a + h (+ t) + noise (sd 3, 8, 4, 15); every human observed."""
    rng = np.random.default_rng(seed)
    agent = rng.integers(0, n_agents, n_obs, dtype=np.int32)
    human = np.concatenate(
        [np.arange(n_humans, dtype=np.int32), rng.integers(0, n_humans, n_obs - n_humans, dtype=np.int32)]
    )
    rng.shuffle(human)
    y = 70.0 + rng.normal(0.0, 3.0, n_agents)[agent] + rng.normal(0.0, 8.0, n_humans)[human]
    y += rng.normal(0.0, 15.0, n_obs)
    task = None
    if n_tasks:
        task = rng.integers(0, n_tasks, n_obs, dtype=np.int32)
        y += rng.normal(0.0, 4.0, n_tasks)[task]
    return agent, human, y, task


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _best(fn: Any, repeats: int) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def run_fit(name: str) -> dict[str, Any]:
    from rating.fit import ModelSpec, fit_model

    n_a, n_h, n, _, _ = FIT_SCALES[name]
    fit_model(*synthetic(3, 10, 40)[:3], spec=ModelSpec())  # warm lazy imports and LAPACK
    agent, human, y, _ = synthetic(n_a, n_h, n)
    repeats = 5 if n <= 10_000 else (2 if n <= 1_000_000 else 1)
    seconds, fit = _best(lambda: fit_model(agent, human, y, spec=ModelSpec()), repeats)
    return {
        "scale": name,
        "seconds": seconds,
        "max_rss": _rss(),
        "hyper": {k: round(v["estimate"], 4) for k, v in fit.hyper.items()},
        "hyper_se": {k: round(v["se"], 4) for k, v in fit.hyper.items()},
        "converged": fit.diagnostics["reml_converged"],
    }


def run_statsmodels(name: str) -> dict[str, Any]:
    import warnings

    from statsmodels.regression.mixed_linear_model import MixedLM

    from rating.fit import ModelSpec, fit_model

    n_a, n_h, n = STATSMODELS_SCALES[name]
    agent, human, y, _ = synthetic(n_a, n_h, n, seed=1)
    ours_s, fit = _best(lambda: fit_model(agent, human, y, spec=ModelSpec(integrate_hyper=False)), 3)
    exog = np.eye(n_a)[agent]
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = MixedLM(y, exog, groups=human).fit(reml=True, method="bfgs")
    theirs_s = time.perf_counter() - t0
    order = fit.agent_ids.astype(int)
    ours = np.array([fit.hyper["beta"]["estimate"] ** 2, fit.hyper["sigma_human"]["estimate"] ** 2])
    theirs = np.array([result.scale, float(np.asarray(result.cov_re)[0, 0])])
    fe_diff = np.max(np.abs(fit.agent_mu - np.asarray(result.fe_params)[order]) / np.abs(fit.agent_mu))
    return {
        "scale": name,
        "ours_s": ours_s,
        "statsmodels_s": theirs_s,
        "max_rel_diff_variances": float(np.max(np.abs(ours - theirs) / theirs)),
        "max_rel_diff_agents": float(fe_diff),
        "loglik_ours": fit.log_likelihood,
        "loglik_statsmodels": float(result.llf),
    }


def run_task() -> dict[str, Any]:
    from rating.fit import ModelSpec, compare_models, fit_model

    n_a, n_h, n_t, n = TASK_SCALE
    agent, human, y, task = synthetic(n_a, n_h, n, n_tasks=n_t)
    seconds, fit = _best(lambda: fit_model(agent, human, y, task, spec=ModelSpec(kind="calibrated_task")), 1)
    t0 = time.perf_counter()
    rows = compare_models(agent, human, y, task)
    return {
        "seconds": seconds,
        "max_rss": _rss(),
        "hyper": {k: round(v["estimate"], 4) for k, v in fit.hyper.items()},
        "compare_s": time.perf_counter() - t0,
        "compare": [
            {"model": r["model"], "aic": round(r["aic"], 1), "p_value": r["p_value"]} for r in rows
        ],
    }


def run_stability(repeats: int = 3) -> dict[str, Any]:
    from rating.fit import ModelSpec
    from rating.stability import stability

    n_a, n_h, n = STABILITY_SCALE
    agent, human, y, _ = synthetic(n_a, n_h, n)
    task = (np.arange(n) % 500).astype(np.int32)
    out: dict[str, Any] = {}
    for cluster in (None, "human"):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            stability(agent, human, y, task, spec=ModelSpec(), rounds=10_000, seed=0, cluster=cluster)
            times.append(time.perf_counter() - t0)
        out[f"seconds_{cluster or 'observation'}"] = times
    out["max_rss"] = _rss()
    out["load_average"] = os.getloadavg()[0]
    return out


def run_calibration(studies: int = 400) -> dict[str, Any]:
    """Simulate paper-scale studies with known truth and score each model's intervals and bias."""
    from scipy.stats import norm

    from rating.fit import ModelSpec, _fit_calibrated, _observations, fit_model

    rng = np.random.default_rng(2026)
    share = np.array([3.0, 3.0, 3.0, 3.0, 1.0])
    z = norm.ppf(0.975)
    stats: dict[str, dict[str, list[float]]] = {
        m: {"cover": [], "level": [], "small": [], "sigma": [], "sure_wrong": [], "sure": []}
        for m in ("paper", "calibrated", "random_agents")
    }
    for study in range(studies):
        p = share / share.sum() if study % 2 else None
        agent = rng.choice(5, size=386, p=p)
        human = np.concatenate([np.arange(93), rng.integers(0, 93, 386 - 93)])
        skill = rng.normal(0.0, 3.0, 5)
        y = 70.0 + skill[agent] + rng.normal(0.0, 8.0, 93)[human] + rng.normal(0.0, 15.0, 386)
        obs = _observations(agent, human, y, None, None)
        fits = {
            "paper": fit_model(agent, human, y, spec=ModelSpec(kind="paper")),
            "calibrated": fit_model(agent, human, y, spec=ModelSpec()),
            "random_agents": _fit_calibrated(obs, ModelSpec(), random_agents=True),
        }
        for name, fit in fits.items():
            truth = 70.0 + skill[fit.agent_ids.astype(int)]
            i, j = np.triu_indices(5, 1)
            cov = fit.agent_cov
            sd = np.sqrt(cov[i, i] + cov[j, j] - 2 * cov[i, j])
            gap, true_gap = fit.agent_mu[i] - fit.agent_mu[j], truth[i] - truth[j]
            s = stats[name]
            s["cover"].extend((np.abs(gap - true_gap) <= z * sd).tolist())
            s["level"].append(float((fit.agent_mu - truth).mean()))
            s["sigma"].append(float(fit.agent_sigma().mean()))
            probs = fit.prob_greater()[i, j]
            sure = (probs > 0.999) | (probs < 0.001)
            s["sure"].extend(sure.tolist())
            s["sure_wrong"].extend((sure & ((probs > 0.5) != (true_gap > 0))).tolist())
            if p is not None:
                small = fit.agent_ids.astype(int) == 4
                err = fit.agent_mu - truth
                s["small"].append(float(err[small].mean() - err[~small].mean()))
    return {
        name: {
            "gap_coverage_95": float(np.mean(s["cover"])),
            "level_bias": float(np.mean(s["level"])),
            "small_agent_bias": float(np.mean(s["small"])),
            "mean_sigma": float(np.mean(s["sigma"])),
            "share_pairs_p_gt_0999": float(np.mean(s["sure"])),
            "wrong_among_p_gt_0999": float(np.sum(s["sure_wrong"]) / max(np.sum(s["sure"]), 1)),
        }
        for name, s in stats.items()
    }


def _child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--big", action="store_true", help="also fit 100 x 10^6 x 10^7 (minutes, ~2 GB)")
    parser.add_argument("--only", choices=["fits", "statsmodels", "task", "stability", "calibration"])
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        runners = {
            "fit": lambda: run_fit(rest[0]),
            "statsmodels": lambda: run_statsmodels(rest[0]),
            "task": run_task,
            "stability": run_stability,
            "calibration": run_calibration,
        }
        print(json.dumps(runners[kind]()))
        return

    print(f"load average {os.getloadavg()[0]:.1f}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
    sections = [args.only] if args.only else ["fits", "statsmodels", "task", "stability", "calibration"]
    if "fits" in sections:
        print("\nREML fit + exact posterior (hyper-uncertainty integrated)")
        for name in FIT_SCALES:
            if name == "100x1M" and not args.big:
                print("  100x1M: skipped (pass --big)")
                continue
            r = _child(["fit", name])
            _, _, _, t_s, t_b = FIT_SCALES[name]
            print(
                f"  {name:8s} {r['seconds'] * 1000:9.1f} ms  [{_mark(r['seconds'] <= t_s)} <= {t_s * 1000:.0f} ms]"
                f"  max RSS {r['max_rss'] / 2**20:7.0f} MiB [{_mark(r['max_rss'] <= t_b)}]"
                f"  hyper {r['hyper']} se {r['hyper_se']}"
            )
    if "statsmodels" in sections:
        print("\nstatsmodels MixedLM (REML) on the same data")
        for name in STATSMODELS_SCALES:
            r = _child(["statsmodels", name])
            print(
                f"  {name:6s} ours {r['ours_s'] * 1000:8.1f} ms  statsmodels {r['statsmodels_s'] * 1000:9.1f} ms"
                f"  ratio {r['statsmodels_s'] / r['ours_s']:7.1f}x  max rel diff variances "
                f"{r['max_rel_diff_variances']:.1e} agents {r['max_rel_diff_agents']:.1e} "
                f"[{_mark(max(r['max_rel_diff_variances'], r['max_rel_diff_agents']) <= 1e-4)} <= 1e-4]"
                f"  loglik {r['loglik_ours']:.6f} vs {r['loglik_statsmodels']:.6f}"
            )
    if "task" in sections:
        r = _child(["task"])
        print(
            f"\ntask model 5 x 10^4 x 2000 tasks x 10^5: {r['seconds']:.2f} s [{_mark(r['seconds'] <= TARGET_TASK_S)}"
            f" <= {TARGET_TASK_S:.0f} s]  max RSS {r['max_rss'] / 2**20:.0f} MiB  hyper {r['hyper']}\n"
            f"  compare_models {r['compare_s']:.2f} s: {r['compare']}"
        )
    if "stability" in sections:
        r = _child(["stability"])
        for key in ("seconds_observation", "seconds_human"):
            times = sorted(r[key])
            print(
                f"\nstability 10^5 episodes / 20 000 participants, bootstrap 10 000 by {key.split('_')[1]}"
                f" + both leave-one-out tables: best {times[0]:.2f} s, median {times[len(times) // 2]:.2f} s,"
                f" worst {times[-1]:.2f} s of {len(times)} [{_mark(times[-1] <= TARGET_STABILITY_S)} worst"
                f" <= {TARGET_STABILITY_S:.0f} s]",
                end="",
            )
        print(f"  max RSS {r['max_rss'] / 2**20:.0f} MiB  load average at the end {r['load_average']:.1f}")
    if "calibration" in sections:
        r = _child(["calibration"])
        print("\ncalibration, 400 simulated paper-scale studies (agent sd 3, human sd 8, noise 15, level 70)")
        for name, s in r.items():
            print(
                f"  {name:14s} gap coverage {s['gap_coverage_95']:.3f}  level bias {s['level_bias']:+.2f}"
                f"  small-agent bias {s['small_agent_bias']:+.2f}  mean sigma {s['mean_sigma']:.2f}"
                f"  pairs at P>0.999 {s['share_pairs_p_gt_0999']:.3f} (wrong {s['wrong_among_p_gt_0999']:.3f})"
            )


if __name__ == "__main__":
    main()
