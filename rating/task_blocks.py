"""The task model's core system in blocks: agents as a dense border, tasks block-diagonal by connected group.

Once the participants are eliminated, two tasks are coupled only when some participant met both, so the
task part of the core Schur complement is block-diagonal over the connected groups of the participant x task
graph (a department's lecturers, a benchmark suite's tasks). With the agents (fixed effects, few) as the
border,

.. math::

    S = \\begin{pmatrix} A & B^\\top \\\\ B & T \\end{pmatrix},\\qquad
    M = A - B^\\top T^{-1} B,\\qquad
    S^{-1} = D_0 + V M^{-1} V^\\top,\\quad V = \\begin{pmatrix} I \\\\ -T^{-1}B \\end{pmatrix},

with :math:`D_0 = \\mathrm{blockdiag}(0, T^{-1})` and :math:`\\log|S| = \\log|T| + \\log|M|`. Each block is
factorised on its own (blocks of one size together, batched), so the cost is the sum of the cubes of the
block sizes instead of the cube of the number of tasks; a design in which every task is reachable from every
other has one block and costs what the dense system does. Everything is exact: the same REML, the same
estimates as the dense path to rounding.

Every per-evaluation sum over participants goes through precomputed pair operators: a participant's factor
:math:`1/d_h` depends on the participant only through their total weight, so
:math:`\\sum_h b_{hi} b_{hj} / d_h` is a sparse matrix (pattern entries x weight groups) times the vector of
:math:`1/d_g`, built once per design.

Pure numpy/scipy: no Django, no settings, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.csgraph

# Blocks at least this large are factorised one by one with LAPACK; smaller ones batched by size.
_LOOP_BLOCK = 48


@dataclass(frozen=True, eq=False)
class TaskBlocks:
    """The block layout of a design's tasks and the pair operators of its core Schur complement."""

    n_agents: int  # p: core columns 0..p-1 are the agents
    n_tasks: int
    order: np.ndarray  # tasks in block order (grouped by block size, then block)
    position: np.ndarray  # per task, its place in ``order``
    classes: tuple[tuple[int, int, int, int], ...]  # (block size k, n blocks, first position, storage offset)
    task_dest: np.ndarray  # per task, storage index of its own diagonal entry's block start (class offset + b k^2)
    task_local: np.ndarray  # per task, its index inside its block
    task_size: np.ndarray  # per task, the size of its block
    diag_dest: np.ndarray  # per task, the storage index of its diagonal entry
    storage: int  # floats held by all task blocks
    group: np.ndarray  # per participant, its weight group
    group_count: np.ndarray  # participants per group
    group_weight: np.ndarray  # the total weight n_g of each group
    gram_agent: np.ndarray  # sum w per agent (the agent block of X'WX is diagonal)
    gram_task: np.ndarray  # sum w per task
    gram_cross: np.ndarray  # K_t x p: sum w over observations of (task, agent)
    elim_aa: PairSums  # into p x p
    elim_ta: PairSums  # into K_t x p
    elim_tt: PairSums  # into the task blocks' storage, lower triangle only (local row >= local column)
    couplings_agent: scipy.sparse.csr_matrix  # H x p
    couplings_task: scipy.sparse.csr_matrix  # H x K_t

    @property
    def n_blocks(self) -> int:
        return int(sum(n for _, n, _, _ in self.classes))

    @property
    def largest(self) -> int:
        return int(max((k for k, _, _, _ in self.classes), default=0))

    def dest(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Return the storage index of task pair ``(i, j)`` (both in one block)."""
        return self.task_dest[i] + self.task_local[i] * self.task_size[i] + self.task_local[j]

    def same_block(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return self.task_dest[i] == self.task_dest[j]


@dataclass(frozen=True, eq=False)
class PairSums:
    r""":math:`\sum_{h \in g} L_{hi} R_{hj}` per weight group, kept as a (destinations x groups) CSR matrix.

    ``self @ c`` returns the storage vector :math:`\sum_g c_g \sum_{h \in g} L_{hi} R_{hj}` at each
    pair's destination: one compiled sparse product, rows in destination order (sequential writes; the
    scatter-add it replaces measured three to five times slower).
    """

    matrix: scipy.sparse.csr_matrix

    @property
    def nnz(self) -> int:
        return int(self.matrix.nnz)

    def __matmul__(self, weights_g: np.ndarray) -> np.ndarray:
        return self.matrix @ weights_g


def _pair_sums(
    left: scipy.sparse.csr_matrix,
    right: scipy.sparse.csr_matrix,
    group: np.ndarray,
    rows: np.ndarray,
    n_groups: int,
    row_base: np.ndarray,
    col_offset: np.ndarray,
    size: int,
    lower: np.ndarray | None = None,
) -> PairSums:
    """Return the grouped pair sums of ``left`` x ``right`` at destinations ``row_base[i] + col_offset[j]``.

    One compiled walk over each participant's pairs of entries, a group at a time
    (:func:`rating.design_kernels.grouped_pair_entries`): the same sums, in the same order, as the sparse
    product of the left factor spread over the groups with the right one, which at 10^6 episodes built
    twice the entries kept and sorted them (measured about eight times slower). With ``lower`` (a rank per
    column, ``left is right``) only the pairs with ``lower[i] >= lower[j]`` are kept: the lower triangle of a
    symmetric result. ``rows`` orders the participants so that those who meet a destination come by
    ascending group, each group's together and ascending (by group; or by block, :func:`_walk_order`).
    """
    # Imported here: numba loads only in the processes that fit.
    from rating.design_kernels import grouped_pair_entries

    dest, g, values = grouped_pair_entries(
        left.indptr, left.indices, left.data, right.indptr, right.indices, right.data, rows, group,
        row_base.astype(np.int64, copy=False), col_offset.astype(np.int64, copy=False),
        np.zeros(0, dtype=np.int64) if lower is None else lower.astype(np.int64, copy=False), int(size),
    )  # fmt: skip
    matrix = scipy.sparse.csr_matrix((values, (dest, g)), shape=(size, n_groups))
    return PairSums(matrix=matrix)


def _walk_order(c_task: scipy.sparse.csr_matrix, group: np.ndarray, task_dest: np.ndarray) -> np.ndarray:
    """Return the participants ordered by task block, then by weight group, then ascending.

    A pair of tasks is met only by participants of its block, so among them the order is by group, each
    group together and ascending within it (the pair sums come out the same, in the same order); walking
    a block at a time keeps the accumulator's writes, and the final sort of the entries by destination,
    within that block's part of the storage (in cache) instead of all over it.
    """
    has = np.diff(c_task.indptr) > 0
    block = np.full(c_task.shape[0], -1, dtype=np.int64)
    block[has] = task_dest[c_task.indices[c_task.indptr[:-1][has]]]
    return np.lexsort((group, block))


def _block_layout(task_block: np.ndarray, n_t: int) -> dict[str, object]:
    """Order the blocks by size (one batch per size), then the tasks by block; return the layout arrays."""
    sizes = np.bincount(task_block)
    block_rank = np.lexsort((np.arange(sizes.shape[0]), sizes))
    rank_of = np.empty_like(block_rank)
    rank_of[block_rank] = np.arange(block_rank.shape[0])
    order = np.lexsort((np.arange(n_t), rank_of[task_block]))
    position = np.empty(n_t, dtype=np.int64)
    position[order] = np.arange(n_t)
    classes = []
    task_dest = np.empty(n_t, dtype=np.int64)
    task_local = np.empty(n_t, dtype=np.int64)
    task_size = sizes[task_block].astype(np.int64)
    first, offset = 0, 0
    sorted_sizes = sizes[block_rank]
    for k in np.unique(sorted_sizes):
        k = int(k)
        count = int(np.count_nonzero(sorted_sizes == k))
        classes.append((k, count, first, offset))
        tasks = order[first : first + count * k]
        within = np.arange(count * k)
        task_dest[tasks] = offset + (within // k) * k * k
        task_local[tasks] = within % k
        first += count * k
        offset += count * k * k
    return {
        "order": order,
        "position": position,
        "classes": tuple(classes),
        "task_dest": task_dest,
        "task_local": task_local,
        "task_size": task_size,
        "diag_dest": task_dest + task_local * task_size + task_local,
        "storage": offset,
    }


def task_blocks(
    couplings: scipy.sparse.csr_matrix,
    n_agents: int,
    n_human: np.ndarray,
    agent: np.ndarray,
    task: np.ndarray,
    omega: np.ndarray,
) -> TaskBlocks:
    """Lay out the tasks in connected blocks and build the pair operators of the core Schur complement.

    ``couplings`` is the participants x core matrix (agents first, then tasks); ``agent`` and ``task`` the
    observations' core-free codes (task -1 where an observation has none).
    """
    n_h, n_core = couplings.shape
    n_t = n_core - n_agents
    c_agent = couplings[:, :n_agents].tocsr()
    c_task = couplings[:, n_agents:].tocsr()
    c_agent.sort_indices()
    c_task.sort_indices()
    # Connected groups of tasks: components of the bipartite participant-task graph.
    adjacency = scipy.sparse.bmat([[None, c_task], [c_task.T, None]], format="csr")
    _, labels = scipy.sparse.csgraph.connected_components(adjacency, directed=False)
    _, task_block = np.unique(labels[n_h:], return_inverse=True)
    layout = _block_layout(task_block.reshape(-1), n_t)
    values, group = np.unique(n_human, return_inverse=True)
    group = group.reshape(-1)
    n_groups = values.shape[0]

    # Agent pairs are met in every block: walk them by group; task pairs only in their block: walk by block.
    by_group = np.argsort(group, kind="stable")
    rows = _walk_order(c_task, group, cast(np.ndarray, layout["task_dest"]))
    agents = np.arange(n_agents, dtype=np.int64)
    elim_aa = _pair_sums(c_agent, c_agent, group, by_group, n_groups, agents * n_agents, agents, n_agents * n_agents)
    tasks_idx = np.arange(n_t, dtype=np.int64)
    elim_ta = _pair_sums(c_task, c_agent, group, rows, n_groups, tasks_idx * n_agents, agents, n_t * n_agents)
    task_local, task_size = cast(np.ndarray, layout["task_local"]), cast(np.ndarray, layout["task_size"])
    row_base = cast(np.ndarray, layout["task_dest"]) + task_local * task_size
    elim_tt = _pair_sums(
        c_task, c_task, group, rows, n_groups, row_base, task_local, int(cast(int, layout["storage"])), lower=task_local
    )

    has_task = task >= 0
    gram_cross = np.bincount(
        task[has_task] * n_agents + agent[has_task], weights=omega[has_task], minlength=n_t * n_agents
    ).reshape(n_t, n_agents)
    return TaskBlocks(
        n_agents=n_agents,
        n_tasks=n_t,
        **layout,  # type: ignore[arg-type]
        group=group,
        group_count=np.bincount(group, minlength=n_groups).astype(np.float64),
        group_weight=values,
        gram_agent=np.bincount(agent, weights=omega, minlength=n_agents),
        gram_task=np.bincount(task[has_task], weights=omega[has_task], minlength=n_t),
        gram_cross=gram_cross,
        elim_aa=elim_aa,
        elim_ta=elim_ta,
        elim_tt=elim_tt,
        couplings_agent=c_agent,
        couplings_task=c_task,
    )


class SingularSystem(ValueError):
    """The core system is not positive definite: the model is not identified by these observations."""


_SINGULAR_BLOCK = "the model is not identified by these observations (singular task block)"
_SINGULAR = "the model is not identified by these observations (singular system)"


@dataclass(eq=False)
class BlockFactor:
    """The core Schur complement factorised in blocks at one set of variance ratios (see the module text).

    Small blocks (batched by size) keep their inverses; large ones (one LAPACK call each) keep their
    Cholesky factors, solve with them, and form their inverses only when :attr:`t_inv` is first read: a
    likelihood evaluation needs the log-determinant and solves, only a gradient or the final per-participant
    outputs need the inverse, which costs twice the factorisation.
    """

    blocks: TaskBlocks
    w: np.ndarray  # K_t x p: T^{-1} B
    m_inv: np.ndarray  # p x p
    m_chol: np.ndarray  # lower Cholesky factor of M
    logdet: float  # log |S|
    inverses: np.ndarray  # storage: the small blocks' inverses (full, symmetric); the large ones' filled lazily
    chols: dict[int, list[np.ndarray]]  # per large class (its offset), each block's lower factor (Fortran order)
    _inverted: bool = False

    @property
    def n_core(self) -> int:
        return self.blocks.n_agents + self.blocks.n_tasks

    @property
    def t_inv(self) -> np.ndarray:
        """Storage: every task block's inverse (full, symmetric)."""
        if not self._inverted:
            b = self.blocks
            for k, count, _, offset in b.classes:
                if offset not in self.chols:
                    continue
                out = self.inverses[offset : offset + count * k * k].reshape(count, k, k)
                for i, chol in enumerate(self.chols[offset]):
                    inv, info = scipy.linalg.lapack.dpotri(chol, lower=1)
                    if info != 0:
                        raise SingularSystem(_SINGULAR_BLOCK)
                    # potri fills the lower triangle; the factor's upper one is zero (clean=1).
                    np.add(inv, inv.T, out=out[i])
                    out[i].flat[:: k + 1] -= np.diagonal(inv)
            self._inverted = True
        return self.inverses

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """Return :math:`S^{-1} r` for a core vector or a (core x m) matrix."""
        p = self.blocks.n_agents
        r_a, r_t = rhs[:p], rhs[p:]
        t_r = self._t_apply(r_t)
        x_a = scipy.linalg.cho_solve((self.m_chol, True), r_a - self.w.T @ r_t, check_finite=False)
        return np.concatenate([x_a, t_r - self.w @ x_a])

    def _t_apply(self, r_t: np.ndarray) -> np.ndarray:
        """Return :math:`T^{-1} r` (rows of ``r`` in task order)."""
        b = self.blocks
        vec = r_t.ndim == 1
        r = (r_t[:, None] if vec else r_t)[b.order]
        out = np.empty_like(r)
        for k, count, first, offset in b.classes:
            part = r[first : first + count * k].reshape(count, k, -1)
            target = out[first : first + count * k].reshape(count, k, -1)
            if offset in self.chols:
                for i, chol in enumerate(self.chols[offset]):
                    target[i] = scipy.linalg.cho_solve((chol, True), part[i], check_finite=False)
            else:
                target[:] = np.matmul(self.inverses[offset : offset + count * k * k].reshape(count, k, k), part)
        res = out[b.position]
        return res[:, 0] if vec else res

    def inverse_diagonal(self) -> np.ndarray:
        """Return the diagonal of :math:`S^{-1}` (agents, then tasks)."""
        d_t = self.t_inv[self.blocks.diag_dest] + np.einsum("ij,jk,ik->i", self.w, self.m_inv, self.w)
        return np.concatenate([np.diag(self.m_inv).copy(), d_t])

    def trace_weighted_gram(self, weights_g: np.ndarray) -> float:
        """Return :math:`\\mathrm{tr}(S^{-1} \\sum_h c_h b_h b_h^\\top)` with ``c`` constant on weight groups."""
        b = self.blocks
        p = b.n_agents
        g_aa = (b.elim_aa @ weights_g).reshape(p, p)
        g_ta = (b.elim_ta @ weights_g).reshape(b.n_tasks, p)
        g_tt = b.elim_tt @ weights_g  # lower triangles
        t_inv = self.t_inv
        d0 = 2.0 * float(np.dot(g_tt, t_inv)) - float(np.dot(g_tt[b.diag_dest], t_inv[b.diag_dest]))
        # V^T G V = G_aa - W^T G_ta - G_ta^T W + W^T G_tt W, with G_tt W applied block by block.
        g_tt_w = self._symmetric_apply(g_tt, self.w)
        vgv = g_aa - self.w.T @ g_ta - g_ta.T @ self.w + self.w.T @ g_tt_w
        return d0 + float(np.sum(self.m_inv * vgv))

    def _symmetric_apply(self, lower: np.ndarray, r_t: np.ndarray) -> np.ndarray:
        """Return :math:`G r` for block-diagonal symmetric ``G`` given by its blocks' lower triangles."""
        b = self.blocks
        r = r_t[b.order]
        out = np.empty_like(r)
        for k, count, first, offset in b.classes:
            mat = lower[offset : offset + count * k * k].reshape(count, k, k)
            part = r[first : first + count * k].reshape(count, k, -1)
            target = out[first : first + count * k].reshape(count, k, -1)
            if k >= _LOOP_BLOCK:  # one BLAS product per triangle (a batched transpose is not one)
                for i in range(count):
                    target[i] = mat[i] @ part[i] + mat[i].T @ part[i] - np.diag(mat[i])[:, None] * part[i]
                continue
            diag = np.diagonal(mat, axis1=1, axis2=2)[:, :, None]
            target[:] = np.matmul(mat, part) + np.matmul(np.swapaxes(mat, 1, 2), part) - diag * part
        return out[b.position]


def _assemble(
    b: TaskBlocks, inv_d_g: np.ndarray, task_prior: float, agent_prior: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the agent block ``A``, the cross block ``B`` (K_t x p) and the task blocks' lower triangles."""
    p, n_t = b.n_agents, b.n_tasks
    a = np.diag(b.gram_agent + agent_prior) - (b.elim_aa @ inv_d_g).reshape(p, p)
    a = 0.5 * (a + a.T)
    cross = b.gram_cross - (b.elim_ta @ inv_d_g).reshape(n_t, p)
    storage = b.elim_tt @ inv_d_g
    np.negative(storage, out=storage)
    storage[b.diag_dest] += b.gram_task + task_prior
    return a, cross, storage


def _factor_tasks(b: TaskBlocks, storage: np.ndarray) -> tuple[np.ndarray, dict[int, list[np.ndarray]], float]:
    """Factorise every task block (lower triangles in ``storage``, overwritten by the small blocks' inverses).

    Returns the storage, the large blocks' Cholesky factors per class and :math:`\\log|T|`.
    """
    logdet = 0.0
    chols: dict[int, list[np.ndarray]] = {}
    for k, count, _, offset in b.classes:
        mats = storage[offset : offset + count * k * k].reshape(count, k, k)
        if k >= _LOOP_BLOCK:
            chols[offset] = []
            for i in range(count):
                chol, info = scipy.linalg.lapack.dpotrf(mats[i], lower=1, clean=1)
                if info != 0:
                    raise SingularSystem(_SINGULAR_BLOCK)
                logdet += 2.0 * float(np.log(np.diag(chol)).sum())
                chols[offset].append(chol)
        else:
            try:
                chol = np.linalg.cholesky(mats)  # reads the lower triangles only
            except np.linalg.LinAlgError as exc:
                raise SingularSystem(f"{_SINGULAR_BLOCK}: {exc}")
            logdet += 2.0 * float(np.log(np.diagonal(chol, axis1=1, axis2=2)).sum())
            inv_l = np.linalg.inv(chol)
            mats[:] = np.matmul(np.swapaxes(inv_l, 1, 2), inv_l)
    return storage, chols, logdet


def factorise(blocks: TaskBlocks, inv_d_g: np.ndarray, task_prior: float, agent_prior: float = 0.0) -> BlockFactor:
    """Assemble the core Schur complement at group factors ``1/d_g`` and factorise it in blocks.

    Raises :class:`SingularSystem` when a block or the agents' Schur complement is not positive definite.
    """
    b = blocks
    p, n_t = b.n_agents, b.n_tasks
    a, cross, storage = _assemble(b, inv_d_g, task_prior, agent_prior)
    inverses, chols, logdet = _factor_tasks(b, storage)
    empty = np.zeros((p, p))
    factor = BlockFactor(
        blocks=b, w=np.zeros((n_t, p)), m_inv=empty, m_chol=empty, logdet=0.0, inverses=inverses, chols=chols
    )
    w = factor._t_apply(cross) if p else np.zeros((n_t, 0))
    m = a - cross.T @ w
    m = 0.5 * (m + m.T)
    if p:
        try:
            m_chol = scipy.linalg.cholesky(m, lower=True, check_finite=False)
        except np.linalg.LinAlgError as exc:
            raise SingularSystem(f"{_SINGULAR}: {exc}")
        inv, info = scipy.linalg.lapack.dpotri(m_chol, lower=1)
        if info != 0:
            raise SingularSystem(_SINGULAR)
        inv = np.tril(inv)
        m_inv = inv + np.tril(inv, -1).T
        logdet += 2.0 * float(np.log(np.diag(m_chol)).sum())
    else:
        m_chol = m_inv = np.zeros((0, 0))
    factor.w, factor.m_inv, factor.m_chol, factor.logdet = w, m_inv, np.tril(m_chol), logdet
    return factor


def participant_forms(factor: BlockFactor) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return ``(b_s_b, tbt, z, e)`` per participant row.

    ``b_s_b`` is :math:`b_h^\top S^{-1} b_h`, ``tbt`` its task-block part :math:`b_{hT}^\top T^{-1} b_{hT}`,
    ``z`` the border part :math:`V^\top b_h` and ``e`` the vector :math:`T^{-1} b_{hT}` at the row's own
    task entries (aligned with ``couplings_task.data``): one compiled walk over each row's pairs of entries.
    """
    # Imported here: numba loads only in the processes that fit.
    from rating.design_kernels import block_row_products

    b = factor.blocks
    c = b.couplings_task
    z = b.couplings_agent.toarray() - np.asarray(c @ factor.w)
    row_base = b.task_dest + b.task_local * b.task_size
    e = block_row_products(c.indptr, c.indices, c.data, factor.t_inv, row_base, b.task_local)
    row_of = np.repeat(np.arange(c.shape[0]), np.diff(c.indptr))
    tbt = np.bincount(row_of, weights=c.data * e, minlength=c.shape[0])
    return tbt + np.einsum("ij,ij->i", z @ factor.m_inv, z), tbt, z, e


def observation_forms(
    factor: BlockFactor,
    d: np.ndarray,
    human: np.ndarray,
    agent: np.ndarray,
    task: np.ndarray,
    tbt: np.ndarray,
    z: np.ndarray,
    e: np.ndarray,
    entry: np.ndarray,
) -> np.ndarray:
    """Return :math:`x_o^\top C^{-1} x_o` for every observation (agent ``agent``, task ``task`` or -1).

    With the participants eliminated it is :math:`1/d_h + v^\top S^{-1} v`, :math:`v = x_c - b_h/d_h`; split
    as :math:`v_T^\top T^{-1} v_T + (V^\top v)^\top M^{-1} (V^\top v)`. ``tbt``, ``z``, ``e`` come from
    :func:`participant_forms`; ``entry`` is each observation's task entry in the full couplings (-1: none).
    """
    b = factor.blocks
    dh = d[human]
    has = task >= 0
    t = np.where(has, task, 0)
    # The task part: T^{-1}[t, t] - 2/d_h (T^{-1} b_h)[t] + tbt_h / d_h^2, with (T^{-1} b_h)[t] read at the
    # row's entry for t.
    part = tbt[human] / dh**2
    part[has] += factor.t_inv[b.diag_dest[t[has]]]
    # The full couplings hold a row's agent entries first: the task entry's place among the task couplings
    # is its place in the full ones less the agent entries up to its row.
    where = entry[has] - b.couplings_agent.indptr[human[has] + 1]
    part[has] -= 2.0 * e[where] / dh[has]
    # The border part: y = e_agent - W[task] - z_h / d_h, compiled (imported here: numba loads only in the
    # processes that fit).
    from rating.design_kernels import border_forms

    out = 1.0 / dh + part
    if b.n_agents:
        border_forms(human, agent, task, z, d, factor.w, factor.m_inv, out)
    return out
