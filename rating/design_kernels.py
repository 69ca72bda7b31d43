"""Compiled loops over a design's couplings (participants x core columns, CSR): the per-observation reads and
the pooled per-group sums of the calibrated fit: the couplings with each observation's entry in them, the
products read at those entries, the leverages.

Why compiled: at 10^6 participants x 100 agents the numpy/scipy formulations built a dense
(participants x core) product of 800 MB and then gathered ten million scattered entries from it, or ran a
sparse-sparse product with its index bookkeeping; the arithmetic is a few hundred million multiply-adds over
each participant's handful of entries, which these loops do in cache. Pure numpy and numba: no Django, no I/O.

Each sum runs over a participant's entries in their stored order, as scipy's CSR products do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from numba import njit

# Below this many items a kernel runs in the calling thread: a thread costs more than it saves.
PARALLEL_MIN_ITEMS = 1 << 20


def in_parts(work: Callable[[int, int], None], n: int, parts: int | None = None) -> None:
    """Run ``work(lo, hi)`` over ``[0, n)`` split into contiguous parts on threads (one per core, at most 4).

    For kernels that release the GIL and write disjoint slices: during a fit the database waits, so the
    machine's other cores are free, and the per-observation passes are bound by memory latency, which more
    threads overlap. Each part's results are the same as one call's (no sums across parts).
    """
    count = parts if parts is not None else min(4, os.cpu_count() or 1)
    if count <= 1 or n < PARALLEL_MIN_ITEMS:
        work(0, n)
        return
    bounds = [n * i // count for i in range(count + 1)]
    with ThreadPoolExecutor(max_workers=count) as pool:
        for future in [pool.submit(work, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]:
            future.result()


@njit(cache=True, nogil=True)
def coupling_entries(
    rows: Any, cols: Any, weights: Any, n_rows: int, n_cols: int
) -> tuple[Any, Any, Any, Any]:  # pragma: no cover - compiled; exercised through rating.fit
    """Return the CSR couplings :math:`B = \\sum_o w_o e_{r_o} x_o^\\top` (``indptr, indices, data``, each row's
    columns sorted) and each observation's entry in them (``entries[i, o]``: the position of
    ``(rows[o], cols[i, o])``, -1 where the column code is -1).

    Observations are counting-sorted by row (stably), so each row is assembled from its own observations
    read in sequence and a row's weights are summed in observation order; the entry map lets every later
    per-observation read of a per-entry quantity be one gather instead of a walk over the participant's row.
    """
    m, n = cols.shape
    start = np.zeros(n_rows + 1, dtype=np.int64)
    for o in range(n):
        start[rows[o] + 1] += 1
    for h in range(n_rows):
        start[h + 1] += start[h]
    # Only the observation numbers are scattered (4 bytes each): scattering their columns and weights as well
    # measured eight times slower than this scatter plus reading those by number afterwards.
    fill = start[:-1].copy()
    order = np.empty(n, dtype=np.int32)
    for o in range(n):
        t = fill[rows[o]]
        fill[rows[o]] = t + 1
        order[t] = o
    # Then their columns and weights are gathered into row order in loops of independent loads (the reads of
    # many observations in flight at once), the rows are assembled from those in sequence, and each
    # observation's entry is scattered back to it at the end.
    sorted_cols = np.empty((m, n), dtype=cols.dtype)
    sorted_weights = np.empty(n)
    for t in range(n):
        sorted_weights[t] = weights[order[t]]
    for i in range(m):
        for t in range(n):
            sorted_cols[i, t] = cols[i, order[t]]
    capacity = min(m * n, n_rows * n_cols)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    indices = np.empty(capacity, dtype=np.int32)
    data = np.zeros(capacity)
    seen = np.full(n_cols, -1, dtype=np.int64)  # the row that last met each column
    position = np.empty(n_cols, dtype=np.int64)
    nnz = 0
    for h in range(n_rows):
        base = nnz
        for t in range(start[h], start[h + 1]):
            for i in range(m):
                c = sorted_cols[i, t]
                if c >= 0 and seen[c] != h:
                    seen[c] = h
                    indices[nnz] = c
                    nnz += 1
        for k in range(base + 1, nnz):  # insertion sort: a row holds a handful of columns
            c = indices[k]
            j = k - 1
            while j >= base and indices[j] > c:
                indices[j + 1] = indices[j]
                j -= 1
            indices[j + 1] = c
        for k in range(base, nnz):
            position[indices[k]] = k
        for t in range(start[h], start[h + 1]):
            for i in range(m):
                c = sorted_cols[i, t]
                if c >= 0:
                    e = position[c]
                    data[e] += sorted_weights[t]
                    sorted_cols[i, t] = e  # the column is read no more: its entry takes its place (-1 stays)
        indptr[h + 1] = nnz
    entries = np.empty((m, n), dtype=np.int64)
    for i in range(m):
        for t in range(n):
            entries[i, order[t]] = sorted_cols[i, t]
    indices, data = indices[:nnz], data[:nnz]
    return indptr, indices, data, entries


@njit(cache=True, nogil=True)
def entry_row_products(
    indptr: Any, indices: Any, data: Any, matrix: Any
) -> tuple[Any, Any]:  # pragma: no cover - compiled; exercised through rating.fit
    """Return :math:`(B M)_{h, j}` at every stored entry :math:`(h, j)` of the CSR matrix ``B``, and
    :math:`b_h^\\top M b_h` per row (``M`` symmetric).

    Each row's products are read over the row's own entries, in sequence: a participant's handful of columns
    squared, and no read of anything but that row and ``M``.
    """
    n_rows = indptr.shape[0] - 1
    reads = np.empty(indices.shape[0])
    forms = np.zeros(n_rows)
    for h in range(n_rows):
        start, stop = indptr[h], indptr[h + 1]
        total = 0.0
        for a in range(start, stop):
            column = indices[a]
            acc = 0.0
            for b in range(start, stop):
                acc += data[b] * matrix[indices[b], column]
            reads[a] = acc
            total += data[a] * acc
        forms[h] = total
    return reads, forms


@njit(cache=True, nogil=True)
def observation_leverages(
    rows: Any, cols: Any, entries: Any, reads: Any, d: Any, forms: Any, s_inv: Any, omega: Any, out: Any
) -> None:  # pragma: no cover - compiled; exercised through rating.fit
    """Write each observation's leverage :math:`\\omega_o x_o^\\top C^{-1} x_o` to ``out``.

    With the participants eliminated, :math:`x^\\top C^{-1} x = 1/d_h + b_h^\\top S^{-1} b_h / d_h^2
    + x_c^\\top S^{-1} x_c - 2\\, x_c^\\top S^{-1} b_h / d_h`; ``forms`` holds :math:`b_h^\\top S^{-1} b_h`
    and ``reads`` :math:`(B S^{-1})` at each coupling entry, which ``entries`` locates for the observation's
    core columns ``cols`` (-1: none).
    """
    m, n = cols.shape
    for o in range(n):
        h = rows[o]
        dh = d[h]
        value = 1.0 / dh + forms[h] / (dh * dh)
        cross = 0.0
        for i in range(m):
            ci = cols[i, o]
            if ci < 0:
                continue
            value += s_inv[ci, ci]
            for j in range(i + 1, m):
                cj = cols[j, o]
                if cj >= 0:
                    value += 2.0 * s_inv[ci, cj]
            cross += reads[entries[i, o]]
        out[o] = omega[o] * (value - 2.0 * cross / dh)


@njit(cache=True, nogil=True)
def grouped_outer_sums(
    indptr: Any, indices: Any, data: Any, r: Any, group: Any, n_groups: int, n_cols: int
) -> tuple[Any, Any]:  # pragma: no cover - compiled; exercised through rating.fit
    """Return :math:`\\sum_{h \\in g} b_h b_h^\\top` (``n_groups x n_cols x n_cols``) and
    :math:`\\sum_{h \\in g} b_h r_h` (``n_groups x n_cols``) over the CSR rows :math:`b_h`, row ``h`` in group
    ``group[h]`` (each participant's pairs of entries, no zero cells)."""
    gram = np.zeros((n_groups, n_cols, n_cols))
    b_r = np.zeros((n_groups, n_cols))
    for h in range(indptr.shape[0] - 1):
        g = group[h]
        start, stop = indptr[h], indptr[h + 1]
        for e in range(start, stop):
            i = indices[e]
            v = data[e]
            b_r[g, i] += v * r[h]
            for f in range(start, stop):
                gram[g, i, indices[f]] += v * data[f]
    return gram, b_r


@njit(cache=True, nogil=True)
def block_row_products(
    indptr: Any, indices: Any, data: Any, storage: Any, row_base: Any, local: Any
) -> Any:  # pragma: no cover - compiled; exercised through rating.fit
    """Return :math:`(T^{-1} b_h)_i` at every stored entry :math:`(h, i)` of the CSR task couplings.

    ``storage`` holds the task blocks' inverses (full, symmetric); pair ``(i, j)`` of one block is at
    ``row_base[i] + local[j]``. A participant's tasks are connected through them, so they lie in one block.
    Each row's sums run over the row's entries in order, as the numpy pair walk they replace did.
    """
    n_rows = indptr.shape[0] - 1
    out = np.empty(indices.shape[0])
    for h in range(n_rows):
        start, stop = indptr[h], indptr[h + 1]
        for a in range(start, stop):
            base = row_base[indices[a]]
            acc = 0.0
            for b in range(start, stop):
                acc += data[b] * storage[base + local[indices[b]]]
            out[a] = acc
    return out


@njit(cache=True, nogil=True)
def border_forms(
    human: Any, agent: Any, task: Any, z: Any, d: Any, w: Any, m_inv: Any, out: Any
) -> None:  # pragma: no cover - compiled; exercised through rating.fit
    """Add :math:`y_o^\\top M^{-1} y_o` to ``out`` per observation, :math:`y_o = e_{a_o} - W_{t_o} - z_h / d_h`.

    The border part of an observation's :math:`x^\\top C^{-1} x` on the task-block core (``task`` -1: no
    task row of ``W``); one pass over the observations instead of four (observations x agents) temporaries.
    """
    p = m_inv.shape[0]
    y = np.empty(p)
    for o in range(human.shape[0]):
        h = human[o]
        t = task[o]
        for a in range(p):
            y[a] = -z[h, a] / d[h]
            if t >= 0:
                y[a] -= w[t, a]
        y[agent[o]] += 1.0
        acc = 0.0
        for a in range(p):
            s = 0.0
            for b in range(p):
                s += m_inv[a, b] * y[b]
            acc += y[a] * s
        out[o] += acc


@njit(cache=True, nogil=True)
def grouped_pair_entries(
    l_indptr: Any,
    l_indices: Any,
    l_data: Any,
    r_indptr: Any,
    r_indices: Any,
    r_data: Any,
    rows: Any,
    group: Any,
    row_base: Any,
    col_offset: Any,
    lower: Any,
    size: int,
) -> tuple[Any, Any, Any]:  # pragma: no cover - compiled; exercised through rating.task_blocks
    """Return ``(dest, g, value)``: :math:`\\sum_{h \\in g} L_{hi} R_{hj}` at ``row_base[i] + col_offset[j]``
    for every weight group ``g`` and pair met in it, each destination's groups ascending, zero sums left out.

    ``rows`` lists the CSR rows so that the rows meeting any one destination come by ascending group
    ``group[h]``, each group's together and in ascending order (a group's run may span rows that meet other
    destinations); pairs with ``lower[i] < lower[j]`` are skipped unless ``lower`` is empty. Each sum runs
    over the group's rows in ascending order from zero, as the sparse product (spread left factor times the
    right one) it replaces did, so the values are the same; a group's sums accumulate in one dense vector
    of the destinations, without the product's (groups x columns) rows and their sorting.
    """
    n = rows.shape[0]
    filtered = lower.shape[0] > 0
    bound = 0
    for t in range(n):
        h = rows[t]
        bound += (l_indptr[h + 1] - l_indptr[h]) * (r_indptr[h + 1] - r_indptr[h])
    acc = np.zeros(size)
    mark = np.full(size, -1, dtype=np.int32)  # the group that last met each destination
    touched = np.empty(min(bound, size), dtype=np.int64)
    out_dest = np.empty(bound, dtype=np.int64)
    out_group = np.empty(bound, dtype=np.int32)
    out_value = np.empty(bound)
    nnz = 0
    t = 0
    while t < n:
        g = group[rows[t]]
        n_touched = 0
        while t < n and group[rows[t]] == g:
            h = rows[t]
            for a in range(l_indptr[h], l_indptr[h + 1]):
                i = l_indices[a]
                v = l_data[a]
                for b in range(r_indptr[h], r_indptr[h + 1]):
                    j = r_indices[b]
                    if filtered and lower[i] < lower[j]:
                        continue
                    dest = row_base[i] + col_offset[j]
                    if mark[dest] != g:
                        mark[dest] = g
                        touched[n_touched] = dest
                        n_touched += 1
                        acc[dest] = 0.0
                    acc[dest] += v * r_data[b]
            t += 1
        for k in range(n_touched):
            dest = touched[k]
            if acc[dest] != 0.0:  # the sparse product kept no zero sums
                out_dest[nnz] = dest
                out_group[nnz] = g
                out_value[nnz] = acc[dest]
                nnz += 1
    return out_dest[:nnz], out_group[:nnz], out_value[:nnz]
