"""Input rows of the preference model and their coding into arrays (`rating/preferences.py`).

Rows are plain dataclasses so a service can build them from the database (episodes, rubric grades, expert
rankings) and a simulation or a test can build them by hand. Coding checks every row and says which one is
wrong; it also decomposes each ranking into its pairs and finds which arms the data link (the comparison
graph plus the rubric scores), because a contrast between arms that nothing links has no number.
Pure numpy/scipy: no Django, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse
from scipy.sparse.csgraph import connected_components

__all__ = [
    "ARMS", "WORKER_ALONE", "ComparisonRow", "Coded", "EpisodeRow", "PreferenceInputError", "ScoreRow",
    "cell_components", "cell_label", "code_rows",
]

ARMS = ("with_agent", "worker_alone", "agent_alone")
WORKER_ALONE = "worker alone"


class PreferenceInputError(ValueError):
    """The rows cannot be fitted as given; the message names the offending row and why."""


@dataclass(frozen=True)
class EpisodeRow:
    """A deliverable and the skill terms behind it: ``arm`` is ``with_agent`` (a worker with an agent),
    ``worker_alone`` (the human professional's own deliverable) or ``agent_alone`` (a solo-agent run)."""

    episode_id: Hashable
    arm: str
    task_id: Hashable
    agent_id: Hashable | None = None
    worker_id: Hashable | None = None


@dataclass(frozen=True)
class ScoreRow:
    """One 0-100 rubric score of a deliverable by one grader (an LLM judge or an expert)."""

    episode_id: Hashable
    score: float
    grader_id: Hashable


@dataclass(frozen=True)
class ComparisonRow:
    """One expert's blind ranking of a comparison set (2-4 deliverables of one task).

    ``positions[i]`` is where item i was shown (1 = first), ``ranks[i]`` its rank (1 = best, equal ranks are
    ties), ``lengths[i]`` its length (words or characters, > 0; ``None`` when not measured).
    """

    set_id: Hashable
    expert_id: Hashable
    episode_ids: tuple[Hashable, ...]
    positions: tuple[int, ...]
    ranks: tuple[int, ...]
    lengths: tuple[float, ...] | None = None


def cell_label(arm: str, agent_id: Hashable | None) -> str:
    """The leaderboard row an episode belongs to: the worker alone, or an agent with or without a worker."""
    if arm == "worker_alone":
        return WORKER_ALONE
    return f"{'with agent' if arm == 'with_agent' else 'agent alone'}: {agent_id}"


@dataclass(frozen=True, eq=False)
class Coded:
    """Everything the fit needs, as integer codes and arrays.

    Episodes are coded 0..n-1; ``cell``/``worker``/``task`` give each episode's codes (worker -1 for an agent
    alone). Pairs come from the rankings: item ``pe`` against ``pf``, ``outcome`` +1 (pe preferred), -1, 0
    (tie), ``first`` = [pe shown first] - [pf shown first], ``log_length`` = log2(len pe / len pf) (0 when not
    measured), ``cluster`` = the ranking it came from, ``pair_expert`` its expert's code.
    """

    episode_ids: list[Hashable]
    cells: list[str]
    cell: np.ndarray
    worker: np.ndarray
    task: np.ndarray
    n_workers: int
    n_tasks: int
    score_episode: np.ndarray
    score: np.ndarray
    score_grader: np.ndarray
    graders: list[Hashable]
    pe: np.ndarray
    pf: np.ndarray
    outcome: np.ndarray
    first: np.ndarray
    log_length: np.ndarray
    cluster: np.ndarray
    pair_expert: np.ndarray
    experts: list[Hashable]
    excluded_experts: dict[str, str] = field(default_factory=dict)
    n_rankings: int = 0


def _episodes(rows: Sequence[EpisodeRow]) -> tuple[dict[Hashable, int], list[str], list[np.ndarray], int, int]:
    """Validate the episodes and code cells, workers and tasks by first appearance."""
    index: dict[Hashable, int] = {}
    cells: dict[str, int] = {}
    workers: dict[Hashable, int] = {}
    tasks: dict[Hashable, int] = {}
    codes: list[tuple[int, int, int]] = []
    for row in rows:
        if row.episode_id in index:
            raise PreferenceInputError(f"episode {row.episode_id} is listed twice")
        if row.arm not in ARMS:
            raise PreferenceInputError(f"episode {row.episode_id}: arm must be one of {ARMS}, not {row.arm!r}")
        if row.arm != "worker_alone" and row.agent_id is None:
            raise PreferenceInputError(f"episode {row.episode_id}: arm {row.arm} needs its agent")
        if row.arm != "agent_alone" and row.worker_id is None:
            raise PreferenceInputError(f"episode {row.episode_id}: arm {row.arm} needs its worker")
        if row.arm == "agent_alone" and row.worker_id is not None:
            raise PreferenceInputError(f"episode {row.episode_id}: an agent-alone run has no worker")
        index[row.episode_id] = len(index)
        c = cells.setdefault(cell_label(row.arm, row.agent_id), len(cells))
        w = -1 if row.worker_id is None else workers.setdefault(row.worker_id, len(workers))
        codes.append((c, w, tasks.setdefault(row.task_id, len(tasks))))
    arr = np.array(codes, dtype=np.int64).reshape(-1, 3)
    return index, list(cells), [arr[:, 0], arr[:, 1], arr[:, 2]], len(workers), len(tasks)


def _scores(rows: Sequence[ScoreRow], index: dict[Hashable, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                             list[Hashable]]:
    graders: dict[Hashable, int] = {}
    out = []
    for row in rows:
        if row.episode_id not in index:
            raise PreferenceInputError(f"a score of grader {row.grader_id} is for unknown episode {row.episode_id}")
        value = float(row.score)
        if not math.isfinite(value) or not 0.0 <= value <= 100.0:
            raise PreferenceInputError(f"episode {row.episode_id}: score {row.score} is not within 0-100")
        out.append((index[row.episode_id], value, graders.setdefault(row.grader_id, len(graders))))
    ep = np.array([o[0] for o in out], dtype=np.int64)
    return ep, np.array([o[1] for o in out], dtype=float), np.array([o[2] for o in out], dtype=np.int64), \
        list(graders)


def _check_ranking(row: ComparisonRow, index: dict[Hashable, int], task: list[int]) -> list[int]:
    """Validate one ranking; return its episodes' codes (``task``: each episode's task code)."""
    k = len(row.episode_ids)
    if k < 2:
        raise PreferenceInputError(f"{_where(row)} has {k} deliverable(s): a ranking needs at least two to compare")
    if len(set(row.episode_ids)) != k:
        raise PreferenceInputError(f"{_where(row)} lists the same deliverable twice")
    codes = [index.get(e, -1) for e in row.episode_ids]
    if -1 in codes:
        missing = [e for e, c in zip(row.episode_ids, codes, strict=True) if c < 0]
        raise PreferenceInputError(f"{_where(row)}: unknown episode(s) {missing}")
    if len(row.positions) != k or sorted(row.positions) != list(range(1, k + 1)):
        raise PreferenceInputError(f"{_where(row)}: positions must be the order shown, a permutation of 1..{k}")
    if len(row.ranks) != k or not all(int(r) == r and r >= 1 for r in row.ranks):
        raise PreferenceInputError(f"{_where(row)}: ranks must be {k} positive integers (1 = best, equal = tie)")
    if row.lengths is not None and (len(row.lengths) != k or not all(
            math.isfinite(float(v)) and float(v) > 0 for v in row.lengths)):
        raise PreferenceInputError(f"{_where(row)}: lengths must be {k} positive numbers (or None)")
    if len({task[c] for c in codes}) != 1:
        raise PreferenceInputError(f"{_where(row)}: a comparison set holds deliverables of one task only")
    return codes


def _where(row: ComparisonRow) -> str:
    return f"comparison set {row.set_id} (expert {row.expert_id})"


def _pairs(rows: Sequence[ComparisonRow], index: dict[Hashable, int], task: np.ndarray) -> dict[str, np.ndarray]:
    """Every ranking broken into its k(k-1)/2 pairs (the rank-breaking the model's composite likelihood uses),
    item i against item j for i < j, ranking by ranking. Rankings of one size are broken together."""
    tasks = task.tolist()
    checked = [(r, _check_ranking(row, index, tasks), row) for r, row in enumerate(rows)]
    parts: list[dict[str, np.ndarray]] = []
    for k in sorted({len(codes) for _, codes, _ in checked}):
        mine = [(r, codes, row) for r, codes, row in checked if len(codes) == k]
        i, j = np.triu_indices(k, 1)
        codes = np.array([c for _, c, _ in mine], dtype=np.int64)
        ranks = np.array([row.ranks for _, _, row in mine], dtype=float)
        shown_first = np.array([row.positions for _, _, row in mine], dtype=np.int64) == 1
        lengths = np.array([row.lengths if row.lengths is not None else (1.0,) * k for _, _, row in mine],
                           dtype=float)
        ratio = (lengths[:, i] / lengths[:, j]).ravel()
        parts.append({
            "pe": codes[:, i], "pf": codes[:, j], "outcome": np.sign(ranks[:, j] - ranks[:, i]).astype(np.int64),
            "first": shown_first[:, i].astype(float) - shown_first[:, j].astype(float),
            "log_length": np.array([math.log2(v) for v in ratio.tolist()], dtype=float),
            "cluster": np.repeat(np.array([r for r, _, _ in mine], dtype=np.int64)[:, None], i.size, axis=1),
        })
    names = ("pe", "pf", "outcome", "first", "log_length", "cluster")
    if not parts:
        return {name: np.zeros(0, dtype=float if name in ("first", "log_length") else np.int64) for name in names}
    out = {name: np.concatenate([part[name].ravel() for part in parts]) for name in names}
    order = np.argsort(out["cluster"], kind="stable")        # ranking by ranking, as the rows came
    return {name: values[order] for name, values in out.items()}


def _tie_everything(expert: np.ndarray, experts: list[Hashable], outcome: np.ndarray) -> dict[str, str]:
    """Experts whose every pair is a tie: they say nothing about which deliverable is better, and left in they
    would only push the tie parameter up; they are left out of the fit and named."""
    pairs = np.bincount(expert, minlength=len(experts))
    decided = np.bincount(expert[outcome != 0], minlength=len(experts))
    return {str(x): (f"expert {x} tied every deliverable in all {int(pairs[e])} pairs they ranked: "
                     "their rankings say nothing about which is better and are left out of the fit")
            for e, x in enumerate(experts) if decided[e] == 0}


def code_rows(episodes: Sequence[EpisodeRow], scores: Sequence[ScoreRow],
              comparisons: Sequence[ComparisonRow]) -> Coded:
    """Validate and code the rows; only episodes that are scored or compared are kept (others carry nothing)."""
    index, cells, (cell, worker, task), n_workers, n_tasks = _episodes(episodes)
    s_ep, s_val, s_grader, graders = _scores(scores, index)
    raw = _pairs(comparisons, index, task)
    outcome = raw["outcome"]
    ranked_by: dict[Hashable, int] = {}
    row_expert = np.array([ranked_by.setdefault(row.expert_id, len(ranked_by)) for row in comparisons],
                          dtype=np.int64)
    all_experts = list(ranked_by)
    pair_expert_all = row_expert[raw["cluster"]]
    excluded = _tie_everything(pair_expert_all, all_experts, outcome)
    kept_expert = np.array([str(x) not in excluded for x in all_experts], dtype=bool)
    keep = kept_expert[pair_expert_all] if pair_expert_all.size else np.zeros(0, dtype=bool)
    experts = [x for x, k in zip(all_experts, kept_expert, strict=True) if k]
    renumber = np.cumsum(kept_expert) - 1
    pe, pf = raw["pe"][keep], raw["pf"][keep]
    used = np.unique(np.concatenate([s_ep, pe, pf]))
    if used.size == 0:
        raise PreferenceInputError("there is nothing to fit: no rubric score and no usable comparison")
    new = np.full(len(index), -1, dtype=np.int64)
    new[used] = np.arange(used.size)
    ids = list(index)
    cell_u, cells_kept = np.unique(cell[used], return_inverse=True)
    worker_u, worker_codes = _recode(worker[used])
    task_u, task_codes = _recode(task[used])
    return Coded(
        episode_ids=[ids[i] for i in used], cells=[cells[c] for c in cell_u], cell=cells_kept.ravel(),
        worker=worker_codes, task=task_codes, n_workers=worker_u, n_tasks=task_u,
        score_episode=new[s_ep], score=s_val, score_grader=s_grader, graders=graders,
        pe=new[pe], pf=new[pf], outcome=outcome[keep],
        first=raw["first"][keep], log_length=raw["log_length"][keep], cluster=raw["cluster"][keep],
        pair_expert=renumber[pair_expert_all[keep]].astype(np.int64),
        experts=experts, excluded_experts=excluded, n_rankings=len(comparisons),
    )


def _recode(codes: np.ndarray) -> tuple[int, np.ndarray]:
    """Compact codes 0..m-1 keeping -1 (absent) as -1."""
    present = codes >= 0
    uniq, inv = np.unique(codes[present], return_inverse=True)
    out = np.full(codes.shape, -1, dtype=np.int64)
    out[present] = inv.ravel()
    return int(uniq.size), out


def cell_components(coded: Coded) -> tuple[np.ndarray, np.ndarray]:
    """Components of the cells linked by compared pairs of different cells; and per component whether some
    cell in it is scored (its levels are then on the points scale, not only relative to each other)."""
    n = len(coded.cells)
    a, b = coded.cell[coded.pe], coded.cell[coded.pf]
    graph = scipy.sparse.coo_matrix((np.ones(a.size), (a, b)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    scored_cells = np.zeros(n, dtype=bool)
    scored_cells[coded.cell[coded.score_episode]] = True
    scored = np.zeros(int(labels.max()) + 1, dtype=bool)
    scored[labels[scored_cells]] = True
    return labels, scored
