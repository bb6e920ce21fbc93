"""Draws of the augmentation variables (MATH.md sections 3 and 5).

Inverse-Gaussian / GIG(1/2, 1, b)
---------------------------------
The hinge and epsilon-insensitive augmentations are ``u ~ IG(mean mu, shape 1)`` with
``mu = 1 / (C sqrt(E zeta^2))``, equivalently ``lambda = 1/u ~ GIG(1/2, 1, b)`` with
``b = 1 / mu^2``. The draw is Michael, Schucany & Haas (1976), written without
cancellation: with ``nu ~ N(0, 1)`` and ``a = mu nu^2 / 2`` the two roots of the
transformation are::

    x_small = mu / (1 + a + sqrt(a (2 + a))),     x_large = mu^2 / x_small

and ``x_small`` is returned with probability ``mu / (mu + x_small)``. For ``mu = inf``
(``b = 0``, a point exactly on the margin at zero noise) this is the Levy limit
``u = 1 / nu^2``; no NaN, inf or spurious zero is produced for any ``0 <= b < inf``.
The loop is jitted by numba and consumes a :class:`numpy.random.Generator`, so draws are
reproducible from its state.

Polya-Gamma PG(h, z)
--------------------
The logistic augmentation is ``lambda ~ PG(h, psi)`` with ``h = 2C`` (``2 C w_n`` per
weighted example), rarely an integer and, for large ``C``, large.
``polyagamma`` 2.0.2 is exact only through its ``devroye`` method, which needs an integer
``h``: its default hybrid and ``alternate`` methods are about 1% biased for non-integer
``1 < h < 8`` (upstream issue 133, a wrong constant in the alternate sampler's bound),
``saddle`` is badly biased for small ``h`` and ``gamma`` truncates the series after 199
terms (about 0.2% low in the mean). Devroye's method draws ``PG(n, z)`` as ``n`` draws of
``PG(1, z)`` (about 0.12 us each), so its cost grows linearly in ``h``: at ``h = 8`` a
sweep's draws cost 4-5 times those at ``h = 0.02``. :func:`polya_gamma` therefore uses
two paths, and the cost of a draw is bounded whatever ``h`` (0.1-0.35 us):

* ``h < 1``: :func:`pg_fraction`, jitted. Where it is cheaper (``|z|`` below
  :func:`bayesdrop.model.pg_inversion.tilt_limit`, about 25 for ``f = 0.2``, 7 for
  ``f = 0.9``), by exponential tilting of ``PG(h, 0)`` draws from a numerical-inversion
  table (u-error 1e-12; :mod:`bayesdrop.model.pg_inversion`), 30-60 ns a trial and
  ``cosh(z/2)^h`` trials on average; elsewhere (and for more than 16 distinct
  fractions) by :func:`pg_series`.

* ``h >= 1`` (after rounding ``h`` within ``1e-12`` of an integer): the whole of
  ``PG(h, z)`` by :func:`pg_series`, 0.12-0.32 us a draw for every ``h`` -- as cheap as
  one Devroye ``PG(1, z)`` draw, and cheaper than ``PG(1, z) + PG(h - 1, z)``. Its
  head's ``K`` draws of ``Gamma(h)``, ``h > 1``, share one shape: :func:`gamma_mt`
  draws them by Marsaglia and Tsang's method with the shape's constants computed once
  (16-18 ns a draw against 40 ns for numba's ``standard_gamma``; on an AMD EPYC, ``h = 2``
  to ``2 x 10^4``: 180-250 ns a draw at ``z = 0``, 470-630 ns near ``|z| = 20``, against
  220-310 and 650-990 ns with ``standard_gamma``).

:func:`pg_series` draws from the series representation
``PG(h, z) = sum_k c_k g_k``, ``c_k = 1 / (2 pi^2 ((k - 1/2)^2 + a^2))``,
``g_k ~ Gamma(h)``, ``a = z / (2 pi)``: the first ``K = 3 + ceil(4 a)`` terms
(:data:`PG_SERIES_HEAD`) are drawn exactly and the remainder
``T = sum_{k > K} c_k g_k`` as a shifted gamma variable ``delta + theta Gamma(kappa)``
with the remainder's exact first three cumulants ``kappa_j(T) = h (j-1)! S_j``,
``S_j = sum_{k > K} c_k^j``::

    theta = S_3 / S_2,   kappa = h S_2^3 / S_3^2,   delta = h (S_1 - S_2^2 / S_3) >= 0

(``delta >= 0`` by Cauchy-Schwarz). ``S_1`` and ``S_2`` are the exact mean and variance
less the head's; ``S_3`` is the midpoint Euler-Maclaurin sum of ``c^3`` from ``K``
(:func:`_tail_cubes`). The draw's mean and variance are therefore exact; its third
cumulant is within ``1e-7`` and its fourth and fifth within ``1e-6`` relative of the
exact ones (checked for ``a`` from 0 to 4 in the tests, against the series summed to two
million terms). Every cumulant of ``PG(h, z)`` and of the draw is ``h`` times that of
shape 1, so this relative error does not depend on ``h``, while the standardised
cumulants (skewness ``~ h^{-1/2}``) shrink: the draw only gets closer to ``PG(h, z)`` as
``h`` grows. For ``|z| >= 25`` (``K`` would exceed 19) it is the inverse Gaussian
``IG(h / (2z), h^2 / 4)`` -- its Laplace transform differs from the Polya-Gamma one by
the factor ``((1 + e^{-z}) / (1 + e^{-2 sqrt(z^2/4 + t/2)}))^h``, a relative error below
``1e-9`` in every cumulant there, for every ``h`` -- with its mean and variance again set
to the exact ones.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from .._validation import check_random_state
from .pg_inversion import PG_SERIES_HEAD, pg_tables, tilted_draw

__all__ = ["inverse_gaussian", "gig_half", "polya_gamma", "polya_gamma_moments"]


@_jit.njit(cache=True, nogil=True)
def _ig_one(m, rng):
    """One ``IG(m, 1)`` draw (``m = inf``: the Levy limit ``1 / nu^2``)."""
    nu = rng.standard_normal()
    y = nu * nu
    if m == np.inf:
        return 1.0 / y
    a = 0.5 * m * y
    if a < 1e150:
        root = np.sqrt(a * (2.0 + a))
    else:
        root = a * np.sqrt(1.0 + 2.0 / a)
    small = m / (1.0 + a + root)
    if rng.random() * (m + small) <= m:
        return small
    return (m / small) * m


@_jit.njit(cache=True, nogil=True)
def _ig_fill(mu, rng, out):
    for i in range(mu.shape[0]):
        out[i] = _ig_one(mu[i], rng)
    return out


def inverse_gaussian(mean, random_state=None, out=None):
    """Draw ``u ~ InverseGaussian(mean, shape=1)`` elementwise.

    Density ``(2 pi u^3)^{-1/2} exp(-(u - mean)^2 / (2 mean^2 u))``; mean ``mean``,
    variance ``mean^3``. ``mean = inf`` gives the Levy distribution ``1 / N(0,1)^2``.

    Parameters
    ----------
    mean : array-like of float, > 0 (``inf`` allowed)
    random_state : None, int, SeedSequence or numpy.random.Generator
    out : ndarray of float64, optional
        Written in place.

    Returns
    -------
    ndarray of the shape of ``mean``

    Examples
    --------
    >>> u = inverse_gaussian(np.full(100_000, 2.0), random_state=0)
    >>> round(float(u.mean()), 1)
    2.0
    """
    mean = np.asarray(mean, dtype=np.float64)
    if np.any(~(mean > 0)):
        raise ValueError("mean must be > 0 (inf allowed) and not NaN")
    rng = check_random_state(random_state)
    flat = np.ascontiguousarray(mean).ravel()
    res = np.empty_like(flat) if out is None else out.reshape(-1)
    _ig_fill(flat, rng, res)
    return res.reshape(mean.shape) if out is None else out


def gig_half(b, random_state=None):
    """Draw ``lambda ~ GIG(1/2, 1, b)`` (density ``∝ lambda^{-1/2} exp(-(lambda + b/lambda)/2)``).

    ``lambda = 1 / u`` with ``u ~ IG(1 / sqrt(b), 1)``; ``E[lambda] = 1 + sqrt(b)``,
    ``E[1/lambda] = 1 / sqrt(b)``. Exact for every ``b >= 0`` (``b = 0``: ``lambda`` is
    chi-square with one degree of freedom).

    Parameters
    ----------
    b : array-like of float >= 0
    random_state : None, int, SeedSequence or numpy.random.Generator

    Returns
    -------
    ndarray

    Examples
    --------
    >>> lam = gig_half(np.full(200000, 4.0), random_state=0)
    >>> round(float(lam.mean()), 2)  # E = 1 + sqrt(b) = 3
    3.0
    """
    b = np.asarray(b, dtype=np.float64)
    if np.any(~(b >= 0)) or np.any(np.isinf(b)):
        raise ValueError("b must be finite and >= 0")
    with np.errstate(divide="ignore"):
        mean = 1.0 / np.sqrt(b)
    return 1.0 / inverse_gaussian(mean, random_state)


#: ``|z|`` from which :func:`pg_series` draws an inverse Gaussian.
PG_IG_SWITCH = 25.0


@_jit.njit(cache=True, nogil=True)
def _pg_exact_mean_var(h, z):
    """Exact mean and variance of ``PG(h, z)`` (series for small ``|z|``)."""
    z = abs(z)
    if z < 1e-3:
        z2 = z * z
        # Taylor series of tanh(z/2)/(2z) and of (sinh z - z)/(4 z^3 cosh^2(z/2))
        mean = h * (0.25 - z2 / 48.0 + z2 * z2 / 480.0)
        var = h * (1.0 / 24.0 - z2 / 60.0 + 17.0 * z2 * z2 / 4032.0)
        return mean, var
    t = math.tanh(0.5 * z)
    mean = 0.5 * h * t / z
    # (sinh z - z) / cosh^2(z/2) = 2 tanh(z/2) - z (1 - tanh^2(z/2)); no overflow
    var = 0.25 * h * (2.0 * t - z * (1.0 - t * t)) / (z * z * z)
    return mean, var


@_jit.njit(cache=True, nogil=True, inline="always")
def _tail_cubes(K, a):
    """``S_3 = sum_{k > K} c_k^3``, ``c_k = 1 / (2 pi^2 ((k - 1/2)^2 + a^2))``, by the
    midpoint Euler-Maclaurin formula ``int_K^inf f + f'(K) / 24 - 7 f'''(K) / 5760`` for
    ``f(x) = (x^2 + a^2)^{-3}``. The integral is ``K^{-5} g(a / K)``, ``g(r) =
    int_1^inf (u^2 + r^2)^{-3} du``: its power series for ``r <= 0.3``, else
    ``(3 psi / 8 - sin(2 psi) / 4 + sin(4 psi) / 32) / r^5`` with ``psi = atan(r)``."""
    r = a / K
    if r <= 0.3:
        r2 = r * r
        g = 0.0
        power = 1.0
        for j in range(14):  # (j+1)(j+2)/2 (-r^2)^j / (5 + 2j): below 1e-14 from j = 14
            g += 0.5 * (j + 1) * (j + 2) * power / (5.0 + 2.0 * j)
            power *= -r2
    else:
        psi = math.atan(r)
        g = (0.375 * psi - 0.25 * math.sin(2.0 * psi)
             + 0.03125 * math.sin(4.0 * psi)) / r ** 5
    q = K * K + a * a
    f1 = -6.0 * K / q ** 4
    f3 = 144.0 * K / q ** 5 - 480.0 * K ** 3 / q ** 6
    two_pi2 = 2.0 * math.pi * math.pi
    return (g / K ** 5 + f1 / 24.0 - 7.0 * f3 / 5760.0) / (two_pi2 * two_pi2 * two_pi2)


@_jit.njit(cache=True, nogil=True, inline="always")
def _series_plan(f, zi):
    """``(K, a^2, delta, theta, kappa)`` of :func:`pg_series` for ``PG(f, zi)``,
    ``zi < PG_IG_SWITCH``: the head's length and the remainder's shifted gamma
    ``delta + theta Gamma(kappa)`` (``kappa = 0``: no remainder)."""
    two_pi2 = 2.0 * math.pi * math.pi
    mean, var = _pg_exact_mean_var(f, zi)
    a = zi / (2.0 * math.pi)
    a2 = a * a
    n_terms = PG_SERIES_HEAD[0] + int(math.ceil(PG_SERIES_HEAD[1] * a))
    m1 = 0.0
    m2 = 0.0
    for k in range(1, n_terms + 1):
        kk = k - 0.5
        c = 1.0 / (two_pi2 * (kk * kk + a2))
        m1 += c
        m2 += c * c
    s1 = mean - f * m1  # h S_1, h S_2, h S_3
    s2 = var - f * m2
    s3 = f * _tail_cubes(float(n_terms), a)
    if not (s1 > 0.0 and s2 > 0.0 and s3 > 0.0):
        return n_terms, a2, 0.0, 0.0, 0.0
    theta = s3 / s2
    kappa = s2 / (theta * theta)
    return n_terms, a2, max(s1 - kappa * theta, 0.0), theta, kappa


@_jit.njit(cache=True, nogil=True, inline="always")
def gamma_mt(rng, b, c):
    """One ``Gamma(f)`` draw, ``f >= 1``, by Marsaglia and Tsang's method (2000) with
    ``b = f - 1/3`` and ``c = 1 / sqrt(9 b)`` computed by the caller: ``x ~ N(0, 1)``,
    ``v = (1 + c x)^3`` (``1 + c x > 0``), ``u ~ U(0, 1)``; accept ``b v`` if
    ``u < 1 - 0.0331 x^4`` (the squeeze) or ``log u < x^2 / 2 + b (1 - v + log v)``.
    Exact: the algorithm of numpy's ``standard_gamma`` for ``f > 1``, with the square
    root and division hoisted out of a series' draws of one shape (16-18 ns a draw
    against numba's ``standard_gamma``'s 40 ns)."""
    while True:
        x = rng.standard_normal()
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = rng.random()
        x2 = x * x
        if u < 1.0 - 0.0331 * x2 * x2:
            return b * v
        if math.log(u) < 0.5 * x2 + b * (1.0 - v + math.log(v)):
            return b * v


@_jit.njit(cache=True, nogil=True)
def pg_series(f, z, rng):
    """One ``PG(f, z)`` draw for any shape ``f > 0`` from the series representation, in
    time bounded in ``f`` (see the module docstring: exact mean and variance, higher
    cumulants within ``1e-6`` relative)."""
    zi = abs(z)
    if zi >= PG_IG_SWITCH:
        mean, var = _pg_exact_mean_var(f, zi)
        # IG(mean, shape) with shape = mean^3 / var; IG(mu, lam) = lam * IG(mu/lam, 1)
        lam = mean * mean * mean / var
        mu1 = mean / lam
        nu = rng.standard_normal()
        y = nu * nu
        a = 0.5 * mu1 * y
        small = mu1 / (1.0 + a + math.sqrt(a * (2.0 + a)))
        if rng.random() * (mu1 + small) <= mu1:
            return lam * small
        return lam * (mu1 / small) * mu1
    n_terms, a2, delta, theta, kappa = _series_plan(f, zi)
    two_pi2 = 2.0 * math.pi * math.pi
    head = 0.0
    if f > 1.0:  # the head's K draws share their shape: its constants once (at f = 1
        # numba's standard_gamma draws an exponential, cheaper still)
        b = f - 1.0 / 3.0
        c = 1.0 / math.sqrt(9.0 * b)
        for k in range(1, n_terms + 1):
            kk = k - 0.5
            head += gamma_mt(rng, b, c) / (two_pi2 * (kk * kk + a2))
    else:
        for k in range(1, n_terms + 1):
            kk = k - 0.5
            head += rng.standard_gamma(f) / (two_pi2 * (kk * kk + a2))
    if kappa > 0.0:
        head += delta + theta * rng.standard_gamma(kappa)
    return head


@_jit.njit(cache=True, nogil=True, inline="always")
def pg_fraction(f, z, rng, K, G, n_int, zmax, ti):
    """One ``PG(f, z)`` draw, ``0 < f < 1``: from table ``ti`` of ``(K, G, n_int, zmax)``
    (a :class:`~bayesdrop.model.pg_inversion.PGTables`) by tilted inversion for
    ``|z| < zmax[ti]``, else :func:`pg_series`."""
    if ti >= 0 and abs(z) < zmax[ti]:
        return tilted_draw(K, G, ti, n_int[ti], z, rng)
    return pg_series(f, z, rng)


@_jit.njit(cache=True, nogil=True)
def _pg_fraction_fill(f_all, z, rng, out, K, G, n_int, zmax, index):
    """Add a ``PG(f_i, z_i)`` draw, ``0 < f_i < 1``, to each ``out[i]`` (table
    ``index[i]``, see :func:`pg_fraction`); entries with ``f_i = 0`` are left alone."""
    for i in range(z.shape[0]):
        if f_all[i] > 0.0:
            out[i] += pg_fraction(f_all[i], z[i], rng, K, G, n_int, zmax, index[i])
    return out


@_jit.njit(cache=True, nogil=True)
def _pg_series_fill(h_all, z, rng, out, mask):
    """``out[i] = pg_series(h_i, z_i)`` where ``mask[i]``; the rest is left alone."""
    for i in range(z.shape[0]):
        if mask[i]:
            out[i] = pg_series(h_all[i], z[i], rng)
    return out


def polya_gamma_moments(h, z):
    """Exact mean and variance of ``PG(h, z)`` (MATH.md section 5).

    ``E = h tanh(z/2) / (2z)``, ``Var = h (sinh z - z) / (4 z^3 cosh^2(z/2))``; at ``z = 0``
    ``h/4`` and ``h/24``.

    Returns
    -------
    mean, var : float

    Examples
    --------
    >>> mean, var = polya_gamma_moments(1.0, 0.0)
    >>> float(mean), round(float(var), 6)  # PG(1, 0): 1/4 and 1/24
    (0.25, 0.041667)
    """
    return _pg_exact_mean_var(float(h), float(z))


def _split_shape(h):
    """``h = n + f``: integer part and fraction, rounded to the integer within ``1e-12``."""
    n = np.floor(h)
    f = h - n
    f = np.where(f < 1e-12, 0.0, f)
    up = f > 1.0 - 1e-12
    return np.where(up, n + 1.0, n), np.where(up, 0.0, f)


def polya_gamma(h, z, random_state=None, out=None):
    """Draw ``lambda_i ~ PG(h_i, z_i)`` for shapes ``h > 0`` and tilts ``z``.

    Exact in mean and variance for every real ``h > 0``, the third to fifth cumulants
    within ``1e-6`` relative (see the module docstring: the inversion table below
    ``h = 1``, the series draw of the whole shape from ``h = 1`` on); the time per draw is
    bounded whatever ``h``.

    Parameters
    ----------
    h : float > 0, or array of floats > 0 of the shape of ``z``
        Shape (``2C``, or ``2 C w_n`` per weighted example, for the logistic loss).
    z : array-like of float
        Tilts (finite).
    random_state : None, int, SeedSequence or numpy.random.Generator
    out : ndarray of float64, optional
        Written in place (same shape as ``z``, C-contiguous).

    Returns
    -------
    ndarray of the shape of ``z``

    Examples
    --------
    >>> lam = polya_gamma(2.7, np.zeros(200_000), random_state=0)
    >>> bool(abs(lam.mean() - 2.7 / 4) < 0.005)  # E = h / 4 at z = 0
    True
    """
    z = np.ascontiguousarray(z, dtype=np.float64)
    scalar = np.ndim(h) == 0
    if scalar:
        if not (isinstance(h, (int, float, np.integer, np.floating)) and np.isfinite(h)
                and h > 0):
            raise ValueError(f"h must be a finite number > 0, got {h!r}")
    else:
        h = np.asarray(h, dtype=np.float64)
        if h.shape != z.shape:
            raise ValueError(f"h must be a number or have the shape of z {z.shape}, "
                             f"got {h.shape}")
        if not np.all(np.isfinite(h) & (h > 0)):
            raise ValueError("h must be finite and > 0")
    if not np.all(np.isfinite(z)):
        raise ValueError("z must be finite")
    rng = check_random_state(random_state)
    flat = z.reshape(-1)
    res = np.empty_like(flat) if out is None else out.reshape(-1)
    hv = np.full(flat.shape[0], float(h)) if scalar else np.ascontiguousarray(h.reshape(-1))
    n, f = _split_shape(hv)
    whole = n >= 1.0  # the series draw of the whole shape: time bounded in h
    res[:] = 0.0
    frac = np.where(whole, 0.0, f)
    if np.any(frac > 0.0):
        tables = pg_tables(frac, flat.shape[0]).arrays()
        _pg_fraction_fill(frac, flat, rng, res, *tables)
    if np.any(whole):
        _pg_series_fill(hv, flat, rng, res, whole)
    return res.reshape(z.shape) if out is None else out
