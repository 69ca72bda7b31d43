"""The compiled loops over a design's couplings, against dense numpy formulations."""

from __future__ import annotations

import numpy as np
import scipy.sparse

from rating.design_kernels import add_row_products_at, grouped_outer_sums


def _couplings(seed: int, n_rows: int = 300, n_cols: int = 7) -> scipy.sparse.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = rng.uniform(0.5, 2.0, (n_rows, n_cols)) * (rng.random((n_rows, n_cols)) < 0.4)
    dense[::17] = 0.0  # some rows without entries
    return scipy.sparse.csr_matrix(dense)


def test_row_products_read_the_dense_product_at_each_row_and_column():
    rng = np.random.default_rng(1)
    couplings = _couplings(1)
    matrix = rng.normal(size=(7, 7))
    rows = rng.integers(0, 300, 1000)
    cols = rng.integers(-1, 7, 1000)  # -1: no column
    out = np.full(1000, 0.25)
    add_row_products_at(couplings.indptr, couplings.indices, couplings.data, matrix, rows, cols, out)
    product = couplings.toarray() @ matrix
    expected = 0.25 + np.where(cols >= 0, product[rows, np.maximum(cols, 0)], 0.0)
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-13)
    assert np.all(out[cols < 0] == 0.25)


def test_row_products_equal_scipys_sparse_product_to_the_bit():
    rng = np.random.default_rng(2)
    couplings = _couplings(2, n_rows=2000, n_cols=40)
    matrix = rng.normal(size=(40, 40))
    rows, cols = rng.integers(0, 2000, 5003), rng.integers(0, 40, 5003)
    out = np.zeros(5003)
    add_row_products_at(couplings.indptr, couplings.indices, couplings.data, matrix, rows, cols, out)
    assert np.array_equal(out, np.asarray(couplings @ matrix)[rows, cols])


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
