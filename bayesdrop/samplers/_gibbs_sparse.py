"""The whole Gibbs sweep compiled for sparse designs with many features (numba, ``nogil``;
``O(nnz)`` passes, never a ``D x D`` or dense ``N x D`` matrix).

The sweep of :mod:`bayesdrop.samplers._gibbs_dense` for CSR ``X`` (and ``V = scale * M``
with ``M`` stored like ``X``: dropout, multiplicative and Poisson noise), for the regime
``D > 2000`` where a ``D x D`` Cholesky factor is out of the question. The Gaussian draw
``theta' = alpha theta + A^{-1} ((1 - alpha) r + sqrt(1 - alpha^2) eta)``,
``eta ~ N(0, A)``, is computed exactly as :class:`bayesdrop.linalg.woodbury.WoodburyFactor`
solves -- through the ``N x N`` dual system in ``mu``::

    S mu - b 1 = X K r_w,   1^T mu = r_b,   S = diag(1/rho) + X K X^T,
    w = K (r_w - X^T mu),   K = diag(1 / (2 + V^T rho))

-- but with ``S`` applied matrix-free (two passes over the stored entries) and the two
dual solves ``S^{-1} v`` and ``S^{-1} 1`` (the intercept's Schur complement) by one
preconditioned conjugate-gradient loop that carries both right-hand sides, to a
relative residual of :data:`DUAL_TOL`. The preconditioner is block-Jacobi: the exact
diagonal blocks ``S_BB`` over groups of near-duplicate rows (:func:`dual_blocks`, fixed
per problem; factored every sweep), which carry the small eigenvalues of the
Jacobi-scaled ``S``; on newsgroups it more than halves the iterations (about 70 -> 30). The perturbation
``eta = sqrt(2) I' z1 + Xbar^T (sqrt(rho) z2) + sqrt(V^T rho) z3`` has covariance ``A``
(:func:`bayesdrop.linalg.wls.perturbation`), so the draw is exact up to the CG residual.

:func:`run_sweeps_csr` has the signature of :func:`bayesdrop.samplers._gibbs_dense.run_sweeps`
without the MH move (its ``D x D`` proposal factor would not fit) and without the kept
draws' ``lp`` and pointwise terms (computed after the chain).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from ..model.design import V_CONSTANT, V_LIKE_X
from ..model.losses.kernels import draws_loop
from ._gibbs_dense import _store_augmentation

__all__ = ["DUAL_TOL", "dual_arrays", "dual_blocks", "dual_draw", "dual_work",
           "run_sweeps_csr", "scores_csr", "singleton_blocks"]

#: relative residual of the dual conjugate-gradient solves (per right-hand side)
DUAL_TOL = 1e-11
#: rows whose cosine similarity exceeds this share a block of the dual preconditioner
BLOCK_SIMILARITY = 0.45
#: largest block of the dual preconditioner (larger groups are split at a higher
#: similarity)
MAX_BLOCK = 128
#: above this many rows the preconditioner is Jacobi (the row similarities cost
#: ``sum_d nnz_d^2``)
MAX_BLOCK_ROWS = 20_000


def singleton_blocks(n):
    """``(bptr, brows, boff)`` of ``n`` one-row blocks: the Jacobi preconditioner."""
    return (np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int64),
            np.arange(n + 1, dtype=np.int64))


def dual_work(D, blocks):
    """Work arrays of one chain's dual draws: ``(8 x D, D x 2, block factors, D + 1)``,
    made once so that no sweep allocates ``D``-sized arrays (fresh pages, whose page
    faults the kernel serialises between the chains' threads)."""
    return (np.zeros((8, D)), np.zeros((D, 2)), np.zeros(int(blocks[2][-1])),
            np.zeros(D + 1))


def dual_blocks(X, threshold=BLOCK_SIMILARITY, max_block=MAX_BLOCK):
    """Blocks of rows for the block-Jacobi preconditioner of the dual system.

    Near-duplicate documents make the small eigenvalues of
    ``S = diag(1/rho) + X K X^T``: two rows with cosine similarity near 1 and
    ``x K x^T >> 1/rho`` give ``S`` (Jacobi-scaled) an eigenvalue near
    ``(1/rho) / (x K x^T)``. The blocks are the connected components of the graph of row
    pairs with cosine similarity above ``threshold`` (from ``X`` alone, once per problem);
    a component with more than ``max_block`` rows is split by the same rule at a
    similarity halfway to 1, and at 0.999 into consecutive chunks. Each sweep factors the
    exact diagonal blocks ``S_BB`` (:func:`_block_factors`). On newsgroups (1427 rows)
    this cut the conjugate-gradient iterations per draw from about 70 to 30.

    Returns
    -------
    bptr, brows, boff : ndarray of int64
        Block ``j`` holds rows ``brows[bptr[j]:bptr[j+1]]``; its factor occupies
        ``boff[j]:boff[j+1]`` of a flat buffer (``size^2`` entries).

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[1.0, 1.0, 0.0], [1.0, 0.9, 0.0], [0.0, 0.0, 1.0]]))
    >>> bptr, brows, boff = dual_blocks(X)
    >>> [brows[bptr[j]:bptr[j + 1]].tolist() for j in range(len(bptr) - 1)]
    [[0, 1], [2]]
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    X = sp.csr_matrix(X)
    n = X.shape[0]
    if n > MAX_BLOCK_ROWS:
        return singleton_blocks(n)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    Xn = sp.diags(np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1.0), 0.0)) @ X
    edges = []
    chunk = max(1, 4_000_000 // max(n, 1))
    for lo in range(0, n, chunk):  # row chunks of the similarity matrix, thresholded
        sim = (Xn[lo:lo + chunk] @ Xn.T).tocoo()
        keep = (sim.data > threshold) & (sim.row + lo != sim.col)
        edges.append((sim.row[keep] + lo, sim.col[keep], sim.data[keep]))
    rows = np.concatenate([e[0] for e in edges])
    cols = np.concatenate([e[1] for e in edges])
    sims = np.concatenate([e[2] for e in edges])

    def split(members, tau):
        if members.size <= max_block:
            return [members]
        if tau > 0.999:
            return [members[i:i + max_block] for i in range(0, members.size, max_block)]
        local = np.full(n, -1)
        local[members] = np.arange(members.size)
        keep = (local[rows] >= 0) & (local[cols] >= 0) & (sims > tau)
        graph = sp.coo_matrix(
            (np.ones(int(keep.sum())), (local[rows[keep]], local[cols[keep]])),
            shape=(members.size, members.size))
        _, lab = connected_components(graph, directed=False)
        out = []
        for c in range(lab.max() + 1):
            out += split(members[lab == c], 0.5 * (1.0 + tau))
        return out

    graph = sp.coo_matrix((np.ones(rows.size), (rows, cols)), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    order = np.argsort(labels, kind="stable")
    bounds = np.flatnonzero(np.diff(labels[order])) + 1
    blocks = []
    for members in np.split(order, bounds):
        blocks += split(np.sort(members), 0.5 * (1.0 + threshold))
    sizes = np.array([b.size for b in blocks], dtype=np.int64)
    bptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    boff = np.concatenate([[0], np.cumsum(sizes * sizes)]).astype(np.int64)
    return bptr, np.concatenate(blocks).astype(np.int64), boff


@_jit.njit(cache=True, nogil=True)
def scores_csr(indptr, indices, xdata, mdata, vkind, scale, D, fit_intercept, theta, m, s):
    """``m = X w + b`` and ``s = V (w * w)`` in one pass over the stored entries."""
    b = theta[D] if fit_intercept else 0.0
    w2 = 0.0
    if vkind == V_CONSTANT:
        for d in range(D):
            w2 += theta[d] * theta[d]
    for i in range(indptr.shape[0] - 1):
        acc = b
        acc_s = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            acc += xdata[k] * theta[j]
            if vkind == V_LIKE_X:
                acc_s += mdata[k] * theta[j] * theta[j]
        m[i] = acc
        s[i] = (scale * acc_s if vkind == V_LIKE_X
                else (scale * w2 if vkind == V_CONSTANT else 0.0))


@_jit.njit(cache=True, nogil=True, inline="always")
def _rmatvec(indptr, indices, xdata, a, out):
    """``out = X^T a`` (``out`` of length D)."""
    out[:] = 0.0
    for i in range(indptr.shape[0] - 1):
        ai = a[i]
        if ai != 0.0:
            for k in range(indptr[i], indptr[i + 1]):
                out[indices[k]] += xdata[k] * ai


@_jit.njit(cache=True, nogil=True, inline="always")
def _pair_sums(idx, data, lo, hi, V, init0, init1):
    """``(init0 + sum_k data_k V[idx_k, 0], init1 + sum_k data_k V[idx_k, 1])`` over the
    entries ``lo <= k < hi``, each sum in four interleaved partial sums (entries ``k``
    modulo 4), which quarters the chain of dependent additions (on newsgroups the
    two-column product :func:`_dual_apply2` takes 0.64 ms with four, 1.0 ms with two;
    eight in an array are slower again). ``data=None``: every value is 1 (binary
    features), compiled without loading or multiplying the values."""
    a0 = init0
    a1 = init1
    b0 = 0.0
    b1 = 0.0
    c0 = 0.0
    c1 = 0.0
    e0 = 0.0
    e1 = 0.0
    k = lo
    while k + 3 < hi:
        i = idx[k]
        x = 1.0 if data is None else data[k]
        i2 = idx[k + 1]
        x2 = 1.0 if data is None else data[k + 1]
        i3 = idx[k + 2]
        x3 = 1.0 if data is None else data[k + 2]
        i4 = idx[k + 3]
        x4 = 1.0 if data is None else data[k + 3]
        a0 += x * V[i, 0]
        a1 += x * V[i, 1]
        b0 += x2 * V[i2, 0]
        b1 += x2 * V[i2, 1]
        c0 += x3 * V[i3, 0]
        c1 += x3 * V[i3, 1]
        e0 += x4 * V[i4, 0]
        e1 += x4 * V[i4, 1]
        k += 4
    while k < hi:
        i = idx[k]
        x = 1.0 if data is None else data[k]
        a0 += x * V[i, 0]
        a1 += x * V[i, 1]
        k += 1
    return (a0 + b0) + (c0 + e0), (a1 + b1) + (c1 + e1)


@_jit.njit(cache=True, nogil=True)
def _dual_apply2(indptr, indices, xdata, cptr, cidx, cdata, kdiag, inv_rho, P, Q, tmp):
    """``Q[:, c] = S P[:, c]`` for the two columns ``c`` of ``P`` (``n x 2``, interleaved
    so that one pass serves both): ``tmp = K X^T P`` by columns (the CSC copy ``cptr,
    cidx, cdata``: a gather from the small ``P``), then ``Q = P / rho + X tmp`` by rows
    (each sum by :func:`_pair_sums`; :func:`dual_arrays` numbers the columns by
    decreasing frequency, so the gathers from ``tmp`` mostly hit the cache).
    ``xdata = cdata = None``: every stored value is 1 (binary features;
    :func:`dual_arrays`), the sums then skip the values (on newsgroups a quarter of the
    product's time); numba compiles one variant per problem, by the values' type."""
    for j in range(cptr.shape[0] - 1):
        s0, s1 = _pair_sums(cidx, cdata, cptr[j], cptr[j + 1], P, 0.0, 0.0)
        tmp[j, 0] = kdiag[j] * s0
        tmp[j, 1] = kdiag[j] * s1
    for i in range(indptr.shape[0] - 1):
        Q[i, 0], Q[i, 1] = _pair_sums(indices, xdata, indptr[i], indptr[i + 1], tmp,
                                      inv_rho[i] * P[i, 0], inv_rho[i] * P[i, 1])


def dual_arrays(X, detect_unit=True):
    """``(cptr, cidx, cdata, rdata, pindices, cperm)``: the dual solve's copies of CSR
    ``X`` with the columns numbered by decreasing number of stored entries
    (``cperm[new] = old``): the CSC arrays of the renumbered ``X``, the CSR values and the
    CSR column indices renumbered; ``cdata`` and ``rdata`` are None where every stored
    value is 1 (with ``detect_unit``): the product :func:`_dual_apply2` is then compiled
    without loading values.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[0.0, 1.0, 2.0], [0.0, 3.0, 0.0]]))
    >>> cptr, cidx, cdata, rdata, pindices, cperm = dual_arrays(X)
    >>> cperm.tolist(), pindices.tolist(), cdata is None
    ([1, 2, 0], [0, 1, 0], False)
    """
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    counts = np.diff(X.tocsc().indptr)
    cperm = np.argsort(-counts, kind="stable").astype(np.int64)
    rank = np.empty_like(cperm)
    rank[cperm] = np.arange(cperm.size)
    Xc = X[:, cperm].tocsc()
    unit = detect_unit and bool(np.all(X.data == 1.0))
    return (Xc.indptr.astype(np.int64), Xc.indices.astype(np.int64),
            None if unit else np.ascontiguousarray(Xc.data, dtype=np.float64),
            None if unit else np.ascontiguousarray(X.data, dtype=np.float64),
            rank[X.indices].astype(np.int64), cperm)


@_jit.njit(cache=True, nogil=True, inline="always")
def _dot4(idx, data, lo, hi, v):
    """``sum_k data_k v[idx_k]`` over ``lo <= k < hi`` in four interleaved partial sums
    (as :func:`_pair_sums`)."""
    a = 0.0
    b = 0.0
    c = 0.0
    e = 0.0
    k = lo
    while k + 3 < hi:
        a += data[k] * v[idx[k]]
        b += data[k + 1] * v[idx[k + 1]]
        c += data[k + 2] * v[idx[k + 2]]
        e += data[k + 3] * v[idx[k + 3]]
        k += 4
    while k < hi:
        a += data[k] * v[idx[k]]
        k += 1
    return (a + b) + (c + e)


@_jit.njit(cache=True, nogil=True)
def _block_factors(indptr, indices, xdata, kdiag, inv_rho, bptr, brows, boff, fac, scatter):
    """Cholesky factors of the diagonal blocks ``S_BB = diag(1/rho_B) + X_B K X_B^T`` of the
    dual matrix, one per block of rows (``brows[bptr[j]:bptr[j+1]]``), written to
    ``fac[boff[j]:boff[j+1]]`` (row-major, lower triangle). ``scatter`` (length D, zero)
    holds one row of ``X K`` at a time and is left zero."""
    for j in range(bptr.shape[0] - 1):
        lo, hi = bptr[j], bptr[j + 1]
        size = hi - lo
        base = boff[j]
        for a in range(size):
            ia = brows[lo + a]
            for k in range(indptr[ia], indptr[ia + 1]):
                scatter[indices[k]] = xdata[k] * kdiag[indices[k]]
            for b in range(a, size):
                ib = brows[lo + b]
                fac[base + b * size + a] = _dot4(indices, xdata, indptr[ib], indptr[ib + 1],
                                                 scatter)  # lower triangle: row b, column a
            fac[base + a * size + a] += inv_rho[ia]
            for k in range(indptr[ia], indptr[ia + 1]):
                scatter[indices[k]] = 0.0
        # in-place Cholesky of the size x size block (lower triangle)
        for c in range(size):
            acc = fac[base + c * size + c]
            for q in range(c):
                acc -= fac[base + c * size + q] * fac[base + c * size + q]
            if acc <= 0.0:
                return False
            piv = math.sqrt(acc)
            fac[base + c * size + c] = piv
            for r in range(c + 1, size):
                acc = fac[base + r * size + c]
                for q in range(c):
                    acc -= fac[base + r * size + q] * fac[base + c * size + q]
                fac[base + r * size + c] = acc / piv
    return True


@_jit.njit(cache=True, nogil=True)
def _block_apply(bptr, brows, boff, fac, R, Z, col, tmp):
    """``Z[:, col] = S_BB^{-1} R[:, col]`` block by block (the block-Jacobi
    preconditioner; factors of :func:`_block_factors`)."""
    for j in range(bptr.shape[0] - 1):
        lo, hi = bptr[j], bptr[j + 1]
        size = hi - lo
        base = boff[j]
        for a in range(size):  # L y = r
            acc = R[brows[lo + a], col]
            for q in range(a):
                acc -= fac[base + a * size + q] * tmp[q]
            tmp[a] = acc / fac[base + a * size + a]
        for a in range(size - 1, -1, -1):  # L^T z = y
            acc = tmp[a]
            for q in range(a + 1, size):
                acc -= fac[base + q * size + a] * tmp[q]
            tmp[a] = acc / fac[base + a * size + a]
        for a in range(size):
            Z[brows[lo + a], col] = tmp[a]


@_jit.njit(cache=True, nogil=True)
def _dual_solve2(indptr, indices, xdata, rdata, cptr, cidx, cdata, kdiag, inv_rho, B, tol,
                 X_out, blocks, scatter, tmp, fac):
    """Solve ``S X_out[:, c] = B[:, c]`` for both columns (``n x 2``) by CG preconditioned
    with the exact diagonal blocks of ``S`` over ``blocks = (bptr, brows, boff)`` (rows of
    near-duplicate documents together, :func:`dual_blocks`; singletons: Jacobi; their
    factors from the values ``xdata``, the products from ``rdata``, None for unit
    values: :func:`dual_arrays`); returns
    the iterations used (``-1`` if not converged within ``4 n + 100``). ``scatter``,
    ``tmp`` and ``fac``: work arrays of :func:`dual_work` (no allocation of ``D``-sized
    arrays per draw: large allocations are fresh pages, and their page faults serialise
    the chains' threads)."""
    n = indptr.shape[0] - 1
    bptr, brows, boff = blocks
    scatter[:] = 0.0
    btmp = np.empty(n)
    if not _block_factors(indptr, indices, xdata, kdiag, inv_rho, bptr, brows, boff, fac,
                          scatter):
        return -1
    R = B.copy()
    Z = np.empty((n, 2))
    Pd = np.empty((n, 2))
    Q = np.empty((n, 2))
    rz = np.zeros(2)
    stop = np.zeros(2)
    done = np.zeros(2, dtype=np.bool_)
    X_out[:, :] = 0.0
    for c in range(2):
        nb = 0.0
        _block_apply(bptr, brows, boff, fac, R, Z, c, btmp)
        for i in range(n):
            Pd[i, c] = Z[i, c]
            rz[c] += R[i, c] * Z[i, c]
            nb += B[i, c] * B[i, c]
        stop[c] = tol * math.sqrt(nb)
        done[c] = nb == 0.0
    for it in range(1, 4 * n + 101):
        _dual_apply2(indptr, indices, rdata, cptr, cidx, cdata, kdiag, inv_rho, Pd, Q, tmp)
        for c in range(2):
            if done[c]:
                continue
            pq = 0.0
            for i in range(n):
                pq += Pd[i, c] * Q[i, c]
            alpha = rz[c] / pq
            rr = 0.0
            for i in range(n):
                X_out[i, c] += alpha * Pd[i, c]
                R[i, c] -= alpha * Q[i, c]
                rr += R[i, c] * R[i, c]
            if math.sqrt(rr) <= stop[c]:
                done[c] = True
                for i in range(n):
                    Pd[i, c] = 0.0  # a finished column adds nothing to later passes
                continue
            rz_new = 0.0
            _block_apply(bptr, brows, boff, fac, R, Z, c, btmp)
            for i in range(n):
                rz_new += R[i, c] * Z[i, c]
            beta = rz_new / rz[c]
            rz[c] = rz_new
            for i in range(n):
                Pd[i, c] = Z[i, c] + beta * Pd[i, c]
        if done[0] and done[1]:
            return it
    return -1


@_jit.njit(cache=True, nogil=True)
def dual_draw(indptr, indices, xdata, mdata, vkind, scale, D, fit_intercept, dual, rho, t,
              theta, overrelax, z1, z2, z3, tol, out, blocks, work):
    """The over-relaxed Gaussian draw given the weights ``(rho, t)`` and the standard
    normals ``z1`` (D), ``z2`` (N), ``z3`` (D) (see the module docstring); writes
    ``out`` and returns the CG iterations (``-1``: not converged). ``dual``: the arrays of
    :func:`dual_arrays`; ``blocks``: those of :func:`dual_blocks`; ``work``: the work
    arrays of :func:`dual_work`."""
    cptr, cidx, cdata, rdata, pindices, cperm = dual
    wD, tmp, fac = work[0], work[1], work[2]
    n = indptr.shape[0] - 1
    beta = math.sqrt(1.0 - overrelax * overrelax)
    noise = wD[0]
    noise[:] = 0.0
    if vkind == V_LIKE_X:
        _rmatvec(indptr, indices, mdata, rho, noise)
        for d in range(D):
            noise[d] *= scale
    elif vkind == V_CONSTANT:
        tot = 0.0
        for i in range(n):
            tot += rho[i]
        for d in range(D):
            noise[d] = scale * tot
    kdiag = wD[1]
    for d in range(D):
        kdiag[d] = 1.0 / (2.0 + noise[d])
    # r' = (1 - alpha) Xbar^T t + beta eta
    a = np.empty(n)
    for i in range(n):
        a[i] = (1.0 - overrelax) * t[i] + beta * math.sqrt(rho[i]) * z2[i]
    rw = wD[2]
    _rmatvec(indptr, indices, xdata, a, rw)
    rb = 0.0
    for i in range(n):
        rb += a[i]
    for d in range(D):
        rw[d] += beta * (math.sqrt(2.0) * z1[d] + math.sqrt(noise[d]) * z3[d])
    # dual right-hand sides: v = X K r_w and 1
    B = np.empty((n, 2))
    inv_rho = np.empty(n)
    for i in range(n):
        acc = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            acc += xdata[k] * kdiag[j] * rw[j]
        B[i, 0] = acc
        B[i, 1] = 1.0 if fit_intercept else 0.0  # no intercept: no second solve
        inv_rho[i] = 1.0 / max(rho[i], 1e-300)
    sol = np.empty((n, 2))
    kperm = wD[4]  # K in the dual solve's column numbering
    for d in range(D):
        kperm[d] = kdiag[cperm[d]]
    iters = _dual_solve2(indptr, pindices, xdata, rdata, cptr, cidx, cdata, kperm, inv_rho,
                         B, tol, sol, blocks, wD[5], tmp, fac)
    mu = np.empty(n)
    for i in range(n):
        mu[i] = sol[i, 0]
    b = 0.0
    if fit_intercept:
        s1 = 0.0
        smu = 0.0
        for i in range(n):
            s1 += sol[i, 1]
            smu += mu[i]
        b = (rb - smu) / s1
        for i in range(n):
            mu[i] += b * sol[i, 1]
    xt = wD[3]
    _rmatvec(indptr, indices, xdata, mu, xt)
    for d in range(D):
        out[d] = kdiag[d] * (rw[d] - xt[d]) + overrelax * theta[d]
    if fit_intercept:
        out[D] = b + overrelax * theta[D]
    return iters


@_jit.njit(cache=True, nogil=True)
def run_sweeps_csr(lp, indptr, indices, xdata, mdata, vkind, scale, D,
                   fit_intercept, dual, y, sw, theta, m, s, n_sweeps,
                   first_sweep, tune, thin, overrelax, rng, theta_out, aug_sum,
                   aug_out, first_kept, tol, cg_stats, pgt, blocks, work):
    """Advance one chain by ``n_sweeps`` sweeps (in place); returns the number kept (see
    :func:`bayesdrop.samplers._gibbs_dense.run_sweeps`, also for ``pgt``). The kept draws'
    ``lp = -J`` and pointwise terms are not computed here: the sweep itself never needs
    ``J``, and :func:`bayesdrop.samplers.compiled.kept_log_target` computes them after
    the chain from the kernels the fit has compiled (a first posterior compiles about
    0.8 s less). ``cg_stats`` accumulates
    ``(CG iterations, sweeps)``; a dual solve that does not converge sets
    ``cg_stats[2] = 1`` and stops."""
    n = indptr.shape[0] - 1
    p = theta.shape[0]
    rho = np.empty(n)
    t = np.empty(n)
    a1 = np.empty(n)
    a2 = np.empty(n)
    z1 = work[0][6]
    z2 = np.empty(n)
    z3 = work[0][7]
    new = work[3][:p]
    kept = 0
    for k in range(n_sweeps):
        sweep = first_sweep + k
        draws_loop(lp, m, s, y, sw, rng, pgt, a1, a2, rho, t)
        for d in range(D):
            z1[d] = rng.standard_normal()
        for i in range(n):
            z2[i] = rng.standard_normal()
        for d in range(D):
            z3[d] = rng.standard_normal()
        iters = dual_draw(indptr, indices, xdata, mdata, vkind, scale, D, fit_intercept,
                          dual, rho, t, theta, overrelax, z1, z2, z3, tol, new,
                          blocks, work)
        if iters < 0:
            cg_stats[2] = 1.0
            return kept
        cg_stats[0] += iters
        cg_stats[1] += 1.0
        for a in range(p):  # (loops, not slice copies: no broadcasting to compile)
            theta[a] = new[a]
        scores_csr(indptr, indices, xdata, mdata, vkind, scale, D, fit_intercept, theta,
                   m, s)
        if sweep >= tune and (sweep - tune + 1) % thin == 0:
            row = first_kept + kept
            for a in range(p):
                theta_out[row, a] = theta[a]
            _store_augmentation(row, a1, a2, aug_sum, aug_out)
            kept += 1
    return kept
