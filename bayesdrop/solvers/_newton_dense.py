"""The whole Newton loop compiled, for dense designs (numba; Gram products through BLAS).

Same algorithm, formulas and stopping rule as :mod:`bayesdrop.solvers.newton` -- per
example the terms of ``J`` and their first and second derivatives in ``(m, s)``
(MATH.md section 3; the closed forms of :mod:`bayesdrop.model.losses`), the Hessian of
:mod:`bayesdrop.linalg.hessian` assembled block by block as signed squares
(:func:`bayesdrop.linalg.kernels.dense_hessian_split` + BLAS ``dsyrk``, no ``N x D``
temporaries), a Cholesky factor that is reused close to the optimum, and a backtracking
Armijo line search -- with no Python between the steps, so that a small problem costs a
few BLAS calls per step rather than dozens of numpy calls.
The conformance suite runs it against L-BFGS-B on ``J`` like every other solver.

``lp`` is the loss's parameter tuple (:attr:`bayesdrop.model.losses.Loss.kernel_params`):
the loop calls the loss's kernels (:mod:`bayesdrop.model.losses.kernels`) and is compiled
for that loss alone.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .._blas import padded, syrk_rows, syrk_work
from ..linalg.kernels import dense_hessian_split
from ..model.losses.kernels import mean, term

__all__ = ["irls_start", "newton_dense"]

#: rows per block of the Hessian's stacked Gram product (see
#: :data:`bayesdrop.linalg.hessian.HESSIAN_BLOCK`)
_HESSIAN_ROWS = 2048


@numba.njit(cache=True, nogil=True)
def _objective(lp, X, M, scale, fi, y, sw, theta, m, s):
    """``J(theta)``; fills the scores ``m`` and ``s``."""
    n, D = X.shape
    _scores(X, M, scale, fi, theta, m, s)
    total = 0.0
    for d in range(D):
        total += theta[d] * theta[d]
    for i in range(n):
        total += sw[i] * term(lp, m[i], s[i], y[i], np.int64(0))[0]
    return total


@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _scores(X, M, scale, fi, theta, m, s):
    """The scores ``m = Xbar theta`` and ``s = scale M w^2``, row by row. Each row's two
    sums may be reassociated (SIMD lanes, fused multiply-adds: ``fastmath`` with only
    ``reassoc`` and ``contract``, so inf and NaN propagate as usual): they differ from
    the left-to-right sums by rounding only, as BLAS ``gemv``'s do, and take about half
    the time of the strict order on a few dozen features (285 x 30: 11 -> 3 us)."""
    n, D = X.shape
    b = theta[D] if fi else 0.0
    for i in range(n):
        mi = 0.0
        si = 0.0
        for d in range(D):
            wd = theta[d]
            mi += X[i, d] * wd
            si += M[i, d] * (wd * wd)
        m[i] = mi + b
        s[i] = si * scale


@numba.njit(cache=True, nogil=True)
def _irls_map(lp, Xb, M, scale, y, sw, m, s, p):
    """One IRLS map from the scores ``(m, s)``: the expected system weights (the loss's
    ``mean`` kernel), then ``A theta = r`` by Cholesky (MATH.md 3-4)."""
    n, D = M.shape
    rho = np.empty(n)
    t = np.empty(n)
    for i in range(n):
        _, _, rho[i], t[i] = mean(lp, lp.C * sw[i], m[i], s[i], y[i])
    A = Xb.T @ (Xb * rho.reshape(n, 1))
    nd = scale * (M.T @ rho)
    for d in range(D):
        A[d, d] += 2.0 + nd[d]
    # A is positive definite (2 I' + a weighted Gram with rho > 0); numba's
    # np.linalg.solve (LU) took 2.2 s of the first fit's compilation, its Cholesky 0.4 s
    return _solve(np.linalg.cholesky(A), -(Xb.T @ t))


@numba.njit(cache=True, nogil=True)
def irls_start(lp, X, M, scale, fi, y, sw, theta):
    """One IRLS map from ``theta`` (:func:`_irls_map`), or ``theta`` itself if the map
    raises ``J``: the start of Newton on a non-smooth loss from zero, where every score
    variance is 0 and the Hessian singular (an IRLS map never raises ``J``, MM)."""
    n, D = X.shape
    p = theta.shape[0]
    m, s, m_c, s_c = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    J = _objective(lp, X, M, scale, fi, y, sw, theta, m, s)
    Xb = np.empty((n, p))
    for i in range(n):
        for d in range(D):
            Xb[i, d] = X[i, d]
        if fi:
            Xb[i, D] = 1.0
    cand = _irls_map(lp, Xb, M, scale, y, sw, m, s, p)
    if _objective(lp, X, M, scale, fi, y, sw, cand, m_c, s_c) <= J:
        return cand
    return theta.copy()


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
def _factor(X, M, scale, fi, theta, d_mm, d_ms, d_ss, nd, ridge, P, Q, Z, Y, syrk, work):
    """Lower Cholesky factor of ``H``: the rows' share as ``P^T P - Q^T Q + Z^T Y`` block
    by block (:func:`bayesdrop.linalg.kernels.dense_hessian_split`: two ``dsyrk`` per
    block, and a product for strongly indefinite examples), then ``2 I'`` and the noise
    diagonal ``nd``; a relative ridge if ``H`` is singular to working precision."""
    n, D = X.shape
    p = Z.shape[1]
    pp = P.shape[1]  # P and Q: zero columns p..pp-1 (a faster syrk, _blas.SYRK_PAD)
    B = P.shape[0] // 2
    Hp = np.zeros((pp, pp))
    Hq = np.zeros((pp, pp))
    Hz = np.zeros((p, p))
    two_w = 2.0 * scale * theta[:D]
    for start in range(0, n, B):
        nb = min(start + B, n) - start
        n_p, n_q, n_z = dense_hessian_split(X, M, two_w, fi, d_mm, d_ms, d_ss, start, nb,
                                            P, Q, Z, Y)
        if n_p:
            syrk_rows(syrk, P, n_p, Hp, work)
        if n_q:
            syrk_rows(syrk, Q, n_q, Hq, work)
        if n_z:
            Hz += Z[:n_z].T @ Y[:n_z]
    H = np.empty((p, p))
    for a in range(p):  # the upper triangles of Hp, Hq hold their sums (syrk_rows)
        for c in range(a, p):
            v = Hp[a, c] - Hq[a, c] + 0.5 * (Hz[a, c] + Hz[c, a])
            H[a, c] = v
            H[c, a] = v
    for d in range(D):
        H[d, d] += 2.0 + nd[d]
    hmax = 1.0
    for a in range(p):
        hmax = max(hmax, H[a, a])
    try:
        L = np.linalg.cholesky(H)
    except Exception:  # noqa: BLE001 - numba raises LinAlgError
        for a in range(p):
            H[a, a] += ridge * hmax
        L = np.linalg.cholesky(H)
    return L


@numba.njit(cache=True, nogil=True)
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


@numba.njit(cache=True, nogil=True)
def _qn_solve(L, g, S, Yq, rho, k):
    """``-B^{-1} g`` for ``B = L L^T`` updated by BFGS with the ``k`` pairs ``S[i]``,
    ``Yq[i]``, ``rho[i] = 1 / S[i].Yq[i]`` (oldest first): the two-loop recursion of
    :func:`bayesdrop.solvers.newton._qn_direction`, in the same order of operations."""
    p = g.shape[0]
    q = g.copy()
    alphas = np.empty(k)
    for i in range(k - 1, -1, -1):
        a = 0.0
        for c in range(p):
            a += S[i, c] * q[c]
        a *= rho[i]
        for c in range(p):
            q[c] -= a * Yq[i, c]
        alphas[i] = a
    r = _solve(L, q)  # -H^{-1} q
    for c in range(p):
        r[c] = -r[c]
    for i in range(k):
        b = 0.0
        for c in range(p):
            b += Yq[i, c] * r[c]
        b = alphas[i] - rho[i] * b
        for c in range(p):
            r[c] += b * S[i, c]
    for c in range(p):
        r[c] = -r[c]
    return r


@numba.njit(cache=True, nogil=True)
def newton_dense(lp, X, M, scale, fi, y, sw, theta0, tol, max_iter, armijo, min_step,
                 ridge, reuse, contraction, chord_stop, expand, expand_ratio,
                 syrk, qn_memory):
    """Newton's method on ``J`` for dense ``X`` and ``V = scale * M``; example ``i``'s
    term is scaled by ``sw[i]`` (its sample weight).

    ``reuse``, ``contraction``, ``chord_stop``: when the Cholesky factor of ``H``
    is kept for the next direction, and when such a step ends the iteration
    (:data:`bayesdrop.solvers.newton.REUSE_DECREMENT`,
    :data:`bayesdrop.solvers.newton.CONTRACTION`, :data:`bayesdrop.solvers.newton.CHORD_STOP`);
    ``expand``, ``expand_ratio``: doublings of a far step, tried when its decrease of ``J``
    exceeds ``expand_ratio * decrement / 2`` (:data:`bayesdrop.solvers.newton.EXPAND_STEPS`,
    :data:`bayesdrop.solvers.newton.EXPAND_RATIO`). ``syrk``: the address of BLAS
    ``dsyrk`` (:func:`bayesdrop._blas.dsyrk_address`). ``qn_memory``: BFGS pairs
    that update a kept factor (:data:`bayesdrop.solvers.newton.QN_MEMORY`). Returns
    ``(theta, history, n_iter, status, grad, n_factors, L)`` (``L``: the last Cholesky
    factor of ``H``, lower triangular, zeros if none); ``status`` 1 converged, 0 not,
    2 the line search could not decrease ``J`` (rounding level reached), -1 a non-finite
    direction, -2 ``J`` not finite at ``theta0``.
    """
    n, D = X.shape
    p = D + (1 if fi else 0)
    theta = theta0.copy()
    m = np.empty(n)
    s = np.empty(n)
    m_c = np.empty(n)
    s_c = np.empty(n)
    d_m = np.empty(n)
    d_s = np.empty(n)
    d_mm = np.empty(n)
    d_ms = np.empty(n)
    d_ss = np.empty(n)
    history = np.empty(max_iter + 1)
    B = min(_HESSIAN_ROWS, n)
    P = np.empty((2 * B, padded(p)))
    Q = np.empty((2 * B, padded(p)))
    P[:, p:] = 0.0
    Q[:, p:] = 0.0
    Z = np.empty((2 * B, p))
    Y = np.empty((2 * B, p))
    work = syrk_work()
    J = _objective(lp, X, M, scale, fi, y, sw, theta, m, s)
    if not np.isfinite(J):
        history[0] = J
        return theta, history[:1], 0, -2, np.full(p, np.nan), 0, np.zeros((p, p))
    history[0] = J
    status = 0
    it = 0
    n_factors = 0
    L = np.zeros((p, p))
    fresh_next = True  # the next direction needs a new factor
    order = 2  # derivatives known at theta: 1 first, 2 also second
    _derivatives(lp, m, s, y, sw, np.int64(2), d_m, d_s, d_mm, d_ms, d_ss)
    g = _gradient(X, M, scale, fi, d_m, d_s, theta)
    prev_dec = np.inf
    S = np.empty((max(qn_memory, 1), p))  # BFGS pairs since the last factor, oldest first
    Yq = np.empty((max(qn_memory, 1), p))
    rho = np.empty(max(qn_memory, 1))
    n_pairs = np.int64(0)
    cand = np.empty(p)
    cand_e = np.empty(p)
    m_e = np.empty(n)
    s_e = np.empty(n)
    while it < max_iter:
        it += 1
        fresh = fresh_next
        for attempt in range(2):
            if fresh:
                if order < 2:
                    _derivatives(lp, m, s, y, sw, np.int64(2), d_m, d_s, d_mm, d_ms, d_ss)
                    order = 2
                nd = 2.0 * scale * (M.T @ d_s)
                L = _factor(X, M, scale, fi, theta, d_mm, d_ms, d_ss, nd, ridge, P, Q, Z,
                            Y, syrk, work)
                n_factors += 1
                n_pairs = np.int64(0)
                step = _solve(L, g)
            else:
                step = _qn_solve(L, g, S, Yq, rho, n_pairs)
            decrement = 0.0
            for a in range(p):
                decrement -= g[a] * step[a]
            # a kept factor must shrink the decrement fast enough, else a new one
            if fresh or (np.isfinite(decrement) and decrement <= contraction * prev_dec):
                break
            fresh = True
        if not np.isfinite(decrement):
            status = -1
            break
        if decrement <= 0.0:
            status = 1
            it -= 1
            break
        # backtracking line search
        t = 1.0
        while True:
            for a in range(p):
                cand[a] = theta[a] + t * step[a]
            J_c = _objective(lp, X, M, scale, fi, y, sw, cand, m_c, s_c)
            if J_c <= J - armijo * t * decrement or t < min_step:
                break
            t *= 0.5
        if (t == 1.0 and decrement > reuse * max(abs(J), 1.0)
                and J - J_c > expand_ratio * 0.5 * decrement):
            # far from the optimum: longer steps while J keeps falling
            for _ in range(expand):
                for a in range(p):
                    cand_e[a] = theta[a] + 2.0 * t * step[a]
                J_e = _objective(lp, X, M, scale, fi, y, sw, cand_e, m_e, s_e)
                if not J_e < J_c:
                    break
                t *= 2.0
                J_c = J_e
                cand, cand_e = cand_e, cand
                m_c, m_e = m_e, m_c
                s_c, s_e = s_e, s_c
        if t < min_step and J_c > J:
            if not fresh:  # a kept factor failed: the same step with a new one
                fresh_next = True
                it -= 1
                continue
            status = 1 if decrement <= 2.0 * tol * max(abs(J), 1.0) else 2
            it -= 1
            break
        theta[:] = cand
        m[:] = m_c
        s[:] = s_c
        J = J_c
        history[it] = J
        prev_dec = decrement
        fresh_next = not (t == 1.0 and decrement <= reuse * max(abs(J), 1.0))
        order = 2 if fresh_next else 1
        _derivatives(lp, m, s, y, sw, order, d_m, d_s, d_mm, d_ms, d_ss)
        g_new = _gradient(X, M, scale, fi, d_m, d_s, theta)
        if qn_memory > 0 and not fresh_next:  # a BFGS pair (newton._add_pair)
            sy = 0.0
            ss = 0.0
            yy = 0.0
            for a in range(p):
                sk = t * step[a]
                yk = g_new[a] - g[a]
                sy += sk * yk
                ss += sk * sk
                yy += yk * yk
            if sy > 1e-12 * math.sqrt(ss) * math.sqrt(yy):
                if n_pairs == qn_memory:  # drop the oldest
                    for i in range(1, n_pairs):
                        S[i - 1] = S[i]
                        Yq[i - 1] = Yq[i]
                        rho[i - 1] = rho[i]
                    n_pairs -= 1
                for a in range(p):
                    S[n_pairs, a] = t * step[a]
                    Yq[n_pairs, a] = g_new[a] - g[a]
                rho[n_pairs] = 1.0 / sy
                n_pairs += 1
        g = g_new
        if decrement <= 2.0 * tol * (1.0 if fresh else chord_stop) * max(abs(J), 1.0):
            status = 1
            break
    return theta, history[: it + 1], it, status, g, n_factors, L


@numba.njit(cache=True, nogil=True)
def _gradient(X, M, scale, fi, d_m, d_s, theta):
    """``Xbar^T d_m + (2 w + 2 scale (M^T d_s) w)`` (no copy of ``X``)."""
    D = X.shape[1]
    p = D + (1 if fi else 0)
    g = np.empty(p)
    g[:D] = X.T @ d_m
    if fi:
        g[D] = np.sum(d_m)
    nd = 2.0 * scale * (M.T @ d_s)
    for d in range(D):
        g[d] += 2.0 * theta[d] + nd[d] * theta[d]
    return g
