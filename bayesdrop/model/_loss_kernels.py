"""The losses' compiled per-example kernels: for each example its term of ``J`` and
the first and second derivatives in the score mean ``m`` and variance ``s`` (MATH.md
section 3; the closed forms of :mod:`bayesdrop.model.losses`), for the compiled Newton
loop, the Hessian, the latent model and the compiled Gibbs sweeps.

Loss codes (:func:`loss_code`): 0 hinge ``(C, margin)``, 1 logistic ``(h = 2C, -)``,
2 epsilon-insensitive ``(C, epsilon)``, 3 squared ``(C, -)``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ._logistic_rows import logistic_from
from .losses import (
    ROOT_FLOOR,
    EpsilonInsensitiveLoss,
    HingeLoss,
    LogisticLoss,
    SquaredLoss,
)

__all__ = ["loss_code", "terms_curvature"]


def loss_code(loss):
    """``(code, p0, p1)`` of a loss for the compiled loop, or None if it has none."""
    if type(loss) is HingeLoss:
        return 0, loss.C, loss.margin
    if type(loss) is LogisticLoss:
        return 1, 2.0 * loss.C, 0.0
    if type(loss) is EpsilonInsensitiveLoss:
        return 2, loss.C, loss.epsilon
    if type(loss) is SquaredLoss:
        return 3, loss.C, 0.0
    return None


@numba.njit(cache=True, nogil=True, inline="always")
def _root_terms(a, s, C):
    """``C sqrt(a^2 + s)`` minus ``C |a|`` (exact form), and its derivatives (da/dm = -1)."""
    root = math.sqrt(a * a + s)
    denom = root + abs(a)
    excess = s / denom if denom > 0.0 else 0.0
    R = max(root, ROOT_FLOOR)
    c3 = C / (R * R * R)
    # value part C*excess; d/dm = -C a / R; d/ds = C / (2R); second derivatives
    return C * excess, -C * a / R, 0.5 * C / R, c3 * s, 0.5 * c3 * a, -0.25 * c3


@numba.njit(cache=True, nogil=True)
def _term(code, p0, p1, m, s, y, derivs):
    """One example's term: ``derivs`` 0 its value; 1 its first derivatives in ``(m, s)``;
    2 the first and second ones (the value then only for the hinge, epsilon-insensitive
    and squared losses: the callers take it from the objective pass)."""
    if code == 0:  # hinge: C (zeta + sqrt(zeta^2 + s)), zeta = l - y m
        zeta = p1 - y * m
        v, dm, ds, dmm, dms, dss = _root_terms(zeta, s, p0)
        value = v + 2.0 * p0 * max(zeta, 0.0)
        # d zeta / dm = -y: chain rule on the root part, plus -C y from the linear part
        return value, y * dm - p0 * y, ds, dmm, y * dms, dss
    if code == 1:  # logistic, h = p0 (bayesdrop.model._logistic_rows.logistic_from)
        psi = math.sqrt(m * m + s)
        if not derivs:
            return logistic_from(p0, m, s, y, psi, math.log1p(math.exp(-psi)), 0.0, True, 0)
        # derivatives only (the callers have the value): one tanh
        return logistic_from(p0, m, s, y, psi, 0.0, math.tanh(0.5 * psi), False, derivs)
    if code == 2:  # epsilon-insensitive: C (sqrt(e+) + sqrt(e-) - 2 eps)
        r = y - m
        vp, dmp, dsp, dmmp, dmsp, dssp = _root_terms(r - p1, s, p0)
        vm, dmm_, dsm, dmmm, dmsm, dssm = _root_terms(r + p1, s, p0)
        value = vp + vm + 2.0 * p0 * max(abs(r) - p1, 0.0)
        return value, dmp + dmm_, dsp + dsm, dmmp + dmmm, dmsp + dmsm, dssp + dssm
    # squared: (C/2) ((y - m)^2 + s)
    r = y - m
    return 0.5 * p0 * (r * r + s), -p0 * r, 0.5 * p0, p0, 0.0, 0.0


@numba.njit(cache=True, nogil=True, inline="always")
def _term_and_value(code, p0, p1, m, s, y, derivs):
    """:func:`_term` with the value filled in for every loss (the logistic branch of
    :func:`_term` leaves it out when derivatives are asked for)."""
    out = _term(code, p0, p1, m, s, y, derivs)
    if code != 1:
        return out
    return (_term(code, p0, p1, m, s, y, np.int64(0))[0],) + out[1:]


@numba.njit(cache=True, nogil=True)
def terms_curvature(code, p0, p1, m, s, y, sw, value, d_m, d_s, d_mm, d_ms, d_ss):
    """Every example's (weighted) term of ``J`` and its first and second derivatives in
    ``(m, s)``, written to the six output arrays: the compiled counterpart of
    ``loss.terms`` and ``loss.curvature`` for the built-in losses (one pass, no
    temporaries)."""
    for i in range(m.shape[0]):
        out = _term_and_value(code, p0, p1, m[i], s[i], y[i], np.int64(2))
        w = sw[i]
        value[i] = w * out[0]
        d_m[i] = w * out[1]
        d_s[i] = w * out[2]
        d_mm[i] = w * out[3]
        d_ms[i] = w * out[4]
        d_ss[i] = w * out[5]
