"""Polya-Gamma draws compiled (numba), for the logistic loss's augmentation kernel
(:mod:`bayesdrop.model.losses.logistic`) and the compiled Gibbs sweeps.

``PG(h, z)`` for real ``h > 0`` by the rule of
:func:`bayesdrop.model.augmentation.polya_gamma` (one rule, one set of compiled draws,
for the numpy path and the sweeps): shapes ``h >= 1`` whole by the series draw
:func:`bayesdrop.model.augmentation.pg_series` (time bounded in ``h``), smaller ones by
:func:`bayesdrop.model.augmentation.pg_fraction`.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from .augmentation import pg_fraction, pg_series
from .pg_inversion import pg_tables

__all__ = ["pg_draw", "pg_draw_tabled", "polya_gamma_compiled"]


@_jit.njit(cache=True, nogil=True, inline="always")
def pg_draw(h, z, rng, K, G, n_int, zmax, ti):
    """``PG(h, z)`` for real ``h > 0``, the rule of
    :func:`bayesdrop.model.augmentation.polya_gamma`: for ``h >= 1`` the series draw of
    the whole shape (:func:`bayesdrop.model.augmentation.pg_series`, time bounded in
    ``h``), below it :func:`bayesdrop.model.augmentation.pg_fraction` (from table ``ti``
    of ``(K, G, n_int, zmax)``)."""
    n = math.floor(h)
    f = h - n
    if f > 1.0 - 1e-12:  # the rounding of augmentation._split_shape
        n += 1.0
    elif f < 1e-12:
        f = 0.0
    if n >= 1.0:
        return pg_series(h, z, rng)
    if f > 0.0:
        return pg_fraction(f, z, rng, K, G, n_int, zmax, ti)
    return 0.0


def pg_draw_tabled(h, z, rng, tables, i):
    """``PG(h, z)`` for example ``i`` with the draw tables ``tables`` of
    :meth:`bayesdrop.model.losses.LogisticLoss.draw_tables`: ``(K, G, n_int, zmax,
    index)``, or ``()`` where no example has a table (every shape 1 or more, the default
    ``C = 1``) -- then every draw is :func:`pg_draw`'s series draw (0 below ``1e-12``),
    and numba compiles the sweep without the tables' code (about 0.8 s of a first
    logistic posterior)."""
    if len(tables) == 0:
        return 0.0 if h < 1e-12 else pg_series(h, z, rng)
    K, G, n_int, zmax, index = tables
    return pg_draw(h, z, rng, K, G, n_int, zmax, index[i])


@_jit.overload(pg_draw_tabled, inline="always", jit_options={"cache": True, "nogil": True})
def _pg_draw_tabled_compiled(h, z, rng, tables, i):
    from numba import types

    if isinstance(tables, types.BaseTuple) and len(tables.types) == 0:
        def impl(h, z, rng, tables, i):
            # pg_draw without tables: a shape of 1 or more (after rounding) and a shape
            # below 1 without its table both take the series draw; below 1e-12, none
            if h < 1e-12:
                return 0.0
            return pg_series(h, z, rng)
        return impl

    def impl(h, z, rng, tables, i):
        K, G, n_int, zmax, index = tables
        return pg_draw(h, z, rng, K, G, n_int, zmax, index[i])
    return impl


@_jit.njit(cache=True, nogil=True)
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
