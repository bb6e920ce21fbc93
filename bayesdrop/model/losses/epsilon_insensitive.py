"""The expected epsilon-insensitive loss (MATH.md section 3): parameters, compiled
kernels, class."""

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

__all__ = ["EpsilonInsensitiveLoss", "EpsilonInsensitiveParams"]


class EpsilonInsensitiveParams(NamedTuple):
    """The epsilon-insensitive loss's kernel parameters."""

    C: float
    epsilon: float


@_jit.njit(cache=True, nogil=True)
def eps_term(p, m, s, y, derivs):
    """``C (sqrt(e+) + sqrt(e-) - 2 eps)`` and its derivatives."""
    r = y - m
    if derivs == 0:
        return (root_value(r - p.epsilon, s, p.C) + root_value(r + p.epsilon, s, p.C)
                + 2.0 * p.C * max(abs(r) - p.epsilon, 0.0), 0.0, 0.0, 0.0, 0.0, 0.0)
    vp, dmp, dsp, dmmp, dmsp, dssp = root_terms(r - p.epsilon, s, p.C)
    vm, dmm_, dsm, dmmm, dmsm, dssm = root_terms(r + p.epsilon, s, p.C)
    value = vp + vm + 2.0 * p.C * max(abs(r) - p.epsilon, 0.0)
    return value, dmp + dmm_, dsp + dsm, dmmp + dmmm, dmsp + dmsm, dssp + dssm


@_jit.njit(cache=True, nogil=True)
def eps_system(p, c, u, u2, y):
    """``rho = c^2 (u + u')``, ``t = c^2 (u (y - eps) + u' (y + eps))``."""
    c2 = c * c
    return c2 * (u + u2), c2 * (u * (y - p.epsilon) + u2 * (y + p.epsilon))


@_jit.njit(cache=True, nogil=True)
def eps_mean(p, c, m, s, y):
    """``E u = 1 / (c root+)``, ``E u' = 1 / (c root-)`` with the roots floored."""
    r = y - m
    rp = max(math.sqrt((r - p.epsilon) ** 2 + s), ROOT_FLOOR)
    rm = max(math.sqrt((r + p.epsilon) ** 2 + s), ROOT_FLOOR)
    u, u2 = c / rp, c / rm  # c^2 times the inverse-Gaussian means
    return 1.0 / (c * rp), 1.0 / (c * rm), u + u2, u * (y - p.epsilon) + u2 * (y + p.epsilon)


@_jit.njit(cache=True, nogil=True, inline="always")
def eps_draw(p, c, m, s, y, rng, tables, i):
    """``u ~ IG(1 / (c root+), 1)``, ``u' ~ IG(1 / (c root-), 1)``."""
    r = y - m
    rp = math.sqrt((r - p.epsilon) * (r - p.epsilon) + s)
    rm = math.sqrt((r + p.epsilon) * (r + p.epsilon) + s)
    u = _ig_one(1.0 / (c * rp) if rp > 0.0 else np.inf, rng)
    u2 = _ig_one(1.0 / (c * rm) if rm > 0.0 else np.inf, rng)
    rho, t = eps_system(p, c, u, u2, y)
    return u, u2, rho, t


kernels.register(EpsilonInsensitiveParams, term=eps_term, mean=eps_mean, draw=eps_draw,
                 system=eps_system)


class EpsilonInsensitiveLoss(Loss):
    """Expected epsilon-insensitive loss for regression.

    With ``Delta_n = y_n - (w.x~_n + b)``, ``e+ = (y - m - eps)^2 + s`` and
    ``e- = (y - m + eps)^2 + s``::

        term_n = C (sqrt(e+_n) + sqrt(e-_n) - 2 eps)

    (``2 C max(0, |Delta_n| - eps)`` at zero noise). Two augmentation variables,
    ``u ~ IG(1 / (C sqrt(e+)), 1)``, ``u' ~ IG(1 / (C sqrt(e-)), 1)``; system weights
    ``rho = C^2 (u + u')``, ``t = C^2 (u (y - eps) + u' (y + eps))``.

    Parameters
    ----------
    C : float > 0
    epsilon : float >= 0

    Examples
    --------
    >>> loss = EpsilonInsensitiveLoss(C=1.0, epsilon=0.5)
    >>> loss.value(np.zeros(3), np.zeros(3), np.array([0.2, 1.0, -2.0])).tolist()
    [0.0, 1.0, 3.0]
    """

    name = "epsilon_insensitive"
    n_augmentation = 2
    binary = False
    smooth = False
    draw_ns = 80.0  # inverse Gaussian draws
    term_ns = 4.0

    def __init__(self, C=1.0, epsilon=0.1):
        self.C = check_C(C)
        self.epsilon = check_scalar(epsilon, "epsilon", min_val=0.0, max_val=MAX_ABS)

    @property
    def kernel_params(self):
        return EpsilonInsensitiveParams(float(self.C), float(self.epsilon))

    def _params(self):
        return {"C": self.C, "epsilon": self.epsilon}

    def kinks(self, y):
        # 2C max(0, |y - m| - eps): kinks at y -+ eps, slopes -2C, 0, 2C
        c2 = 2.0 * self.c * np.ones(y.shape[0])
        slopes = np.column_stack([-c2, np.zeros_like(c2), c2])
        return np.column_stack([y - self.epsilon, y + self.epsilon]), slopes
