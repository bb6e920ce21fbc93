"""Compiled ``O(nnz)`` passes over the rows for Newton's method (numba, in a fixed order).

For a design whose noise variances are ``V = scale * M`` with ``M`` stored like ``X``
(dense, or CSR with the same sparsity pattern -- dropout and multiplicative noise have
``M = X**2``, Poisson ``M = X``), every product Newton needs is one or two passes over the
stored entries, with no temporary ``N x D`` array and no scipy call per product:

* :func:`csr_hvp` / :func:`dense_hvp` -- the Hessian-vector product of
  :func:`bayesdrop.linalg.hessian.hessian_vector_product` in two fused passes (for CSR
  the entries of ``G = 2 V diag(w)`` are computed once per Hessian, with the Hessian's
  diagonal, by :func:`csr_hessian_entries`, not once per product);
* :func:`csr_hessian_entries` / :func:`dense_hdiag` -- the Hessian's diagonal (the CG
  preconditioner);
* :func:`csr_gradient_entries` -- where CG needs no diagonal (a wide design), the
  entries of ``G`` written by the gradient's pass instead of a pass of their own;
  :func:`csr_gradient_pass` the same pass in row chunks (compiled Newton-CG);
* :func:`csr_pcg` -- CG on ``H p = -g`` with :func:`csr_hvp`'s products; also, with
  ``d_ms = d_ss = None`` and :func:`csr_normal_diagonal`'s preconditioner, the weighted
  normal system of :mod:`bayesdrop.linalg.wls` on CSR designs (``X``'s entries alone).

Each loop runs its rows in order, or in the fixed row chunks of :func:`row_chunks` (from
:data:`CHUNKED_MIN_ENTRIES` stored entries), each summed into its own copy of the output
and the copies added in chunk order -- on numba's threads where
:func:`bayesdrop._threads.numba_threads` allows, one after the other otherwise: results
are the same bits for any thread count. The formulas are those of :mod:`bayesdrop.linalg.hessian` (the tests
check the kernels against them).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from ..model._design_kernels import _scaled_row, m_entry

__all__ = ["CHUNKED_MIN_ENTRIES", "HVP_CHUNKS", "csr_gradient_entries", "csr_gradient_pass",
           "csr_hessian_entries", "csr_hvp", "csr_normal_diagonal", "csr_pcg", "csr_pcg_blocks",
           "csr_pcg_iterate", "csr_pcg_state", "dense_hdiag",
           "dense_hessian_split", "dense_hvp", "row_chunks", "single_hvp", "threads_arg"]


@_jit.njit(cache=True, nogil=True)
def csr_hessian_entries(indptr, indices, xdata, mdata, scale, fit_intercept, w, d_mm, d_ms,
                        d_ss, noise_diag, xg, diag):
    """What CG needs of one Hessian, in one pass over the stored entries.

    ``xg`` (length ``2 nnz``): the entries ``x_k`` of ``X`` and ``g_k = 2 scale m_k w_j``
    of ``G = 2 V diag(w)`` (column ``j``) interleaved, ``x_0, g_0, x_1, g_1, ...``: the
    products of :func:`csr_hvp` read one stream of values instead of two (on newsgroups,
    714 x 22178 with 1.1e5 entries: 410 -> 260 us per product with unsigned indices).
    ``diag`` (length ``n_params``, or 0 to skip it): the diagonal of ``H``,
    ``2 + noise_diag_j + sum_n [x (d_mm x + 2 d_ms g) + d_ss g^2]`` (intercept:
    ``sum_n d_mm``) -- the formula of
    :func:`bayesdrop.linalg.hessian.hessian_diagonal` with ``g = 2 scale m w_j``.
    """
    D = w.shape[0]
    with_diag = diag.shape[0] > 0
    if with_diag:
        for d in range(D):
            diag[d] = 2.0 + noise_diag[d]
    two_s = 2.0 * scale
    total = 0.0
    for i in range(indptr.shape[0] - 1):
        lo, hi = indptr[i], indptr[i + 1]
        if not with_diag:
            for k in range(lo, hi):
                xg[2 * k] = xdata[k]
                xg[2 * k + 1] = two_s * mdata[k] * w[indices[k]]
            continue
        a = d_mm[i]
        b = 2.0 * d_ms[i]
        c = d_ss[i]
        for k in range(lo, hi):
            j = indices[k]
            x = xdata[k]
            g = two_s * mdata[k] * w[j]
            xg[2 * k] = x
            xg[2 * k + 1] = g
            diag[j] += x * (a * x + b * g) + c * g * g
        total += a
    if with_diag and fit_intercept:
        diag[D] = total
    return xg, diag


@_jit.njit(cache=True, nogil=True)
def csr_normal_diagonal(indptr, indices, data, fit_intercept, rho, base, diag):
    """The diagonal of the weighted normal matrix ``A = diag(base) + Xbar^T diag(rho)
    Xbar`` (``base`` of length ``D``, zero for the intercept) in one pass over the stored
    entries: ``A_jj = base_j + sum_n rho_n x_nj^2``, ``A_bb = sum_n rho_n`` -- the sums
    of :func:`csr_hessian_entries`'s diagonal with ``d_mm = rho`` and ``G = 0``, bit for
    bit (the Jacobi preconditioner of :func:`csr_pcg` on that system).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[1.0, 0.0], [2.0, 3.0]]))
    >>> csr_normal_diagonal(X.indptr, X.indices, X.data, True, np.array([0.5, 1.0]),
    ...                     np.full(2, 2.0), np.empty(3)).tolist()
    [6.5, 11.0, 1.5]
    """
    D = base.shape[0]
    for d in range(D):
        diag[d] = base[d]
    total = 0.0
    for i in range(indptr.shape[0] - 1):
        a = rho[i]
        for k in range(indptr[i], indptr[i + 1]):
            x = data[k]
            diag[indices[k]] += x * (a * x)
        total += a
    if fit_intercept:
        diag[D] = total
    return diag


@_jit.njit(cache=True, nogil=True)
def csr_gradient_entries(indptr, indices, xdata, mdata, scale, w, a, rho, g, nd, xg):
    """The gradient's pass and the Hessian's entries in one pass over the stored entries:
    ``g[:D] = X^T a`` and ``nd = M^T rho`` (the products of
    :func:`bayesdrop.model._design_kernels.csr_rmatvec_pair`, in its order: the same
    sums) and ``xg`` as :func:`csr_hessian_entries` writes it without the diagonal --
    ``x_k`` and ``g_k = 2 scale m_k w_j`` interleaved. Where the next Newton direction
    needs a new Hessian (CG on a wide design) the entries then cost no pass of their own
    (newsgroups, 1427 x 22178: 0.71 -> 0.50 ms for both)."""
    for j in range(nd.shape[0]):
        g[j] = 0.0
        nd[j] = 0.0
    _gradient_rows(indptr, indices, xdata, mdata, 2.0 * scale, w, a, rho, g, nd, xg, True, 0,
                   indptr.shape[0] - 1)
    return g, nd, xg


@_jit.njit(cache=True, nogil=True, inline="always")
def _gradient_rows(indptr, indices, xdata, mdata, two_s, w, a, rho, g, nd, xg, entries, lo,
                   hi):
    """Rows ``lo .. hi - 1`` of :func:`csr_gradient_pass` and :func:`csr_gradient_entries`
    added into ``g`` and ``nd`` (with ``entries``, also writing their ``xg``)."""
    for i in range(lo, hi):
        ai = a[i]
        ri = rho[i]
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            x = xdata[k]
            m = mdata[k]
            g[j] += x * ai
            nd[j] += m * ri
            if entries:
                xg[2 * k] = x
                xg[2 * k + 1] = two_s * m * w[j]


@_jit.njit(cache=True, nogil=True, inline="always")
def _gradient_chunk(c, indptr, indices, xdata, mdata, two_s, w, a, rho, g, nd, xg, entries,
                    chunks, bufs):
    """Chunk ``c`` of :func:`csr_gradient_pass`: chunk 0 into ``g`` and ``nd``, chunk
    ``c`` into ``bufs[c - 1]``, each zeroed first."""
    tg = g if c == 0 else bufs[c - 1, 0]
    tn = nd if c == 0 else bufs[c - 1, 1]
    for j in range(nd.shape[0]):
        tg[j] = 0.0
        tn[j] = 0.0
    _gradient_rows(indptr, indices, xdata, mdata, two_s, w, a, rho, tg, tn, xg, entries,
                   chunks[c], chunks[c + 1])


@_jit.njit(cache=True, nogil=True)
def _gradient_chunks(indptr, indices, xdata, mdata, two_s, w, a, rho, g, nd, xg, entries,
                     chunks, bufs):
    """The chunks of :func:`csr_gradient_pass` one after the other."""
    for c in range(chunks.shape[0] - 1):
        _gradient_chunk(c, indptr, indices, xdata, mdata, two_s, w, a, rho, g, nd, xg,
                        entries, chunks, bufs)


@_jit.njit(cache=True, nogil=True, parallel=True)
def _gradient_chunks_threads(indptr, indices, xdata, mdata, two_s, w, a, rho, g, nd, xg,
                             entries, chunks, bufs):
    """:func:`_gradient_chunks` with the chunks on numba's threads (the same sums)."""
    for c in _jit.prange(chunks.shape[0] - 1):
        _gradient_chunk(c, indptr, indices, xdata, mdata, two_s, w, a, rho, g, nd, xg,
                        entries, chunks, bufs)


@_jit.njit(cache=True, nogil=True)
def csr_gradient_pass(indptr, indices, xdata, mdata, scale, w, a, rho, g, nd, xg, entries,
                      chunks, threads):
    """``g[:D] = X^T a`` and ``nd = M^T rho`` (``D = nd.shape[0]``; ``g``'s intercept
    entry is left to the caller) and, with ``entries``, the Hessian's entries ``xg`` as
    :func:`csr_gradient_entries` writes them, in the row chunks ``chunks`` of
    :func:`row_chunks`: each chunk summed into its own copy of ``g[:D]`` and ``nd``, the
    copies added in chunk order, on numba's threads where ``threads`` (a bool) -- the same
    sums either way. With one chunk, the sums of :func:`csr_gradient_entries` and
    :func:`bayesdrop.model._design_kernels.csr_rmatvec_pair`."""
    D = nd.shape[0]
    K = chunks.shape[0] - 1
    bufs = np.empty((max(K - 1, 0), 2, D))
    two_s = 2.0 * scale
    if threads and K > 1:
        _gradient_chunks_threads(indptr, indices, xdata, mdata, two_s, w, a, rho, g, nd, xg,
                                 entries, chunks, bufs)
    else:
        _gradient_chunks(indptr, indices, xdata, mdata, two_s, w, a, rho, g, nd, xg, entries,
                         chunks, bufs)
    for c in range(1, K):
        for j in range(D):
            g[j] += bufs[c - 1, 0, j]
            nd[j] += bufs[c - 1, 1, j]
    return g, nd


@_jit.njit(cache=True, nogil=True, inline="always")
def _sum4(idx, data, lo, hi, v, init):
    """``init + sum_k data_k v[idx_k]`` over the entries ``lo <= k < hi`` in four
    interleaved partial sums (entries ``k`` modulo 4), which quarters the chain of
    dependent additions. ``data=None``: every value is 1 (binary features), compiled
    without loading or multiplying the values."""
    a = init
    b = 0.0
    c = 0.0
    e = 0.0
    k = lo
    while k + 3 < hi:
        a += (1.0 if data is None else data[k]) * v[idx[k]]
        b += (1.0 if data is None else data[k + 1]) * v[idx[k + 1]]
        c += (1.0 if data is None else data[k + 2]) * v[idx[k + 2]]
        e += (1.0 if data is None else data[k + 3]) * v[idx[k + 3]]
        k += 4
    while k < hi:
        a += (1.0 if data is None else data[k]) * v[idx[k]]
        k += 1
    return (a + b) + (c + e)


@_jit.njit(cache=True, nogil=True, inline="always")
def _two_dots(idx, xg, lo, hi, z):
    """``(sum_k x_k z[idx_k], sum_k g_k z[idx_k])`` over ``lo <= k < hi`` (``xg``
    interleaved, :func:`csr_hessian_entries`), each in four interleaved partial sums
    (entries ``k`` modulo 4): a quarter of the chain of dependent additions (as
    :func:`_sum4`; the ``x`` sum is ``_sum4``'s from ``init = 0``, bit for bit)."""
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
        x0 += xg[2 * k] * z0
        g0 += xg[2 * k + 1] * z0
        x1 += xg[2 * k + 2] * z1
        g1 += xg[2 * k + 3] * z1
        x2 += xg[2 * k + 4] * z2
        g2 += xg[2 * k + 5] * z2
        x3 += xg[2 * k + 6] * z3
        g3 += xg[2 * k + 7] * z3
        k += 4
    while k < hi:
        zk = z[idx[k]]
        x0 += xg[2 * k] * zk
        g0 += xg[2 * k + 1] * zk
        k += 1
    return (x0 + x1) + (x2 + x3), (g0 + g1) + (g2 + g3)


#: the CSR Hessian-vector product splits the rows into this many chunks of about equal
#: stored entries (:func:`row_chunks`), each summed into its own copy of the output and
#: the copies added in chunk order, once ``X`` has :data:`CHUNKED_MIN_ENTRIES` stored
#: entries: the chunks run on numba's threads where :func:`bayesdrop._threads.numba_threads`
#: allows, one after the other otherwise -- the same sums either way, so the result does
#: not depend on the number of threads. On newsgroups (1427 x 22178, 2.3e5 entries; 2
#: cores) 0.42 -> 0.25 ms per product; four chunks 0.26, eight 0.29 ms.
HVP_CHUNKS = 2
#: see :data:`HVP_CHUNKS`; below, one chunk (the rows in order, into the output itself)
CHUNKED_MIN_ENTRIES = 50_000


def row_chunks(indptr):
    """Row boundaries ``r_0 = 0 < ... < r_K = N`` of the product's :data:`HVP_CHUNKS`
    chunks (one below :data:`CHUNKED_MIN_ENTRIES` stored entries): chunk ``c`` holds rows
    ``r_c .. r_{c+1} - 1``, cut where the stored entries reach ``c nnz / K`` (int64).

    Examples
    --------
    >>> row_chunks(np.array([0, 40_000, 50_000, 90_000, 100_000])).tolist()
    [0, 2, 4]
    >>> row_chunks(np.array([0, 3, 5])).tolist()
    [0, 2]
    """
    n = indptr.shape[0] - 1
    nnz = int(indptr[-1])
    K = HVP_CHUNKS if nnz >= CHUNKED_MIN_ENTRIES and n >= HVP_CHUNKS else 1
    cuts = np.searchsorted(indptr, [c * nnz / K for c in range(1, K)], side="left")
    return np.concatenate(([0], np.clip(cuts, 1, n - 1), [n])).astype(np.int64)


def threads_arg(chunks, threads):
    """The ``threads`` argument of :func:`csr_hvp`, :func:`csr_pcg` and the sparse sweep's
    dual products for these ``chunks``: True where more than one chunk may run on
    numba's threads (``threads``: :func:`bayesdrop._threads.numba_threads`), else None.

    Examples
    --------
    >>> threads_arg(np.array([0, 5, 9]), True), threads_arg(np.array([0, 9]), True)
    (True, None)
    """
    return True if threads and chunks.shape[0] > 2 else None


@_jit.njit(cache=True, nogil=True, inline="always")
def _hvp_rows(indptr, indices, xg, zb, d_mm, d_ms, d_ss, z, lo, hi, out):
    """Rows ``lo .. hi - 1`` of :func:`csr_hvp` added into ``out``; returns their share
    of the intercept's entry."""
    total_b = 0.0
    for i in range(lo, hi):
        klo, khi = indptr[i], indptr[i + 1]
        if d_ms is None:  # the weighted normal system: xg holds X's entries alone
            a = d_mm[i] * (_sum4(indices, xg, klo, khi, z, 0.0) + zb)
            for k in range(klo, khi):
                out[indices[k]] += xg[k] * a
            total_b += a
            continue
        xz, gz = _two_dots(indices, xg, klo, khi, z)
        xz += zb
        a = d_mm[i] * xz + d_ms[i] * gz
        b = d_ms[i] * xz + d_ss[i] * gz
        for k in range(klo, khi):
            out[indices[k]] += xg[2 * k] * a + xg[2 * k + 1] * b
        total_b += a
    return total_b


@_jit.njit(cache=True, nogil=True, inline="always")
def _hvp_chunk(c, indptr, indices, xg, zb, d_mm, d_ms, d_ss, z, chunks, out, bufs, tb):
    """Chunk ``c`` of :func:`csr_hvp`: chunk 0 into ``out``, chunk ``c`` into the zeroed
    ``bufs[c - 1]``; ``tb[c]`` its intercept share."""
    target = out if c == 0 else bufs[c - 1]
    if c > 0:
        target[:] = 0.0
    tb[c] = _hvp_rows(indptr, indices, xg, zb, d_mm, d_ms, d_ss, z, chunks[c], chunks[c + 1],
                      target)


@_jit.njit(cache=True, nogil=True)
def _hvp_chunks(indptr, indices, xg, zb, d_mm, d_ms, d_ss, z, chunks, out, bufs, tb):
    """The chunks of :func:`csr_hvp` one after the other."""
    for c in range(chunks.shape[0] - 1):
        _hvp_chunk(c, indptr, indices, xg, zb, d_mm, d_ms, d_ss, z, chunks, out, bufs, tb)


@_jit.njit(cache=True, nogil=True, parallel=True)
def _hvp_chunks_threads(indptr, indices, xg, zb, d_mm, d_ms, d_ss, z, chunks, out, bufs, tb):
    """:func:`_hvp_chunks` with the chunks on numba's threads (the same sums)."""
    for c in _jit.prange(chunks.shape[0] - 1):
        _hvp_chunk(c, indptr, indices, xg, zb, d_mm, d_ms, d_ss, z, chunks, out, bufs, tb)


@_jit.njit(cache=True, nogil=True)
def csr_hvp(indptr, indices, xg, fit_intercept, d_mm, d_ms, d_ss, base, z, out, chunks,
            bufs, threads):
    """``out = H z`` for CSR ``X`` and ``G = 2 V diag(w)`` sharing ``indptr`` / ``indices``
    (their entries interleaved in ``xg`` by :func:`csr_hessian_entries`; ``indices``
    best an unsigned view, which spares the negative-index test of every load).

    ``base = 2 + 2 V^T d_s`` (length ``D``). Per row ``n``: ``xz = xbar_n . z``,
    ``gz = g_n . z``; then ``out += xbar_n (d_mm xz + d_ms gz) + g_n (d_ms xz + d_ss gz)``.

    ``d_ms = d_ss = None``: the weighted normal system of :mod:`bayesdrop.linalg.wls`,
    ``out = base z + Xbar^T (d_mm * (Xbar z))`` (``G = 0``), with ``xg`` the entries of
    ``X`` alone (``X.data``, no interleaved copy; compiled without the ``G`` stream) --
    the same sums as with ``G``'s zero entries interleaved, one stream of values instead
    of two (random 6000 x 2500 CSR, 6e4 entries, AMD EPYC, best of 15: 114 -> 92 us per
    product on 2 threads, 313 -> 278 us on one).

    The rows run in the chunks ``chunks`` (:func:`row_chunks`), each but the first summed
    into a row of ``bufs`` (shape ``(K - 1, D)``), the copies then added to ``out`` in
    chunk order; ``threads``: True for the chunks on numba's threads (the same sums),
    None where they never are (:func:`threads_arg`: then the parallel kernel is not
    compiled -- about 3 s of a first fit after install).
    """
    D = base.shape[0]
    zb = z[D] if fit_intercept else 0.0
    for d in range(D):
        out[d] = base[d] * z[d]
    K = chunks.shape[0] - 1
    tb = np.empty(K)
    if threads is not None and threads and K > 1:  # (pruned by numba where None)
        _hvp_chunks_threads(indptr, indices, xg, zb, d_mm, d_ms, d_ss, z, chunks, out, bufs,
                            tb)
    else:
        _hvp_chunks(indptr, indices, xg, zb, d_mm, d_ms, d_ss, z, chunks, out, bufs, tb)
    for c in range(1, K):
        for d in range(D):
            out[d] += bufs[c - 1, d]
    if fit_intercept:
        total_b = 0.0
        for c in range(K):
            total_b += tb[c]
        out[D] = total_b
    return out


@_jit.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _dot(a, b):
    """``a . b`` reassociated into SIMD lanes (``fastmath`` with only ``reassoc`` and
    ``contract``: inf and NaN propagate), as BLAS ``ddot`` sums; the strict left-to-right
    chain took 15 of the 16 us of a 22179-entry product. Not ``inline="always"``: numba
    would inline it into callers compiled without these flags."""
    acc = 0.0
    for i in range(a.shape[0]):
        acc += a[i] * b[i]
    return acc


@_jit.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _cg_update(p, r, z, d, Hd, inv_precond, alpha):
    """One pass of a CG iteration: ``p += alpha d``, ``r -= alpha H d``, ``z = M^-1 r``;
    returns ``(r.r, r.z)`` (sums reassociated as in :func:`_dot`)."""
    rr = 0.0
    rz = 0.0
    for i in range(p.shape[0]):
        p[i] += alpha * d[i]
        ri = r[i] - alpha * Hd[i]
        r[i] = ri
        zi = inv_precond[i] * ri
        z[i] = zi
        rr += ri * ri
        rz += ri * zi
    return rr, rz


@_jit.njit(cache=True, nogil=True)
def csr_pcg(indptr, indices, xg, fit_intercept, d_mm, d_ms, d_ss, base, inv_precond, g, rtol,
            maxiter, chunks, threads):
    """Preconditioned CG on ``H p = -g`` (``H`` applied by :func:`csr_hvp`, preconditioner
    ``diag(inv_precond)``) until ``||H p + g|| <= rtol ||g||`` or ``maxiter`` products
    (``d_ms = d_ss = None``: the weighted normal system, see :func:`csr_hvp`).

    The same iteration as the Python loop of :func:`bayesdrop.solvers.newton.steps.direction_cg`
    without Python between the products, and without BLAS (numba's ``np.dot`` would call
    scipy's BLAS, whose idle threads then compete with numpy's for the cores). ``chunks``
    and ``threads``: the products' row chunks and True where they run on numba's threads,
    else None (:func:`csr_hvp`). Returns ``(p, iterations)``. From Python,
    :func:`csr_pcg_blocks` runs the same iterations in blocks (Ctrl-C acts between them).
    """
    state = csr_pcg_state(g, inv_precond, rtol, base, chunks)
    csr_pcg_iterate(indptr, indices, xg, fit_intercept, d_mm, d_ms, d_ss, base, inv_precond,
                    state, maxiter, chunks, threads)
    return state[0], state[7][0]


@_jit.njit(cache=True, nogil=True)
def csr_pcg_state(g, inv_precond, rtol, base, chunks):
    """The state of :func:`csr_pcg_iterate` at ``p = 0``: ``(p, r, z, d, Hd, bufs,
    [r.z, stop], [products, finished])``."""
    n_p = g.shape[0]
    p = np.zeros(n_p)
    r = np.empty(n_p)
    z = np.empty(n_p)
    d = np.empty(n_p)
    for i in range(n_p):
        r[i] = -g[i]
        z[i] = inv_precond[i] * r[i]
        d[i] = z[i]
    floats = np.empty(2)
    floats[0] = _dot(r, z)
    floats[1] = rtol * math.sqrt(_dot(g, g))
    return (p, r, z, d, np.empty(n_p), np.empty((chunks.shape[0] - 2, base.shape[0])),
            floats, np.zeros(2, dtype=np.int64))


@_jit.njit(cache=True, nogil=True)
def csr_pcg_iterate(indptr, indices, xg, fit_intercept, d_mm, d_ms, d_ss, base, inv_precond,
                    state, k_stop, chunks, threads):
    """:func:`csr_pcg`'s iterations on ``state`` (:func:`csr_pcg_state`) until it has
    made ``k_stop`` products in all or finished (``state[7] = [products, finished]``);
    one run cut into calls takes the same steps."""
    p, r, z, d, Hd, bufs, floats, ints = state
    n_p = p.shape[0]
    rz, stop = floats[0], floats[1]
    k = ints[0]
    while k < k_stop and ints[1] == 0:
        k += 1
        csr_hvp(indptr, indices, xg, fit_intercept, d_mm, d_ms, d_ss, base, d, Hd, chunks,
                bufs, threads)
        dHd = _dot(d, Hd)
        if dHd <= 0.0:
            ints[1] = 1
            break
        rr, rz_new = _cg_update(p, r, z, d, Hd, inv_precond, rz / dHd)
        if math.sqrt(rr) <= stop:
            ints[1] = 1
            break
        beta = rz_new / rz
        for i in range(n_p):
            d[i] = z[i] + beta * d[i]
        rz = rz_new
    floats[0] = rz
    ints[0] = k


def csr_pcg_blocks(indptr, indices, xg, fit_intercept, d_mm, d_ms, d_ss, base, inv_precond,
                   g, rtol, maxiter, chunks, threads):
    """:func:`csr_pcg` from Python in blocks of products of about 0.1 s
    (``bayesdrop._blocks``): the same iterations and result, but Ctrl-C acts between
    blocks instead of after the whole solve (on a large design a solve of many products
    can take minutes)."""
    from .._blocks import in_blocks

    state = csr_pcg_state(g, inv_precond, rtol, base, chunks)
    ints = state[7]

    def advance(stop):
        csr_pcg_iterate(indptr, indices, xg, fit_intercept, d_mm, d_ms, d_ss, base,
                        inv_precond, state, stop, chunks, threads)
        return int(ints[0]), bool(ints[1])

    return state[0], in_blocks(advance, int(maxiter), 8)


@_jit.njit(cache=True, nogil=True)
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


@_jit.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def single_hvp(X, M, fit_intercept, w, d_mm, c_xg, c_gg, base, z, out):
    """``out = H z`` from float32 ``X`` and ``M`` (``M`` None: ``X * X``,
    :func:`bayesdrop.model._design_kernels.m_entry`) in one pass over the rows: row
    ``n``'s ``x_n . z`` and ``m_n . (w z)`` in float32 sums, its ``a_n = d_mm xz +
    c_xg mz`` and ``b_n = c_xg xz + c_gg mz`` in float64, then its shares of
    ``X^T a`` and ``M^T b`` (float32 sums) while the row is in the cache;
    ``out = base z + X^T a + w M^T b`` (intercept: ``sum a``). The four products of
    :func:`bayesdrop.linalg.hessian.single_operator` with one read of the data instead of
    four, each sum within the float32 bound of any summation order (``fastmath`` with
    only ``reassoc`` and ``contract``). Fashion-MNIST 4000 x 784: 0.66-0.72 ms against
    0.83 ms for four ``sgemv`` on two threads, 1.85 ms on one."""
    n, D = X.shape
    zb = z[D] if fit_intercept else 0.0
    zz = np.empty(D, dtype=np.float32)
    wz = np.empty(D, dtype=np.float32)
    for d in range(D):
        zz[d] = np.float32(z[d])
        wz[d] = np.float32(w[d] * z[d])
    ax = np.zeros(D, dtype=np.float32)
    am = np.zeros(D, dtype=np.float32)
    total = 0.0
    for i in range(n):
        xz = np.float32(0.0)
        mz = np.float32(0.0)
        for d in range(D):
            xz += X[i, d] * zz[d]
            mz += m_entry(X, M, i, d) * wz[d]
        xi = np.float64(xz) + zb
        mi = np.float64(mz)
        a = d_mm[i] * xi + c_xg[i] * mi
        b = c_xg[i] * xi + c_gg[i] * mi
        total += a
        a32 = np.float32(a)
        b32 = np.float32(b)
        for d in range(D):
            ax[d] += X[i, d] * a32
            am[d] += m_entry(X, M, i, d) * b32
    for d in range(D):
        out[d] = base[d] * z[d] + np.float64(ax[d]) + w[d] * np.float64(am[d])
    if fit_intercept:
        out[D] = total
    return out


@_jit.njit(cache=True, nogil=True)
def dense_hdiag(X, M, scale, fit_intercept, w, d_mm, d_ms, d_ss, noise_diag, out):
    """Diagonal of ``H`` for dense ``X`` and ``M``: ``2 + noise_diag_d + sum_n [d_mm x^2 +
    4 scale w d_ms x m + 4 scale^2 w^2 d_ss m^2]`` (intercept: ``sum_n d_mm``)."""
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


@_jit.njit(cache=True, nogil=True, inline="always")
def _eigen2(a, b, c):
    """Eigen-decomposition of the symmetric ``[[a, b], [b, c]]``: ``(l1, l2, u, v)`` with
    ``l1 >= l2`` and unit eigenvectors ``(u, v)`` of ``l1`` and ``(-v, u)`` of ``l2``
    (the eigenvector formula without cancellation: the longer of the two candidates)."""
    if b == 0.0:
        if a >= c:
            return a, c, 1.0, 0.0
        return c, a, 0.0, 1.0
    half = 0.5 * (a - c)
    big = max(abs(half), abs(b))  # scaled: no overflow in the squares
    rad = big * math.sqrt((half / big) ** 2 + (b / big) ** 2)
    mean = 0.5 * (a + c)
    # the eigenvalue of larger magnitude directly, the other as det / it (mean -+ rad
    # would cancel when the two differ by orders of magnitude)
    scale = max(abs(a), abs(b), abs(c))
    det = (a / scale) * (c / scale) - (b / scale) ** 2
    if mean >= 0.0:
        l1 = mean + rad
        l2 = det * scale * (scale / l1)
    else:
        l2 = mean - rad
        l1 = det * scale * (scale / l2)
    if half >= 0.0:
        u, v = half + rad, b
    else:
        u, v = b, rad - half
    norm = big * math.sqrt((u / big) ** 2 + (v / big) ** 2)
    return l1, l2, u / norm, v / norm


@_jit.njit(cache=True, nogil=True, inline="always")
def _put_row(Z, row, X, M, g, r, fit_intercept, cx, cg):
    """``Z[row] = cx * xbar_r + cg * gbar_r`` (``gbar_r = g * M[r]``, zero intercept;
    ``M`` None: ``X * X``, :func:`bayesdrop.model._design_kernels.m_entry`)."""
    D = X.shape[1]
    for j in range(D):
        Z[row, j] = cx * X[r, j] + cg * (m_entry(X, M, r, j) * g[j])
    if fit_intercept:
        Z[row, D] = cx


#: an example's 2 x 2 curvature ``C_n`` is split into signed squares only when
#: ``d_ms^2 <= SPLIT_MAX_RATIO |d_mm d_ss|``: for a strongly indefinite ``C_n`` the two
#: squares are much larger than ``C_n``'s entries and their difference would lose
#: ``log10(d_ms^2 / |d_mm d_ss|)`` digits; those examples use the exact product instead
#: (see :func:`dense_hessian_split`). Measured at the optimum at q = 0.3: every example of
#: 10^4 x 50 logistic / hinge and of breast cancer is below 400.
SPLIT_MAX_RATIO = 1e4


@_jit.njit(cache=True, nogil=True)
def dense_hessian_split(X, M, g, fit_intercept, d_mm, d_ms, d_ss, start, nb, P, Q, Z, Y):
    """The rows ``start .. start + nb`` of the Hessian's data part, as signed squares.

    Row ``n`` adds ``[xbar_n, gbar_n] C_n [xbar_n, gbar_n]^T`` to ``H`` with the 2 x 2
    curvature ``C_n = [[d_mm, d_ms], [d_ms, d_ss]]`` and ``gbar_n = g * M[n]`` (zero
    intercept entry). With ``C_n = l1 e1 e1^T + l2 e2 e2^T`` each eigenpair is one
    rank-one term ``l (e . [xbar, gbar]) (e . [xbar, gbar])^T``: rows with ``l > 0`` go to
    ``P`` scaled by ``sqrt(l)``, rows with ``l < 0`` to ``Q`` scaled by ``sqrt(-l)``, so
    that the block adds ``P^T P - Q^T Q`` -- two symmetric rank-k updates (``syrk``),
    half the work of the general product ``Z^T (C Z)``. Examples whose ``C_n`` is strongly
    indefinite (``d_ms^2 > SPLIT_MAX_RATIO |d_mm d_ss|``) go to ``Z`` (rows ``xbar_n``,
    ``gbar_n``) and ``Y`` (rows ``C_n [xbar_n, gbar_n]``) instead, adding the exact
    ``Z^T Y``. ``P``, ``Q``, ``Z`` and ``Y`` need ``2 nb`` rows; returns how many rows of
    ``P``, ``Q`` and ``Z`` were filled."""
    n_p = 0
    n_q = 0
    n_z = 0
    g_zero = True  # w = 0: every gbar_n is zero and only d_mm xbar xbar^T remains
    for j in range(g.shape[0]):
        if g[j] != 0.0:
            g_zero = False
    if g_zero:  # rows sqrt(d_mm) xbar (M unread)
        for i in range(nb):
            r = start + i
            a = d_mm[r]
            if a == 0.0:
                continue
            if a > 0.0:
                _scaled_row(P, n_p, X, r, fit_intercept, math.sqrt(a))
                n_p += 1
            else:
                _scaled_row(Q, n_q, X, r, fit_intercept, math.sqrt(-a))
                n_q += 1
        return n_p, n_q, n_z
    for i in range(nb):
        r = start + i
        a, b, c = d_mm[r], d_ms[r], d_ss[r]
        if b * b > SPLIT_MAX_RATIO * abs(a * c):
            # rows xbar, gbar of Z and C_n [xbar, gbar] of Y: the exact Z^T Y
            _put_row(Z, n_z, X, M, g, r, fit_intercept, 1.0, 0.0)
            _put_row(Z, n_z + 1, X, M, g, r, fit_intercept, 0.0, 1.0)
            _put_row(Y, n_z, X, M, g, r, fit_intercept, a, b)
            _put_row(Y, n_z + 1, X, M, g, r, fit_intercept, b, c)
            n_z += 2
            continue
        l1, l2, u, v = _eigen2(a, b, c)
        if l1 > 0.0:
            root = math.sqrt(l1)
            _put_row(P, n_p, X, M, g, r, fit_intercept, root * u, root * v)
            n_p += 1
        elif l1 < 0.0:
            root = math.sqrt(-l1)
            _put_row(Q, n_q, X, M, g, r, fit_intercept, root * u, root * v)
            n_q += 1
        if l2 > 0.0:
            root = math.sqrt(l2)
            _put_row(P, n_p, X, M, g, r, fit_intercept, -root * v, root * u)
            n_p += 1
        elif l2 < 0.0:
            root = math.sqrt(-l2)
            _put_row(Q, n_q, X, M, g, r, fit_intercept, -root * v, root * u)
            n_q += 1
    return n_p, n_q, n_z
