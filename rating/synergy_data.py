"""The synergy model's input (one row per scored episode) and its parameter-free design arrays.

Everything here is computed once per fit and does not depend on the variance components, so the REML search
(`rating/synergy_reml.py`) only recombines small dense matrices. Pure numpy/scipy: no Django, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse

__all__ = ["CollinearCovariates", "Design", "SynergyData", "SynergyInputError", "build_design", "subset"]

# Above this many bytes of per-pattern dense matrices the worker elimination is recomputed sparsely per
# evaluation instead (many distinct (solo, with agent) task counts per worker and many tasks).
PATTERN_BYTES_LIMIT = 300_000_000


class SynergyInputError(ValueError):
    """The episodes cannot be fitted as given; the message says which rows and why."""


class CollinearCovariates(SynergyInputError):
    """Covariates added to the fixed effects cannot be told apart from the arms and positions."""


@dataclass(frozen=True)
class SynergyData:
    """One row per scored episode.

    ``arm`` is 0 for the worker alone (solo) and 1..A for the agents named by ``arm_labels[1:]``;
    ``position`` is the 1-based position of the episode in the worker's session.
    """

    y: np.ndarray
    arm: np.ndarray
    human: np.ndarray
    task: np.ndarray
    position: np.ndarray
    arm_labels: tuple[str, ...]

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def n(self) -> int:
        return int(self.y.shape[0])

    @property
    def team(self) -> np.ndarray:
        """True where the worker had an agent."""
        return self.arm > 0


def _as_int(values: np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise SynergyInputError(f"{name} must be one-dimensional")
    integral = np.issubdtype(arr.dtype, np.integer) or (
        np.issubdtype(arr.dtype, np.floating) and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)))
    if arr.size and not integral:
        raise SynergyInputError(f"{name} must hold integer codes")
    return arr.astype(np.int64)


def _validate(data: SynergyData) -> None:
    """Check shapes, codes and scores; replace the arrays by clean int/float copies (frozen: via __setattr__)."""
    y = np.asarray(data.y, dtype=float)
    if y.ndim != 1:
        raise SynergyInputError("y must be one-dimensional")
    arrays = {name: _as_int(getattr(data, name), name) for name in ("arm", "human", "task", "position")}
    for name, arr in arrays.items():
        if arr.shape != y.shape:
            raise SynergyInputError(f"{name} has {arr.shape[0]} rows but y has {y.shape[0]}")
    bad = np.flatnonzero(~np.isfinite(y) | (y < 0) | (y > 100))
    if bad.size:
        raise SynergyInputError(f"scores must be finite and within 0-100; rows {bad[:5].tolist()} are not")
    labels = tuple(str(label) for label in data.arm_labels)
    if not labels or labels[0] != "solo":
        raise SynergyInputError('arm_labels[0] must be "solo" (arm code 0 is the worker alone)')
    if len(set(labels)) != len(labels):
        raise SynergyInputError("arm_labels must be distinct")
    for name, low, high in (("arm", 0, len(labels) - 1), ("human", 0, None), ("task", 0, None), ("position", 1, None)):
        arr = arrays[name]
        out = np.flatnonzero((arr < low) | ((arr > high) if high is not None else False))
        if out.size:
            raise SynergyInputError(f"{name} codes out of range at rows {out[:5].tolist()}")
    object.__setattr__(data, "y", y)
    object.__setattr__(data, "arm_labels", labels)
    for name, arr in arrays.items():
        object.__setattr__(data, name, arr)


def subset(data: SynergyData, rows: np.ndarray) -> SynergyData:
    """The episodes ``rows`` of ``data`` with the same codes (used for held-out folds)."""
    return SynergyData(
        y=data.y[rows], arm=data.arm[rows], human=data.human[rows], task=data.task[rows],
        position=data.position[rows], arm_labels=data.arm_labels,
    )


@dataclass(frozen=True, eq=False)
class Patterns:
    """Workers grouped by their (solo, with agent) episode counts: within a group the eliminated 2×2 worker
    block is the same, so its contribution to the small system is a fixed combination of these sums."""

    n_solo: np.ndarray          # (G,)
    n_team: np.ndarray          # (G,)
    count: np.ndarray           # (G,) workers in the group
    of_worker: np.ndarray       # (H,) group of each worker
    p_ss: np.ndarray | None     # (G, d, d) sum of m_s m_sᵀ; None when recomputed sparsely
    p_tt: np.ndarray | None
    p_st: np.ndarray | None     # sum of m_s m_tᵀ
    r_ss: np.ndarray            # (G, d) sum of m_s r_s
    r_st: np.ndarray            # sum of m_s r_t
    r_ts: np.ndarray            # sum of m_t r_s
    r_tt: np.ndarray            # sum of m_t r_t
    yy_ss: np.ndarray           # (G,) sum of r_s²
    yy_st: np.ndarray
    yy_tt: np.ndarray


@dataclass(frozen=True, eq=False)
class Design:
    """The fixed effects and task effects ("small set", size d = p + 2T) and the worker sums eliminated onto it.

    Small-set columns: ``fixed_names`` (arms present, then positions other than the reference, then any
    covariates), then β_t for every task code, then γ_t for every task code.
    """

    n: int
    p: int
    n_tasks: int
    n_humans: int
    fixed_names: tuple[str, ...]
    arm_columns: dict[int, int]            # arm code -> fixed column
    position_columns: dict[int, int]       # position -> fixed column (reference position has none)
    reference_position: int
    rows: scipy.sparse.csr_matrix          # (n, d) the small-set design [X W]
    m_solo: scipy.sparse.csr_matrix        # (H, d) per worker: sum of solo rows
    m_team: scipy.sparse.csr_matrix        # (H, d) per worker: sum of with-agent rows
    r_solo: np.ndarray                     # (H,) sum of solo scores
    r_team: np.ndarray
    n_solo: np.ndarray                     # (H,) solo episodes
    n_team: np.ndarray
    gram: np.ndarray                       # (d, d) [X W]ᵀ[X W]
    rhs: np.ndarray                        # (d,) [X W]ᵀ y
    yy: float
    patterns: Patterns
    dropped: dict[str, str] = field(default_factory=dict)

    @property
    def d(self) -> int:
        return self.p + 2 * self.n_tasks


def _fixed_columns(data: SynergyData, positions: bool) -> tuple[dict[int, int], dict[int, int], int, list[str]]:
    arms = np.unique(data.arm)
    arm_columns = {int(a): j for j, a in enumerate(arms)}
    names = [f"arm:{data.arm_labels[a]}" for a in arms]
    present = np.unique(data.position)
    reference = int(present[0])
    position_columns: dict[int, int] = {}
    if positions:
        for pos in present[1:]:
            position_columns[int(pos)] = len(names)
            names.append(f"position:{int(pos)}")
    return arm_columns, position_columns, reference, names


def _small_rows(data: SynergyData, arm_columns: dict[int, int], position_columns: dict[int, int],
                p: int, n_tasks: int) -> scipy.sparse.csr_matrix:
    n = data.n
    arm_col = np.zeros(max(arm_columns) + 1, dtype=np.int64)
    for a, j in arm_columns.items():
        arm_col[a] = j
    cols = [arm_col[data.arm], p + data.task]
    rows = [np.arange(n), np.arange(n)]
    if position_columns:
        lookup = np.full(int(data.position.max()) + 1, -1, dtype=np.int64)
        for pos, j in position_columns.items():
            lookup[pos] = j
        pj = lookup[data.position]
        keep = np.flatnonzero(pj >= 0)
        rows.append(keep)
        cols.append(pj[keep])
    team = np.flatnonzero(data.team)
    rows.append(team)
    cols.append(p + n_tasks + data.task[team])
    r = np.concatenate(rows)
    c = np.concatenate(cols)
    return scipy.sparse.csr_matrix((np.ones(r.size), (r, c)), shape=(n, p + 2 * n_tasks))


def _full_rank(rows: scipy.sparse.csr_matrix, p: int) -> bool:
    x = rows[:, :p]
    xtx = (x.T @ x).toarray()
    return bool(np.linalg.matrix_rank(xtx, tol=1e-8 * max(1.0, float(np.abs(xtx).max()))) == p)


def _patterns(m_solo: scipy.sparse.csr_matrix, m_team: scipy.sparse.csr_matrix, r_solo: np.ndarray,
              r_team: np.ndarray, n_solo: np.ndarray, n_team: np.ndarray) -> Patterns:
    keys, of_worker, count = np.unique(np.stack([n_solo, n_team], axis=1), axis=0, return_inverse=True,
                                       return_counts=True)
    of_worker = of_worker.ravel()
    g, d = keys.shape[0], m_solo.shape[1]
    dense = g * 3 * d * d * 8 <= PATTERN_BYTES_LIMIT
    p_ss, p_tt, p_st = (np.zeros((g if dense else 0, d, d)) for _ in range(3))
    vec = {k: np.zeros((g, d)) for k in ("ss", "st", "ts", "tt")}
    yy = {k: np.zeros(g) for k in ("ss", "st", "tt")}
    for k in range(g):
        members = np.flatnonzero(of_worker == k)
        ms, mt = m_solo[members], m_team[members]
        rs, rt = r_solo[members], r_team[members]
        if dense:
            p_ss[k] = (ms.T @ ms).toarray()
            p_tt[k] = (mt.T @ mt).toarray()
            p_st[k] = (ms.T @ mt).toarray()
        vec["ss"][k], vec["st"][k] = ms.T @ rs, ms.T @ rt
        vec["ts"][k], vec["tt"][k] = mt.T @ rs, mt.T @ rt
        yy["ss"][k], yy["st"][k], yy["tt"][k] = rs @ rs, rs @ rt, rt @ rt
    return Patterns(
        n_solo=keys[:, 0].astype(float), n_team=keys[:, 1].astype(float), count=count.astype(float),
        of_worker=of_worker, p_ss=p_ss if dense else None, p_tt=p_tt if dense else None,
        p_st=p_st if dense else None, r_ss=vec["ss"], r_st=vec["st"], r_ts=vec["ts"],
        r_tt=vec["tt"], yy_ss=yy["ss"], yy_st=yy["st"], yy_tt=yy["tt"],
    )


def _add_covariates(data: SynergyData, rows: scipy.sparse.csr_matrix, p: int, n_tasks: int,
                    covariates: dict[str, np.ndarray]) -> tuple[scipy.sparse.csr_matrix, list[str]]:
    """Insert the covariate columns right after the arm and position columns (before the task effects), so
    the REML search treats them as ordinary fixed effects."""
    c = len(covariates)
    values = np.zeros((data.n, c))
    for j, (name, column) in enumerate(covariates.items()):
        arr = np.asarray(column, dtype=float)
        if arr.shape != (data.n,) or not np.all(np.isfinite(arr)):
            raise SynergyInputError(f"covariate {name!r} must hold one finite value per episode")
        values[:, j] = arr
    rows = rows.tocsc()
    fixed, tasks = rows[:, :p], rows[:, p:]
    widened = scipy.sparse.hstack([fixed, scipy.sparse.csc_matrix(values), tasks], format="csr")
    if not _full_rank(widened, p + c):
        raise CollinearCovariates(
            f"the covariates {list(covariates)} are constant or collinear with the arms and positions: their "
            "effects cannot be told apart")
    return widened, list(covariates)


def build_design(data: SynergyData, n_humans: int, n_tasks: int,
                 covariates: dict[str, np.ndarray] | None = None) -> Design:
    """The parameter-free arrays of the fit. Positions are dropped (and the reason kept) when the session
    order makes them collinear with the arms: then position and condition cannot be told apart.

    ``covariates`` (name -> one value per episode) become extra fixed columns after the positions, e.g. the
    ToM moderation's ToM x [solo] and ToM x [with agent] (`rating/tom_moderation.py`); the fit is unchanged
    otherwise, so one REML serves both models.
    """
    dropped: dict[str, str] = {}
    arm_columns, position_columns, reference, names = _fixed_columns(data, positions=True)
    p = len(names)
    rows = _small_rows(data, arm_columns, position_columns, p, n_tasks)
    if position_columns and not _full_rank(rows, p):
        dropped["position_effects"] = (
            "the order of conditions is the same for every worker, so a position effect (learning or fatigue) "
            "cannot be told apart from the effect of working with an agent; positions are left out and the "
            "boosts include any position effect"
        )
        arm_columns, position_columns, reference, names = _fixed_columns(data, positions=False)
        p = len(names)
        rows = _small_rows(data, arm_columns, position_columns, p, n_tasks)
    if covariates:
        rows, extra = _add_covariates(data, rows, p, n_tasks, covariates)
        names += extra
        p = len(names)
    team = data.team.astype(float)
    solo = 1.0 - team
    z_solo = scipy.sparse.csr_matrix((solo, (data.human, np.arange(data.n))), shape=(n_humans, data.n))
    z_team = scipy.sparse.csr_matrix((team, (data.human, np.arange(data.n))), shape=(n_humans, data.n))
    m_solo, m_team = (z_solo @ rows).tocsr(), (z_team @ rows).tocsr()
    r_solo, r_team = z_solo @ data.y, z_team @ data.y
    n_solo = np.bincount(data.human, weights=solo, minlength=n_humans)
    n_team = np.bincount(data.human, weights=team, minlength=n_humans)
    return Design(
        n=data.n, p=p, n_tasks=n_tasks, n_humans=n_humans, fixed_names=tuple(names), arm_columns=arm_columns,
        position_columns=position_columns, reference_position=reference, rows=rows, m_solo=m_solo,
        m_team=m_team, r_solo=r_solo, r_team=r_team, n_solo=n_solo, n_team=n_team,
        gram=(rows.T @ rows).toarray(), rhs=rows.T @ data.y, yy=float(data.y @ data.y),
        patterns=_patterns(m_solo, m_team, r_solo, r_team, n_solo, n_team), dropped=dropped,
    )
