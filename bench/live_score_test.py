"""Bench: does the live updates' REML score test refit when it should, and only then?

Why: between refits the variance components stay at the last REML fit; `rating.live.InformationState.score_test`
decides when they have drifted. Under the same model a test at level alpha must reject about alpha of the time
(no needless refits), and it must reject when the participant spread changes. Each simulated study fits 1 500
scores of 300 participants x 4 agents, then grows by ``--new`` participants x 5 scores through live updates:
drawn from the same model ("same") or with the participant SD raised from 8 to 30 ("drifted"). Prints the
rejection rates at 0.01 and 0.05 with their Monte-Carlo standard errors, and the machine's load.

    python bench/live_score_test.py [--studies 200] [--new 300]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from rating.fit import ModelSpec, fit_model  # noqa: E402
from rating.live import information_state, participant_terms  # noqa: E402
from tests.rating.simulated import simulate  # noqa: E402


def one_study(seed: int, new: int, human_sd: float) -> float:
    rng = np.random.default_rng(seed)
    data = simulate(rng, n_agents=4, n_humans=300, n_obs=1500)
    fit = fit_model(data["agent"], data["human"], data["y"], spec=ModelSpec())
    position = {int(a): i for i, a in enumerate(fit.agent_ids)}
    codes = np.array([position[int(a)] for a in data["agent"]])
    state = information_state(fit, codes, data["human"], data["y"])
    assert state is not None
    skill = data["truth"][fit.agent_ids.astype(int)]
    empty = participant_terms(np.zeros(0, int), np.zeros(0, int), np.zeros(0), np.zeros(0), 4, state.gammas)
    for _ in range(new):
        agents = rng.integers(0, 4, 5)
        y = skill[agents] + rng.normal(0, human_sd) + rng.normal(0, 15, 5)
        state = state.updated(empty, participant_terms(agents, np.zeros(5, int), y, np.ones(5), 4, state.gammas))
    return state.score_test().p_value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--studies", type=int, default=200)
    parser.add_argument("--new", type=int, default=300)
    args = parser.parse_args()
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    for label, human_sd in (("same model", 8.0), ("participant SD 8 -> 30", 30.0)):
        p = np.array([one_study(seed, args.new, human_sd) for seed in range(args.studies)])
        rates = []
        for alpha in (0.01, 0.05):
            rate = float((p < alpha).mean())
            rates.append(f"reject at {alpha}: {rate:.3f} (+/- {math.sqrt(max(rate * (1 - rate), 1e-9) / p.size):.3f})")
        print(f"{label:>24}: {args.studies} studies, +{args.new} participants each; " + "; ".join(rates))
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
