"""The Newton steps of :func:`bayesdrop.solvers.bare.bare_newton` compiled, for dense
designs (numba, ``nogil``): the scores, the Huber model's per-example derivatives, its
gradient, the Hessian (:func:`bayesdrop.solvers.newton.compiled.hessian_rows`, float32
products far from the end where the design is large) and its Cholesky factor, and the
backtracking line search, with no Python between the steps. The bound itself
(:func:`bayesdrop.solvers.bare._least_bound`) stays in Python: it is computed once or
twice per certificate, near the end.

The steps are those of the Python loop of :func:`~bayesdrop.solvers.bare.bare_newton`
(the same tests, the same order), computed with the compiled Newton loop's kernels
(their sums may differ from numpy's in rounding only). Measured on digits 8-vs-rest
(hinge, dropout 0.2, ``C = 0.1``; 9 steps): 11 ms of the Python loop, most of it
numpy's calls on 1797-long arrays between 0.5 ms Hessians.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from .._blas import cholesky_lower
from .newton import loop
from .newton.compiled import _gradient, _scores, _solve, float64_products, hessian_rows

__all__ = ["NEAR", "RULED_OUT", "STOPPED", "bare_steps", "kept_state"]

#: :func:`bare_steps`' exits: ``h < 0`` at the current direction (the bare model is not
#: the optimum); near the end (or at the last step): the caller computes the bound;
#: no descent step (no Cholesky factor, no descent, the line search failed)
RULED_OUT, NEAR, STOPPED = 0, 1, 2


@_jit.njit(cache=True, nogil=True)
def _huber_model(slope, half, m, s, derivs, d_m, d_s, d_mm, d_ms, d_ss):
    """``(h, F)`` at the direction whose scores are ``(m, s)``: ``h = sum_n slope_n m_n +
    half_n r_n`` and its Huber smoothing ``F`` (``r_n = sqrt(m_n^2 + s_n)``; ``half_n``
    zero off the kinks), and with ``derivs`` ``F``'s per-example derivatives in
    ``(m, s)`` (those of :func:`bayesdrop.solvers.bare._huber_gradient` and
    :func:`~bayesdrop.solvers.bare._huber_curvature`)."""
    h = 0.0
    F = 0.0
    for i in range(m.shape[0]):
        lin = slope[i] * m[i]
        h += lin
        F += lin
        a = half[i]
        if derivs:
            d_m[i] = slope[i]
            d_s[i] = 0.0
            d_mm[i] = 0.0
            d_ms[i] = 0.0
            d_ss[i] = 0.0
        if a == 0.0:
            continue
        r = math.sqrt(m[i] * m[i] + s[i])
        h += a * r
        F += a * r if r >= 1.0 else a * 0.5 * (r * r + 1.0)
        if derivs:
            big = max(r, 1.0)
            d_m[i] += a * m[i] / big
            d_s[i] = 0.5 * a / big
            if r >= 1.0:
                r3 = big * big * big
                d_mm[i] = a * s[i] / r3
                d_ms[i] = -0.5 * a * m[i] / r3
                d_ss[i] = -0.25 * a / r3
            else:
                d_mm[i] = a
    return h, F


@_jit.njit(cache=True, nogil=True)
def bare_steps(X, M, scale, fi, slope, half, phi0, k_first, max_iter, near_at, resume,
               ridge, allowance, armijo, min_step, contraction, gram, potrf, sgram, ws, qn):
    """Newton's steps on the Huber model ``F`` of :func:`bayesdrop.solvers.bare.bare_newton`
    from ``phi0``, as that function's iterations ``k_first .. max_iter``.

    Each iteration ``k``: exit ``RULED_OUT`` if ``h < -allowance``; the gradient ``g`` of
    ``F`` (and the last step's BFGS pair); exit ``NEAR`` if ``||g_w||^2 / 4 <= near_at``
    or ``k = max_iter`` (the caller computes the bound there; with ``resume`` the first
    iteration skips both tests: it resumes one that returned ``NEAR``); the direction:
    the kept factor's, BFGS-updated (:func:`bayesdrop.solvers.newton.loop.qn_direction`),
    if its decrement is at most ``contraction`` times the last step's, else the
    Hessian's (float32 products where ``sgram`` is non-zero and the iteration is not
    near; no penalty) with the relative ridge ``ridge``, its Cholesky factor kept;
    backtracking on ``F`` (sufficient decrease ``armijo``, shortest step ``min_step``;
    where the kept factor's step fails, the Hessian's). Exit ``STOPPED`` where there is
    no factor, no descent or no step.

    ``X`` (n x D, C-ordered) and ``V = scale * M`` as :func:`bayesdrop.solvers.newton.compiled.dense_steps`
    takes them; ``slope`` and ``half`` per example (``half`` zero off the kinks); ``ws``
    from :func:`bayesdrop.solvers.newton.compiled.hessian_workspace`; ``qn`` the kept
    factor's state, carried from run to run of one certificate (:func:`kept_state`).
    Returns ``(phi, k, status)``: the direction reached and the iteration of the exit.
    """
    n, D = X.shape
    p = phi0.shape[0]
    phi = phi0.copy()
    cand = np.empty(p)
    m, s, m_t, s_t = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    d_m, d_s, d_mm, d_ms, d_ss = (np.empty(n), np.empty(n), np.empty(n), np.empty(n),
                                  np.empty(n))
    nd = np.zeros(D)
    kept, S, Yq, rho, g_last, last, state = qn
    L = kept.L
    memory = rho.shape[0]
    P, Q, Z, Y, work, single = ws
    exact = float64_products(single)
    _scores(X, M, scale, fi, phi, m, s)
    h, F = _huber_model(slope, half, m, s, False, d_m, d_s, d_mm, d_ms, d_ss)
    for k in range(k_first, max_iter + 1):
        again = resume and k == k_first
        if not again and h < -allowance:
            return phi, k, RULED_OUT
        _huber_model(slope, half, m, s, True, d_m, d_s, d_mm, d_ms, d_ss)
        g = _gradient(X, M, scale, fi, d_m, d_s, phi, nd, 0.0)
        if state[2] == 1.0:  # the last step's pair, for the kept factor's BFGS update
            for a in range(p):
                g_last[a] = g[a] - g_last[a]
            state[0] = loop.add_pair(S, Yq, rho, int(state[0]), last, g_last, memory)
            state[2] = 0.0
        gw = 0.0
        for d in range(D):
            gw += g[d] * g[d]
        near = 0.25 * gw <= near_at
        if not again and (near or k == max_iter):
            return phi, k, NEAR
        fresh = state[1] == 0.0
        while True:
            if fresh:
                hessian_rows(X, M, scale, fi, phi, d_mm, d_ms, d_ss, P, Q, Z, Y, gram,
                             work, L, exact if near or sgram[0] == 0 else single)
                for d in range(D):
                    L[d, d] += nd[d]
                hmax = 1.0
                for a in range(p):
                    hmax = max(hmax, L[a, a])
                for a in range(p):
                    L[a, a] += ridge * hmax
                state[1] = 0.0
                if cholesky_lower(potrf, L) != 0:
                    return phi, k, STOPPED
                state[0] = 0.0
                state[1] = 1.0
                step = _solve(L, g)
            else:  # the kept factor, BFGS-updated, while its decrements contract
                step = loop.qn_direction(kept, g, S, Yq, rho, int(state[0]))
            decrease = 0.0
            for a in range(p):
                decrease += g[a] * step[a]
            if fresh and not decrease < 0.0:
                return phi, k, STOPPED
            if not fresh and not (decrease < 0.0 and -decrease <= contraction * state[3]):
                fresh = True
                continue
            t = 1.0
            while True:
                for a in range(p):
                    cand[a] = phi[a] + t * step[a]
                _scores(X, M, scale, fi, cand, m_t, s_t)
                h_t, F_t = _huber_model(slope, half, m_t, s_t, False, d_m, d_s, d_mm,
                                        d_ms, d_ss)
                if F_t <= F + armijo * t * decrease or t < min_step:
                    break
                t *= 0.5
            if t >= min_step:
                break
            if fresh:
                return phi, k, STOPPED
            fresh = True  # the kept factor's direction failed: a new Hessian
        state[3] = -decrease
        state[2] = 1.0
        for a in range(p):
            last[a] = t * step[a]
            g_last[a] = g[a]
        phi[:] = cand
        m, m_t = m_t, m
        s, s_t = s_t, s
        h, F = h_t, F_t
    return phi, max_iter, STOPPED


def kept_state(p, memory):
    """The kept factor's state of :func:`bare_steps` for a certificate in ``p``
    parameters: ``(KeptFactor(L), S, Yq, rho, g_last, last, state)`` -- the factor, the
    ``memory`` BFGS pairs, the last step's gradient and step, and ``state = (pairs, a
    factor is kept, a step's pair is due, the last step's decrement)``."""
    from .newton.loop import KeptFactor

    return (KeptFactor(np.empty((p, p))), np.empty((memory, p)), np.empty((memory, p)),
            np.empty(memory), np.empty(p), np.empty(p), np.array([0.0, 0.0, 0.0, np.inf]))
