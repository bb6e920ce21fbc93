"""The expected hinge loss (MATH.md section 3): parameters, compiled kernels, class."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import _jit
from ..._validation import MAX_ABS, check_C, check_scalar
from ..augmentation import _ig_one
from . import kernels
from .base import Loss
from .kernels import ROOT_FLOOR, root_terms, root_value

__all__ = ["HingeLoss", "HingeParams"]


class HingeParams(NamedTuple):
    """The hinge loss's kernel parameters."""

    C: float
    margin: float


@_jit.njit(cache=True, nogil=True)
def hinge_term(p, m, s, y, derivs):
    """``C (zeta + sqrt(zeta^2 + s))``, ``zeta = l - y m``, and its derivatives."""
    zeta = p.margin - y * m
    if derivs == 0:
        return root_value(zeta, s, p.C) + 2.0 * p.C * max(zeta, 0.0), 0.0, 0.0, 0.0, 0.0, 0.0
    v, dm, ds, dmm, dms, dss = root_terms(zeta, s, p.C)
    value = v + 2.0 * p.C * max(zeta, 0.0)
    # d zeta / dm = -y: the chain rule on the root part, plus -C y from the linear part
    return value, y * dm - p.C * y, ds, dmm, y * dms, dss


@_jit.njit(cache=True, nogil=True)
def hinge_system(p, c, u, unused, y):
    """``rho = c^2 u``, ``t = (c + l rho) y``."""
    rho = c * c * u
    return rho, (c + p.margin * rho) * y


@_jit.njit(cache=True, nogil=True)
def hinge_mean(p, c, m, s, y):
    """``E u = 1 / (c root)`` with the root floored; ``rho = c / root``."""
    zeta = p.margin - y * m
    root = max(math.sqrt(zeta * zeta + s), ROOT_FLOOR)
    rho = c / root
    return 1.0 / (c * root), 0.0, rho, (c + p.margin * rho) * y


@_jit.njit(cache=True, nogil=True, inline="always")
def hinge_draw(p, c, m, s, y, rng, tables, i):
    """``u ~ IG(1 / (c root), 1)`` (the Levy limit at ``root = 0``)."""
    zeta = p.margin - y * m
    root = math.sqrt(zeta * zeta + s)
    u = _ig_one(1.0 / (c * root) if root > 0.0 else np.inf, rng)
    rho, t = hinge_system(p, c, u, 0.0, y)
    return u, 0.0, rho, t


kernels.register(HingeParams, term=hinge_term, mean=hinge_mean, draw=hinge_draw,
                 system=hinge_system)


class HingeLoss(Loss):
    """Expected hinge loss with margin ``l``, bounded as in MATH.md section 3.

    With ``zeta_n = l - y_n (w.x~_n + b)``, ``E zeta = l - y m`` and
    ``E zeta^2 = (l - y m)^2 + s``::

        term_n = C (E zeta_n + sqrt(E zeta_n^2))

    (``2 C max(0, zeta_n)`` at zero noise). Augmentation
    ``u_n = 1/lambda_n ~ InverseGaussian(1 / (C sqrt(E zeta_n^2)), 1)``, mean
    ``gamma_n = 1 / (C sqrt(E zeta_n^2))``; system weights ``rho_n = C^2 u_n`` and
    ``t_n = (C + C^2 l u_n) y_n``.

    Parameters
    ----------
    C : float > 0
        Regularisation constant (scikit-learn's ``C``).
    margin : float >= 0, default=1.0
        ``l``; ``l = 0`` with fixed weights gives the MCF-quadratic loss.

    Examples
    --------
    >>> loss = HingeLoss(C=1.0)
    >>> m, s, y = np.array([0.2, 3.0]), np.zeros(2), np.array([1.0, 1.0])
    >>> loss.value(m, s, y).tolist()  # zero noise: 2C max(0, 1 - y m)
    [1.6, 0.0]
    """

    name = "hinge"
    smooth = False
    draw_ns = 40.0  # inverse Gaussian draw
    term_ns = 2.0

    def __init__(self, C=1.0, margin=1.0):
        self.C = check_C(C)
        self.margin = check_scalar(margin, "margin", min_val=0.0, max_val=MAX_ABS)

    @property
    def kernel_params(self):
        return HingeParams(float(self.C), float(self.margin))

    def _params(self):
        return {"C": self.C, "margin": self.margin}

    def kinks(self, y):
        # 2C max(0, l - y m): kink at m = l y; slope -2C y on the side where y m < l
        c2 = 2.0 * self.c
        left = np.where(y > 0, -c2, 0.0)
        right = np.where(y > 0, 0.0, c2)
        return (self.margin * y)[:, None], np.column_stack([left, right])
