"""Newton's Hessian of ``J``: the weighted system with exact curvature (MATH.md section 4).

Each term of ``J`` is a function of the mean score ``m_n = xbar_n . theta`` and the score
variance ``s_n = sum_d v_nd w_d^2``. With the per-example derivatives ``d_s`` (first, in
``s``) and ``d_mm, d_ms, d_ss`` (second; :meth:`bayesdrop.model.losses.Loss.curvature`) and
``G = 2 V diag(w)`` (so ``ds_n / dw = G_n``), the Hessian is::

    H = 2 I' + Xbar^T diag(d_mm) Xbar + diag(V^T (2 d_s), 0)
          + Xbar^T diag(d_ms) Gbar + Gbar^T diag(d_ms) Xbar + Gbar^T diag(d_ss) Gbar

(``Gbar`` is ``G`` with a zero intercept column). The first line is the IRLS normal
matrix ``A`` of :mod:`bayesdrop.linalg.wls` with the Gram weights ``rho`` replaced by the
exact curvature ``d_mm`` (the noise weight ``2 d_s`` *is* the IRLS weight: ``rho = 2 d_s``
for every loss); the second line is the curvature of the noise term through ``w``.

:func:`hessian_matrix` forms ``H`` densely (``O(N D^2)``: three Gram-type products);
:func:`hessian_vector_product` applies it matrix-free in ``O(nnz)``: by the compiled
row passes of :mod:`bayesdrop.linalg.kernels` when ``V = scale * M`` is stored like ``X``,
otherwise through the design's products ``Xbar z``, ``Xbar^T a``, ``V z`` and ``V^T a``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._blas import padded_rows
from .._threads import numba_threads
from . import kernels
from ..model.objective import penalised

__all__ = ["Curvature", "curvature", "gradient", "hessian_diagonal", "hessian_matrix",
           "hessian_operator", "hessian_vector_product", "single_operator"]


class Curvature(NamedTuple):
    """Per-example derivatives of the terms of ``J`` at ``theta``, and ``w``.

    Attributes
    ----------
    w : ndarray of shape (n_features,)
    d_m, d_s : ndarray of shape (n_samples,)
        First derivatives in the mean score and the score variance.
    d_mm, d_ms, d_ss : ndarray of shape (n_samples,)
        Second derivatives.
    noise_diag : ndarray of shape (n_features,)
        ``2 V^T d_s``.
    entries : ndarray of shape (2 nnz,) or None
        For a CSR design with compiled row passes: the entries of ``X`` and of
        ``G = 2 V diag(w)`` interleaved, as :func:`hessian_operator` uses them (written by
        the gradient's pass, :func:`bayesdrop.linalg.kernels.csr_gradient_entries`).
    """

    w: np.ndarray
    d_m: np.ndarray
    d_s: np.ndarray
    d_mm: np.ndarray
    d_ms: np.ndarray
    d_ss: np.ndarray
    noise_diag: np.ndarray  # 2 V^T d_s, the diagonal noise term of H (length n_features)
    entries: np.ndarray = None


def curvature(problem, theta, m=None, s=None, entries=False):
    """``J``, its gradient and the :class:`Curvature` at ``theta`` in one pass; with
    ``entries`` (for CG on a CSR design whose preconditioner does not need ``H``'s
    diagonal) also :attr:`Curvature.entries` from that pass.

    Returns
    -------
    value : float
    grad : ndarray of shape (n_params,)
    curv : Curvature

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 3)); y = np.sign(X[:, 0] + rng.normal(size=50))
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    >>> theta = rng.normal(size=4)
    >>> J, g, _ = curvature(problem, theta)
    >>> J2, g2 = problem.objective(theta, gradient=True)
    >>> bool(np.isclose(J, J2) and np.allclose(g, g2))
    True
    """
    design, loss, y = problem
    w, _ = design.split(theta)
    if m is None or s is None:
        m, s = design.scores(theta)
    value, d_m, d_s, d_mm, d_ms, d_ss = loss.terms_curvature(m, s, y)
    fused = _gradient_entries(design, w, d_m, d_s) if entries else None
    grad, noise_diag, entries = fused or (*design.rmatvec_pair(d_m, d_s), None)
    noise_diag *= 2.0
    grad[: design.n_features] += 2.0 * w + noise_diag * w
    J = penalised(w, value)
    return J, grad, Curvature(w, d_m, d_s, np.maximum(d_mm, 0.0), d_ms, d_ss, noise_diag,
                              entries)


def _gradient_entries(design, w, d_m, d_s):
    """``(Xbar^T d_m, V^T d_s, entries)`` -- :meth:`~bayesdrop.model.design.Design.rmatvec_pair`
    (the same sums) and :attr:`Curvature.entries` from one compiled pass -- for a CSR
    design with compiled row passes and noise; None otherwise."""
    if not design.sparse or design.variance.is_zero:
        return None
    compiled = design.row_kernel_arrays()
    if compiled is None or compiled[0] != "csr":
        return None
    indptr, indices, xdata, mdata = compiled[1]
    g, nd, xg = (np.empty(design.n_params), np.empty(design.n_features),
                 np.empty(2 * xdata.shape[0]))
    kernels.csr_gradient_entries(indptr, indices, xdata, mdata, float(compiled[2]),
                                 np.ascontiguousarray(w, dtype=np.float64),
                                 np.ascontiguousarray(d_m, dtype=np.float64),
                                 np.ascontiguousarray(d_s, dtype=np.float64), g, nd, xg)
    if design.fit_intercept:
        g[-1] = np.sum(d_m)
    nd *= design.variance.scale
    return g, nd, xg


def gradient(problem, theta, m, s, terms=None):
    """``J`` and its gradient at ``theta`` from its scores ``(m, s)`` (first derivatives
    only: the pass of a Newton step that reuses an earlier Hessian); ``terms``: the
    loss's ``terms(m, s, y)`` if already computed.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 3)); y = np.sign(X[:, 0] + rng.normal(size=50))
    >>> problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))
    >>> theta = rng.normal(size=4)
    >>> J, g = gradient(problem, theta, *problem.design.scores(theta))
    >>> J2, g2 = problem.objective(theta, gradient=True)
    >>> bool(np.isclose(J, J2) and np.allclose(g, g2))
    True
    """
    design, loss, y = problem
    w, _ = design.split(theta)
    value, d_m, d_s = loss.terms(m, s, y) if terms is None else terms
    grad, nd = design.rmatvec_pair(d_m, d_s)
    grad[: design.n_features] += 2.0 * w + 2.0 * nd * w
    return penalised(w, value), grad


def _compiled_diagonal(design, curv, compiled):
    """The diagonal of ``H`` by the compiled row pass."""
    kind, arrays, scale = compiled
    if kind == "csr":
        return _compiled_operator(design, curv, compiled, True).diagonal
    return kernels.dense_hdiag(*arrays, scale, design.fit_intercept, curv.w, curv.d_mm,
                               curv.d_ms, curv.d_ss, curv.noise_diag,
                               np.empty(design.n_params))


def _compiled_operator(design, curv, compiled, diagonal):
    """``z -> H z`` by the compiled row passes (per-Hessian set-up done once). For CSR the
    set-up also gives ``H``'s diagonal if asked, as ``.diagonal``."""
    kind, arrays, scale = compiled
    fi = design.fit_intercept
    if kind == "csr":
        indptr, indices, xdata, mdata = arrays
        if curv.entries is not None and not diagonal:  # written by the gradient's pass
            xg = curv.entries
        else:
            xg, diag = kernels.csr_hessian_entries(
                indptr, indices, xdata, mdata, float(scale), fi, curv.w, curv.d_mm,
                curv.d_ms, curv.d_ss, curv.noise_diag, np.empty(2 * xdata.shape[0]),
                np.empty(design.n_params if diagonal else 0))
        base = 2.0 + curv.noise_diag
        chunks = kernels.row_chunks(indptr)
        threads = kernels.threads_arg(chunks, numba_threads())

        def apply(z):
            z = np.ascontiguousarray(z, dtype=np.float64)
            return kernels.csr_hvp(indptr, indices, xg, fi, curv.d_mm, curv.d_ms, curv.d_ss,
                                   base, z, np.empty(design.n_params), chunks,
                                   np.empty((chunks.size - 2, base.size)), threads)

        def solve(g, inv_precond, rtol, maxiter):
            return kernels.csr_pcg_blocks(indptr, indices, xg, fi, curv.d_mm, curv.d_ms,
                                          curv.d_ss, base, inv_precond, g, float(rtol),
                                          int(maxiter), chunks, threads)
        apply.solve = solve  # the preconditioned CG loop compiled, in blocks
        if diagonal:
            apply.diagonal = diag
        return apply

    def apply(z):
        z = np.ascontiguousarray(z, dtype=np.float64)
        return kernels.dense_hvp(*arrays, scale, fi, curv.w, curv.d_mm, curv.d_ms,
                                 curv.d_ss, curv.noise_diag, z, np.empty(design.n_params))
    return apply


def _check_design(design):
    if not design.diagonal_noise:
        raise ValueError("Newton's Hessian needs a design with diagonal noise covariance; "
                         "the latent design is fitted by IRLS")


#: rows per block of :func:`_dense_hessian_blocked` (measured best of 256-4096 at
#: 10^6 x 20 and 2.5 x 10^5 x 64)
HESSIAN_BLOCK = 2048
#: the blocked product is used from this many stored entries ``N x D`` on, where its
#: float32 Hessian and the policies of :func:`single_applies` make Newton's Python loop
#: faster (from ``newton.MAX_COMPILED_ENTRIES`` on, or ``newton.MAX_COMPILED_ROWS`` rows,
#: the designs that loop fits when its compiled twin is at hand). Measured (separate
#: processes, median of 3 x 7 fits, 2 cores; the float64 Hessian -> this): digits 10
#: classes logistic q = 0.2, C = 0.1 28-44 -> 17-23 ms, hinge 40-55 -> 31-38 ms;
#: q = 0.3: 2500 x 64 logistic 4.3-6.4 -> 2.2 ms, 1500 x 100 epsilon-insensitive 4.4 ->
#: 2.7 ms, 600 x 200 logistic 6.6 -> 4.5 ms, 10^4 x 12 logistic 3.5 -> 2.4 ms, 1000 x 60
#: hinge 1.6 -> 1.4 ms; no gain below (6000 x 5 logistic 1.6 -> 1.9 ms, 3000 x 12 hinge
#: 1.45 -> 1.43 ms)
HESSIAN_BLOCKED_MIN = 40_000


def _dense_hessian_blocked(design, curv, X, M, scale, single=False, work=None):
    """The rows' share of ``H`` for dense ``X`` and ``V = scale * M`` in one pass of
    cache-sized blocks: each example's 2 x 2 curvature in ``(m, s)`` split into its signed
    eigen-terms where that is accurate (:func:`bayesdrop.linalg.kernels.dense_hessian_split`),
    so that a block adds ``P^T P - Q^T Q`` -- two symmetric rank-k products (BLAS
    ``syrk``) -- plus the exact ``Z^T Y`` of the other examples, without ``N x D``
    temporaries. With ``single`` the ``P`` and ``Q`` rows are stored and multiplied in
    float32 (each block's products summed into the float64 ``H``; ``Z^T Y`` stays
    float64). The noise diagonal is not included. ``work``: a dict that keeps the block
    arrays for the next call (a Newton fit's steps; see :func:`hessian_matrix`)."""
    n, D = X.shape
    p = design.n_params
    B = min(HESSIAN_BLOCK, n)
    g = 2.0 * scale * curv.w
    rows = np.float32 if single else np.float64
    key = (2 * B, p, single)
    arrays = None if work is None else work.get(key)
    if arrays is None:
        # zero columns p.. in P and Q: a faster syrk (see _blas.SYRK_PAD); the blocks
        # write columns 0..p-1 only, so reused arrays keep them zero
        arrays = (padded_rows(2 * B, p, rows), padded_rows(2 * B, p, rows),
                  np.empty((2 * B, p)), np.empty((2 * B, p)))
        if work is not None:
            work[key] = arrays
    P, Q, Z, Y = arrays
    H = np.zeros((P.shape[1], P.shape[1]))
    args = (X, M, g, design.fit_intercept, curv.d_mm, curv.d_ms, curv.d_ss)
    for start in range(0, n, B):
        nb = min(start + B, n) - start
        n_p, n_q, n_z = kernels.dense_hessian_split(*args, start, nb, P, Q, Z, Y)
        Pb, Qb = P[:n_p], Q[:n_q]
        H += Pb.T @ Pb  # numpy calls syrk for a product with its own transpose
        H -= Qb.T @ Qb
        if n_z:
            H[:p, :p] += Z[:n_z].T @ Y[:n_z]
    H = H[:p, :p]
    return 0.5 * (H + H.T)


def single_applies(design):
    """Whether ``hessian_matrix(design, curv, single=True)`` multiplies in float32 (a
    dense design with noise and :data:`HESSIAN_BLOCKED_MIN` stored entries or more)."""
    compiled = design.row_kernel_arrays()
    return (compiled is not None and compiled[0] == "dense" and not design.variance.is_zero
            and design.n_samples * design.n_features >= HESSIAN_BLOCKED_MIN)


def hessian_matrix(design, curv, penalty=True, single=False, row_step=1, work=None):
    """Dense Hessian ``H`` of shape (n_params, n_params) (see the module docstring).

    With ``penalty=False`` the ``2 I'`` of the penalty is left out: the rows' share of
    ``H``, which sums over row blocks (:mod:`bayesdrop.linalg.backend`). With
    ``single=True`` the data part of a large dense design (:data:`HESSIAN_BLOCKED_MIN`
    entries or more) is multiplied in float32 -- about a third faster, with an error of
    order ``1e-7 ||H||`` (a Newton solver's approximate Hessian; elsewhere ignored). At
    ``w = 0`` (where ``H = 2 I' + Xbar^T diag(d_mm) Xbar + diag(noise_diag)``) a
    ``row_step = k > 1`` estimates the Gram part from every ``k``-th row weighted ``k``
    (``Design.gram(single=True, row_step=k)``: a starting matrix). ``work``: a dict (the
    caller's, e.g. one per Newton fit) in which the blocked product keeps its block arrays
    from call to call -- fresh arrays of that size are fresh pages at every call
    (Fashion-MNIST 4000 x 784, float32: 2570 page faults, 34 -> 30 ms a Hessian).

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> from scipy.optimize import approx_fprime
    >>> rng = np.random.default_rng(1)
    >>> X = rng.normal(size=(40, 3)); y = np.sign(X[:, 0] + rng.normal(size=40))
    >>> problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.4))
    >>> theta = rng.normal(size=4)
    >>> H = hessian_matrix(problem.design, curvature(problem, theta)[2])
    >>> fd = np.array([approx_fprime(theta, lambda t: problem.objective(t, True)[1][i], 1e-7)
    ...                for i in range(4)])
    >>> bool(np.allclose(H, fd, rtol=1e-4, atol=1e-4))
    True
    """
    _check_design(design)
    D = design.n_features
    if row_step > 1:
        if np.any(curv.w):
            raise ValueError("row_step > 1 estimates H only at w = 0")
        H = design.gram(curv.d_mm, single=True, row_step=row_step)
        if penalty:
            H[np.diag_indices_from(H)] += 2.0 * design.penalty_mask()
        H[np.arange(D), np.arange(D)] += curv.noise_diag
        return H
    if single_applies(design):
        compiled = design.row_kernel_arrays()
        H = _dense_hessian_blocked(design, curv, *compiled[1], compiled[2], single, work)
        if penalty:
            H[np.diag_indices_from(H)] += 2.0 * design.penalty_mask()
        H[np.arange(D), np.arange(D)] += curv.noise_diag
        return H
    H = design.gram(curv.d_mm)
    if penalty:
        H[np.diag_indices_from(H)] += 2.0 * design.penalty_mask()
    H[np.arange(D), np.arange(D)] += curv.noise_diag
    if not design.variance.is_zero:
        two_w = 2.0 * curv.w
        cross = design.noise_cross(curv.d_ms) * two_w[None, :]  # Xbar^T diag(d_ms) Gbar
        H[:, :D] += cross
        H[:D, :] += cross.T
        H[:D, :D] += design.noise_gram(curv.d_ss) * np.outer(two_w, two_w)
    return H


def hessian_vector_product(design, curv, z):
    """``H z`` without forming ``H``: ``O(nnz)`` through ``Xbar``, ``Xbar^T``, ``V``, ``V^T``
    (one product; :func:`hessian_operator` for many products with the same ``H``).

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(2)
    >>> X = rng.normal(size=(40, 3)); y = np.sign(X[:, 0] + rng.normal(size=40))
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.4))
    >>> curv = curvature(problem, rng.normal(size=4))[2]
    >>> z = rng.normal(size=4)
    >>> H = hessian_matrix(problem.design, curv)
    >>> bool(np.allclose(hessian_vector_product(problem.design, curv, z), H @ z))
    True
    """
    return hessian_operator(design, curv)(z)


def hessian_operator(design, curv, diagonal=False):
    """The function ``z -> H z`` (see :func:`hessian_vector_product`), with what does not
    depend on ``z`` computed once: CG applies one Hessian many times. For CSR designs with
    compiled row passes it also has ``.solve(g, inv_precond, rtol, maxiter)``, the whole
    preconditioned CG loop on ``H p = -g`` compiled (:func:`bayesdrop.linalg.kernels.csr_pcg`),
    and with ``diagonal=True`` ``.diagonal``, the diagonal of ``H`` from the same set-up
    pass (:func:`bayesdrop.linalg.kernels.csr_hessian_entries`; without it, the entries
    the gradient's pass wrote, :attr:`Curvature.entries`, where there are any).

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss, Dropout
    >>> import scipy.sparse as sp
    >>> rng = np.random.default_rng(2)
    >>> X = sp.random(40, 6, density=0.4, random_state=2, format="csr")
    >>> y = np.sign(rng.normal(size=40))
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.4))
    >>> curv = curvature(problem, rng.normal(size=7))[2]
    >>> hvp, H = hessian_operator(problem.design, curv), hessian_matrix(problem.design, curv)
    >>> z = rng.normal(size=7)
    >>> bool(np.allclose(hvp(z), H @ z, rtol=1e-12, atol=1e-12))
    True
    """
    _check_design(design)
    compiled = design.row_kernel_arrays()
    if compiled is not None:
        return _compiled_operator(design, curv, compiled, diagonal)
    return lambda z: _generic_hvp(design, curv, z)


def single_operator(design, curv):
    """The function ``z -> H z`` for a dense design with row kernels, its four products
    with the data in float32 (:meth:`~bayesdrop.model.design.Design.single_arrays`, in
    one pass over the rows: :func:`bayesdrop.linalg.kernels.single_hvp`)::

        a = d_mm (Xbar z) + d_ms (G z),   b = d_ms (Xbar z) + d_ss (G z),
        H z = (2 I' + diag(noise_diag)) z + Xbar^T a + G^T b,   G = 2 scale M diag(w)

    -- ``a`` and ``b`` in float64. Each product carries a relative
    error of order ``N 2^-24`` in its entries' magnitudes (Higham 2002, section 3.1): for
    directions only -- the preconditioned CG of a Newton step
    (:func:`bayesdrop.solvers.newton.steps.direction_refined`), whose gradient, ``J`` and
    line search stay float64. Faster than the compiled float64 pass where the data
    exceed the cache (Fashion-MNIST 4000 x 784: 0.7 ms, one read of 12.5 MB; four
    ``sgemv`` took 0.8 ms on two threads, the float64 pass 4.8 ms).

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> rng = np.random.default_rng(3)
    >>> X = rng.normal(size=(300, 5)); y = np.sign(X[:, 0] + rng.normal(size=300))
    >>> problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))
    >>> curv = curvature(problem, rng.normal(size=6))[2]
    >>> z = rng.normal(size=6)
    >>> err = np.abs(single_operator(problem.design, curv)(z)
    ...              - hessian_operator(problem.design, curv)(z))

    The error is within the float32 bound of every summation order, ``(N + D + 2) 2^-24``
    (for the rounded inputs and the two chained products, four times that) times the
    same products of the absolute values:

    >>> absolute = Problem.create(np.abs(X), y, HingeLoss(1.0), Dropout(0.3)).design
    >>> acurv = curv._replace(**{k: np.abs(getattr(curv, k))
    ...                          for k in ("w", "d_mm", "d_ms", "d_ss", "noise_diag")})
    >>> bound = 4 * (300 + 5 + 2) * 2.0**-24 * hessian_operator(absolute, acurv)(np.abs(z))
    >>> bool(np.all(err <= bound))
    True
    """
    _check_design(design)
    X, M = design.single_arrays()  # M None: X * X formed from X's row in the pass
    scale = design.row_kernel_arrays()[2]
    fi = design.fit_intercept
    two_s = 2.0 * scale
    # (a, b) = (c_xx xz + c_xg mz, c_xg xz + c_gg mz) with mz = M (w z), G z = two_s mz
    c_xg = two_s * curv.d_ms
    c_gg = two_s * two_s * curv.d_ss
    base = 2.0 + curv.noise_diag

    def apply(z):
        return kernels.single_hvp(X, M, fi, curv.w, curv.d_mm, c_xg, c_gg, base,
                                  np.ascontiguousarray(z, dtype=np.float64),
                                  np.empty(design.n_params))
    return apply


def _generic_hvp(design, curv, z):
    D = design.n_features
    xz = design.matvec(z)
    z_w = z[:D]
    out = 2.0 * design.penalty_mask() * z
    if design.variance.is_zero:
        return out + design.rmatvec(curv.d_mm * xz)
    gz = 2.0 * design.noise_matvec(curv.w * z_w)  # G z
    out += design.rmatvec(curv.d_mm * xz + curv.d_ms * gz)
    out[:D] += 2.0 * curv.w * design.noise_rmatvec(curv.d_ms * xz + curv.d_ss * gz)
    out[:D] += curv.noise_diag * z_w
    return out


def hessian_diagonal(design, curv):
    """Diagonal of ``H`` (a Jacobi preconditioner), ``O(nnz)``.

    ``diag(H)_d = 2 + sum_n d_mm x_nd^2 + 2 sum_n d_s v_nd + 4 w_d sum_n d_ms x_nd v_nd
    + 4 w_d^2 sum_n d_ss v_nd^2``.
    """
    _check_design(design)
    compiled = design.row_kernel_arrays()
    if compiled is not None:
        return _compiled_diagonal(design, curv, compiled)
    D = design.n_features
    diag = 2.0 * design.penalty_mask() + design.gram_diagonal(curv.d_mm)
    V = design.variance
    if V.is_zero:
        return diag
    diag[:D] += curv.noise_diag
    X = design.X
    if V.is_constant:
        xv = V.scale * np.asarray(X.T @ curv.d_ms).ravel()
        vv = V.scale * V.scale * float(np.sum(curv.d_ss)) * np.ones(D)
    else:
        M = V.matrix
        XM = X.multiply(M) if design.sparse else X * M
        MM = M.multiply(M) if design.sparse else M * M
        xv = V.scale * np.asarray(XM.T @ curv.d_ms).ravel()
        vv = V.scale * V.scale * np.asarray(MM.T @ curv.d_ss).ravel()
    w = curv.w
    diag[:D] += 4.0 * w * xv + 4.0 * w * w * vv
    return diag
