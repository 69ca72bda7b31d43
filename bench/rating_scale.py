"""Benchmark the exact rating engine from paper scale up to a million humans.

Usage::

    python bench/rating_scale.py            # every scale, dense comparison up to 10 000 humans
    python bench/rating_scale.py --quick    # skip the 10^7-observation scale and the 10 000-human dense solve

Each scale runs in a fresh subprocess so its peak memory is its own. For every scale the script prints the
time to accumulate the observations (``SkillModel.from_arrays``) and to compute the exact posterior (every
mu and sigma, Schur path), and two memory figures: the tracemalloc peak of accumulate + posterior (Python and
numpy allocations, measured in a second, separate run because tracing slows the first) and the max RSS of the
whole subprocess (including data generation). Up to 10 000 humans it also times what the reference
implementation does -- a dense solve plus a dense inverse of the full Lambda -- and the speed ratio. Finally
it times 10 000 bootstrap rounds of the paper model at paper scale (rating.stability). Targets are marked PASS or MISS.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SCALES: dict[str, tuple[int, int, int]] = {
    "paper": (5, 93, 386),
    "5x3k": (5, 3_000, 12_000),
    "50x10k": (50, 10_000, 100_000),
    "100x1M": (100, 1_000_000, 10_000_000),
}
DENSE_LIMIT = 10_000  # humans; beyond this a dense n x n inverse is out of reach
TARGET_POSTERIOR_S = 2.0
TARGET_POSTERIOR_BYTES = 2 * 1024**3
TARGET_SPEEDUP = 1000.0
TARGET_BOOTSTRAP_S = 1.0
TARGET_INGEST_S = 3.0  # add_observations and leaderboard() each, 10^6 humans x 10^7 observations
REPEATS = 3  # timings are the best of this many runs; the machine may be shared


def synthetic(n_agents: int, n_humans: int, n_obs: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Return int32 agent/human indices and scores from y = 70 + s_A + s_H + noise, every human observed."""
    rng = np.random.default_rng(seed)
    agent_idx = rng.integers(0, n_agents, n_obs, dtype=np.int32)
    # Every human appears at least once, so the entity counts are exactly the nominal ones.
    human_idx = np.concatenate(
        [np.arange(n_humans, dtype=np.int32), rng.integers(0, n_humans, n_obs - n_humans, dtype=np.int32)]
    )
    rng.shuffle(human_idx)
    skills = rng.normal(0.0, 5.0, n_agents)
    offsets = rng.normal(0.0, 10.0, n_humans)
    scores = 70.0 + skills[agent_idx] + offsets[human_idx] + rng.normal(0.0, 10.0, n_obs)
    return agent_idx, human_idx, scores


def _max_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def run_scale(name: str, dense: bool) -> dict[str, Any]:
    """Time one scale in this process and return its figures."""
    from rating.engine import SkillModel

    n_agents, n_humans, n_obs = SCALES[name]
    # Warm the code path (lazy imports, LAPACK initialisation) so the figures show steady-state cost.
    SkillModel.from_arrays(*synthetic(2, 3, 6, seed=99)).posterior()
    agent_idx, human_idx, scores = synthetic(n_agents, n_humans, n_obs)
    gc.collect()

    accumulate, solve, solve_cpu = [], [], []
    for _ in range(REPEATS):
        model = post = None
        gc.collect()
        t0 = time.perf_counter()
        model = SkillModel.from_arrays(agent_idx, human_idx, scores)
        t1, c1 = time.perf_counter(), time.process_time()
        post = model.posterior()
        t2, c2 = time.perf_counter(), time.process_time()
        accumulate.append(t1 - t0)
        solve.append(t2 - t1)
        solve_cpu.append(c2 - c1)
    result: dict[str, Any] = {
        "scale": name,
        "agents": len(post.agent_ids),
        "humans": len(post.human_ids),
        "observations": int(post.n_agents.sum()),
        "accumulate_s": min(accumulate),
        "posterior_s": min(solve),
        "posterior_median_s": float(np.median(solve)),
        "posterior_cpu_s": min(solve_cpu),
        "max_rss_bytes": _max_rss_bytes(),
        "load_average": os.getloadavg()[0],
    }

    if n_obs <= 200_000:
        agent_ids = np.char.add("agent-", agent_idx.astype(str))
        human_ids = np.char.add("human-", human_idx.astype(str))
        t3 = time.perf_counter()
        by_id = SkillModel()
        by_id.add_observations(agent_ids, human_ids, scores)
        by_id.posterior()
        result["string_ids_s"] = time.perf_counter() - t3

    if dense and n_humans <= DENSE_LIMIT:
        Lambda, eta = model.precision_matrix()  # noqa: N806 - the paper's symbol
        full = Lambda.toarray()
        t4 = time.perf_counter()
        mu = np.linalg.solve(full, eta)
        sigma = np.sqrt(np.diag(np.linalg.inv(full)))
        result["dense_s"] = time.perf_counter() - t4
        exact_mu = np.concatenate([post.mu_agents, post.mu_humans])
        exact_sigma = np.concatenate([post.sigma_agents, post.sigma_humans])
        result["dense_max_abs_diff"] = float(max(np.abs(mu - exact_mu).max(), np.abs(sigma - exact_sigma).max()))
        del full, Lambda

    del model, post
    gc.collect()
    tracemalloc.start()
    model = SkillModel.from_arrays(agent_idx, human_idx, scores)
    model.posterior()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    result["tracemalloc_peak_bytes"] = peak
    return result


def run_ingest(ids: str) -> dict[str, Any]:
    """Time ``add_observations`` with integer or string ids and ``leaderboard()`` at 10^6 humans x 10^7 obs.

    The ids are built before the clock starts; ``leaderboard()`` includes the posterior it ranks. Memory is
    the tracemalloc peak of ingest + leaderboard (a second run) and the max RSS of the whole subprocess.
    """
    from rating.engine import SkillModel

    agent_idx, human_idx, scores = synthetic(*SCALES["100x1M"])
    if ids == "int":
        agents, humans = agent_idx.astype(np.int64), human_idx.astype(np.int64)
    else:
        # Ids as a caller holds them: str arrays as wide as the longest id ("agent-99", "h999999").
        agents = np.char.add("agent-", agent_idx.astype(str)).astype("U8")
        humans = np.char.add("h", human_idx.astype(str)).astype("U7")
    del agent_idx, human_idx
    gc.collect()
    SkillModel().add_observations(agents[:10], humans[:10], scores[:10])  # warm the code path
    t0 = time.perf_counter()
    model = SkillModel()
    model.add_observations(agents, humans, scores)
    t1 = time.perf_counter()
    board = model.leaderboard()
    t2 = time.perf_counter()
    rows = len(board)
    del model, board
    gc.collect()
    tracemalloc.start()
    model = SkillModel()
    model.add_observations(agents, humans, scores)
    model.leaderboard()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "ids": ids,
        "ingest_s": t1 - t0,
        "leaderboard_s": t2 - t1,
        "rows": rows,
        "tracemalloc_peak_bytes": peak,
        "max_rss_bytes": _max_rss_bytes(),
        "load_average": os.getloadavg()[0],
    }


def run_bootstrap() -> dict[str, Any]:
    """Time 10 000 bootstrap rounds at paper scale, first (cold) and second call."""
    from rating.fit import ModelSpec
    from rating.stability import stability

    agent_idx, human_idx, scores = synthetic(*SCALES["paper"], seed=1)
    agents = np.char.add("agent-", agent_idx.astype(str))
    humans = np.char.add("human-", human_idx.astype(str))
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        result = stability(agents, humans, scores, spec=ModelSpec(kind="paper"), rounds=10_000, seed=0)
        times.append(time.perf_counter() - t0)
    return {
        "first_s": times[0],
        "best_s": min(times),
        "mean_kendall_tau": result["bootstrap"]["mean_kendall_tau"],
        "load_average": os.getloadavg()[0],
    }


def _child(args: list[str]) -> dict[str, Any]:
    completed = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False, cwd=ROOT)
    if completed.returncode != 0:
        raise SystemExit(f"benchmark step {args} failed:\n{completed.stderr}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _mark(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _mib(n_bytes: float) -> str:
    mib = n_bytes / 1024**2
    return f"{mib:,.1f} MiB" if mib < 10 else f"{mib:,.0f} MiB"


def _ratio(value: float) -> str:
    return f"{value:,.1f}x" if value < 10 else f"{value:,.0f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="skip the 10^7 scale and the 10 000-human dense solve")
    parser.add_argument("--no-dense", action="store_true", help="skip every dense comparison")
    parser.add_argument("--only", choices=list(SCALES), action="append", help="run only these scales (repeatable)")
    parser.add_argument(
        "--ingest", action="store_true", help="only time add_observations + leaderboard at 10^6 humans x 10^7 obs"
    )
    parser.add_argument("--case", choices=[*SCALES, "bootstrap", "ingest-int", "ingest-str"], help=argparse.SUPPRESS)
    parser.add_argument("--dense", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.case == "bootstrap":
        print(json.dumps(run_bootstrap()))
        return
    if args.case in ("ingest-int", "ingest-str"):
        print(json.dumps(run_ingest(args.case.split("-")[1])))
        return
    if args.case:
        print(json.dumps(run_scale(args.case, dense=args.dense)))
        return
    if args.ingest:
        print("SkillModel.add_observations + leaderboard(), 100 agents x 10^6 humans x 10^7 observations")
        for ids in ("int", "str"):
            fig = _child(["--case", f"ingest-{ids}"])
            print(
                f"  {ids:>3} ids: add_observations {fig['ingest_s']:.2f} s "
                f"{_mark(fig['ingest_s'] <= TARGET_INGEST_S)}, leaderboard {fig['leaderboard_s']:.2f} s "
                f"({fig['rows']:,} rows) {_mark(fig['leaderboard_s'] <= TARGET_INGEST_S)}; traced "
                f"{_mib(fig['tracemalloc_peak_bytes'])} "
                f"{_mark(fig['tracemalloc_peak_bytes'] <= TARGET_POSTERIOR_BYTES)}, rss {_mib(fig['max_rss_bytes'])}; "
                f"load average {fig['load_average']:.1f}"
            )
        return

    import scipy

    print(
        f"rating engine benchmark: numpy {np.__version__}, scipy {scipy.__version__}, python {sys.version.split()[0]}"
    )
    print(f"times: best of {REPEATS} runs (accumulate = SkillModel.from_arrays, posterior = every mu and sigma, exact)")
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    print("memory: 'traced' = tracemalloc peak during accumulate + posterior (separate run);")
    print("        'rss' = max resident set size of the whole scale subprocess, data generation included")
    print()
    columns = ("accumulate", "posterior", "traced", "rss", "dense")
    header = f"{'scale (A x H x obs)':<40}" + "".join(f"{c:>12}" for c in columns) + f"{'speedup':>10}"
    print(header)
    print("-" * len(header))
    scales = args.only or [s for s in SCALES if not (args.quick and s == "100x1M")]
    figures = {}
    for scale in scales:
        n_humans = SCALES[scale][1]
        dense = not args.no_dense and n_humans <= (3_000 if args.quick else DENSE_LIMIT)
        fig = _child(["--case", scale, *(["--dense"] if dense else [])])
        figures[scale] = fig
        label = f"{scale} ({fig['agents']} x {fig['humans']:,} x {fig['observations']:,})"
        dense_s = f"{fig['dense_s']:.3f} s" if "dense_s" in fig else "-"
        speedup = _ratio(fig["dense_s"] / fig["posterior_s"]) if "dense_s" in fig else "-"
        print(
            f"{label:<40}{fig['accumulate_s']:>10.3f} s{fig['posterior_s']:>10.3f} s"
            f"{_mib(fig['tracemalloc_peak_bytes']):>12}{_mib(fig['max_rss_bytes']):>12}{dense_s:>12}{speedup:>10}"
        )
        extras = [
            f"posterior median of {REPEATS}: {fig['posterior_median_s']:.3f} s wall; best CPU time "
            f"{fig['posterior_cpu_s']:.3f} s; load average {fig['load_average']:.1f}"
        ]
        if "string_ids_s" in fig:
            extras.append(f"add_observations with string ids + posterior: {fig['string_ids_s']:.3f} s")
        if "dense_max_abs_diff" in fig:
            extras.append(f"max |dense - Schur| over mu and sigma: {fig['dense_max_abs_diff']:.1e}")
        for line in extras:
            print(f"{'':<4}{line}")

    boot = _child(["--case", "bootstrap"])
    print()
    print(
        f"bootstrap, paper scale, 10 000 rounds: {boot['best_s']:.3f} s best of {REPEATS}, "
        f"{boot['first_s']:.3f} s first call (mean Kendall tau {boot['mean_kendall_tau']:.2f}, "
        f"load {boot['load_average']:.1f})"
    )
    print()
    print("targets")
    if "100x1M" in figures:
        big = figures["100x1M"]
        print(
            f"  10^6-human posterior <= {TARGET_POSTERIOR_S:.0f} s: {big['posterior_s']:.3f} s wall "
            f"{_mark(big['posterior_s'] <= TARGET_POSTERIOR_S)} (CPU time {big['posterior_cpu_s']:.3f} s, "
            f"load average {big['load_average']:.1f} on {os.cpu_count()} CPUs)"
        )
        print(
            f"  10^6-human accumulate + posterior <= 2 GiB traced: {_mib(big['tracemalloc_peak_bytes'])} "
            f"{_mark(big['tracemalloc_peak_bytes'] <= TARGET_POSTERIOR_BYTES)}"
            f" (whole process rss {_mib(big['max_rss_bytes'])})"
        )
    else:
        print("  10^6-human posterior: not run (--quick)")
    ten_k = figures.get("50x10k", {})
    if "dense_s" in ten_k:
        ratio = ten_k["dense_s"] / ten_k["posterior_s"]
        verdict = _mark(ratio >= TARGET_SPEEDUP)
        print(f"  >= {TARGET_SPEEDUP:,.0f}x faster than dense at 10 000 humans: {_ratio(ratio)} {verdict}")
    else:
        print("  speed-up at 10 000 humans: dense solve not run")
    print(
        f"  bootstrap 10 000 rounds <= {TARGET_BOOTSTRAP_S:.0f} s: {boot['first_s']:.3f} s first call "
        f"{_mark(boot['first_s'] <= TARGET_BOOTSTRAP_S)}"
    )


if __name__ == "__main__":
    main()
