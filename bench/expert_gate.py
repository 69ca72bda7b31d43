"""Simulate the expert gate's calibration sample and check its estimates (rating/expert_gate.py).

Usage::

    python bench/expert_gate.py           # 1 000 simulated studies per section, about a minute
    python bench/expert_gate.py --quick   # 200

Design: a study of 600 automatically graded episodes with 5 criteria each (pass/fail by the experts, the
judge's share of points = verdict + 0.25 noise, clipped to [0, 1]) from three agent families of 60 %, 30 %
and 10 % of the episodes. The judge is fair on the first two families and 25 points lenient on the third
(a self-preference the gate should see). The truth is the judge's bias over **all** automatically graded
episodes. Calibration sample: rate 0.1, each family's first 10 sampled for sure (`inclusion_probability`).

Printed, per estimator of the judge's bias against the experts: its mean error over studies (goal: within
+- 1.96 Monte-Carlo SE of 0 for the weighted calibration sample), and for the weighted estimator the coverage
of its 95 % episode-bootstrap interval (goal 93-97 %) and how well "n more episodes for a w-point interval"
predicts the width reached. Estimators: the calibration sample weighted by 1 / pi (what the gate uses), the
same sample unweighted, and a selected sample of the same size: the episodes whose judge scores the panel
disagreed about most (today's expert-review queue). Also the gate's evaluation time for 20 000 co-graded
items (2 000 bootstrap rounds). Prints, never asserts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rating.expert_gate import (  # noqa: E402
    GateRule,
    bias,
    episodes_for_bias_width,
    gate_evaluate,
    inclusion_probability,
    statistics_bootstrap,
)

N_EPISODES, N_CRITERIA = 600, 5
FAMILY_SHARES = (0.6, 0.3, 0.1)
LENIENCY = (0.0, 0.0, 0.25)
RATE, FLOOR = 0.1, 10


def simulate(rng: np.random.Generator) -> dict[str, np.ndarray]:
    family = rng.choice(3, size=N_EPISODES, p=FAMILY_SHARES)
    expert = rng.integers(0, 2, (N_EPISODES, N_CRITERIA)).astype(float)
    second = np.clip(expert + rng.normal(0, 0.25, expert.shape), 0, 1)  # a second judge, for the queue
    judge = np.clip(expert + np.asarray(LENIENCY)[family][:, None] + rng.normal(0, 0.25, expert.shape), 0, 1)
    sampled = np.zeros(N_EPISODES, dtype=bool)
    pi = np.zeros(N_EPISODES)
    counts = [0, 0, 0]
    for e in range(N_EPISODES):
        pi[e] = inclusion_probability(rate=RATE, sampled_in_family=counts[family[e]], min_per_family=FLOOR)
        sampled[e] = rng.random() < pi[e]
        counts[family[e]] += int(sampled[e])
    disagreement = np.abs(judge.sum(axis=1) - second.sum(axis=1))
    return {"family": family, "expert": expert, "judge": judge, "sampled": sampled, "pi": pi,
            "queue": np.argsort(-disagreement)[: int(sampled.sum())]}


def flat(data: dict[str, np.ndarray], episodes: np.ndarray, weighted: bool):
    judge, expert = data["judge"][episodes].ravel(), data["expert"][episodes].ravel()
    ids = np.repeat(episodes, N_CRITERIA)
    weight = np.repeat(1.0 / data["pi"][episodes], N_CRITERIA) if weighted else None
    return judge, expert, ids, weight


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    studies = 200 if args.quick else 1000
    print(f"expert gate: {studies} simulated studies, {N_EPISODES} episodes x {N_CRITERIA} criteria; "
          f"load {os.getloadavg()[0]:.1f}")
    errors: dict[str, list[float]] = {"weighted calibration sample (the gate)": [], "unweighted calibration sample": [],
                                      "judges' disagreement queue": []}
    hits, predicted, reached = 0, [], []
    for s in range(studies):
        rng = np.random.default_rng(s)
        data = simulate(rng)
        truth = 100 * float(np.mean(data["judge"] - data["expert"]))
        sample = np.flatnonzero(data["sampled"])
        j, x, ids, w = flat(data, sample, True)
        estimate = bias(j, x, w)
        errors["weighted calibration sample (the gate)"].append(estimate - truth)
        errors["unweighted calibration sample"].append(bias(j, x) - truth)
        jq, xq, _, _ = flat(data, data["queue"], False)
        errors["judges' disagreement queue"].append(bias(jq, xq) - truth)
        _, draws = statistics_bootstrap(j, x, ids, w, rounds=1000, seed=s)
        low, high = np.quantile(draws, [0.025, 0.975])
        hits += low <= truth <= high
        if s < 50:  # the sample-size prediction: double the precision
            more = episodes_for_bias_width(n_episodes=sample.size, interval=(low, high), width=(high - low) / 2)
            extra = rng.choice(np.setdiff1d(np.arange(N_EPISODES), sample), size=min(more, N_EPISODES - sample.size),
                               replace=False)
            bigger = np.concatenate([sample, extra])
            j2, x2, ids2, w2 = flat(data, bigger, True)
            _, draws2 = statistics_bootstrap(j2, x2, ids2, w2, rounds=1000, seed=s)
            lo2, hi2 = np.quantile(draws2, [0.025, 0.975])
            predicted.append((high - low) / 2)
            reached.append(hi2 - lo2)
    print(f"{'estimator of the judge bias (points)':<44}{'mean error':>12}{'+-1.96 MC SE':>14}  verdict")
    for name, values in errors.items():
        arr = np.asarray(values)
        half = 1.96 * arr.std(ddof=1) / np.sqrt(arr.size)
        verdict = "unbiased" if abs(arr.mean()) <= half else "BIASED"
        print(f"{name:<44}{arr.mean():>12.2f}{half:>14.2f}  {verdict}")
    coverage = hits / studies
    se = 1.96 * np.sqrt(coverage * (1 - coverage) / studies)
    status = "PASS" if coverage + se >= 0.93 and coverage - se <= 0.97 else "MISS"
    print(f"coverage of the 95 % episode-bootstrap bias interval: {100 * coverage:.1f} % (+-{100 * se:.1f}); "
          f"goal 93-97 %: {status}")
    ratio = np.asarray(reached) / np.asarray(predicted)
    print(f"'n more episodes for half the width': reached / target width, median {np.median(ratio):.2f} "
          f"(IQR {np.quantile(ratio, 0.25):.2f}-{np.quantile(ratio, 0.75):.2f}) over {ratio.size} studies "
          "(the extra episodes come from a 10 % sample's remainder, so their weights are approximate)")

    rng = np.random.default_rng(1)
    n = 4000
    expert = rng.integers(0, 2, n * N_CRITERIA).astype(float)
    judge = np.clip(expert + rng.normal(0, 0.25, expert.size), 0, 1)
    ids = np.repeat(np.arange(n), N_CRITERIA)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        gate_evaluate(judge, expert, ids, rule=GateRule(), rounds=2000)
        times.append(time.perf_counter() - start)
    print(f"gate evaluation, {n * N_CRITERIA} co-graded items of {n} episodes, 2 000 rounds: "
          f"{1000 * np.median(times):.0f} ms (median of 3; per judge x category); load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
