"""Effort measures of a worker's prompts (seed 004 §3.3): the edit ratio beside turns and characters.

The edit ratio is the normalised Levenshtein distance between the worker's concatenated prompts and the task's
own text: 0 when the worker pasted the task as it stands, near 1 when they wrote their own request. The synergy
paper uses it as an effort control, so the theory-of-mind analysis does not credit perspective-taking with what
plain effort explains.
"""

from __future__ import annotations

import numpy as np

# Beyond this many characters per side the distance is computed on the first MAX_CHARS of each (said by the caller
# through `edit_ratio_cut`); the row-by-row cost is len(a) numpy passes of len(b), so 20 000 × 20 000 stays ~1 s.
MAX_CHARS = 20_000


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions of one character each) between ``a`` and ``b``.

    One numpy pass per character of ``a``: deletions and substitutions come from the previous row, and the
    insertions along the row are a running minimum, d[j] = min_k (e[k] + j − k) = j + cummin(e − k).
    """
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return len(a)
    codes_b = np.frombuffer(b.encode("utf-32-le"), dtype=np.uint32)
    steps = np.arange(len(b) + 1)
    row = steps.copy()
    for i, char in enumerate(np.frombuffer(a.encode("utf-32-le"), dtype=np.uint32), start=1):
        substitute = row[:-1] + (codes_b != char)
        delete = row[1:] + 1
        fresh = np.empty_like(row)
        fresh[0] = i
        fresh[1:] = np.minimum(substitute, delete)
        row = np.minimum.accumulate(fresh - steps) + steps
    return int(row[-1])


def edit_ratio(prompts: list[str], question: str) -> float | None:
    """Normalised edit distance of the worker's prompts (joined by newlines) from the task text, in [0, 1].

    None when the worker wrote nothing: there is no effort to measure, which is not the same as none.
    """
    text = "\n".join(p for p in prompts if p.strip())
    if not text.strip():
        return None
    a, b = text[:MAX_CHARS], question[:MAX_CHARS]
    longest = max(len(a), len(b))
    return levenshtein(a, b) / longest if longest else 0.0


def edit_ratio_cut(prompts: list[str], question: str) -> bool:
    """Whether :func:`edit_ratio` compared shortened texts (either side longer than MAX_CHARS)."""
    return len("\n".join(prompts)) > MAX_CHARS or len(question) > MAX_CHARS
