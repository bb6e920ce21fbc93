"""Compiled ``O(nnz)`` passes over the rows for Newton's method (numba, serial, exact order).

For a design whose noise variances are ``V = scale * M`` with ``M`` stored like ``X``
(dense, or CSR with the same sparsity pattern -- dropout and multiplicative noise have
``M = X**2``, Poisson ``M = X``), every product Newton needs is one or two passes over the
stored entries, with no temporary ``N x D`` array and no scipy call per product:

* :func:`csr_hvp` / :func:`dense_hvp` -- the Hessian-vector product of
  :func:`bayesdrop.linalg.hessian.hessian_vector_product` in two fused passes (for CSR
  the entries of ``G = 2 V diag(w)`` are computed once per Hessian by
  :func:`csr_noise_entries`, not once per product);
* :func:`csr_hdiag` / :func:`dense_hdiag` -- the Hessian's diagonal (the CG preconditioner).

The loops run in row order on one thread, so results are the same bits on every machine
and thread count. The formulas are those of :mod:`bayesdrop.linalg.hessian` (the tests
check the kernels against them).
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["csr_noise_entries", "csr_hvp", "csr_pcg", "dense_hvp", "csr_hdiag", "dense_hdiag", "dense_hessian_block"]


@numba.njit(cache=True, nogil=True)
def csr_noise_entries(indices, mdata, scale, w, out):
    """``out[k] = 2 scale m_k w_j`` for every stored entry ``k`` (column ``j``): the entries
    of ``G = 2 V diag(w)``, fixed while CG applies one Hessian many times."""
    two_s = 2.0 * scale
    for k in range(indices.shape[0]):
        out[k] = two_s * mdata[k] * w[indices[k]]
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _two_dots(idx, xdata, gdata, lo, hi, z):
    """``(sum_k xdata_k z[idx_k], sum_k gdata_k z[idx_k])`` over ``lo <= k < hi``, each in
    four interleaved partial sums (entries ``k`` modulo 4): a quarter of the chain of
    dependent additions (as :func:`bayesdrop.samplers._gibbs_sparse._pair_sums`)."""
    x0 = 0.0
    x1 = 0.0
    x2 = 0.0
    x3 = 0.0
    g0 = 0.0
    g1 = 0.0
    g2 = 0.0
    g3 = 0.0
    k = lo
    while k + 3 < hi:
        z0 = z[idx[k]]
        z1 = z[idx[k + 1]]
        z2 = z[idx[k + 2]]
        z3 = z[idx[k + 3]]
        x0 += xdata[k] * z0
        x1 += xdata[k + 1] * z1
        x2 += xdata[k + 2] * z2
        x3 += xdata[k + 3] * z3
        g0 += gdata[k] * z0
        g1 += gdata[k + 1] * z1
        g2 += gdata[k + 2] * z2
        g3 += gdata[k + 3] * z3
        k += 4
    while k < hi:
        zk = z[idx[k]]
        x0 += xdata[k] * zk
        g0 += gdata[k] * zk
        k += 1
    return (x0 + x1) + (x2 + x3), (g0 + g1) + (g2 + g3)


@numba.njit(cache=True, nogil=True)
def csr_hvp(indptr, indices, xdata, gdata, fit_intercept, d_mm, d_ms, d_ss, diag, z, out):
    """``out = H z`` for CSR ``X`` and ``G = 2 V diag(w)`` sharing ``indptr`` / ``indices``
    (``gdata`` from :func:`csr_noise_entries`).

    ``diag = 2 + 2 V^T d_s`` (length ``D``). Per row ``n``: ``xz = xbar_n . z``,
    ``gz = g_n . z``; then ``out += xbar_n (d_mm xz + d_ms gz) + g_n (d_ms xz + d_ss gz)``.
    """
    D = diag.shape[0]
    zb = z[D] if fit_intercept else 0.0
    for d in range(D):
        out[d] = diag[d] * z[d]
    total_b = 0.0
    for i in range(indptr.shape[0] - 1):
        lo, hi = indptr[i], indptr[i + 1]
        xz, gz = _two_dots(indices, xdata, gdata, lo, hi, z)
        xz += zb
        a = d_mm[i] * xz + d_ms[i] * gz
        b = d_ms[i] * xz + d_ss[i] * gz
        for k in range(lo, hi):
            out[indices[k]] += xdata[k] * a + gdata[k] * b
        total_b += a
    if fit_intercept:
        out[D] = total_b
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _dot(a, b):
    acc = 0.0
    for i in range(a.shape[0]):
        acc += a[i] * b[i]
    return acc


@numba.njit(cache=True, nogil=True)
def csr_pcg(indptr, indices, xdata, gdata, fit_intercept, d_mm, d_ms, d_ss, diag, inv_precond,
            g, rtol, maxiter):
    """Preconditioned CG on ``H p = -g`` (``H`` applied by :func:`csr_hvp`, preconditioner
    ``diag(inv_precond)``) until ``||H p + g|| <= rtol ||g||`` or ``maxiter`` products.

    The same iteration as the Python loop of :func:`bayesdrop.solvers.newton._direction_cg`
    without Python between the products, and without BLAS (numba's ``np.dot`` would call
    scipy's BLAS, whose idle threads then compete with numpy's for the cores).
    Returns ``(p, iterations)``.
    """
    n_p = g.shape[0]
    p = np.zeros(n_p)
    r = np.empty(n_p)
    z = np.empty(n_p)
    d = np.empty(n_p)
    Hd = np.empty(n_p)
    for i in range(n_p):
        r[i] = -g[i]
        z[i] = inv_precond[i] * r[i]
        d[i] = z[i]
    rz = _dot(r, z)
    stop = rtol * math.sqrt(_dot(g, g))
    k = 0
    while k < maxiter:
        k += 1
        csr_hvp(indptr, indices, xdata, gdata, fit_intercept, d_mm, d_ms, d_ss, diag, d, Hd)
        dHd = _dot(d, Hd)
        if dHd <= 0.0:
            break
        alpha = rz / dHd
        for i in range(n_p):
            p[i] += alpha * d[i]
            r[i] -= alpha * Hd[i]
        if math.sqrt(_dot(r, r)) <= stop:
            break
        for i in range(n_p):
            z[i] = inv_precond[i] * r[i]
        rz_new = _dot(r, z)
        beta = rz_new / rz
        for i in range(n_p):
            d[i] = z[i] + beta * d[i]
        rz = rz_new
    return p, k


@numba.njit(cache=True, nogil=True)
def dense_hvp(X, M, scale, fit_intercept, w, d_mm, d_ms, d_ss, noise_diag, z, out):
    """``out = H z`` for dense ``X`` and ``M`` (see :func:`csr_hvp`)."""
    n, D = X.shape
    zb = z[D] if fit_intercept else 0.0
    for d in range(D):
        out[d] = (2.0 + noise_diag[d]) * z[d]
    if fit_intercept:
        out[D] = 0.0
    two_s = 2.0 * scale
    wz = w * z[:D]
    for i in range(n):
        xz = zb
        gz = 0.0
        for j in range(D):
            xz += X[i, j] * z[j]
            gz += M[i, j] * wz[j]
        gz *= two_s
        a = d_mm[i] * xz + d_ms[i] * gz
        b = two_s * (d_ms[i] * xz + d_ss[i] * gz)
        for j in range(D):
            out[j] += X[i, j] * a + M[i, j] * w[j] * b
        if fit_intercept:
            out[D] += a
    return out


@numba.njit(cache=True, nogil=True)
def csr_hdiag(indptr, indices, xdata, mdata, scale, fit_intercept, w, d_mm, d_ms, d_ss,
              noise_diag, out):
    """Diagonal of ``H``: ``2 + noise_diag_d + sum_n [d_mm x^2 + 4 scale w d_ms x m +
    4 scale^2 w^2 d_ss m^2]`` (intercept: ``sum_n d_mm``)."""
    D = w.shape[0]
    for d in range(D):
        out[d] = 2.0 + noise_diag[d]
    if fit_intercept:
        out[D] = 0.0
    four_s = 4.0 * scale
    for i in range(indptr.shape[0] - 1):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            x = xdata[k]
            mw = mdata[k] * w[j]
            out[j] += d_mm[i] * x * x + four_s * d_ms[i] * x * mw \
                + four_s * scale * d_ss[i] * mw * mw
        if fit_intercept:
            out[D] += d_mm[i]
    return out


@numba.njit(cache=True, nogil=True)
def dense_hdiag(X, M, scale, fit_intercept, w, d_mm, d_ms, d_ss, noise_diag, out):
    """Diagonal of ``H`` for dense ``X`` and ``M`` (see :func:`csr_hdiag`)."""
    n, D = X.shape
    for d in range(D):
        out[d] = 2.0 + noise_diag[d]
    if fit_intercept:
        out[D] = 0.0
    four_s = 4.0 * scale
    for i in range(n):
        for j in range(D):
            x = X[i, j]
            mw = M[i, j] * w[j]
            out[j] += d_mm[i] * x * x + four_s * d_ms[i] * x * mw \
                + four_s * scale * d_ss[i] * mw * mw
        if fit_intercept:
            out[D] += d_mm[i]
    return out


@numba.njit(cache=True, nogil=True)
def dense_hessian_block(X, M, g, fit_intercept, d_mm, d_ms, d_ss, start, nb, Z, Y):
    """Fill the stacked block of :func:`bayesdrop.linalg.hessian._dense_hessian_blocked`:
    rows ``0..nb`` of ``Z`` are ``xbar_n``, rows ``nb..2nb`` are ``g * m_n`` (zero
    intercept entry); ``Y`` holds ``d_mm xbar + d_ms gbar`` and ``d_ms xbar + d_ss gbar``
    (one pass, no temporaries; the caller adds ``Z^T Y`` by BLAS)."""
    D = X.shape[1]
    for i in range(nb):
        r = start + i
        a = d_mm[r]
        b = d_ms[r]
        c = d_ss[r]
        for j in range(D):
            x = X[r, j]
            gm = M[r, j] * g[j]
            Z[i, j] = x
            Z[nb + i, j] = gm
            Y[i, j] = a * x + b * gm
            Y[nb + i, j] = b * x + c * gm
        if fit_intercept:
            Z[i, D] = 1.0
            Z[nb + i, D] = 0.0
            Y[i, D] = a
            Y[nb + i, D] = b
    return Z
