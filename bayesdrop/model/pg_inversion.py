"""Fractional Polya-Gamma draws ``PG(f, z)``, ``0 < f < 1``, by numerical inversion.

``PG(f, 0)`` is drawn by inverting its distribution function through a table, and
``PG(f, z)`` by exponential tilting: since the density of ``PG(f, z)`` is
``cosh(z/2)^f exp(-z^2 x / 2) p(x | f, 0)``, a draw ``x`` of ``PG(f, 0)`` is accepted
when an independent standard exponential ``E`` satisfies ``E >= z^2 x / 2``; the expected
number of trials is ``cosh(z/2)^f``.

The distribution function
-------------------------
``PG(f, 0) = J*(f) / 4`` (Polson, Scott & Windle 2013) and the Laplace transform of
``J*(f)`` is ``cosh(sqrt(2t))^{-f} = 2^f sum_n binom(-f, n) exp(-(2n + f) sqrt(2t))``.
Each exponential is the transform of a Levy law, so (Windle, Polson & Scott 2014)::

    F(x) = (2^f / Gamma(f)) sum_{n >= 0} (-1)^n Gamma(n + f) / n!  erfc((2n + f) / sqrt(8x))
    p(x) = 4 (2^f / Gamma(f)) sum_{n >= 0} (-1)^n Gamma(n + f) / n!
           (2n + f) / sqrt(2 pi (4x)^3) exp(-(2n + f)^2 / (8x))

for ``x > 0`` (``F`` and ``p`` of ``PG``, i.e. at ``4x`` for ``J*``). The series converge
for every ``x`` (the ``erfc`` factors decay like ``exp(-n^2 / 2x)``).

The table
---------
:func:`fraction_table` builds, once per fraction ``f`` (cached), a piecewise cubic
Hermite interpolant of the inverse ``x(u)`` with the exact slopes ``dx/du = 1 / p(x)``
at its knots -- the HINV method of Hormann & Leydold (2003), as in UNU.RAN and
:class:`scipy.stats.sampling.NumericalInverseHermite`. Intervals are split until the
u-error ``|F(x(u)) - u|`` at three interior points of every interval is at most
:data:`U_RESOLUTION` (1e-12) and ``x(u)`` is increasing there, so a draw is the exact
quantile of a uniform that differs from the one drawn by at most about ``1e-12``. The
table covers ``F(x_lo) <= 1e-17`` to ``1 - F(x_hi) = TAIL_MASS`` (1e-13); a uniform
beyond ``x_hi`` (probability 1e-13) gives ``x_hi`` plus an exponential with the
distribution's asymptotic decay rate ``pi^2 / 2``. A lookup is one uniform, a guide
table (Chen & Asau 1974) and a cubic.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import special

from .. import _jit

__all__ = [
    "TAIL_MASS",
    "U_RESOLUTION",
    "PGTables",
    "fraction_cdf",
    "fraction_pdf",
    "fraction_table",
    "pg_tables",
    "tilt_limit",
]

#: target u-error of the inversion table
U_RESOLUTION = 1e-12
#: probability above the table's last knot (drawn as an exponential tail)
TAIL_MASS = 1e-13
#: ``(K0, c)``: the series draw of :mod:`.augmentation` (``pg_series``) draws the first
#: ``K0 + ceil(c a)`` terms of the series exactly, ``a = |z| / (2 pi)``, and one more
#: gamma variate for the remainder
PG_SERIES_HEAD = (3, 4.0)
#: the tilted table draw is used while its expected number of trials ``cosh(z/2)^f`` is
#: at most ``MAX_TRIALS`` or, below ``|z| = 25`` (where the series draw takes
#: ``K0 + 1 + c |z| / (2 pi)`` gamma variates of about 1.5 trials' cost each,
#: :data:`PG_SERIES_HEAD`), at most 1.5 times that many
MAX_TRIALS = 8.0
#: the most distinct fractions a sampler tabulates (more: the series draw for all)
MAX_TABLES = 16
#: guide-table entries per interval (a lookup then scans 0.1 intervals on average)
GUIDE_PER_KNOT = 4
_TAIL_RATE = math.pi * math.pi / 2.0
_LOW_MASS = 1e-17


def _coefficients(f, x_max):
    """Signed series coefficients and Levy parameters ``a_n = 2n + f``, enough terms for
    every ``x <= x_max``: ``erfc(a_n / sqrt(8 x_max)) < 1e-300``."""
    n_terms = math.ceil((27.0 * math.sqrt(8.0 * x_max) - f) / 2.0) + 2
    n = np.arange(n_terms, dtype=np.float64)
    logc = f * math.log(2.0) + special.gammaln(n + f) - special.gammaln(f) - special.gammaln(n + 1)
    sign = np.where(n % 2 == 0, 1.0, -1.0)
    return sign * np.exp(logc), 2.0 * n + f


def fraction_cdf(x, f):
    """Distribution function of ``PG(f, 0)`` at ``x`` (series of the module docstring).

    Parameters
    ----------
    x : array-like of float > 0
    f : float > 0

    Returns
    -------
    ndarray of the shape of ``x``

    Examples
    --------
    >>> round(float(fraction_cdf(0.25, 1.0)), 6)  # PG(1, 0), at its mean 1/4
    0.629223
    """
    x = np.asarray(x, dtype=np.float64)
    c, a = _coefficients(f, float(np.max(x)) if x.size else 1.0)
    arg = a[None, :] / np.sqrt(8.0 * x.reshape(-1, 1))
    return (special.erfc(arg) @ c).reshape(x.shape)


def fraction_pdf(x, f):
    """Density of ``PG(f, 0)`` at ``x`` (series of the module docstring).

    Examples
    --------
    >>> from scipy import integrate
    >>> round(integrate.quad(lambda t: fraction_pdf(t, 0.3), 0, 10)[0], 8)
    1.0
    """
    x = np.asarray(x, dtype=np.float64)
    c, a = _coefficients(f, float(np.max(x)) if x.size else 1.0)
    y = 4.0 * x.reshape(-1, 1)
    terms = a[None, :] / np.sqrt(2.0 * np.pi * y**3) * np.exp(-(a[None, :] ** 2) / (2.0 * y))
    return (4.0 * (terms @ c)).reshape(x.shape)


def _hermite(u0, u1, x0, x1, d0, d1, t):
    du = u1 - u0
    h00 = (1 + 2 * t) * (1 - t) ** 2
    h10 = t * (1 - t) ** 2
    h01 = t * t * (3 - 2 * t)
    h11 = t * t * (t - 1)
    return h00 * x0 + h10 * du * d0 + h01 * x1 + h11 * du * d1


@lru_cache(maxsize=64)
def fraction_table(f):
    """The inversion table of ``PG(f, 0)``, ``0 < f < 1`` (see the module docstring).

    Returns
    -------
    u, x, d : ndarray
        Knots: ``u = F(x)`` increasing, and the slopes ``d = 1 / p(x)``.
    guide : ndarray of int64
        ``guide[j]``: the last knot with ``u <= j / len(guide)`` (``GUIDE_PER_KNOT``
        entries per interval).

    Examples
    --------
    >>> u, x, d, guide = fraction_table(0.2)
    >>> bool(np.all(np.diff(u) > 0) and np.all(np.diff(x) > 0))
    True
    """
    f = float(f)
    if not 0.0 < f < 1.0:
        raise ValueError(f"f must be in (0, 1), got {f!r}")
    # lower end: the first term 2^f erfc(f / sqrt(8x)) is F there to relative 1e-15
    t_lo = special.erfcinv(_LOW_MASS / 2.0**f)
    x_lo = (f / t_lo) ** 2 / 8.0
    # upper end: 1 - F = TAIL_MASS (F from the series to an absolute ~1e-15)
    grid = np.linspace(0.5, 12.0, 2301)
    tail = 1.0 - fraction_cdf(grid, f)
    x_hi = float(grid[np.argmax(tail < TAIL_MASS)])
    xs = np.geomspace(x_lo, x_hi, 96)
    ts = np.array([0.25, 0.5, 0.75])
    for _ in range(60):
        u = fraction_cdf(xs, f)
        d = 1.0 / fraction_pdf(xs, f)
        u0, u1, x0, x1, d0, d1 = u[:-1], u[1:], xs[:-1], xs[1:], d[:-1], d[1:]
        xt = _hermite(u0[:, None], u1[:, None], x0[:, None], x1[:, None], d0[:, None],
                      d1[:, None], ts[None, :])
        inside = (np.all((xt > x0[:, None]) & (xt < x1[:, None]), axis=1)
                  & np.all(np.diff(xt, axis=1) > 0, axis=1))
        err = np.abs(fraction_cdf(np.clip(xt, x_lo, x_hi), f)
                     - (u0[:, None] + ts[None, :] * (u1 - u0)[:, None]))
        bad = ~inside | (np.max(err, axis=1) > U_RESOLUTION)
        if not np.any(bad):
            break
        xs = np.sort(np.concatenate([xs, np.sqrt(x0[bad] * x1[bad])]))
    else:  # pragma: no cover - the refinement converges in about 10 rounds
        raise RuntimeError(f"the PG({f}, 0) inversion table did not reach its u-error")
    if not np.all(np.diff(u) > 0):  # pragma: no cover
        raise RuntimeError(f"the PG({f}, 0) distribution function is not increasing")
    n_int = xs.shape[0] - 1
    n_guide = GUIDE_PER_KNOT * n_int
    guide = np.searchsorted(u, np.arange(n_guide) / n_guide, side="right") - 1
    guide = np.clip(guide, 0, n_int - 1).astype(np.int64)
    for arr in (u, xs, d, guide):
        arr.setflags(write=False)
    return u, xs, d, guide


@_jit.njit(cache=True, nogil=True, inline="always")
def table_draw(K, G, k, n_int, rng):
    """One ``PG(f, 0)`` draw from inversion table ``k``: ``K[k, i] = (u_i, x_i, d_i)``
    its knots (interleaved: one cache line holds both ends of an interval), ``G[k]`` its
    guide (:func:`fraction_table`), ``n_int`` its intervals."""
    u = rng.random()
    if u >= K[k, n_int, 0]:
        return K[k, n_int, 1] + rng.standard_exponential() / _TAIL_RATE
    if u <= K[k, 0, 0]:
        return K[k, 0, 1]
    i = G[k, int(u * (GUIDE_PER_KNOT * n_int))]
    while K[k, i + 1, 0] <= u:
        i += 1
    u0 = K[k, i, 0]
    du = K[k, i + 1, 0] - u0
    t = (u - u0) / du
    s = 1.0 - t
    return ((1.0 + 2.0 * t) * s * s * K[k, i, 1] + t * s * s * du * K[k, i, 2]
            + t * t * (3.0 - 2.0 * t) * K[k, i + 1, 1] - t * t * s * du * K[k, i + 1, 2])


def _log_cosh_half(z):
    a = 0.5 * abs(z)
    return a + math.log1p(math.exp(-2.0 * a)) - math.log(2.0)


def tilt_limit(f):
    """``|z|`` below which the tilted table draw of ``PG(f, z)`` is used.

    The expected number of trials is ``cosh(z/2)^f``. Below ``|z| = 25`` the table is
    used while that is at most ``max(MAX_TRIALS, 1.5 (4 + 4 |z| / (2 pi)))`` (the
    series draw takes ``4 + 4 |z| / (2 pi)`` gamma variates of about 1.5 trials' cost
    each); from 25 on, where the inverse-Gaussian branch is cheap, while it is at most
    :data:`MAX_TRIALS`. Both conditions hold on an interval ``[0, limit)``.

    Examples
    --------
    >>> round(tilt_limit(0.2), 2), round(tilt_limit(0.9), 2)
    (25.0, 7.04)
    """
    from scipy.optimize import brentq

    def excess(z, limit):
        return f * _log_cosh_half(z) - math.log(limit(z))

    def series(z):
        k0, c = PG_SERIES_HEAD
        return max(MAX_TRIALS, 1.5 * (k0 + 1.0 + c * z / (2.0 * math.pi)))

    def fixed(z):
        return MAX_TRIALS

    z_a = 25.0 if excess(25.0, series) <= 0 else brentq(excess, 0.0, 25.0, args=(series,))
    z_b = brentq(excess, 0.0, 2.0 * math.log(2.0 * MAX_TRIALS) / f + 2.0, args=(fixed,))
    return max(z_a, z_b)


@_jit.njit(cache=True, nogil=True, inline="always")
def tilted_draw(K, G, k, n_int, z, rng):
    """One ``PG(f, z)`` draw: draws of ``PG(f, 0)`` from table ``k`` accepted with
    probability ``exp(-z^2 x / 2)``."""
    c = 0.5 * z * z
    while True:
        x = table_draw(K, G, k, n_int, rng)
        if rng.standard_exponential() >= c * x:
            return x


class PGTables:
    """Inversion tables for the fractional parts of a set of Polya-Gamma shapes.

    ``index[i]`` is the table of shape ``h[i]`` (``-1``: a shape of 1 or more, or more
    than :data:`MAX_TABLES` distinct shapes below 1 -- then the series draw). ``knots`` stacks
    the tables' ``(u, x, d)`` knots, one table per row (padded past ``u = 1``), ``guide``
    their guides, ``n_int`` their numbers of intervals and ``zmax`` their
    :func:`tilt_limit`, ready for the compiled sweeps.

    Examples
    --------
    >>> tabs = PGTables.for_shapes(np.array([0.2, 0.2, 2.0, 1.5, 0.5]))
    >>> tabs.index.tolist(), tabs.fractions.tolist()
    ([0, 0, -1, -1, 1], [0.2, 0.5])
    """

    def __init__(self, fractions, index):
        self.fractions = np.asarray(fractions, dtype=np.float64)
        self.index = np.ascontiguousarray(index, dtype=np.int64)
        tables = [fraction_table(float(f)) for f in self.fractions]
        width = max([t[0].shape[0] for t in tables], default=2)
        n_t = max(len(tables), 1)
        self.knots = np.ones((n_t, width, 3))
        self.knots[:, :, 0] = 2.0  # past every uniform
        self.guide = np.zeros((n_t, GUIDE_PER_KNOT * (width - 1)), dtype=np.int64)
        self.n_int = np.ones(n_t, dtype=np.int64)
        self.zmax = np.zeros(n_t)
        for k, (u, x, d, g) in enumerate(tables):
            m = u.shape[0]
            self.knots[k, :m, 0], self.knots[k, :m, 1], self.knots[k, :m, 2] = u, x, d
            self.knots[k, m:, 1], self.knots[k, m:, 2] = x[-1], d[-1]
            self.guide[k, : g.shape[0]] = g
            self.n_int[k] = m - 1
            self.zmax[k] = tilt_limit(float(self.fractions[k]))

    @classmethod
    def for_shapes(cls, h):
        """Tables for the shapes ``h`` (array), one per distinct shape below 1 (shapes
        from 1 on, after rounding within ``1e-12`` of an integer, are drawn whole by the
        series draw and get none)."""
        h = np.asarray(h, dtype=np.float64).ravel()
        frac = h - np.floor(h)
        frac = np.where((frac < 1e-12) | (frac > 1.0 - 1e-12) | (h >= 1.0), 0.0, frac)
        distinct = np.unique(frac[frac > 0.0])
        if distinct.size == 0 or distinct.size > MAX_TABLES:
            return cls([], np.full(h.shape[0], -1))
        index = np.where(frac > 0.0, np.searchsorted(distinct, frac), -1)
        return cls(distinct, index)

    def arrays(self):
        """``(knots, guide, n_int, zmax, index)`` for the compiled sweeps."""
        return self.knots, self.guide, self.n_int, self.zmax, self.index


def pg_tables(h, n):
    """:class:`PGTables` for a scalar shape ``h`` or per-example shapes (``n`` examples)."""
    return PGTables.for_shapes(np.broadcast_to(np.asarray(h, dtype=np.float64), (n,)))
