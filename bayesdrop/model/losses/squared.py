"""The expected squared loss (MCF-quadratic): parameters, compiled kernels, class."""

from __future__ import annotations

from typing import NamedTuple

from ... import _jit
from ..._validation import check_C
from . import kernels
from .base import Loss

__all__ = ["SquaredLoss", "SquaredParams"]


class SquaredParams(NamedTuple):
    """The squared loss's kernel parameters."""

    C: float


@_jit.njit(cache=True, nogil=True)
def squared_term(p, m, s, y, derivs):
    """``(C/2) ((y - m)^2 + s)`` and its derivatives."""
    r = y - m
    return 0.5 * p.C * (r * r + s), -p.C * r, 0.5 * p.C, p.C, 0.0, 0.0


@_jit.njit(cache=True, nogil=True)
def squared_system(p, c, unused, unused2, y):
    """``rho = c``, ``t = c y`` (no augmentation)."""
    return c, c * y


@_jit.njit(cache=True, nogil=True)
def squared_mean(p, c, m, s, y):
    return 0.0, 0.0, c, c * y


@_jit.njit(cache=True, nogil=True, inline="always")
def squared_draw(p, c, m, s, y, rng, tables, i):
    return 0.0, 0.0, c, c * y


kernels.register(SquaredParams, term=squared_term, mean=squared_mean, draw=squared_draw,
                 system=squared_system)


class SquaredLoss(Loss):
    """Expected squared loss (MCF-quadratic, van der Maaten et al. 2013).

    The hinge surrogate with margin ``l = 0`` and weights fixed at ``gamma = 1/C``::

        term_n = (C/2) E (y_n - w.x~_n - b)^2 = (C/2) ((y_n - m_n)^2 + s_n)

    System weights ``rho_n = C``, ``t_n = C y_n``. There is no augmentation: one IRLS step
    is the closed-form solution
    ``theta = (2 I' + C (Xbar^T Xbar + diag(sum_n vbar_n)))^{-1} C Xbar^T y``.

    Parameters
    ----------
    C : float > 0
    binary : bool, default=True
        Whether targets must be labels in {-1, +1} (classification) or any reals.

    Examples
    --------
    >>> SquaredLoss(C=2.0).value(np.array([0.5]), np.array([0.25]), np.array([1.0])).tolist()
    [0.5]
    """

    name = "squared"
    n_augmentation = 0

    def __init__(self, C=1.0, binary=True):
        self.C = check_C(C)
        self.binary = bool(binary)

    @property
    def kernel_params(self):
        return SquaredParams(float(self.C))
