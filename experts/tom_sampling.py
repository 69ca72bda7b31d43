"""Stratified simple random sampling without replacement: allocation and a seeded draw (pure, no Django).

Each stratum h of N_h units gets n_h units (proportional allocation, at least one per stratum, largest remainder),
drawn uniformly, so a sampled unit's inclusion probability is pi = n_h / N_h and sum(1/pi) over a stratum's sample
is N_h: a Horvitz-Thompson weight.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Bands of the judges' mean ToM score (0-5): [lower bound, name), checked from the top.
BANDS: tuple[tuple[float, str], ...] = ((3.5, "high"), (2.0, "mid"), (0.0, "low"))


def score_band(mean: float) -> str:
    """The band of a mean ToM score: low (< 2), mid (2 to < 3.5) or high (>= 3.5)."""
    return next(name for bound, name in BANDS if mean >= bound)


@dataclass(frozen=True)
class Drawn:
    unit: int
    stratum: str
    stratum_population: int
    stratum_sample: int

    @property
    def inclusion_probability(self) -> float:
        return self.stratum_sample / self.stratum_population


def allocate(sizes: Mapping[str, int], size: int) -> dict[str, int]:
    """n_h per stratum summing to min(size, N); ValueError if size is below the number of strata."""
    total = sum(sizes.values())
    if size >= total:
        return dict(sizes)
    if size < len(sizes):
        raise ValueError(f"size {size} is below the number of strata ({len(sizes)}); every stratum needs one")
    quota = {h: size * n / total for h, n in sizes.items()}
    alloc = {h: min(sizes[h], max(1, math.floor(q))) for h, q in quota.items()}
    while (gap := size - sum(alloc.values())) != 0:
        if gap > 0:
            open_ = [h for h in sorted(alloc) if alloc[h] < sizes[h]]
            pick = max(open_, key=lambda h: quota[h] - alloc[h])
            alloc[pick] += 1
        else:
            over = [h for h in sorted(alloc) if alloc[h] > 1]
            pick = max(over, key=lambda h: alloc[h] - quota[h])
            alloc[pick] -= 1
    return alloc


def stratified_draw(population: Mapping[str, Sequence[int]], size: int, seed: int) -> list[Drawn]:
    """Draw `size` units across strata; the same population, size and seed give the same sample."""
    if size < 1:
        raise ValueError("size must be at least 1")
    strata = {h: sorted(set(units)) for h, units in sorted(population.items()) if units}
    alloc = allocate({h: len(u) for h, u in strata.items()}, size)
    rng = random.Random(seed)
    drawn: list[Drawn] = []
    for h, units in strata.items():
        for unit in sorted(rng.sample(units, alloc[h])):
            drawn.append(Drawn(unit, h, len(units), alloc[h]))
    return drawn
