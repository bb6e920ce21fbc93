"""Polya-Gamma draws compiled (numba), for the logistic loss's augmentation kernel
(:mod:`bayesdrop.model.losses.logistic`) and the compiled Gibbs sweeps.

``PG(h, z)`` for real ``h > 0``: for ``floor(h) <= 8``, ``floor(h)`` exact ``PG(1, z)``
draws by Devroye's alternating-series method (:func:`pg1`; the algorithm of Polson,
Scott & Windle 2013, as in BayesLogit and ``polyagamma``'s ``devroye``) plus the
fractional part of :func:`bayesdrop.model.augmentation.pg_fraction`; larger shapes whole
by :func:`bayesdrop.model.augmentation.pg_series` (time bounded in ``h``). The numpy
counterpart, :func:`bayesdrop.model.augmentation.polya_gamma`, draws the integer part
with the ``polyagamma`` library's ``devroye`` method; the tests check the two in law.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .augmentation import PG_DEVROYE_MAX, pg_fraction, pg_series
from .pg_inversion import pg_tables

__all__ = ["pg1", "pg_draw", "polya_gamma_compiled"]

#: Devroye's truncation point of the PG(1, z) sampler (Polson, Scott & Windle 2013)
_TRUNC = 0.64
_PI2_8 = math.pi * math.pi / 8.0


@numba.njit(cache=True, nogil=True)
def _log_phi(x):
    """``log Phi(x)``, the standard normal log-CDF (via ``erfc``)."""
    v = 0.5 * math.erfc(-x / math.sqrt(2.0))
    return math.log(v) if v > 0.0 else -np.inf


@numba.njit(cache=True, nogil=True)
def _a_coef(n, x):
    """The n-th term of the alternating series of the J*(1) density at ``x``."""
    k = (n + 0.5) * math.pi
    if x > _TRUNC:
        return k * math.exp(-0.5 * k * k * x)
    if x <= 0.0:
        return 0.0
    return math.exp(-1.5 * (math.log(0.5 * math.pi) + math.log(x)) + math.log(k)
                    - 2.0 * (n + 0.5) * (n + 0.5) / x)


@numba.njit(cache=True, nogil=True)
def _truncated_ig(z, rng):
    """Inverse Gaussian ``IG(1/z, 1)`` truncated to ``(0, TRUNC)``."""
    t = _TRUNC
    if z < 1.0 / t:  # mean beyond the truncation point: from the truncated Levy law
        while True:
            e1 = rng.standard_exponential()
            e2 = rng.standard_exponential()
            while e1 * e1 > 2.0 * e2 / t:
                e1 = rng.standard_exponential()
                e2 = rng.standard_exponential()
            x = t / ((1.0 + t * e1) * (1.0 + t * e1))
            if rng.random() <= math.exp(-0.5 * z * z * x):
                return x
    mu = 1.0 / z
    while True:
        y = rng.standard_normal()
        y = y * y
        x = mu + 0.5 * mu * mu * y - 0.5 * mu * math.sqrt(4.0 * mu * y + (mu * y) ** 2)
        if rng.random() > mu / (mu + x):
            x = mu * mu / x
        if x < t:
            return x


@numba.njit(cache=True, nogil=True)
def pg1(z, rng):
    """One exact draw of ``PG(1, z)`` (Devroye's method; ``PG(1, z) = J*(1, z/2) / 4``)."""
    z = 0.5 * abs(z)
    fz = _PI2_8 + 0.5 * z * z
    t = _TRUNC
    # probability of the exponential proposal on (t, inf) vs the truncated IG on (0, t)
    rt = math.sqrt(1.0 / t)
    x0 = math.log(fz) + fz * t
    xb = x0 - z + _log_phi(rt * (t * z - 1.0))
    xa = x0 + z + _log_phi(-rt * (t * z + 1.0))
    p_exp = 1.0 / (1.0 + 4.0 / math.pi * (math.exp(xb) + math.exp(xa)))
    while True:
        if rng.random() < p_exp:
            x = t + rng.standard_exponential() / fz
        else:
            x = _truncated_ig(z, rng)
        s = _a_coef(np.int64(0), x)
        u = rng.random() * s
        n = 0
        while True:
            n += 1
            if n % 2 == 1:
                s -= _a_coef(n, x)
                if u <= s:
                    return 0.25 * x
            else:
                s += _a_coef(n, x)
                if u > s:
                    break


@numba.njit(cache=True, nogil=True, inline="always")
def pg_draw(h, z, rng, K, G, n_int, zmax, ti):
    """``PG(h, z)`` for real ``h > 0``: ``floor(h)`` exact ``PG(1, z)`` draws plus the
    fractional part (:func:`bayesdrop.model.augmentation.pg_fraction`, from table
    ``ti`` of ``(K, G, n_int, zmax)``); above ``PG_DEVROYE_MAX`` the series draw of the
    whole shape (:func:`bayesdrop.model.augmentation.pg_series`), so that the cost
    is bounded in ``h``."""
    n = int(math.floor(h))
    f = h - n
    if f < 1e-12:
        f = 0.0
    elif f > 1.0 - 1e-12:
        n += 1
        f = 0.0
    if n > PG_DEVROYE_MAX:  # the rule of augmentation.polya_gamma, after its rounding
        return pg_series(h, z, rng)
    out = 0.0
    for _ in range(n):
        out += pg1(z, rng)
    if f > 0.0:
        out += pg_fraction(f, z, rng, K, G, n_int, zmax, ti)
    return out


@numba.njit(cache=True, nogil=True)
def _pg_fill(h, z, rng, out, K, G, n_int, zmax, index):
    for i in range(z.shape[0]):
        out[i] = pg_draw(h[i], z[i], rng, K, G, n_int, zmax, index[i])
    return out


def polya_gamma_compiled(h, z, random_state=None):
    """``PG(h_i, z_i)`` from the compiled sampler of the Gibbs sweep (testing and reuse).

    Examples
    --------
    >>> lam = polya_gamma_compiled(np.full(100_000, 2.0), np.zeros(100_000), 0)
    >>> bool(abs(lam.mean() - 0.5) < 0.01)  # E PG(h, 0) = h / 4
    True
    """
    from .._validation import check_random_state

    z = np.ascontiguousarray(z, dtype=np.float64)
    h = np.ascontiguousarray(np.broadcast_to(np.asarray(h, dtype=np.float64), z.shape))
    if not (np.all(np.isfinite(h)) and np.all(h > 0) and np.all(np.isfinite(z))):
        raise ValueError("h must be finite and > 0 and z finite")
    tables = pg_tables(h.ravel(), z.size).arrays()
    return _pg_fill(h.ravel(), z.ravel(), check_random_state(random_state),
                    np.empty(z.size), *tables).reshape(z.shape)
