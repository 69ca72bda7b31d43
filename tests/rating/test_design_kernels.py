"""The compiled loops over a design's couplings, against dense numpy formulations."""

from __future__ import annotations

import numpy as np
import scipy.sparse

from rating.design_kernels import (
    coupling_entries,
    entry_row_products,
    grouped_outer_sums,
    in_parts,
    observation_leverages,
)


def _couplings(seed: int, n_rows: int = 300, n_cols: int = 7) -> scipy.sparse.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = rng.uniform(0.5, 2.0, (n_rows, n_cols)) * (rng.random((n_rows, n_cols)) < 0.4)
    dense[::17] = 0.0  # some rows without entries
    return scipy.sparse.csr_matrix(dense)


def test_coupling_entries_build_scipys_csr_and_locate_every_observation():
    rng = np.random.default_rng(1)
    n, n_rows, n_cols = 4000, 300, 9
    rows = rng.integers(0, n_rows, n)
    rows[:n_rows] = np.arange(n_rows)
    agent = rng.integers(0, 5, n)
    task = np.where(rng.random(n) < 0.3, -1, 5 + rng.integers(0, 4, n))  # -1: no task column
    weights = rng.uniform(0.5, 2.0, n)
    cols = np.stack([agent, task])
    indptr, indices, data, entries = coupling_entries(rows, cols, weights, n_rows, n_cols)
    keep = task >= 0
    expected = scipy.sparse.coo_matrix(
        (
            np.concatenate([weights, weights[keep]]),
            (np.concatenate([rows, rows[keep]]), np.concatenate([agent, task[keep]])),
        ),
        shape=(n_rows, n_cols),
    ).tocsr()
    expected.sum_duplicates()
    assert np.array_equal(indptr, expected.indptr) and np.array_equal(indices, expected.indices)
    np.testing.assert_allclose(data, expected.data, rtol=1e-14)
    # Each observation's entry is its own (row, column) cell, and -1 where it has no column.
    assert np.all(entries[1, ~keep] == -1)
    for i, column in enumerate((agent, task)):
        has = column >= 0
        e = entries[i, has]
        assert np.all(indices[e] == column[has])
        assert np.all((e >= indptr[rows[has]]) & (e < indptr[rows[has] + 1]))


def test_entry_row_products_read_the_dense_product_at_each_entry():
    rng = np.random.default_rng(2)
    couplings = _couplings(2, n_rows=500, n_cols=12)
    half = rng.normal(size=(12, 12))
    matrix = half @ half.T
    reads, forms = entry_row_products(couplings.indptr, couplings.indices, couplings.data, matrix)
    dense = couplings.toarray()
    product = dense @ matrix
    rows = np.repeat(np.arange(500), np.diff(couplings.indptr))
    np.testing.assert_allclose(reads, product[rows, couplings.indices], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(forms, np.einsum("hi,ij,hj->h", dense, matrix, dense), rtol=1e-12, atol=1e-12)


def test_observation_leverages_equal_the_dense_hat_matrix_diagonal():
    """The leverage of every observation of a two-factor design with one random factor, from the dense
    mixed-model matrix C = X^T W X + diag(0, 1/gamma) against the kernel's eliminated form."""
    rng = np.random.default_rng(3)
    n, n_rows, n_cols, gamma = 600, 40, 6, 0.7
    rows = np.concatenate([np.arange(n_rows), rng.integers(0, n_rows, n - n_rows)])
    agent = np.concatenate([np.arange(n_cols), rng.integers(0, n_cols, n - n_cols)])
    task = np.where(rng.random(n) < 0.2, -1, n_cols + rng.integers(0, 3, n))
    omega = rng.uniform(0.5, 2.0, n)
    k = n_cols + 3
    x = np.zeros((n, n_rows + k))
    x[np.arange(n), rows] = 1.0
    x[np.arange(n), n_rows + agent] = 1.0
    x[np.flatnonzero(task >= 0), n_rows + task[task >= 0]] = 1.0
    prior = np.zeros(n_rows + k)
    prior[:n_rows] = 1.0 / gamma
    prior[n_rows + n_cols :] = 1.0 / gamma  # the task columns are random too
    c = x.T @ (omega[:, None] * x) + np.diag(prior)
    expected = omega * np.einsum("oi,ij,oj->o", x, np.linalg.inv(c), x)
    cols = np.stack([agent, task])
    indptr, indices, data, entries = coupling_entries(rows, cols, omega, n_rows, k)
    d = np.bincount(rows, weights=omega, minlength=n_rows) + 1.0 / gamma
    b = scipy.sparse.csr_matrix((data, indices, indptr), shape=(n_rows, k)).toarray()
    core = c[n_rows:, n_rows:]
    s_inv = np.linalg.inv(core - b.T @ (b / d[:, None]))
    reads, forms = entry_row_products(indptr, indices, data, s_inv)
    out = np.empty(n)
    observation_leverages(rows, cols, entries, reads, d, forms, s_inv, omega, out)
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)


def test_in_parts_covers_the_range_once_in_contiguous_parts():
    seen = np.zeros(3_000_001, dtype=np.int64)

    def work(lo: int, hi: int) -> None:
        seen[lo:hi] += 1

    in_parts(work, seen.shape[0], parts=3)
    assert np.all(seen == 1)
    in_parts(work, 10, parts=3)  # small: one call in this thread
    assert np.all(seen[:10] == 2) and np.all(seen[10:] == 1)


def test_grouped_outer_sums_pool_each_groups_outer_products_and_weighted_sums():
    rng = np.random.default_rng(3)
    couplings = _couplings(3)
    dense = couplings.toarray()
    group = rng.integers(0, 4, 300)
    r = rng.normal(size=300)
    gram, b_r = grouped_outer_sums(couplings.indptr, couplings.indices, couplings.data, r, group, 4, 7)
    for g in range(4):
        rows = dense[group == g]
        np.testing.assert_allclose(gram[g], rows.T @ rows, rtol=1e-13)
        np.testing.assert_allclose(b_r[g], rows.T @ r[group == g], rtol=1e-13, atol=1e-13)
