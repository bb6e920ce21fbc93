"""The expected logistic loss (MATH.md section 3): parameters, compiled kernels, class."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import _jit
from ..._validation import check_C
from ..augmentation import polya_gamma
from ..pg_compiled import pg_draw_tabled
from ..pg_inversion import PGTables
from . import kernels
from ._logistic_rows import PSI_SERIES, SIMD_MIN_ROWS, logistic_from, logistic_rows
from .base import Loss

__all__ = ["LogisticLoss", "LogisticParams"]


class LogisticParams(NamedTuple):
    """The logistic loss's kernel parameters (the Polya-Gamma shape is ``h = 2C``)."""

    C: float


@_jit.njit(cache=True, nogil=True)
def logistic_term(p, m, s, y, derivs):
    """``h [log(2 cosh(psi/2)) - y m / 2]`` (up to ``h log 2``) and its derivatives
    (:func:`bayesdrop.model.losses._logistic_rows.logistic_from`); with derivatives the
    value is left out (one ``tanh``, no ``log1p``)."""
    h = 2.0 * p.C
    psi = math.sqrt(m * m + s)
    if not derivs:
        return logistic_from(h, m, s, y, psi, math.log1p(math.exp(-psi)), 0.0, True, 0)
    return logistic_from(h, m, s, y, psi, 0.0, math.tanh(0.5 * psi), False, derivs)


@_jit.njit(cache=True, nogil=True)
def logistic_term_and_value(p, m, s, y, derivs):
    """:func:`logistic_term` with the value: ``exp``, ``expm1`` and ``log1p`` once
    (``tanh(psi / 2) = -expm1(-psi) / (1 + exp(-psi))``)."""
    h = 2.0 * p.C
    psi = math.sqrt(m * m + s)
    e = math.exp(-psi)
    if not derivs:
        return logistic_from(h, m, s, y, psi, math.log1p(e), 0.0, True, 0)
    th = -math.expm1(-psi) / (1.0 + e)
    return logistic_from(h, m, s, y, psi, math.log1p(e), th, True, derivs)


@_jit.njit(cache=True, nogil=True)
def logistic_system(p, c, lam, unused, y):
    """``rho = lambda``, ``t = (h / 2) y = c y``."""
    return lam, c * y


@_jit.njit(cache=True, nogil=True)
def logistic_mean(p, c, m, s, y):
    """``E lambda = (h / (2 psi)) tanh(psi / 2)`` (``h / 4`` at ``psi = 0``), ``h = 2c``."""
    h = 2.0 * c
    psi = math.sqrt(m * m + s)
    if psi < PSI_SERIES:
        lam = h / 4.0 * (1.0 - psi * psi / 12.0)
    else:
        lam = h / (2.0 * psi) * math.tanh(0.5 * psi)
    return lam, 0.0, lam, c * y


@_jit.njit(cache=True, nogil=True, inline="always")
def logistic_draw(p, c, m, s, y, rng, tables, i):
    """``lambda ~ PG(2c, psi)`` (:func:`bayesdrop.model.pg_compiled.pg_draw_tabled`;
    ``tables`` the fractional Polya-Gamma tables of :meth:`LogisticLoss.draw_tables`)."""
    lam = pg_draw_tabled(2.0 * c, math.sqrt(m * m + s), rng, tables, i)
    return lam, 0.0, lam, c * y


kernels.register(LogisticParams, term=logistic_term, mean=logistic_mean,
                 draw=logistic_draw, system=logistic_system,
                 term_and_value=logistic_term_and_value)


class LogisticLoss(Loss):
    """Expected logistic loss, bounded through the Polya-Gamma augmentation.

    With ``h = 2C`` and ``psi_n = sqrt(m_n^2 + s_n)``::

        term_n = h log(2 cosh(psi_n / 2)) - (h/2) y_n m_n

    which equals ``2C log(1 + exp(-y_n m_n))`` at zero noise (the constant ``h log 2`` is
    kept so that ``J`` is the ordinary regularised objective there). Augmentation
    ``lambda_n ~ PG(h, psi_n)``, mean ``(h / (2 psi_n)) tanh(psi_n / 2)`` (``h/4`` at
    ``psi = 0``); system weights ``rho_n = lambda_n``, ``t_n = (h/2) y_n``.

    The value is evaluated as ``h [s / (2 (psi + |m|)) + log1p(exp(-psi)) + max(0, -y m)]``,
    which has no cancellation. On 1-D inputs of ``SIMD_MIN_ROWS`` (16) rows or more the
    terms, derivatives and curvature take ``exp``, ``log1p`` and ``tanh`` from numpy's SIMD
    ufuncs and do the rest with the same compiled kernel
    (:mod:`bayesdrop.model.losses._logistic_rows`; the same numbers to a few units in the
    last place). :meth:`draw_augmentation` draws with
    :func:`bayesdrop.model.augmentation.polya_gamma`; the compiled sweeps with the
    ``draw`` kernel, the same draws.

    Parameters
    ----------
    C : float > 0

    Examples
    --------
    >>> loss = LogisticLoss(C=0.5)  # h = 2C = 1
    >>> m, y = np.array([0.0, 2.0]), np.array([1.0, -1.0])
    >>> bool(np.allclose(loss.value(m, np.zeros(2), y) - loss.value(np.zeros(2), np.zeros(2), y),
    ...                  2 * 0.5 * (np.logaddexp(0, -y * m) - np.log(2))))
    True
    """

    name = "logistic"
    draw_ns = 250.0  # Polya-Gamma draw
    term_ns = 20.0

    def __init__(self, C=1.0):
        self.C = check_C(C)

    @property
    def kernel_params(self):
        return LogisticParams(float(self.C))

    @property
    def h(self):
        """Polya-Gamma shape ``h = 2C`` (per example ``2 C w_n`` if weighted)."""
        return 2.0 * self.c

    def _simd_rows(self, m, s, y, order):
        """:func:`bayesdrop.model.losses._logistic_rows.logistic_rows` (numpy's SIMD
        transcendental functions, the arithmetic compiled) for 1-D inputs of
        ``SIMD_MIN_ROWS`` rows or more; None otherwise (the compiled loop)."""
        n = np.shape(m)[0] if np.ndim(m) == 1 else 0
        if n < SIMD_MIN_ROWS or np.shape(s) != (n,) or np.shape(y) != (n,):
            return None
        if self.weights is not None and np.shape(self.weights) != (n,):
            return None
        return logistic_rows(2.0 * self.C, m, s, y, self.weights, order)

    def terms(self, m, s, y):
        rows = self._simd_rows(m, s, y, 1)
        if rows is not None:
            return rows[0], rows[1], rows[2]
        return super().terms(m, s, y)

    def curvature(self, m, s, y):
        rows = self._simd_rows(m, s, y, 2)
        if rows is not None:
            return rows[3], rows[4], rows[5]
        return super().curvature(m, s, y)

    def terms_curvature(self, m, s, y):
        rows = self._simd_rows(m, s, y, 2)
        if rows is not None:
            return tuple(rows)
        return super().terms_curvature(m, s, y)

    def value(self, m, s, y):
        rows = self._simd_rows(m, s, y, 0)
        if rows is not None:
            return rows[0]
        return super().value(m, s, y)

    def draw_tables(self, c):
        """The fractional Polya-Gamma tables of the shapes ``h_n = 2 c_n``, or ``()``
        where none is needed (every draw is then the series draw:
        :func:`bayesdrop.model.pg_compiled.pg_draw_tabled`)."""
        tables = PGTables.for_shapes(2.0 * np.asarray(c, dtype=np.float64))
        return tables.arrays() if tables.fractions.size else ()

    def draw_augmentation(self, m, s, y, rng):
        return (polya_gamma(self.h, np.sqrt(m * m + s), rng),)
