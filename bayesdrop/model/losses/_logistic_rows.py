"""The expected logistic loss's per-example terms, many rows at a time.

The terms (:class:`bayesdrop.model.losses.LogisticLoss`, MATH.md section 3) need three
transcendental functions of ``psi_n = sqrt(m_n^2 + s_n)``: ``log1p(exp(-psi))`` for the
value and ``tanh(psi / 2)`` for the derivatives. numba calls the C library's scalar
functions (``exp`` 2.8, ``log1p`` 5.8, ``tanh`` 8.4 ns per call on this project's 2-core
AVX-512 machine), numpy's ufuncs their SIMD loops (0.5-0.7 ns per element). So
:func:`logistic_rows` takes the three functions from numpy, a block of
:data:`BLOCK_ROWS` rows at a time (the temporaries stay in cache), and does the
arithmetic in one compiled pass (:func:`logistic_from`, the same code the scalar path of
:mod:`bayesdrop.solvers.newton.compiled` runs). The two paths agree to a few units in the
last place (the SIMD functions are within 4 ulp of the correctly rounded result).
"""

from __future__ import annotations

import math

import numpy as np

from ... import _jit

__all__ = ["BLOCK_ROWS", "SIMD_MIN_ROWS", "logistic_from", "logistic_rows"]

#: Below this ``psi`` the logistic weight ``tanh(psi/2)/psi`` uses its Taylor series.
PSI_SERIES = 1e-4
#: Below this ``psi`` the curvature ``lambda'(psi) / psi`` uses its Taylor series (the
#: closed form cancels to relative error ``eps / psi^2``; the series' first omitted term
#: is ``psi^6`` relative).
KAPPA_SERIES = 1e-2
#: rows per block of :func:`logistic_rows` (three temporaries of 64 KiB)
BLOCK_ROWS = 8192
#: from this many rows on the callers use :func:`logistic_rows` (measured: faster than
#: the numpy formulas from 16 rows on, 4.4 against 17.4 us at 128 rows with derivatives,
#: and than the scalar compiled pass from a few hundred rows on)
SIMD_MIN_ROWS = 16


@_jit.njit(cache=True, nogil=True, inline="always")
def logistic_from(h, m, s, y, psi, l1, th, value_too, derivs):
    """One example's expected logistic term ``h [log(2 cosh(psi/2)) - y m / 2]`` (up to
    the constant ``h log 2``) from ``psi = sqrt(m^2 + s)``, ``l1 = log1p(exp(-psi))``
    (used if ``value_too``) and ``th = tanh(psi / 2)`` (used if ``derivs >= 1``).

    Returns ``(value, d_m, d_s, d_mm, d_ms, d_ss)`` (zeros where not asked for)::

        value = h [(psi - |m|) / 2 + l1 + max(0, -y m)],  psi - |m| = s / (psi + |m|)
        lam = h tanh(psi/2) / (2 psi),   d_m = lam m - h y / 2,   d_s = lam / 2
        kappa = lam'(psi) / psi,  d_mm = lam + m^2 kappa,  d_ms = m kappa / 2,
        d_ss = kappa / 4

    with Taylor series below :data:`PSI_SERIES` (``lam``) and :data:`KAPPA_SERIES`
    (``kappa``), and ``d_mm`` floored at 0.
    """
    value = 0.0
    if value_too:
        denom = psi + abs(m)
        excess = s / denom if denom > 0.0 else 0.0
        value = h * (0.5 * excess + l1 + max(-y * m, 0.0))
    if derivs == 0:
        return value, 0.0, 0.0, 0.0, 0.0, 0.0
    if psi < PSI_SERIES:
        lam = h / 4.0 * (1.0 - psi * psi / 12.0)
    else:
        lam = h / (2.0 * psi) * th
    if derivs == 1:
        return value, lam * m - 0.5 * h * y, 0.5 * lam, 0.0, 0.0, 0.0
    if psi < KAPPA_SERIES:
        p2 = psi * psi
        kappa = 0.25 * h * (-1.0 / 6.0 + p2 / 30.0 - 17.0 * p2 * p2 / 3360.0)
    else:
        # 1 / cosh^2(psi/2) = (1 - th)(1 + th): its rounding error is below 1e-15 of
        # kappa wherever the term matters
        kappa = 0.5 * h * (0.5 * (1.0 - th) * (1.0 + th) / (psi * psi)
                           - th / (psi * psi * psi))
    dmm = max(lam + m * m * kappa, 0.0)
    return value, lam * m - 0.5 * h * y, 0.5 * lam, dmm, 0.5 * m * kappa, 0.25 * kappa


@_jit.njit(cache=True, nogil=True)
def _psi(m, s, psi, work):
    """``psi = sqrt(m^2 + s)`` and ``work = -psi`` (the argument of ``exp``)."""
    for i in range(m.shape[0]):
        p = math.sqrt(m[i] * m[i] + s[i])
        psi[i] = p
        work[i] = -p


@_jit.njit(cache=True, nogil=True)
def _block(h, m, s, y, sw, psi, l1, th, order, start, out):
    """Rows ``start + i`` of ``out`` (``(1 + 2 [order >= 1] + 3 [order == 2], n)``): the
    weighted value and derivatives by :func:`logistic_from`."""
    weighted = sw.shape[0] > 0
    for i in range(psi.shape[0]):
        r = start + i
        w = sw[r] if weighted else 1.0
        v = logistic_from(h, m[r], s[r], y[r], psi[i], l1[i], th[i], True, order)
        out[0, r] = w * v[0]
        if order >= 1:
            out[1, r] = w * v[1]
            out[2, r] = w * v[2]
        if order == 2:
            out[3, r] = w * v[3]
            out[4, r] = w * v[4]
            out[5, r] = w * v[5]


def logistic_rows(h, m, s, y, sw=None, order=1):
    """Every example's expected logistic term and its derivatives in ``(m, s)``.

    ``term_n = sw_n h [(psi_n - |m_n|) / 2 + log1p(exp(-psi_n)) + max(0, -y_n m_n)]``
    with ``psi_n = sqrt(m_n^2 + s_n)`` and the derivatives of :func:`logistic_from`;
    the transcendental functions by numpy's (SIMD) ufuncs, :data:`BLOCK_ROWS` rows at a
    time, the rest compiled.

    Parameters
    ----------
    h : float
        The Polya-Gamma shape ``2C``.
    m, s, y : ndarray of shape (n,)
        Mean scores, score variances (``>= 0``), labels in ``{-1, +1}`` (float64).
    sw : ndarray of shape (n,) or None
        Per-example factors (sample weights); None for all 1.
    order : {0, 1, 2}
        0: the value; 1: also ``d_m, d_s``; 2: also ``d_mm, d_ms, d_ss``.

    Returns
    -------
    ndarray of shape (1, n), (3, n) or (6, n)
        The rows ``value, d_m, d_s[, d_mm, d_ms, d_ss]``.

    Examples
    --------
    >>> m, s, y = np.array([0.0, 1.5, -2.0]), np.array([0.0, 0.3, 1.0]), np.ones(3)
    >>> out = logistic_rows(1.0, m, s, y, order=1)
    >>> psi = np.sqrt(m * m + s)  # h = 1: value log(2 cosh(psi / 2)) - y m / 2
    >>> bool(np.allclose(out[0], np.log(2 * np.cosh(psi / 2)) - y * m / 2))
    True
    """
    m = np.ascontiguousarray(m, dtype=np.float64)
    s = np.ascontiguousarray(s, dtype=np.float64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    sw = np.empty(0) if sw is None else np.ascontiguousarray(sw, dtype=np.float64)
    n = m.shape[0]
    out = np.empty((1 if order == 0 else 3 if order == 1 else 6, n))
    k = min(n, BLOCK_ROWS)
    psi, l1, th = np.empty(k), np.empty(k), np.empty(k)
    for start in range(0, n, BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, n)
        b = stop - start
        p, e, t = psi[:b], l1[:b], th[:b]
        _psi(m[start:stop], s[start:stop], p, e)
        np.exp(e, out=e)
        np.log1p(e, out=e)
        if order:
            np.multiply(p, 0.5, out=t)
            np.tanh(t, out=t)
        _block(float(h), m, s, y, sw, p, e, t, order, start, out)
    return out
