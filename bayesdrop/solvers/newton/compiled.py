"""Newton's method compiled, for dense designs: the step evaluator :class:`DenseSteps`
whose operations numba compiles into :func:`bayesdrop.solvers.newton.loop.newton_loop`
-- the same function the Python evaluators run, compiled with no Python between the
steps, so that a small problem costs a few BLAS calls per step rather than dozens of
numpy calls (numba; Gram products through BLAS).

Per example the terms of ``J`` and their first and second derivatives in ``(m, s)``
(MATH.md section 3; the loss's compiled kernels, :mod:`bayesdrop.model.losses.kernels`,
so the loop is compiled per loss parameter type), the Hessian of
:mod:`bayesdrop.linalg.hessian` assembled block by block as signed squares
(:func:`bayesdrop.linalg.kernels.dense_hessian_split` + BLAS Gram products, no ``N x D``
temporaries), its Cholesky factor, and the trial points' scores recomputed from
``theta + t p`` row by row.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import _jit
from ..._blas import cholesky_lower, gram_rows, padded, syrk_work, syrk_work_single
from ...linalg.kernels import dense_hessian_split
from ...model._design_kernels import dense_rmatvec_pair, m_entry, scaled_rows
from ...model.losses.kernels import (
    mean,
    objective_from_scores,
    ridge,
    term,
    term_and_value,
)
from . import loop
from .steps import diagonal_condition

__all__ = ["EVALUATORS", "DenseSteps", "dense_steps", "irls_start_factored",
           "newton_dense", "newton_dense_path", "newton_loop_compiled", "ready",
           "start_factor", "start_weights", "with_C"]

#: rows per block of the Hessian's stacked Gram product (see
#: :data:`bayesdrop.linalg.hessian.HESSIAN_BLOCK`): its four work arrays (``2 x 128``
#: rows each) stay in the cache and are reused from the heap from fit to fit. At 2048
#: rows (digits: four arrays of ~1.9 MB) every fit first touched fresh pages -- 925 minor
#: page faults per one-vs-rest problem, about 1 ms -- and the rows left the cache between
#: ``dense_hessian_split`` and ``dsyrk``. Measured (``newton.fit(compiled=True)``, best of
#: 15; 2048 -> 128 rows): digits 0-vs-rest hinge q = 0.2 3.6 -> 2.5 ms, logistic 4.7 ->
#: 3.5 ms, random 2000 x 50 hinge q = 0.3 2.3 -> 1.4 ms, 1000 x 100 2.5 -> 1.6 ms,
#: 600 x 150 2.5 -> 1.7 ms, 400 x 300 5.1 -> 4.2 ms, breast cancer 0.52 -> 0.46 ms; the
#: 10-class digits DropoutSVC 60 -> 47 ms, DropoutLogisticRegression 42 -> 31 ms; 64 and
#: 256 rows within a few per cent of 128, 1024 rows as slow as 2048 on 1000 x 100
_HESSIAN_ROWS = 128


@_jit.njit(cache=True, nogil=True)
def _objective(lp, X, M, scale, fi, y, sw, theta, m, s):
    """``J(theta)``; fills the scores ``m`` and ``s``."""
    D = X.shape[1]
    _scores(X, M, scale, fi, theta, m, s)
    none = m[:0]
    return objective_from_scores(lp, y, sw, m, s, ridge(theta, D), none, none, none, none, 0.0)


@_jit.njit(cache=True, nogil=True, inline="always")
def _row_sums(X, M, i, theta, D):
    """Row ``i``'s ``(x_i . w, M_i . w^2)`` (inlined into its callers, whose ``fastmath``
    flags apply; ``M`` None: ``X * X``, :func:`bayesdrop.model._design_kernels.m_entry`)."""
    mi = 0.0
    si = 0.0
    for d in range(D):
        wd = theta[d]
        mi += X[i, d] * wd
        si += m_entry(X, M, i, d) * (wd * wd)
    return mi, si


@_jit.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _scores(X, M, scale, fi, theta, m, s):
    """The scores ``m = Xbar theta`` and ``s = scale M w^2``, row by row. Each row's two
    sums may be reassociated (SIMD lanes, fused multiply-adds: ``fastmath`` with only
    ``reassoc`` and ``contract``, so inf and NaN propagate as usual): they differ from
    the left-to-right sums by rounding only, as BLAS ``gemv``'s do, and take about half
    the time of the strict order on a few dozen features (285 x 30: 11 -> 3 us)."""
    n, D = X.shape
    b = theta[D] if fi else 0.0
    for i in range(n):
        mi, si = _row_sums(X, M, i, theta, D)
        m[i] = mi + b
        s[i] = si * scale


@_jit.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _value_gradient(lp, X, M, scale, fi, y, sw, theta, m, s, d_m, d_s, g, nd):
    """``J(theta)`` and its gradient in one pass over the rows: each row's scores (as
    :func:`_scores`), its term and first derivatives (the loss's ``term_and_value``
    kernel), and its share of ``Xbar^T d_m`` and ``M^T d_s`` while the row is in the
    cache -- the work of :func:`_objective`, :func:`_derivatives` and :func:`_gradient`
    with one pass over ``X`` and ``M`` instead of two. Fills the scores ``m, s``, the
    weighted first derivatives ``d_m, d_s``, the gradient ``g`` and the noise diagonal
    ``nd = 2 scale M^T d_s`` (as :func:`_gradient`)."""
    n, D = X.shape
    b = theta[D] if fi else 0.0
    acc = np.zeros(D)
    acn = np.zeros(D)
    value = ridge(theta, D)
    intercept = 0.0
    for i in range(n):
        mi, si = _row_sums(X, M, i, theta, D)
        mi += b
        si *= scale
        m[i] = mi
        s[i] = si
        out = term_and_value(lp, mi, si, y[i], np.int64(1))
        w = sw[i]
        value += w * out[0]
        a = w * out[1]
        c = w * out[2]
        d_m[i] = a
        d_s[i] = c
        intercept += a
        for d in range(D):
            acc[d] += X[i, d] * a
            acn[d] += m_entry(X, M, i, d) * c
    if fi:
        g[D] = intercept
    for d in range(D):
        nd[d] = 2.0 * scale * acn[d]
        g[d] = acc[d] + 2.0 * theta[d] + nd[d] * theta[d]
    return value


@_jit.njit(cache=True, nogil=True)
def _irls_weights(lp, y, sw, m, s):
    """The expected system weights and targets ``(rho, t)`` of an IRLS map at the scores
    ``(m, s)`` (the loss's ``mean`` kernel; ``rho > 0``)."""
    n = m.shape[0]
    rho, t = np.empty(n), np.empty(n)
    for i in range(n):
        _, _, rho[i], t[i] = mean(lp, lp.C * sw[i], m[i], s[i], y[i])
    return rho, t


@_jit.njit(cache=True, nogil=True)
def _irls_rhs(X, M, fi, t, rho, p):
    """``r = Xbar^T t`` (by :func:`dense_rmatvec_pair`, whose order of summation the
    maps have always had)."""
    r = np.zeros(p)
    dense_rmatvec_pair(X, M, t, rho, r, np.zeros(X.shape[1]))
    if fi:
        r[X.shape[1]] = np.sum(t)
    return r


@_jit.njit(cache=True, nogil=True)
def start_weights(lp, y, sw):
    """The IRLS weights ``rho`` at ``w = 0`` and zero intercept (scores 0): those of
    :func:`irls_start_factored`'s map."""
    n = y.shape[0]
    return _irls_weights(lp, y, sw, np.zeros(n), np.zeros(n))[0]


@_jit.njit(cache=True, nogil=True)
def start_factor(X, M, scale, fi, rho, p, gram, potrf):
    """The lower Cholesky factor of :func:`irls_start_factored`'s system for the weights
    ``rho`` (:func:`start_weights`), the IRLS system ``A = 2 I' + Xbar^T diag(rho) Xbar +
    diag(V^T rho)`` (MATH.md 3-4): the Gram part as one product of the rows
    ``sqrt(rho_n) xbar_n`` (``gram``: :func:`bayesdrop._blas.gram_pair`)."""
    n, D = X.shape
    root = np.empty(n)
    for i in range(n):
        root[i] = np.sqrt(max(rho[i], 0.0))
    W = np.zeros((n, padded(p)))  # zero columns p.. (a faster syrk, _blas.SYRK_PAD)
    scaled_rows(X, root, fi, W)
    r = np.zeros(p)
    nd = np.zeros(D)
    dense_rmatvec_pair(X, M, rho, rho, r, nd)  # nd = M^T rho (r unused)
    pp = W.shape[1]
    G = np.zeros((pp, pp))
    gram_rows(gram, W, n, G, syrk_work())
    A = np.empty((p, p))
    for a in range(p):  # G's upper triangle holds the sums (gram_rows)
        for c in range(a, p):
            A[a, c] = G[a, c]
            A[c, a] = G[a, c]
    for d in range(D):
        A[d, d] += 2.0 + scale * nd[d]
    # A is positive definite (2 I' + a weighted Gram with rho > 0)
    cholesky_lower(potrf, A)
    return A


@_jit.njit(cache=True, nogil=True)
def irls_start_factored(lp, X, M, scale, fi, y, sw, L):
    """One IRLS map from zero, or zero itself if the map raises ``J``: the start of Newton
    on a non-smooth loss, where at ``w = 0`` every score variance is 0 and the Hessian
    singular (an IRLS map never raises ``J``, MM). The map's system ``A theta = r``
    (MATH.md 3-4) is solved with its factor ``L`` given (:func:`start_factor`; the
    one-vs-rest problems of a design share it where their weights at zero agree)."""
    n = X.shape[0]
    p = L.shape[0]
    theta = np.zeros(p)
    # at zero every score is 0 (m = b = 0, s = 0): J without a pass over X
    m, s, m_c, s_c = np.zeros(n), np.zeros(n), np.empty(n), np.empty(n)
    J = objective_from_scores(lp, y, sw, m, s, 0.0, m[:0], m[:0], m[:0], m[:0], 0.0)
    rho, t = _irls_weights(lp, y, sw, m, s)
    cand = _solve(L, -_irls_rhs(X, M, fi, t, rho, p))
    if _objective(lp, X, M, scale, fi, y, sw, cand, m_c, s_c) <= J:
        return cand
    return theta


@_jit.njit(cache=True, nogil=True)
def _derivatives(lp, m, s, y, sw, order, d_m, d_s, d_mm, d_ms, d_ss):
    """Every example's (weighted) derivatives of its term in ``(m, s)``: the first ones,
    and with ``order=2`` the second ones too."""
    for i in range(m.shape[0]):
        _, dm, ds, dmm, dms, dss = term(lp, m[i], s[i], y[i], order)
        w = sw[i]
        d_m[i] = w * dm
        d_s[i] = w * ds
        if order == 2:
            d_mm[i], d_ms[i], d_ss[i] = w * dmm, w * dms, w * dss


@_jit.njit(cache=True, nogil=True)
def _add_upper(A, B, p):
    """``A += B`` on the upper triangle of the leading ``p x p`` block (``B`` float32)."""
    for a in range(p):
        for c in range(a, p):
            A[a, c] += B[a, c]


@_jit.njit(cache=True, nogil=True)
def hessian_rows(X, M, scale, fi, theta, d_mm, d_ms, d_ss, P, Q, Z, Y, gram, work, L,
                 single):
    """The rows' share of ``H`` (its data part: no penalty, no noise diagonal) into both
    triangles of ``L``, as ``P^T P - Q^T Q + Z^T Y`` block by block
    (:func:`bayesdrop.linalg.kernels.dense_hessian_split`: two Gram products per block,
    :func:`bayesdrop._blas.gram_rows` with the addresses ``gram``, and a product for
    strongly indefinite examples), for the per-example curvatures ``d_mm, d_ms, d_ss`` at
    ``w = theta[:D]``.

    ``single = (sgram, P32, Q32, H32, work32)`` with ``sgram[0] != 0``: the rows of ``P``
    and ``Q`` stored and multiplied in float32 (``sgram``:
    :func:`bayesdrop._blas.gram_pair_single`), each block's product added to the
    float64 sums (as :func:`bayesdrop.linalg.hessian.hessian_matrix` with ``single``);
    ``Z^T Y`` stays float64. The workspace: :func:`hessian_workspace`."""
    n, D = X.shape
    p = Z.shape[1]
    pp = P.shape[1]  # P and Q: zero columns p..pp-1 (a faster syrk, _blas.SYRK_PAD)
    B = P.shape[0] // 2
    sgram, P32, Q32, H32, work32 = single
    Hp = np.zeros((pp, pp))
    Hq = np.zeros((pp, pp))
    Hz = np.zeros((p, p))
    two_w = np.empty(D)
    for d in range(D):
        two_w[d] = 2.0 * scale * theta[d]
    for start in range(0, n, B):
        nb = min(start + B, n) - start
        if sgram[0] != 0:
            n_p, n_q, n_z = dense_hessian_split(X, M, two_w, fi, d_mm, d_ms, d_ss, start,
                                                nb, P32, Q32, Z, Y)
            if n_p:
                gram_rows(sgram, P32, n_p, H32, work32)  # beta = 0: H32 = P^T P
                _add_upper(Hp, H32, p)
            if n_q:
                gram_rows(sgram, Q32, n_q, H32, work32)
                _add_upper(Hq, H32, p)
        else:
            n_p, n_q, n_z = dense_hessian_split(X, M, two_w, fi, d_mm, d_ms, d_ss, start,
                                                nb, P, Q, Z, Y)
            if n_p:
                gram_rows(gram, P, n_p, Hp, work)
            if n_q:
                gram_rows(gram, Q, n_q, Hq, work)
        for k in range(n_z):  # strongly indefinite examples: the exact product
            for a in range(p):
                za = Z[k, a]
                for c in range(p):
                    Hz[a, c] += za * Y[k, c]
    for a in range(p):  # the upper triangles of Hp, Hq hold their sums (gram_rows)
        for c in range(a, p):
            v = Hp[a, c] - Hq[a, c] + 0.5 * (Hz[a, c] + Hz[c, a])
            L[a, c] = v
            L[c, a] = v


@_jit.njit(cache=True, nogil=True, inline="always")
def float64_products(single):
    """``single`` of :func:`hessian_rows` with its ``sgram`` set to zeros: the same
    workspace, the products in float64."""
    _, P32, Q32, H32, work32 = single
    return (np.int64(0), np.int64(0)), P32, Q32, H32, work32


@_jit.njit(cache=True, nogil=True)
def hessian_workspace(n, p, sgram):
    """The workspace of :func:`hessian_rows` for ``n`` rows and ``p`` parameters:
    ``(P, Q, Z, Y, work, single)``, blocks of ``min(_HESSIAN_ROWS, n)`` rows (``P`` and
    ``Q`` with zero columns ``p..``); ``single``'s float32 arrays empty unless ``sgram``
    (:func:`bayesdrop._blas.gram_pair_single`, or zeros) is non-zero."""
    B = min(_HESSIAN_ROWS, n)
    P = np.empty((2 * B, padded(p)))
    Q = np.empty((2 * B, padded(p)))
    P[:, p:] = 0.0
    Q[:, p:] = 0.0
    rows32 = 2 * B if sgram[0] != 0 else 0
    single = (sgram, np.zeros((rows32, padded(p)), dtype=np.float32),
              np.zeros((rows32, padded(p)), dtype=np.float32),
              np.zeros((padded(p), padded(p)), dtype=np.float32), syrk_work_single())
    return P, Q, np.empty((2 * B, p)), np.empty((2 * B, p)), syrk_work(), single


@_jit.njit(cache=True, nogil=True)
def _factor(X, M, scale, fi, theta, d_mm, d_ms, d_ss, nd, ridge, P, Q, Z, Y, gram, work,
            potrf, L, single):
    """Lower Cholesky factor of ``H`` into the lower triangle of ``L`` (its strict upper
    triangle holds ``H``): the rows' share (:func:`hessian_rows`; float32 products with
    ``single``), then ``2 I'`` and the noise diagonal ``nd``; a relative ridge if ``H``
    is singular to working precision."""
    D = X.shape[1]
    p = Z.shape[1]
    hessian_rows(X, M, scale, fi, theta, d_mm, d_ms, d_ss, P, Q, Z, Y, gram, work, L,
                 single)
    for d in range(D):
        L[d, d] += 2.0 + nd[d]
    hmax = 1.0
    for a in range(p):
        hmax = max(hmax, L[a, a])
    if cholesky_lower(potrf, L) != 0:  # singular to working precision: a relative ridge
        for a in range(p):
            for c in range(a, p):
                L[c, a] = L[a, c]  # H again (its upper triangle is untouched)
            L[a, a] += ridge * hmax
        cholesky_lower(potrf, L)


@_jit.njit(cache=True, nogil=True)
def _solve(L, g):
    """``-H^{-1} g`` from the lower Cholesky factor ``L`` of ``H``."""
    p = g.shape[0]
    u = np.empty(p)
    for a in range(p):
        acc = -g[a]
        for c in range(a):
            acc -= L[a, c] * u[c]
        u[a] = acc / L[a, a]
    step = np.empty(p)
    for a in range(p - 1, -1, -1):
        acc = u[a]
        for c in range(a + 1, p):
            acc -= L[c, a] * step[c]
        step[a] = acc / L[a, a]
    return step


@_jit.njit(cache=True, nogil=True)
def _gradient(X, M, scale, fi, d_m, d_s, theta, nd, penalty=2.0):
    """``Xbar^T d_m + (penalty w + 2 scale (M^T d_s) w)`` in one pass over the rows
    (:func:`bayesdrop.model._design_kernels.dense_rmatvec_pair`; ``penalty`` 2: ``J``'s
    ``||w||^2``); the noise diagonal ``2 scale M^T d_s`` of ``H`` into ``nd``."""
    D = X.shape[1]
    g = np.zeros(D + (1 if fi else 0))
    dense_rmatvec_pair(X, M, d_m, d_s, g, nd)
    if fi:
        g[D] = np.sum(d_m)
    for d in range(D):
        nd[d] *= 2.0 * scale
        g[d] += penalty * theta[d] + nd[d] * theta[d]
    return g

class DenseSteps(NamedTuple):
    """The state of the compiled evaluator: the data (``lp`` the loss's parameter tuple,
    ``X``, ``V = scale * M``, ``fi`` fit intercept, labels ``y``, sample weights ``sw``),
    the current point ``theta`` and its scores (``m, s``), a trial point ``cand`` and at the line search's and a doubling's
    trial points (``m_c, s_c``; ``m_e, s_e``; ``J_trial`` their ``J``), the per-example
    derivatives (``d_*``; ``order[0]``: 1 first only, 2 also second), the Hessian's
    workspace (``P, Q, Z, Y``, ``work``; ``gram`` the BLAS addresses of
    :func:`bayesdrop._blas.gram_pair`) and its
    kept lower Cholesky factor ``L``; ``ridge`` as ``RIDGE``; the float32 products'
    workspace ``single`` (:func:`_factor`), ``max_cond`` as ``SINGLE_MAX_COND`` and
    ``flags``: float32 Hessians allowed, the kept factor from them, the last float64
    factor too ill-conditioned for them (the rule of
    :meth:`bayesdrop.solvers.newton.steps.DesignSteps.new_factor`)."""

    lp: tuple
    theta: np.ndarray
    cand: np.ndarray
    X: np.ndarray
    M: np.ndarray
    scale: float
    fi: bool
    y: np.ndarray
    sw: np.ndarray
    m: np.ndarray
    s: np.ndarray
    m_c: np.ndarray
    s_c: np.ndarray
    m_e: np.ndarray
    s_e: np.ndarray
    J_trial: np.ndarray
    d_m: np.ndarray
    d_s: np.ndarray
    d_mm: np.ndarray
    d_ms: np.ndarray
    d_ss: np.ndarray
    order: np.ndarray
    P: np.ndarray
    Q: np.ndarray
    Z: np.ndarray
    Y: np.ndarray
    work: tuple
    L: np.ndarray
    nd: np.ndarray
    gram: tuple
    potrf: int
    ridge: float
    exact: bool
    single: tuple
    max_cond: float
    flags: np.ndarray
    d_m_c: np.ndarray
    d_s_c: np.ndarray
    nd_c: np.ndarray
    g_c: np.ndarray
    fused: np.ndarray


@_jit.njit(cache=True, nogil=True)
def dense_steps(lp, X, M, scale, fi, y, sw, gram, potrf, ridge, sgram, max_cond):
    """A :class:`DenseSteps` with its workspace for ``X`` (n x D, C-ordered float64);
    ``sgram`` the addresses of :func:`bayesdrop._blas.gram_pair_single` for float32
    Hessians (zeros: float64 only)."""
    n, D = X.shape
    p = D + (1 if fi else 0)
    P, Q, Z, Y, work, single = hessian_workspace(n, p, sgram)
    flags = np.zeros(3, dtype=np.int64)
    if sgram[0] != 0:
        flags[0] = 1
    return DenseSteps(lp, np.zeros(p), np.empty(p), X, M, scale, fi, y, sw, np.empty(n), np.empty(n),
                      np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.zeros(2),
                      np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n),
                      np.zeros(1, dtype=np.int64), P, Q, Z, Y, work, np.zeros((p, p)),
                      np.zeros(D), gram, potrf, ridge, True, single, max_cond, flags,
                      np.empty(n), np.empty(n), np.empty(D), np.empty(p),
                      np.zeros(1, dtype=np.int64))


def _is_dense(ev):
    from numba import types

    return isinstance(ev, types.BaseNamedTuple) and ev.instance_class is DenseSteps


#: the NamedTuple evaluators compiled into the loop (:class:`DenseSteps`; :mod:`.compiled_csr`
#: adds ``CsrSteps``): they share the overloads of the operations that only move the
#: trial points' scores (:func:`_take_doubled`) or have no float32 factor to retry
#: (:func:`_retry_exact`)
EVALUATORS = [DenseSteps]


def _is_compiled(ev):
    from numba import types

    return isinstance(ev, types.BaseNamedTuple) and ev.instance_class in EVALUATORS


@_jit.overload(loop.start)
def _start(ev, theta):
    if not _is_dense(ev):
        return None

    def impl(ev, theta):
        loop.put(ev.theta, theta)
        J = _objective(ev.lp, ev.X, ev.M, ev.scale, ev.fi, ev.y, ev.sw, theta, ev.m, ev.s)
        _derivatives(ev.lp, ev.m, ev.s, ev.y, ev.sw, np.int64(2), ev.d_m, ev.d_s, ev.d_mm,
                     ev.d_ms, ev.d_ss)
        ev.order[0] = 2
        return J, _gradient(ev.X, ev.M, ev.scale, ev.fi, ev.d_m, ev.d_s, theta, ev.nd)
    return impl


@_jit.overload(loop.newton_direction)
def _newton_direction(ev, g, rtol):
    if not _is_dense(ev):
        return None

    def impl(ev, g, rtol):
        if ev.order[0] < 2:
            _derivatives(ev.lp, ev.m, ev.s, ev.y, ev.sw, np.int64(2), ev.d_m, ev.d_s,
                         ev.d_mm, ev.d_ms, ev.d_ss)
            ev.order[0] = 2
        # ev.nd: the noise diagonal, from the gradient at this point (d_s is the same)
        _new_factor(ev)
        return _solve(ev.L, g)
    return impl


@_jit.njit(cache=True, nogil=True)
def _new_factor(ev):
    """Factor the Hessian at ``ev.theta`` into ``ev.L`` by the rule of
    :meth:`bayesdrop.solvers.newton.steps.DesignSteps.new_factor`: from float32 products
    (``ev.flags[0]``), kept when the factor's condition estimate is at most
    ``ev.max_cond`` (``ev.flags[1]``: the kept factor is float32's), else from float64
    products; float32 is not tried while the last float64 factor's estimate is above
    ``ev.max_cond`` (``ev.flags[2]``), nor after a step from a float32 factor failed its
    line search (:func:`_retry_exact` clears ``ev.flags[0]``). A float32 factor's
    direction carries a relative error of about ``cond * 1e-7``; ``J``, the gradient and
    the stopping rule stay float64."""
    if ev.flags[0] == 1 and ev.flags[2] == 0:
        _factor(ev.X, ev.M, ev.scale, ev.fi, ev.theta, ev.d_mm, ev.d_ms, ev.d_ss, ev.nd,
                ev.ridge, ev.P, ev.Q, ev.Z, ev.Y, ev.gram, ev.work, ev.potrf, ev.L,
                ev.single)
        if diagonal_condition(ev.L) <= ev.max_cond:
            ev.flags[1] = 1
            return
    _factor(ev.X, ev.M, ev.scale, ev.fi, ev.theta, ev.d_mm, ev.d_ms, ev.d_ss, ev.nd,
            ev.ridge, ev.P, ev.Q, ev.Z, ev.Y, ev.gram, ev.work, ev.potrf, ev.L,
            float64_products(ev.single))
    ev.flags[1] = 0
    if ev.flags[0] == 1:
        ev.flags[2] = 1 if diagonal_condition(ev.L) > ev.max_cond else 0


@_jit.overload(loop.chord_solve)
def _chord_solve(ev, q):
    from numba import types

    if not (_is_dense(ev) or isinstance(ev, types.BaseNamedTuple)
            and ev.instance_class is loop.KeptFactor):
        return None

    def impl(ev, q):
        return loop.add_scaled(np.zeros(q.shape[0]), -1.0, _solve(ev.L, q))
    return impl


@_jit.overload(loop.trial)
def _trial(ev, theta, step, t, slot, derivs):
    if not _is_dense(ev):
        return None

    def impl(ev, theta, step, t, slot, derivs):
        cand = ev.cand
        for a in range(cand.shape[0]):
            cand[a] = theta[a] + t * step[a]
        if slot == 0 and derivs:  # the next gradient, if the step is taken: one pass
            J = _value_gradient(ev.lp, ev.X, ev.M, ev.scale, ev.fi, ev.y, ev.sw, cand,
                                ev.m_c, ev.s_c, ev.d_m_c, ev.d_s_c, ev.g_c, ev.nd_c)
            ev.fused[0] = 1
        elif slot == 0:
            J = _objective(ev.lp, ev.X, ev.M, ev.scale, ev.fi, ev.y, ev.sw, cand, ev.m_c,
                           ev.s_c)
            ev.fused[0] = 0
        else:  # a doubling (far from the optimum: no derivatives)
            J = _objective(ev.lp, ev.X, ev.M, ev.scale, ev.fi, ev.y, ev.sw, cand, ev.m_e,
                           ev.s_e)
            ev.fused[0] = 0
        ev.J_trial[slot] = J
        return J
    return impl


@_jit.overload(loop.take_doubled)
def _take_doubled(ev):
    if not _is_compiled(ev):
        return None

    def impl(ev):
        loop.put(ev.m_c, ev.m_e)
        loop.put(ev.s_c, ev.s_e)
        ev.J_trial[0] = ev.J_trial[1]
    return impl


@_jit.overload(loop.retry_exact)
def _retry_exact(ev, fresh):
    if not _is_compiled(ev):
        return None
    if _is_dense(ev):
        def impl(ev, fresh):  # a failed step from a float32 factor: float64 from now on
            if ev.flags[1] == 0:
                return False
            if fresh:
                ev.flags[0] = 0
            ev.flags[1] = 0
            return True
        return impl

    def impl(ev, fresh):
        return False
    return impl


@_jit.overload(loop.accept)
def _accept(ev, theta, second):
    if not _is_dense(ev):
        return None

    def impl(ev, theta, second):
        loop.put(ev.theta, theta)
        loop.put(ev.m, ev.m_c)
        loop.put(ev.s, ev.s_c)
        if ev.fused[0] == 1:  # the trial's pass gave the gradient (and nd)
            ev.fused[0] = 0
            loop.put(ev.nd, ev.nd_c)
            if second:
                _derivatives(ev.lp, ev.m, ev.s, ev.y, ev.sw, np.int64(2), ev.d_m, ev.d_s,
                             ev.d_mm, ev.d_ms, ev.d_ss)
                ev.order[0] = 2
            else:
                loop.put(ev.d_m, ev.d_m_c)
                loop.put(ev.d_s, ev.d_s_c)
                ev.order[0] = 1
            return ev.J_trial[0], ev.g_c.copy()
        order = np.int64(2) if second else np.int64(1)
        _derivatives(ev.lp, ev.m, ev.s, ev.y, ev.sw, order, ev.d_m, ev.d_s, ev.d_mm,
                     ev.d_ms, ev.d_ss)
        ev.order[0] = order
        return ev.J_trial[0], _gradient(ev.X, ev.M, ev.scale, ev.fi, ev.d_m, ev.d_s, theta,
                                        ev.nd)
    return impl


#: :func:`bayesdrop.solvers.newton.loop.newton_loop` compiled (for :class:`DenseSteps`)
newton_loop_compiled = _jit.njit(cache=True, nogil=True)(loop.newton_loop)


@_jit.njit(cache=True, nogil=True)
def newton_dense(lp, X, M, scale, fi, y, sw, theta0, opts, gram, potrf, ridge, sgram,
                 max_cond):
    """:func:`newton_loop_compiled` from ``theta0`` on the :class:`DenseSteps` of these
    arrays (built here: no tuple of arrays crosses into Python); ``sgram``: float32
    Hessians (:func:`_new_factor`; zeros: float64 only)."""
    ev = dense_steps(lp, X, M, scale, fi, y, sw, gram, potrf, ridge, sgram, max_cond)
    return newton_loop_compiled(ev, theta0, opts, True)


def with_C(lp, C):
    """The loss's parameter tuple ``lp`` with its first field, ``C``, replaced (also in
    compiled code, where numba has no ``_replace``).

    Examples
    --------
    >>> from bayesdrop.model.losses import HingeLoss
    >>> with_C(HingeLoss(1.0).kernel_params, 4.0)
    HingeParams(C=4.0, margin=1.0)
    """
    return lp._replace(C=C)


@_jit.overload(with_C)
def _with_C(lp, C):
    cls = lp.instance_class  # a NamedTuple type: its class, called with every field
    source = ("def impl(lp, C):\n    return cls(C"
              + "".join(f", lp[{k}]" for k in range(1, len(lp))) + ")\n")
    namespace = {"cls": cls}
    exec(source, namespace)  # noqa: S102 - fixed source, the tuple's length only
    return namespace["impl"]


@_jit.njit(cache=True, nogil=True)
def newton_dense_path(lp, X, M, scale, fi, y, sw, Cs, theta0, previous, opts, bare_Js, gram,
                      potrf, ridge, sgram, max_cond):
    """:func:`newton_dense` at each ``C`` of ``Cs`` in turn (the loss ``lp`` at that ``C``,
    :func:`with_C`; the trap check at ``bare_Js[i]``), each run from the start of
    :func:`bayesdrop.solvers.fit_path`: the first from ``theta0``, the ``i``-th from
    ``theta_{i-1} + previous[i] - previous[i-1]`` where ``previous`` (the fits of a
    neighbouring path, one row per ``C``) has rows, else from ``theta_{i-1}``. Stops after
    the first run that does not converge.

    Returns ``(k, thetas, J, grad_norm, n_iter, n_factors, status, histories)``
    for the ``k`` runs made (rows ``0 .. k-1``; row ``i`` of ``histories`` holds ``J``
    before each step and after the last in its first ``n_iter[i] + 1`` entries)."""
    n_C = Cs.shape[0]
    p = theta0.shape[0]
    starts = np.empty((n_C, p))
    runs = _runs(n_C, p, opts.max_iter)
    for i in range(n_C):
        for a in range(p):
            if i == 0:
                starts[i, a] = theta0[a]
            elif previous.shape[0] > 0:  # the same operations as the Python path's
                starts[i, a] = runs[0][i - 1, a] + previous[i, a] - previous[i - 1, a]
            else:
                starts[i, a] = runs[0][i - 1, a]
        st = _run_into(runs, i, with_C(lp, Cs[i]), X, M, scale, fi, y, sw, starts[i].copy(),
                       opts, bare_Js[i], gram, potrf, ridge, sgram, max_cond)
        if st != loop.CONVERGED:
            return (i + 1, *runs)
    return (n_C, *runs)


@_jit.njit(cache=True, nogil=True)
def _runs(k, p, max_iter):
    """The rows of ``k`` runs: ``(thetas, J, grad_norm, n_iter, n_factors, status,
    histories)`` (:func:`_run_into`)."""
    return (np.empty((k, p)), np.empty(k), np.empty(k), np.zeros(k, dtype=np.int64),
            np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64),
            np.full((k, max_iter + 1), np.nan))


@_jit.njit(cache=True, nogil=True)
def _run_into(runs, i, lp, X, M, scale, fi, y, sw, theta0, opts, bare_J, gram, potrf, ridge,
              sgram, max_cond):
    """:func:`newton_dense` from ``theta0`` with the trap check at ``bare_J``, its result in
    row ``i`` of ``runs`` (:func:`_runs`: the point, ``J``, the gradient's largest entry,
    the counts and status, ``J`` before each step and after the last); returns its
    status."""
    run = loop.NewtonOptions(opts.tol, opts.max_iter, opts.armijo, opts.min_step,
                             opts.reuse, opts.contraction, opts.chord_stop,
                             opts.expand_steps, opts.expand_ratio, opts.qn_memory,
                             opts.cg_floor, bare_J, opts.trap_steps, opts.check_start)
    theta, J_i, g, history, it, st, nf = newton_dense(
        lp, X, M, scale, fi, y, sw, theta0, run, gram, potrf, ridge, sgram, max_cond)
    thetas, J, grad_norm, n_iter, n_factors, status, histories = runs
    thetas[i] = theta
    J[i] = J_i
    gmax = 0.0
    for a in range(g.shape[0]):
        gmax = max(gmax, abs(g[a]))
    grad_norm[i] = gmax
    n_iter[i], n_factors[i], status[i] = it, nf, st
    histories[i, :history.shape[0]] = history
    return st


@_jit.njit(cache=True, nogil=True)
def newton_dense_problems(lp, X, M, scale, fi, Y, SW, irls_start, opts, bare_Js, gram, potrf,
                          ridge, sgram, max_cond):
    """:func:`newton_dense` from zero on each problem ``k`` of a design -- labels ``Y[k]``,
    sample weights ``SW[k]`` (the one-vs-rest problems of a classifier), the trap check
    at ``bare_Js[k]`` -- in one call, without Python between them; with ``irls_start``
    each run starts from one compiled IRLS map from zero (:func:`irls_start_factored`),
    its system's factor shared while the weights at zero agree (as
    :func:`bayesdrop.solvers.newton._compiled_start`). The same operations as
    :func:`bayesdrop.solvers.newton.fit` on each problem from zero, so the same results.

    Returns ``(thetas, J, grad_norm, n_iter, n_factors, status, histories)``, a row per
    problem (row ``k`` of ``histories`` holds ``J`` before each step and after the last
    in its first ``n_iter[k] + 1`` entries)."""
    K, n = Y.shape
    p = X.shape[1] + (1 if fi else 0)
    runs = _runs(K, p, opts.max_iter)
    L = np.zeros((p, p))
    kept = np.empty(0)  # the weights L was made for
    for k in range(K):
        y, sw = Y[k], SW[k]
        theta0 = np.zeros(p)
        if irls_start:
            rho = start_weights(lp, y, sw)
            same = kept.shape[0] == n
            for i in range(kept.shape[0]):
                if kept[i] != rho[i]:
                    same = False
                    break
            if not same:
                L = start_factor(X, M, scale, fi, rho, p, gram, potrf)
                kept = rho
            theta0 = irls_start_factored(lp, X, M, scale, fi, y, sw, L)
        _run_into(runs, k, lp, X, M, scale, fi, y, sw, theta0, opts, bare_Js[k], gram, potrf,
                  ridge, sgram, max_cond)
    return runs


def ready(dispatcher, *args):
    """Whether ``dispatcher`` has machine code for these arguments without compiling:
    compiled in this process, or in numba's on-disk cache (then loaded, as numba's own
    first call would)."""
    sig = tuple(dispatcher.typeof_pyval(a) for a in args)
    if sig in dispatcher.overloads:
        return True
    cache = getattr(dispatcher, "_cache", None)
    if cache is None:
        return False
    # numba keys its cache by the tuple of argument types (Dispatcher.compile's ``sig``)
    cres = cache.load_overload(sig, dispatcher.targetctx)
    if cres is None:
        return False
    # as numba's Dispatcher.compile does with a cached overload: also registered for the
    # compiled functions that call this one (else compiling such a caller later fails
    # with "No definition for lowering")
    if not cres.objectmode:
        dispatcher.targetctx.insert_user_function(cres.entry_point, cres.fndesc,
                                                  [cres.library])
    dispatcher.add_overload(cres)
    return True
