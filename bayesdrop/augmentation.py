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
"""

from __future__ import annotations

import numba
import numpy as np

from ._validation import check_random_state

__all__ = ["inverse_gaussian", "gig_half"]


@numba.njit(cache=True, nogil=True)
def _ig_fill(mu, rng, out):
    for i in range(mu.shape[0]):
        m = mu[i]
        nu = rng.standard_normal()
        y = nu * nu
        if m == np.inf:
            out[i] = 1.0 / y
            continue
        a = 0.5 * m * y
        if a < 1e150:
            root = np.sqrt(a * (2.0 + a))
        else:
            root = a * np.sqrt(1.0 + 2.0 / a)
        small = m / (1.0 + a + root)
        if rng.random() * (m + small) <= m:
            out[i] = small
        else:
            out[i] = (m / small) * m
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
    """
    b = np.asarray(b, dtype=np.float64)
    if np.any(~(b >= 0)) or np.any(np.isinf(b)):
        raise ValueError("b must be finite and >= 0")
    with np.errstate(divide="ignore"):
        mean = 1.0 / np.sqrt(b)
    return 1.0 / inverse_gaussian(mean, random_state)
