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

-- but with ``S`` applied matrix-free (two passes over the stored entries, their indices
unsigned 32-bit where they fit, :func:`dual_arrays`) and the system, with its
constraint, solved by **projected preconditioned conjugate gradients** (Gould, Hribar and
Nocedal, 2001; :func:`_dual_solve`): one right-hand side, the iterates kept on
``1^T mu = r_b`` by projecting the preconditioned gradient, the intercept read off the
gradient ``S mu - v = b 1`` -- where two solves ``S^{-1} v`` and ``S^{-1} 1`` (the
intercept's Schur complement) carried two columns through every product. The loop stops at
``||S mu - v - b 1|| <= tol (||v|| + |b| sqrt(N))`` (:data:`DUAL_TOL`), the guarantee
those two solves gave at ``tol`` each.

**The start.** At the solution ``mu = R Xbar theta_s`` (``R = diag(rho)``), with
``theta_s = theta' - alpha theta`` the solve's part of the draw; the solve starts from
``theta_s ~ (1 - alpha) theta``, i.e. ``mu = (1 - alpha) R m`` with the current scores
``m``. Where ``C`` is large the draw's mean dominates ``v``, and this start saves CG
iterations (random 2000 x 5000 CSR, dropout 0.3, ``C = 10^4``: 32 -> 26 per draw); where
it is small the start is about as good as zero (8.1 against 8.0 at ``C = 0.01``).

**The error.** For any ``mu`` on the constraint and any ``b`` the draw
``(w, b)`` with ``w = K (r_w - X^T mu)`` has the primal residual
``-Xbar^T R e`` with ``e = v + b 1 - S mu``, so its distance from the exact draw in the
posterior's own metric is ``||theta - theta*||_A <= ||R^{1/2} e||`` (``A >=
Xbar^T R Xbar``). :func:`_dual_solve` chooses the ``b`` that minimises that bound.
Measured against a dense solve (same design, one draw from the mode): ``3.5e-12``
posterior standard deviations at ``C = 0.01``, ``1.1e-9`` at ``C = 1``, ``9e-7`` at
``C = 10^4`` (the stopping rule is relative to ``||v||``, which grows with ``C``).

The preconditioner is block-Jacobi: the exact diagonal blocks ``S_BB`` over groups of
near-duplicate rows (:func:`dual_blocks`, fixed per problem; factored every sweep), which
carry the small eigenvalues of the Jacobi-scaled ``S``; on newsgroups it more than halves
the iterations (about 70 -> 30). The perturbation
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
from ..linalg.kernels import _sum4
from ..model.design import V_CONSTANT, V_LIKE_X
from ..model.losses.kernels import draws_loop
from ._gibbs_dense import _store_augmentation, slice_line

__all__ = ["DUAL_TOL", "dual_arrays", "dual_blocks", "dual_draw", "dual_work",
           "run_sweeps_csr", "scores_csr", "singleton_blocks"]

#: relative residual of the dual conjugate-gradient solve (see the module docstring)
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
    """Work arrays of one chain's dual draws: ``(8 x D, D, block factors, D + 1)``,
    made once so that no sweep allocates ``D``-sized arrays (fresh pages, whose page
    faults the kernel serialises between the chains' threads)."""
    return (np.zeros((8, D)), np.zeros(D), np.zeros(int(blocks[2][-1])), np.zeros(D + 1))


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
def _dual_rows(indptr, indices, xdata, inv_rho, p, q, tmp, lo, hi):
    """Rows ``lo .. hi - 1`` of :func:`_dual_apply`'s ``q = p / rho + X tmp``; returns
    their share of ``p . q``."""
    pq = 0.0
    for i in range(lo, hi):
        qi = _sum4(indices, xdata, indptr[i], indptr[i + 1], tmp, inv_rho[i] * p[i])
        q[i] = qi
        pq += p[i] * qi
    return pq


@_jit.njit(cache=True, nogil=True, parallel=True)
def _dual_apply_threads(indptr, indices, xdata, cptr, cidx, cdata, kdiag, inv_rho, p, q, tmp,
                        chunks, part):
    """:func:`_dual_apply` on numba's threads: the columns' sums and the row chunks'
    products in parallel, each the same sum as in one thread; ``part[c]``: chunk ``c``'s
    share of ``p . q``."""
    for j in _jit.prange(cptr.shape[0] - 1):
        tmp[j] = kdiag[j] * _sum4(cidx, cdata, cptr[j], cptr[j + 1], p, 0.0)
    for c in _jit.prange(chunks.shape[0] - 1):
        part[c] = _dual_rows(indptr, indices, xdata, inv_rho, p, q, tmp, chunks[c],
                             chunks[c + 1])


@_jit.njit(cache=True, nogil=True)
def _dual_apply(indptr, indices, xdata, cptr, cidx, cdata, kdiag, inv_rho, p, q, tmp, chunks,
                threads):
    """``q = S p``: ``tmp = K X^T p`` by columns (the CSC copy ``cptr, cidx, cdata``: a
    gather from the small ``p``), then ``q = p / rho + X tmp`` by rows (each sum by
    :func:`_sum4`; :func:`dual_arrays` numbers the columns by decreasing frequency, so
    the gathers from ``tmp`` mostly hit the cache). ``xdata = cdata = None``: every
    stored value is 1 (binary features; :func:`dual_arrays`), the sums then skip the
    values; numba compiles one variant per problem, by the values' type. Returns
    ``p . q`` (CG's curvature along ``p``, summed in the same pass): the rows' shares
    in the fixed chunks ``chunks`` (:func:`bayesdrop.linalg.kernels.row_chunks`) added in
    chunk order, each chunk on one of numba's threads where ``threads`` is True, one
    after the other where it is None (:func:`bayesdrop.linalg.kernels.threads_arg`; then
    nothing parallel is compiled) -- the same sums either way."""
    K = chunks.shape[0] - 1
    part = np.empty(K)
    if threads is not None and threads and K > 1:  # (pruned by numba where None)
        _dual_apply_threads(indptr, indices, xdata, cptr, cidx, cdata, kdiag, inv_rho, p, q,
                            tmp, chunks, part)
    else:
        for j in range(cptr.shape[0] - 1):
            tmp[j] = kdiag[j] * _sum4(cidx, cdata, cptr[j], cptr[j + 1], p, 0.0)
        for c in range(K):
            part[c] = _dual_rows(indptr, indices, xdata, inv_rho, p, q, tmp, chunks[c],
                                 chunks[c + 1])
    pq = 0.0
    for c in range(K):
        pq += part[c]
    return pq


def dual_arrays(X, detect_unit=True):
    """``(cptr, cidx, cdata, rdata, pindices, cperm)``: the dual solve's copies of CSR
    ``X`` with the columns numbered by decreasing number of stored entries
    (``cperm[new] = old``): the CSC arrays of the renumbered ``X``, the CSR values and the
    CSR column indices renumbered; ``cdata`` and ``rdata`` are None where every stored
    value is 1 (with ``detect_unit``): the product :func:`_dual_apply` is then compiled
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
    # unsigned indices (bayesdrop.model.design.unsigned_indices) where they fit
    index = np.uint32 if max(X.shape) < 2 ** 32 else np.int64
    return (Xc.indptr.astype(np.int64), Xc.indices.astype(index),
            None if unit else np.ascontiguousarray(Xc.data, dtype=np.float64),
            None if unit else np.ascontiguousarray(X.data, dtype=np.float64),
            rank[X.indices].astype(index), cperm)


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
                # lower triangle: row b, column a
                fac[base + b * size + a] = _sum4(indices, xdata, indptr[ib], indptr[ib + 1],
                                                 scatter, 0.0)
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
def _block_apply(bptr, brows, boff, fac, r, z, tmp):
    """``z = S_BB^{-1} r`` block by block (the block-Jacobi preconditioner; factors of
    :func:`_block_factors`)."""
    for j in range(bptr.shape[0] - 1):
        lo, hi = bptr[j], bptr[j + 1]
        size = hi - lo
        base = boff[j]
        for a in range(size):  # L y = r
            acc = r[brows[lo + a]]
            for q in range(a):
                acc -= fac[base + a * size + q] * tmp[q]
            tmp[a] = acc / fac[base + a * size + a]
        for a in range(size - 1, -1, -1):  # L^T z = y
            acc = tmp[a]
            for q in range(a + 1, size):
                acc -= fac[base + q * size + a] * tmp[q]
            tmp[a] = acc / fac[base + a * size + a]
        for a in range(size):
            z[brows[lo + a]] = tmp[a]


@_jit.njit(cache=True, nogil=True)
def _precondition(blocks, fac, minv, r, z, btmp):
    """``z = M^{-1} r`` for the block-Jacobi preconditioner (factors of
    :func:`_block_factors`; ``minv``: its inverse diagonal where every block is one row,
    else empty); returns ``1^T z``."""
    tot = 0.0
    if minv.shape[0]:
        for i in range(r.shape[0]):
            z[i] = minv[i] * r[i]
            tot += z[i]
        return tot
    bptr, brows, boff = blocks
    _block_apply(bptr, brows, boff, fac, r, z, btmp)
    for i in range(r.shape[0]):
        tot += z[i]
    return tot


@_jit.njit(cache=True, nogil=True)
def _project(blocks, fac, minv, btmp, u, su, rho, r, z, sums):
    """``z = P r``, the projected preconditioned gradient, and the residual update;
    returns the shift ``c`` moved from ``r`` into the intercept.

    ``z = M^{-1} r - c u`` with ``c = 1^T M^{-1} r / su`` (``u = M^{-1} 1``,
    ``su = 1^T u``; ``su = 0``: no intercept, no constraint, ``c = 0``): ``1^T z = 0``,
    so that the iterates stay on ``1^T mu = r_b``. ``r`` becomes ``r - c 1``, which ``P``
    maps to the same ``z``: moving the gradient's part along ``1`` into the intercept at
    every step is the residual update of Gould, Hribar and Nocedal (2001) -- left in
    ``r`` it grows to swamp the part that CG drives to zero. ``sums = (r.z, sum r,
    sum r^2, sum rho r)`` of the new ``r``, in the same pass."""
    tot = _precondition(blocks, fac, minv, r, z, btmp)
    c = tot / su if su > 0.0 else 0.0
    rz = 0.0
    s1 = 0.0
    s2 = 0.0
    sr = 0.0
    for i in range(r.shape[0]):
        z[i] -= c * u[i]
        ri = r[i] - c
        r[i] = ri
        rz += ri * z[i]
        s1 += ri
        s2 += ri * ri
        sr += rho[i] * ri
    sums[0] = rz
    sums[1] = s1
    sums[2] = s2
    sums[3] = sr
    return c


@_jit.njit(cache=True, nogil=True)
def _dual_solve(indptr, indices, xdata, rdata, cptr, cidx, cdata, kdiag, inv_rho, rho, v,
                rb, fit_intercept, tol, mu, blocks, scatter, tmp, fac, par):
    """Solve ``S mu - b 1 = v`` with ``1^T mu = r_b`` (``fit_intercept``; else
    ``S mu = v``) by projected preconditioned CG from the guess in ``mu``; returns
    ``(iterations, b)`` (``-1`` if not converged within ``4 n + 100`` products).

    The preconditioner is block-Jacobi over ``blocks = (bptr, brows, boff)`` (rows of
    near-duplicate documents together, :func:`dual_blocks`; singletons: Jacobi, applied
    as a diagonal; factors from the values ``xdata``, products from ``rdata``, None for
    unit values: :func:`dual_arrays`), projected onto ``1^T z = 0`` (:func:`_project`;
    the start is moved onto the constraint along ``M^{-1} 1``). The gradient
    ``g = S mu - v`` equals ``b 1`` at the solution. The loop keeps ``g = r + shift 1``
    and reads ``b = shift + sum rho r / sum rho`` off it -- the weighted mean that
    minimises the bound ``||R^{1/2} (g - b 1)||`` on the draw's error in the posterior's
    metric (module docstring) -- and stops once ``||g - b 1|| <= tol (||v|| + |b|
    sqrt(n))``: the guarantee of two solves ``S^{-1} v`` and ``S^{-1} 1`` each to
    ``tol``. That norm is estimated from the sums of :func:`_project` and computed
    exactly (one more pass) only where the estimate is within twice the bound.
    ``scatter``, ``tmp`` and ``fac``: work arrays of :func:`dual_work` (no allocation of
    ``D``-sized arrays per draw: large allocations are fresh pages, whose page faults
    serialise the chains' threads); ``par``: the products' row chunks and threads
    (:func:`_dual_apply`)."""
    n = indptr.shape[0] - 1
    bptr, brows, boff = blocks
    scatter[:] = 0.0
    btmp = np.empty(n)
    if not _block_factors(indptr, indices, xdata, kdiag, inv_rho, bptr, brows, boff, fac,
                          scatter):
        return -1, 0.0
    minv = np.empty(n if bptr.shape[0] == n + 1 else 0)
    for j in range(minv.shape[0]):  # one-row blocks: the factor is sqrt(S_jj)
        minv[brows[j]] = 1.0 / (fac[boff[j]] * fac[boff[j]])
    u = np.zeros(n)
    su = 0.0
    srho = 0.0
    if fit_intercept:
        ones = np.ones(n)
        su = _precondition(blocks, fac, minv, ones, u, btmp)
        c = rb
        for i in range(n):
            c -= mu[i]
            srho += rho[i]
        c /= su
        for i in range(n):
            mu[i] += c * u[i]
    r = np.empty(n)
    _dual_apply(indptr, indices, rdata, cptr, cidx, cdata, kdiag, inv_rho, mu, r, tmp,
                par[0], par[1])
    nv = 0.0
    for i in range(n):
        r[i] -= v[i]
        nv += v[i] * v[i]
    nv = math.sqrt(nv)
    z = np.empty(n)
    d = np.empty(n)
    q = np.empty(n)
    sums = np.empty(4)
    # S mu - v = r + shift 1 from here on
    shift = _project(blocks, fac, minv, btmp, u, su, rho, r, z, sums)
    rz = sums[0]
    for i in range(n):
        d[i] = -z[i]
    for it in range(4 * n + 101):
        b = sums[3] / srho if srho > 0.0 else 0.0
        bound = tol * (nv + abs(shift + b) * math.sqrt(n))
        if sums[2] - 2.0 * b * sums[1] + n * b * b <= 4.0 * bound * bound:
            res = 0.0
            for i in range(n):
                res += (r[i] - b) * (r[i] - b)
            if math.sqrt(res) <= bound:
                return it, shift + b
        dq = _dual_apply(indptr, indices, rdata, cptr, cidx, cdata, kdiag, inv_rho, d, q,
                         tmp, par[0], par[1])
        if not dq > 0.0:
            return -1, shift + b
        alpha = rz / dq
        for i in range(n):
            mu[i] += alpha * d[i]
            r[i] += alpha * q[i]
        shift += _project(blocks, fac, minv, btmp, u, su, rho, r, z, sums)
        beta = sums[0] / rz
        rz = sums[0]
        for i in range(n):
            d[i] = beta * d[i] - z[i]
    return -1, 0.0


@_jit.njit(cache=True, nogil=True)
def dual_draw(indptr, indices, xdata, mdata, vkind, scale, D, fit_intercept, dual, rho, t,
              theta, m, overrelax, z1, z2, z3, tol, out, blocks, work, par):
    """The over-relaxed Gaussian draw given the weights ``(rho, t)`` and the standard
    normals ``z1`` (D), ``z2`` (N), ``z3`` (D) (see the module docstring); writes
    ``out`` and returns the CG iterations (``-1``: not converged). ``m``: the scores
    ``Xbar theta`` of the current ``theta``, from which the dual solve starts (see the
    module docstring). ``dual``: the arrays of :func:`dual_arrays`; ``blocks``: those
    of :func:`dual_blocks`; ``work``: the work arrays of :func:`dual_work`; ``par``: the
    products' row chunks and threads (:func:`_dual_apply`)."""
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
    # the dual right-hand side v = X K r_w; the start mu = R Xbar theta_s with the
    # solve's solution theta_s = theta' - alpha theta guessed as (1 - alpha) theta
    v = np.empty(n)
    mu = np.empty(n)
    inv_rho = np.empty(n)
    for i in range(n):
        acc = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            acc += xdata[k] * kdiag[j] * rw[j]
        v[i] = acc
        inv_rho[i] = 1.0 / max(rho[i], 1e-300)
        mu[i] = (1.0 - overrelax) * rho[i] * m[i]
    kperm = wD[4]  # K in the dual solve's column numbering
    for d in range(D):
        kperm[d] = kdiag[cperm[d]]
    iters, b = _dual_solve(indptr, pindices, xdata, rdata, cptr, cidx, cdata, kperm,
                           inv_rho, rho, v, rb, fit_intercept, tol, mu, blocks, wD[5], tmp,
                           fac, par)
    xt = wD[3]
    _rmatvec(indptr, indices, xdata, mu, xt)
    for d in range(D):
        out[d] = kdiag[d] * (rw[d] - xt[d]) + overrelax * theta[d]
    if fit_intercept:
        out[D] = b + overrelax * theta[D]
    return iters


@_jit.njit(cache=True, nogil=True)
def dual_slice_moves(lp, y, sw, indptr, indices, xdata, D, fit_intercept, theta, m, Ct, ones,
                     pen2, widths, uptr, uidx, uval, rng, stats, q, alpha, work):
    """The slice moves of :func:`bayesdrop.samplers._gibbs_dense.slice_line` along the
    directions ``v_k = Xbar^T c_k`` (``c_k`` the rows of ``Ct``:
    :func:`bayesdrop.samplers.schedule.slice_directions`) on a CSR design without noise,
    with no ``D``-long direction stored: the moves accumulate their dual coefficients
    ``alpha = sum_k delta_k c_k``, and ``theta`` gains ``Xbar^T alpha`` at the end (one
    pass over the stored entries).

    Along ``v_k`` the scores move by ``delta u_k``, ``u_k = Xbar v_k = K c_k`` (``K =
    Xbar Xbar^T``), non-zero only on the examples ``uidx[uptr[k]:uptr[k + 1]]`` (values
    ``uval``; one example where ``K`` has full rank): ``J`` on the line is their terms
    plus the penalty, the other terms a constant that the slice's level absorbs. The
    penalty's ``w . v_{k,w} = c_k . (X w)``, with ``q = X w`` kept up to date as ``q +=
    delta (u_k - ones[k] 1)`` (``ones[k] = 1 . c_k``, the direction's intercept; the
    constant part kept as one offset), and ``||v_{k,w}||^2 = pen2[k]``. ``theta`` and
    ``m`` are updated in place (``m`` incrementally: the caller recomputes the scores from
    ``theta``); ``stats`` counts ``(evaluations of J, line moves)``; ``q``, ``alpha``
    (length ``N``) and ``work`` (5 x the largest support) are work arrays."""
    n = m.shape[0]
    pen = np.zeros(3)
    for d in range(D):
        pen[0] += theta[d] * theta[d]
    b = theta[D] if fit_intercept else 0.0
    for i in range(n):
        q[i] = m[i] - b
        alpha[i] = 0.0
    offset = 0.0
    ym, sm, mm, zm, um = work[0], work[1], work[2], work[3], work[4]
    for k in range(Ct.shape[0]):
        along = -offset * ones[k]
        for j in range(n):
            along += Ct[k, j] * q[j]
        pen[1] = along
        pen[2] = pen2[k]
        lo, hi = uptr[k], uptr[k + 1]
        for e in range(lo, hi):
            i = uidx[e]
            ym[e - lo] = y[i]
            sm[e - lo] = sw[i]
            mm[e - lo] = m[i]
            zm[e - lo] = 0.0
            um[e - lo] = uval[e]
        size = hi - lo
        delta = slice_line(lp, ym[:size], sm[:size], mm[:size], zm[:size], um[:size],
                           zm[:size], pen, widths[k], rng, stats)
        pen[0] += delta * (2.0 * along + delta * pen2[k])
        offset += delta * ones[k]
        for e in range(lo, hi):
            i = uidx[e]
            q[i] += delta * uval[e]
            m[i] += delta * uval[e]
        for j in range(n):
            alpha[j] += delta * Ct[k, j]
    for i in range(n):
        a = alpha[i]
        for e in range(indptr[i], indptr[i + 1]):
            theta[indices[e]] += xdata[e] * a
        if fit_intercept:
            theta[D] += a


@_jit.njit(cache=True, nogil=True)
def run_sweeps_csr(lp, indptr, indices, xdata, mdata, vkind, scale, D,
                   fit_intercept, dual, y, sw, theta, m, s, n_sweeps,
                   first_sweep, tune, thin, overrelax, rng, theta_out, aug_sum,
                   aug_out, first_kept, tol, cg_stats, pgt, blocks, work, par, slice_Ct,
                   slice_ones, slice_pen2, slice_w, slice_uptr, slice_uidx, slice_uval,
                   slice_stats):
    """Advance one chain by ``n_sweeps`` sweeps (in place); returns the number kept (see
    :func:`bayesdrop.samplers._gibbs_dense.run_sweeps`, also for ``pgt``). The kept draws'
    ``lp = -J`` and pointwise terms are not computed here: the sweep itself never needs
    ``J``, and :func:`bayesdrop.samplers.compiled.kept_log_target` computes them after
    the chain from the kernels the fit has compiled (a first posterior compiles about
    0.8 s less). ``cg_stats`` accumulates
    ``(CG iterations, sweeps)``; a dual solve that does not converge sets
    ``cg_stats[2] = 1`` and stops. ``par``: the dual products' row chunks and threads
    (:func:`_dual_apply`: the same draws with threads or without). Where ``slice_Ct`` has
    rows (a design without noise), :func:`dual_slice_moves` follows each sweep
    (``slice_Ct, slice_ones, slice_pen2, slice_w, slice_uptr, slice_uidx, slice_uval``:
    its arguments ``Ct, ones, pen2, widths, uptr, uidx, uval``; ``slice_stats`` its
    counts), then the scores are recomputed from ``theta``."""
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
    moves = slice_Ct.shape[0]
    support = 0
    for k in range(moves):
        support = max(support, slice_uptr[k + 1] - slice_uptr[k])
    slice_q = np.empty(n if moves else 0)
    slice_alpha = np.empty(n if moves else 0)
    slice_work = np.empty((5, support))
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
                          dual, rho, t, theta, m, overrelax, z1, z2, z3, tol, new,
                          blocks, work, par)
        if iters < 0:
            cg_stats[2] = 1.0
            return kept
        cg_stats[0] += iters
        cg_stats[1] += 1.0
        for a in range(p):  # (loops, not slice copies: no broadcasting to compile)
            theta[a] = new[a]
        scores_csr(indptr, indices, xdata, mdata, vkind, scale, D, fit_intercept, theta,
                   m, s)
        if moves:
            dual_slice_moves(lp, y, sw, indptr, indices, xdata, D, fit_intercept, theta, m,
                             slice_Ct, slice_ones, slice_pen2, slice_w, slice_uptr,
                             slice_uidx, slice_uval, rng, slice_stats, slice_q, slice_alpha,
                             slice_work)
            scores_csr(indptr, indices, xdata, mdata, vkind, scale, D, fit_intercept,
                       theta, m, s)
        if sweep >= tune and (sweep - tune + 1) % thin == 0:
            row = first_kept + kept
            for a in range(p):
                theta_out[row, a] = theta[a]
            _store_augmentation(row, a1, a2, aug_sum, aug_out)
            kept += 1
    return kept
