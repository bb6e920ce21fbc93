"""The design's own compiled passes (:class:`bayesdrop.model.design.Design`): the
gradient's two products ``Xbar^T a`` and ``V^T rho`` in one pass over the stored entries
(:func:`csr_rmatvec_pair`, :func:`dense_rmatvec_squares`; ``Design.rmatvec_pair``; and
:func:`dense_rmatvec_pair` for a stored ``M``, the compiled Newton loop's), and
the rows ``sqrt(rho_n) xbar_n`` of a float32 Gram product (:func:`scaled_rows`;
``Design.gram``). Row order, one thread: the same bits on every machine."""

from __future__ import annotations

import numpy as np

from .. import _jit

__all__ = ["csr_rmatvec_pair", "dense_rmatvec_pair", "dense_rmatvec_squares", "m_entry",
           "scaled_rows"]


@_jit.njit(cache=True, nogil=True, inline="always")
def m_entry(X, M, i, d):
    """``M[i, d]``, or ``X[i, d]^2`` where ``M`` is None: the compiled dense loops'
    ``V = scale * M`` of dropout and multiplicative noise (``M = X * X``; zero noise,
    ``scale = 0``) formed in the pass from the row of ``X`` in the cache, one array read
    instead of two (the same product ``X * X`` the stored ``M`` holds; numba compiles one
    variant of each loop for None, the branch removed)."""
    return X[i, d] * X[i, d] if M is None else M[i, d]


@_jit.njit(cache=True, nogil=True, inline="always")
def _scaled_row(Z, row, X, r, fit_intercept, cx):
    """``Z[row] = cx * xbar_r``."""
    D = X.shape[1]
    for j in range(D):
        Z[row, j] = cx * X[r, j]
    if fit_intercept:
        Z[row, D] = cx


@_jit.njit(cache=True, nogil=True)
def scaled_rows(X, r, fit_intercept, out, step=1):
    """``out[i] = r_i [x_n, 1]`` with ``n = i * step`` (``[x_n]`` without intercept) for
    ``i < len(out)``, cast to ``out``'s dtype: the rows of ``diag(r) Xbar`` (of every
    ``step``-th row of ``Xbar``), whose ``out^T out`` is ``Xbar^T diag(r^2) Xbar``
    (numpy's casting ``multiply`` into float32 took four times as long; the rows of a
    strided view ``X[::step]`` would not vectorise: 109 against 23 us for 2500 x 50)."""
    for i in range(out.shape[0]):
        _scaled_row(out, i, X, i * step, fit_intercept, r[i])
    return out


@_jit.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def dense_rmatvec_pair(X, M, a, rho, g, nd):
    """``g[:D] = X^T a`` and ``nd = M^T rho`` in one pass over C-ordered ``X`` and ``M``
    (``N x D`` each), four rows at a time into local sums, as
    :func:`dense_rmatvec_squares` (which reads ``X`` alone when ``M = X * X``); ``g`` may be
    longer than ``D`` (its intercept entry is left to the caller). 569 x 30: 5.4 us, 7.2 us
    one row at a time, 4.4 us for numba's two BLAS products (which cost 2.5 s of
    compilation). ``M`` None: ``M = X * X``, by :func:`dense_rmatvec_squares`."""
    if M is None:
        dense_rmatvec_squares(X, a, rho, g, nd)
        return
    n, D = X.shape
    acc = np.zeros(D)
    acn = np.zeros(D)
    i = 0
    while i + 4 <= n:
        a0, a1, a2, a3 = a[i], a[i + 1], a[i + 2], a[i + 3]
        c0, c1, c2, c3 = rho[i], rho[i + 1], rho[i + 2], rho[i + 3]
        for d in range(D):
            acc[d] += X[i, d] * a0 + X[i + 1, d] * a1 + X[i + 2, d] * a2 + X[i + 3, d] * a3
            acn[d] += M[i, d] * c0 + M[i + 1, d] * c1 + M[i + 2, d] * c2 + M[i + 3, d] * c3
        i += 4
    while i < n:
        a0, c0 = a[i], rho[i]
        for d in range(D):
            acc[d] += X[i, d] * a0
            acn[d] += M[i, d] * c0
        i += 1
    for d in range(D):
        g[d] = acc[d]
        nd[d] = acn[d]


@_jit.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def dense_rmatvec_squares(X, a, rho, g, nd):
    """``g[:D] = X^T a`` and ``nd = (X * X)^T rho`` in one pass over C-ordered ``X``
    (``N x D``), four rows at a time (the accumulators are read and written once per four
    rows); ``g`` may be longer than ``D`` (its intercept entry is left to the caller).
    Each column's sum is reassociated (``fastmath`` with only ``reassoc`` and
    ``contract``): the two BLAS products with a stored ``X * X`` differ by rounding only,
    and read twice the memory (on 10^4 x 50: 240 -> 136 us)."""
    n, D = X.shape
    for j in range(D):
        g[j] = 0.0
        nd[j] = 0.0
    i = 0
    while i + 4 <= n:
        a0, a1, a2, a3 = a[i], a[i + 1], a[i + 2], a[i + 3]
        r0, r1, r2, r3 = rho[i], rho[i + 1], rho[i + 2], rho[i + 3]
        for j in range(D):
            x0 = X[i, j]
            x1 = X[i + 1, j]
            x2 = X[i + 2, j]
            x3 = X[i + 3, j]
            g[j] += x0 * a0 + x1 * a1 + x2 * a2 + x3 * a3
            nd[j] += x0 * x0 * r0 + x1 * x1 * r1 + x2 * x2 * r2 + x3 * x3 * r3
        i += 4
    while i < n:
        ai = a[i]
        ri = rho[i]
        for j in range(D):
            x = X[i, j]
            g[j] += x * ai
            nd[j] += x * x * ri
        i += 1


@_jit.njit(cache=True, nogil=True)
def csr_rmatvec_pair(indptr, indices, xdata, mdata, a, rho, g, nd):
    """``g[:D] = X^T a`` and ``nd = M^T rho`` in one pass over CSR ``X`` and ``M`` of the
    same pattern (``D = nd.shape[0]``; ``g`` may be longer, its intercept entry is left
    to the caller): the two products of the gradient in one sweep over the entries
    instead of two scipy products (on newsgroups, 714 x 22178: 230 -> 205 us)."""
    for j in range(nd.shape[0]):
        g[j] = 0.0
        nd[j] = 0.0
    for i in range(indptr.shape[0] - 1):
        ai = a[i]
        ri = rho[i]
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            g[j] += xdata[k] * ai
            nd[j] += mdata[k] * ri
