"""The compiled event loop of :mod:`bayesdrop.solvers.homotopy` (numba; compiled on the
first path that follows, cached on disk).

One event costs ``O(N D)`` (the scores' slope in ``t``; the scores move along each
segment), ``O(k D)`` (the kink rows' Gram row and products) and ``O(k^3)`` (the bordered
system), ``k = |E| <= n_params``."""

from __future__ import annotations

import numpy as np

from .. import _jit

__all__ = ["walk", "OK", "DEGENERATE", "SINGULAR", "TOO_MANY", "BAD_START"]

#: statuses of :func:`walk`
OK, DEGENERATE, SINGULAR, TOO_MANY, BAD_START = 0, 1, 2, 3, 4


@_jit.njit(cache=True, nogil=True)
def _solve2(A, B, m):
    """Solve ``A[:m, :m] Z = B[:m, :2]`` in place (``Z`` in ``B``) by Gaussian elimination
    with partial pivoting; False if a pivot is zero. ``A`` is overwritten."""
    for col in range(m):
        piv = col
        big = abs(A[col, col])
        for r in range(col + 1, m):
            if abs(A[r, col]) > big:
                big = abs(A[r, col])
                piv = r
        if big == 0.0:
            return False
        if piv != col:
            for c in range(m):
                A[col, c], A[piv, c] = A[piv, c], A[col, c]
            B[col, 0], B[piv, 0] = B[piv, 0], B[col, 0]
            B[col, 1], B[piv, 1] = B[piv, 1], B[col, 1]
        inv = 1.0 / A[col, col]
        for r in range(col + 1, m):
            f = A[r, col] * inv
            if f != 0.0:
                for c in range(col + 1, m):
                    A[r, c] -= f * A[col, c]
                B[r, 0] -= f * B[col, 0]
                B[r, 1] -= f * B[col, 1]
    for col in range(m - 1, -1, -1):
        s0 = B[col, 0]
        s1 = B[col, 1]
        for c in range(col + 1, m):
            s0 -= A[col, c] * B[c, 0]
            s1 -= A[col, c] * B[c, 1]
        B[col, 0] = s0 / A[col, col]
        B[col, 1] = s1 / A[col, col]
    return True


@_jit.njit(cache=True, nogil=True)
def walk(X, fit_intercept, pos, slopes, on, kink, piece, theta0, t0, max_events, a):
    """Follow the solution path from ``t0`` (``theta0`` optimal there) to ``t = 1``.

    ``on``, ``kink``, ``piece`` (the assignment read from ``theta0``) are updated in
    place. Returns ``(status, events, theta)``; ``theta`` is the end point (``status``
    :data:`OK`), and ``a`` (length ``N``) then holds each example's derivative of its
    term there: its piece's slope, or on a kink its multiplier (``2 w + Xbar_w^T a = 0``,
    ``sum_n a_n = 0`` with an intercept)."""
    n, D = X.shape
    n_kinks = pos.shape[1]
    fi = 1 if fit_intercept else 0
    p = D + fi
    theta = np.zeros(p)
    # f = Xbar_F^T s_F, the examples off their kinks
    f_w = np.zeros(D)
    f_b = 0.0
    for i in range(n):
        if not on[i]:
            s = slopes[i, piece[i]]
            for d in range(D):
                f_w[d] += s * X[i, d]
            f_b += s
    # the kink set E as a list with its Gram matrix X_E X_E^T
    E = np.empty(p, dtype=np.int64)
    G = np.zeros((p, p))
    k = 0
    for i in range(n):
        if on[i]:
            if k == p:
                return DEGENERATE, 0, theta
            E[k] = i
            k += 1
    for e in range(k):
        for e2 in range(e + 1):
            s = 0.0
            for d in range(D):
                s += X[E[e], d] * X[E[e2], d]
            G[e, e2] = s
            G[e2, e] = s
    K = np.empty((p + 1, p + 1))
    K0 = np.empty((p + 1, p + 1))
    B = np.empty((p + 1, 2))
    B0 = np.empty((p + 1, 2))
    w0 = np.empty(D)
    w1 = np.empty(D)
    c = np.empty(n)
    # the scores where the walk stands, moved along each segment by its slope c
    m = np.empty(n)
    for i in range(n):
        s = theta0[D] if fit_intercept else 0.0
        for d in range(D):
            s += X[i, d] * theta0[d]
        m[i] = s
    t = t0
    direction = 1.0 if t0 < 1.0 else -1.0
    scale_s = 1.0
    for i in range(n):
        for j in range(n_kinks + 1):
            scale_s = max(scale_s, abs(slopes[i, j]))
    tol_u = 1e-9 * scale_s
    tol_rate = 1e-12 * scale_s
    events = 0
    last = -1
    b_now = theta0[D] if fit_intercept else 0.0  # the intercept where the walk stands
    while True:
        # the bordered system: [[G / 2, -1], [-1^T, 0]] [u; b] = [-p_E - t X_E f_w / 2; t f_b]
        size = k + fi
        for e in range(k):
            i = E[e]
            for e2 in range(k):
                K[e, e2] = 0.5 * G[e, e2]
            xf = 0.0
            for d in range(D):
                xf += X[i, d] * f_w[d]
            B[e, 0] = -pos[i, kink[i]]
            B[e, 1] = -0.5 * xf
            if fi:
                K[e, k] = -1.0
                K[k, e] = -1.0
        if fi:
            K[k, k] = 0.0
            B[k, 0] = 0.0
            B[k, 1] = f_b
        for r in range(size):
            B0[r, 0] = B[r, 0]
            B0[r, 1] = B[r, 1]
            for r2 in range(size):
                K0[r, r2] = K[r, r2]
        flat = fi == 1 and k == 0
        if flat:
            # no example on a kink: J is linear in b with slope t f_b, so b is pinned only
            # where f_b = 0 (balanced slopes, e.g. as many examples above the tube as
            # below it); then every b of the flat stretch is optimal: b stays put
            if abs(f_b) > 1e-9 * scale_s:
                return SINGULAR, events, theta
            B[0, 0] = b_now
            B[0, 1] = 0.0
        elif size > 0:
            if not _solve2(K, B, size):
                return SINGULAR, events, theta
            # each equation's residual against the magnitude of its terms (a solve of
            # a system with large entries -- unscaled features -- leaves residuals of a
            # few rounding units of those, far above 1e-9 of the right-hand side)
            for r in range(size):
                r0 = -B0[r, 0]
                r1 = -B0[r, 1]
                m0 = max(abs(B0[r, 0]), 1.0)
                m1 = max(abs(B0[r, 1]), 1.0)
                for r2 in range(size):
                    r0 += K0[r, r2] * B[r2, 0]
                    r1 += K0[r, r2] * B[r2, 1]
                    m0 += abs(K0[r, r2] * B[r2, 0])
                    m1 += abs(K0[r, r2] * B[r2, 1])
                if abs(r0) > 1e-9 * m0 or abs(r1) > 1e-9 * m1:
                    return SINGULAR, events, theta
        # theta(t) = (w0 + t w1, b0 + t b1), u(t) = u0 + t u1 (u0, u1 in B[:k])
        for d in range(D):
            w0[d] = 0.0
            w1[d] = -0.5 * f_w[d]
        for e in range(k):
            i = E[e]
            for d in range(D):
                w0[d] -= 0.5 * B[e, 0] * X[i, d]
                w1[d] -= 0.5 * B[e, 1] * X[i, d]
        b0 = B[k, 0] if fi else 0.0
        b1 = B[k, 1] if fi else 0.0
        if events == 0:  # the assignment read from theta0 must be its KKT point
            big = 1.0
            err = 0.0
            for d in range(D):
                big = max(big, abs(theta0[d]))
                err = max(err, abs(w0[d] + t * w1[d] - theta0[d]))
            if fi:
                big = max(big, abs(theta0[D]))
                err = max(err, abs(b0 + t * b1 - theta0[D]))
            if err > 1e-6 * big:
                return BAD_START, 0, theta
            for e in range(k):
                i = E[e]
                u = B[e, 0] + t * B[e, 1]
                if (u < t * slopes[i, kink[i]] - tol_u * t
                        or u > t * slopes[i, kink[i] + 1] + tol_u * t):
                    return BAD_START, 0, theta
        if t == 1.0:
            break
        # the scores' slope in t, then the nearest event ahead (a step in t)
        for i in range(n):
            s1 = b1
            for d in range(D):
                s1 += X[i, d] * w1[d]
            c[i] = s1
        best = abs(1.0 - t)
        who = -1
        kind = 0
        tiny = 1e-14 * max(abs(t), 1e-300)
        for i in range(n):
            if on[i]:
                continue
            ci = c[i] * direction
            mi = m[i]
            pc = piece[i]
            if ci > 0.0 and pc < n_kinks:
                st = (pos[i, pc] - mi) / ci
            elif ci < 0.0 and pc > 0:
                st = (pos[i, pc - 1] - mi) / ci
            else:
                continue
            if st < 0.0:
                st = 0.0
            if i == last and st <= tiny:
                continue  # the example that just left its kink: not straight back
            if st < best:
                best = st
                who = i
                kind = 1
        for e in range(k):
            i = E[e]
            j = kink[i]
            u = B[e, 0] + t * B[e, 1]
            rate_lo = (B[e, 1] - slopes[i, j]) * direction
            rate_hi = (B[e, 1] - slopes[i, j + 1]) * direction
            # a multiplier that moves with its interval's end (a rate of zero up to
            # rounding: degenerate, e.g. the only kink example of a flat intercept) stays
            if rate_lo < -tol_rate:
                st = max((u - t * slopes[i, j]) / -rate_lo, 0.0)
                if not (i == last and st <= tiny) and st < best:
                    best = st
                    who = i
                    kind = 2
            if rate_hi > tol_rate:
                st = max((t * slopes[i, j + 1] - u) / rate_hi, 0.0)
                if not (i == last and st <= tiny) and st < best:
                    best = st
                    who = i
                    kind = 3
        if who < 0:
            t = 1.0  # no event before the target
            continue
        events += 1
        if events > max_events:
            return TOO_MANY, events, theta
        step = direction * best
        t = t + step
        for i in range(n):
            m[i] += step * c[i]
        last = who
        b_now = b0 + t * b1
        if kind == 1:  # reaches a kink: joins E
            if k == p:
                return DEGENERATE, events, theta
            s = slopes[who, piece[who]]
            for d in range(D):
                f_w[d] -= s * X[who, d]
            f_b -= s
            kink[who] = piece[who] if c[who] * direction > 0.0 else piece[who] - 1
            on[who] = True
            m[who] = pos[who, kink[who]]
            E[k] = who
            for e in range(k + 1):
                s = 0.0
                for d in range(D):
                    s += X[who, d] * X[E[e], d]
                G[k, e] = s
                G[e, k] = s
            k += 1
        else:  # a multiplier at an end of its interval: onto the piece on that side
            new_piece = kink[who] if kind == 2 else kink[who] + 1
            on[who] = False
            piece[who] = new_piece
            s = slopes[who, new_piece]
            for d in range(D):
                f_w[d] += s * X[who, d]
            f_b += s
            pos_e = 0
            for e in range(k):
                if E[e] == who:
                    pos_e = e
            k -= 1
            if pos_e != k:  # the last entry moves into its place
                E[pos_e] = E[k]
                for e in range(k + 1):
                    G[pos_e, e] = G[k, e]
                for e in range(k + 1):
                    G[e, pos_e] = G[e, k]
                G[pos_e, pos_e] = G[k, k]
    for d in range(D):
        theta[d] = w0[d] + w1[d]
    if fi:
        theta[D] = b0 + b1
    for i in range(n):
        if not on[i]:
            a[i] = slopes[i, piece[i]]
    for e in range(k):
        a[E[e]] = B[e, 0] + B[e, 1]
    return OK, events, theta
