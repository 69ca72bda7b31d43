"""Compiled loops of the observation bootstrap: one pass per round from drawn indices to the agents' system.

Why compiled: a round of the plain bootstrap re-weights every (participant, agent) sum, and in numpy that is
a dozen full passes over a dense (participants x agents) tensor per round -- memory traffic, not arithmetic,
was the cost (about 1.3 ms a round at 20 000 participants). Here one round is one count pass over the draws,
one pass over the observations laid out by (participant, agent), and each participant's few pairs of pairs
(:math:`\\sum_h b_h b_h^\\top / d_h` without the zero cells). Pure numpy and numba: no Django, no I/O.

The numbers equal the numpy formulation's up to the order of floating-point sums (tested against a dense
solve of every round).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def observation_round_systems(
    draws: Any,
    obs_pair: Any,
    obs_w_wy: Any,
    pair_agent: Any,
    human_pair_start: Any,
    prior_precision_humans: Any,
    prior_eta_humans: Any,
    schur: Any,
    rhs: Any,
) -> None:  # pragma: no cover - compiled; exercised through rating.fit._bootstrap
    """Fill ``schur[r]`` with :math:`\\sum_h (\\mathrm{diag}(b_h) - b_h b_h^\\top / d_h)` and ``rhs[r]`` with
    :math:`\\sum_h (e_h - b_h \\eta_h / d_h)` for each row ``r`` of ``draws`` (indices into the observations).

    Observation ``o`` belongs to pair ``obs_pair[o]`` and carries ``obs_w_wy[o] = (w, w y)``; pair ``p`` is
    agent ``pair_agent[p]``; participant ``h`` (in the caller's order) holds pairs
    ``human_pair_start[h]:human_pair_start[h+1]``, each participant's pairs in increasing agent order. The
    agents' prior is added by the caller.
    """
    rounds, n = draws.shape
    n_h = human_pair_start.shape[0] - 1
    n_a = schur.shape[1]
    n_pairs = pair_agent.shape[0]
    sums = np.empty((n_pairs, 2))
    upper = np.zeros((n_a, n_a))
    g = np.zeros(n_a)
    for r in range(rounds):
        sums[:, :] = 0.0
        for i in range(n):
            o = draws[r, i]
            p = obs_pair[o]
            sums[p, 0] += obs_w_wy[o, 0]
            sums[p, 1] += obs_w_wy[o, 1]
        upper[:, :] = 0.0
        g[:] = 0.0
        for h in range(n_h):
            p0 = human_pair_start[h]
            p1 = human_pair_start[h + 1]
            d = prior_precision_humans[h]
            eta = prior_eta_humans[h]
            for p in range(p0, p1):
                d += sums[p, 0]
                eta += sums[p, 1]
            f = eta / d
            for p in range(p0, p1):
                bp = sums[p, 0]
                a = pair_agent[p]
                g[a] += sums[p, 1] - bp * f
                q = bp / d
                upper[a, a] += bp - q * bp
                for s in range(p + 1, p1):  # the participant's later pairs: higher agents, the upper triangle
                    upper[a, pair_agent[s]] -= q * sums[s, 0]
        for a in range(n_a):
            schur[r, a, a] = upper[a, a]
            for b in range(a + 1, n_a):
                schur[r, a, b] = upper[a, b]
                schur[r, b, a] = upper[a, b]
            rhs[r, a] = g[a]
