"""Reproducible draw of episode pairs for the pairwise ToM run (pure: ids in, pairs out)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence


def _unrank(index: int, n: int) -> tuple[int, int]:
    """The index-th pair (i < j) of range(n) in lexicographic order."""
    i = 0
    while index >= n - 1 - i:
        index -= n - 1 - i
        i += 1
    return i, i + 1 + index


def draw_pairs(ids: Sequence[int], cap: int, seed: int) -> list[tuple[int, int]]:
    """Up to `cap` distinct unordered pairs (a < b) of `ids`, uniformly without replacement, same seed same pairs."""
    units = sorted(set(ids))
    total = math.comb(len(units), 2)
    if cap < 1 or total == 0:
        return []
    picked = random.Random(seed).sample(range(total), min(cap, total))
    return sorted((units[i], units[j]) for i, j in (_unrank(k, len(units)) for k in picked))
