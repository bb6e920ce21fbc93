"""The latent objective's value and gradient on dense ``X`` in one compiled call.

:func:`latent_value_grad` computes exactly what
:func:`bayesdrop.model.latent.latent_gradients` computes for dense ``X`` (the same
formulas, MATH.md section 6), with the five ``N x D x K`` products by ``np.dot`` (BLAS)
and every element-wise pass compiled -- one call that holds no GIL, so that an optimiser
loop around it can run compiled too (:mod:`bayesdrop.solvers._lbfgs_compiled`) and
one-vs-rest problems can run in threads on separate cores (``latent_gradients`` itself
calls it for dense ``X`` with noise and a built-in loss). numpy's SIMD loops cannot be
called without the GIL: the sigmoid's ``exp`` is a compiled polynomial
(:func:`_exp_parts`), the logistic terms take the C library's scalar functions; both
agree with the numpy formulas to rounding.

The arrays are feature-major: ``X^T`` and ``V^T`` (``D x N``), the hidden quantities
``K x N``. The products then have the long dimension ``N`` last (on digits, 898 x 64 x 20,
the five products take 222 instead of 270 us) and every element-wise loop runs along
``N`` (long SIMD loops instead of loops over ``K = 20``).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from .losses.kernels import term_and_value

__all__ = ["EXP_FLOOR_ARG", "LatentWork", "latent_value_grad"]

#: ``exp(-|x|)`` in the hidden layer's sigmoid is computed as ``exp(max(-|x|, -708))``:
#: a hidden feature is never closer to 0 or 1 than ``exp(-708) = 3.3e-308`` (the
#: smallest normal number is ``exp(-708.4)``); the power of two then stays a normal number
EXP_FLOOR_ARG = -708.0
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's split of log(2): k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e+00


class LatentWork:
    """Work arrays of :func:`latent_value_grad` for an ``N x D`` design and ``K`` units.

    Attributes
    ----------
    KN : ndarray of shape (5, K, N)
        ``pre / G, Gp, C, P, R`` (transposed).
    DN : ndarray of shape (D, N)
        ``U^T``, then ``F^T = (d_s V U)^T``.
    DK : ndarray of shape (2, D, K)
        ``F^T C`` and ``X^T R``.
    KD : ndarray of shape (K, D)
        ``alpha^T`` (hidden weights, contiguous).
    N4 : ndarray of shape (4, N)
        ``m, d_m, s`` and ``d_s``.
    bits : ndarray of shape (K N,), int64
        The powers of two of :func:`_exp_parts`.
    """

    def __init__(self, n, d, k):
        self.KN = np.empty((5, k, n))
        self.DN = np.empty((d, n))
        self.DK = np.empty((2, d, k))
        self.KD = np.empty((k, d))
        self.N4 = np.empty((4, n))
        self.bits = np.empty(n * k, dtype=np.int64)

    def arrays(self):
        """The arrays in the order :func:`latent_value_grad` takes them."""
        return self.KN, self.DN, self.DK, self.KD, self.N4, self.bits


@_jit.njit(cache=True, nogil=True)
def latent_value_grad(lp, XT, VT, y, sw, z, K, fit_intercept, alpha_penalty,
                      KN, DN, DK, KD, N4, bits, grad):
    """``J(z)`` of the latent model on dense ``X``; its gradient written to ``grad``.

    ``z = [w, b, alpha.ravel()]`` (``b`` only with ``fit_intercept``; ``alpha`` of shape
    ``(D + 1, K)``, hidden biases in its last row), as
    :func:`bayesdrop.model.latent.latent_gradients`::

        g = sigmoid(X alpha_{:D} + alpha_D),  g' = g (1 - g),  C = g' w,  m = g w + b
        U = C alpha_{:D}^T,  s_n = sum_d V_nd U_nd^2,  (value, d_m, d_s) = terms(m, s, y)
        F = d_s V U,  P = F alpha_{:D},  R = d_m C + 2 P w g' (1 - 2 g)
        dJ/dw = 2 w + g^T d_m + 2 sum_n P_n g'_n,   dJ/db = sum_n d_m
        dJ/dalpha_{:D} = 2 alpha_penalty alpha_{:D} + X^T R + 2 F^T C,
        dJ/dalpha_D = sum_n R_n

    ``XT``, ``VT``: ``X^T`` and the noise variances ``V^T`` (``D x N``, C-contiguous;
    without noise ``VT`` has shape ``(0, 0)`` and the three products that carry the
    noise are skipped). ``lp`` is the loss's parameter tuple
    (:attr:`bayesdrop.model.losses.Loss.kernel_params`); ``sw`` the example weights (all 1
    for none); ``KN, DN, DK, KD, N4, bits`` the work arrays of :class:`LatentWork`. No
    ``fastmath`` here: this function is inlined into the compiled L-BFGS loop, and
    reassociated sums there came out differently in a fresh compilation than in numba's
    cached copy (another L-BFGS path for the same seed); the element-wise loops run along
    ``N`` and vectorise without it (2% slower).
    """
    D, n = XT.shape
    nt = K + (1 if fit_intercept else 0)
    w = z[:K]
    b = z[K] if fit_intercept else 0.0
    alpha = z[nt:].reshape((D + 1, K))
    aw = alpha[:D]
    bias = alpha[D]
    GT, GpT, CT, PT, RT = KN[0], KN[1], KN[2], KN[3], KN[4]
    m, d_m, s, d_s = N4[0], N4[1], N4[2], N4[3]
    T1, XR = DK[0], DK[1]
    for d in range(D):
        for k in range(K):
            KD[k, d] = aw[d, k]
    np.dot(KD, XT, GT)  # pre-activations, then the hidden features in place
    _exp_parts(GT, bias, GpT, bits)
    scale = bits.view(np.float64)
    m[:] = b
    for k in range(K):
        wk = w[k]
        row = k * n
        for i in range(n):
            x = GT[k, i]
            e = GpT[k, i] * scale[row + i]  # exp(-|x|)
            r = 1.0 / (1.0 + e)
            g = r if x >= 0.0 else e * r
            gp = g * (1.0 - g)
            GT[k, i] = g
            GpT[k, i] = gp
            CT[k, i] = gp * wk
            m[i] += g * wk
    noisy = VT.shape[0] > 0
    UT = DN
    s[:] = 0.0
    if noisy:
        np.dot(aw, CT, UT)
        for d in range(D):
            for i in range(n):
                u = UT[d, i]
                s[i] += VT[d, i] * u * u
    total = 0.0
    for i in range(n):
        out = term_and_value(lp, m[i], s[i], y[i], np.int64(1))
        total += sw[i] * out[0]
        d_m[i] = sw[i] * out[1]
        d_s[i] = sw[i] * out[2]
    if noisy:
        for d in range(D):
            for i in range(n):
                UT[d, i] *= d_s[i] * VT[d, i]
        np.dot(KD, UT, PT)  # UT now holds F^T
        np.dot(UT, CT.T, T1)
    else:
        PT[:] = 0.0
        T1[:] = 0.0
    pen = 0.0
    for d in range(D):
        for k in range(K):
            pen += aw[d, k] * aw[d, k]
    ww = 0.0
    for k in range(K):
        ww += w[k] * w[k]
    db = 0.0
    for i in range(n):
        db += d_m[i]
    if fit_intercept:
        grad[K] = db
    gb = grad[nt + D * K:]
    for k in range(K):
        wk = w[k]
        acc = 0.0
        rsum = 0.0
        for i in range(n):
            pgp = PT[k, i] * GpT[k, i]
            acc += GT[k, i] * d_m[i] + 2.0 * pgp
            r = d_m[i] * CT[k, i] + 2.0 * wk * pgp * (1.0 - 2.0 * GT[k, i])
            RT[k, i] = r
            rsum += r
        grad[k] = 2.0 * wk + acc
        gb[k] = rsum
    np.dot(XT, RT.T, XR)
    ga = grad[nt:nt + D * K].reshape((D, K))
    for d in range(D):
        for k in range(K):
            ga[d, k] = XR[d, k] + 2.0 * T1[d, k] + 2.0 * alpha_penalty * aw[d, k]
    return ww + alpha_penalty * pen + total


@_jit.njit(cache=True, nogil=True, fastmath={"contract"})
def _exp_parts(pre, bias, poly, bits):
    """``pre += bias`` (one bias per row); ``exp(-|pre|) = poly * bits.view(float64)``
    element by element.

    Cody-Waite reduction ``t = k log 2 + r`` (``t = max(-|x|, EXP_FLOOR_ARG)``, ``k =
    round(t / log 2)``, ``|r| <= log(2) / 2``, ``log 2`` split in fdlibm's two parts),
    ``exp(r)`` by its Taylor polynomial of degree 13 (truncation below ``4e-18``
    relative) in Horner form with fused multiply-adds, and ``2^k`` as the IEEE bit
    pattern ``(k + 1023) << 52`` in ``bits``: one SIMD loop (the C library's scalar
    ``exp`` took 80 of the 520 us of an evaluation on digits), within 1 ulp of
    ``np.exp`` for ``t`` above ``EXP_FLOOR_ARG``; NaN propagates.
    """
    K, n = pre.shape
    for k in range(K):
        for i in range(n):
            x = pre[k, i] + bias[k]
            pre[k, i] = x
            t = -abs(x)
            t = EXP_FLOOR_ARG if t < EXP_FLOOR_ARG else t
            kf = math.floor(t * _INV_LN2 + 0.5)
            r = (t - kf * _LN2_HI) - kf * _LN2_LO
            p = 1.0 / 6227020800.0
            p = p * r + 1.0 / 479001600.0
            p = p * r + 1.0 / 39916800.0
            p = p * r + 1.0 / 3628800.0
            p = p * r + 1.0 / 362880.0
            p = p * r + 1.0 / 40320.0
            p = p * r + 1.0 / 5040.0
            p = p * r + 1.0 / 720.0
            p = p * r + 1.0 / 120.0
            p = p * r + 1.0 / 24.0
            p = p * r + 1.0 / 6.0
            p = p * r + 0.5
            p = p * r + 1.0
            poly[k, i] = p * r + 1.0
            bits[k * n + i] = (np.int64(kf) + 1023) << 52
