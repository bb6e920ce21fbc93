"""Compiled L-BFGS for the latent objective on dense ``X`` (no GIL, no Python per step).

scipy's L-BFGS-B costs about 50 us per ``setulb`` call (two per iteration: its bound-
constrained compact form is ``O(m^2 n)``) plus its Python wrapper, while one evaluation
of the latent ``J`` on digits costs about 300-450 us; and it holds the GIL, so that
one-vs-rest fits cannot share the cores. Without bounds L-BFGS needs only the two-loop
recursion (Nocedal & Wright, *Numerical Optimization*, 2nd ed., Algorithm 7.4, ``O(m n)``)
and a line search satisfying the strong Wolfe conditions (Algorithms 3.5 and 3.6, cubic
interpolation in the zoom), which is what this module runs, compiled, around
:func:`bayesdrop.model._latent_compiled.latent_value_grad`.

Constants: memory :data:`MEMORY` pairs (scipy's ``maxcor`` as the latent fit used it),
sufficient decrease ``c1 = 1e-4``, curvature ``c2 = 0.9`` (Nocedal & Wright's values for
quasi-Newton methods), at most :data:`MAX_LINE_SEARCH` evaluations per line search; the
first step is ``min(1, 1 / ||g||_2)`` along ``-g`` (as L-BFGS-B), then the unit step.
A pair with ``s^T y <= eps y^T y`` is not stored (the curvature condition guarantees
``s^T y > 0`` whenever the search succeeds).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from .. import _jit
from .._blocks import in_blocks
from ..model._latent_compiled import LatentWork, latent_value_grad
from ..model.losses.kernels import has_kernels

__all__ = ["CompiledLatent", "MAX_LINE_SEARCH", "MEMORY", "centred_objective",
           "input_mean", "lbfgs_latent", "lbfgs_state", "shift_biases"]

#: stored (s, y) pairs
MEMORY = 20
#: evaluations per line search at most
MAX_LINE_SEARCH = 50
_C1 = 1e-4
_C2 = 0.9
_EPS = np.finfo(np.float64).eps
#: iterations of the first compiled block of :meth:`CompiledLatent.run` (later blocks
#: are sized from the measured time per iteration)
_FIRST_BLOCK = 10


@_jit.njit(cache=True, nogil=True)
def _dot(a, b):
    """``a . b`` summed in four fixed lanes: SIMD-friendly, and -- unlike ``fastmath``
    reassociation, whose order LLVM may choose differently when a function is inlined
    into a fresh compilation than in numba's cached copy -- the same sum in every
    compiled context (one seed, one result)."""
    n = a.shape[0]
    m = n - n % 4
    s0 = s1 = s2 = s3 = 0.0
    for j in range(0, m, 4):
        s0 += a[j] * b[j]
        s1 += a[j + 1] * b[j + 1]
        s2 += a[j + 2] * b[j + 2]
        s3 += a[j + 3] * b[j + 3]
    for j in range(m, n):
        s0 += a[j] * b[j]
    return (s0 + s1) + (s2 + s3)


@_jit.njit(cache=True, nogil=True)
def two_loop(g, S, Y, rho, newest, count, q, alpha):
    """``q = -H g`` by the two-loop recursion over the ``count`` newest pairs of the ring
    buffers ``S, Y`` (rows; ``newest`` the index of the latest), ``H_0 = gamma I`` with
    ``gamma = s^T y / y^T y`` of the latest pair (inner products by :func:`_dot`)."""
    n = g.shape[0]
    mem = S.shape[0]
    for j in range(n):
        q[j] = -g[j]
    i = newest
    for _ in range(count):
        a = rho[i] * _dot(S[i], q)
        alpha[i] = a
        for j in range(n):
            q[j] -= a * Y[i, j]
        i = i - 1 if i > 0 else mem - 1
    if count > 0:
        gamma = 1.0 / (rho[newest] * _dot(Y[newest], Y[newest]))
        for j in range(n):
            q[j] *= gamma
    i = (newest - count + 1) % mem
    for _ in range(count):
        a = alpha[i] - rho[i] * _dot(Y[i], q)
        for j in range(n):
            q[j] += a * S[i, j]
        i = i + 1 if i < mem - 1 else 0


@_jit.njit(cache=True, nogil=True)
def cubic_step(a, fa, da, b, fb, db):
    """Minimiser of the cubic through ``(a, fa, da)`` and ``(b, fb, db)`` (Nocedal &
    Wright eq. 3.59), or the midpoint where it does not exist or falls outside the middle
    80% of the interval (safeguard)."""
    lo, hi = min(a, b), max(a, b)
    width = hi - lo
    mid = 0.5 * (a + b)
    if width <= 0.0:
        return mid
    d1 = da + db - 3.0 * (fa - fb) / (a - b)
    disc = d1 * d1 - da * db
    if disc < 0.0:
        return mid
    d2 = math.copysign(math.sqrt(disc), b - a)
    denom = db - da + 2.0 * d2
    if denom == 0.0:
        return mid
    t = b - (b - a) * (db + d2 - d1) / denom
    if not (lo + 0.1 * width <= t <= hi - 0.1 * width):
        return mid
    return t


@_jit.njit(cache=True, nogil=True)
def _latent_phi(step, z, d, znew, grad, lp, XT, VT, y, sw, K, fi, pen,
                KN, DN, DK, KD, N4, bits, n_fixed):
    """``J(z + step d)`` and its directional derivative; ``znew, grad`` filled (the
    gradient's first ``n_fixed`` components zeroed)."""
    n = z.shape[0]
    for j in range(n):
        znew[j] = z[j] + step * d[j]
    f = latent_value_grad(lp, XT, VT, y, sw, znew, K, fi, pen, KN, DN, DK, KD,
                          N4, bits, grad)
    grad[:n_fixed] = 0.0
    return f, _dot(grad, d)


@_jit.njit(cache=True, nogil=True)
def lbfgs_latent(lp, XT, VT, y, sw, z, K, fit_intercept, alpha_penalty,
                 max_iter, tol, window, history, KN, DN, DK, KD, N4, bits, n_fixed, state):
    """Minimise the latent ``J`` (:func:`latent_value_grad`, whose arguments ``XT, VT``,
    ``y, sw``, the work arrays and ``K, fit_intercept, alpha_penalty`` are passed on)
    from ``z`` (overwritten with the result) by L-BFGS with a strong-Wolfe line search;
    the first ``n_fixed`` components of ``z`` are held fixed (their gradient taken as
    zero: the ``alpha``-step of the alternation, ``n_fixed = len(theta)``).

    Stops after ``max_iter`` iterations; when the last ``window`` iterations lowered
    ``J`` by at most ``tol * max(|J|, 1)`` in total (status 1); when one iteration
    lowered it by at most ``64 eps max(|J_old|, |J|, 1)`` (scipy's ``ftol``, status 2);
    or when the line search finds no acceptable step (status 3, ``z`` the best point).
    ``history[0]`` is ``J`` at the start, ``history[t]`` after iteration ``t``.

    **Resumable.** ``state = (S, Y, rho, g, ints, J)`` (:func:`lbfgs_state`) holds what
    carries from one iteration to the next -- the stored pairs, the gradient at ``z``,
    ``ints = [iterations done, newest pair, pairs stored, evaluations, started]`` and
    ``J = [J(z)]`` -- so a run cut into calls, each with a larger ``max_iter``, takes
    the same steps as one call (:meth:`CompiledLatent.run` returns to Python between
    them: Ctrl-C acts).

    Returns
    -------
    n_iter : int
    status : int
        0 (``max_iter`` reached), 1, 2 or 3 as above.
    n_eval : int
        Objective evaluations.
    """
    n = z.shape[0]
    mem = MEMORY
    S, Y, rho, g, ints, fbox = state
    alpha = np.zeros(mem)
    d = np.empty(n)
    znew = np.empty(n)
    gnew = np.empty(n)
    zlo = np.empty(n)
    glo = np.empty(n)
    if ints[4] == 0:  # the first call: J and its gradient at the start
        fbox[0] = latent_value_grad(lp, XT, VT, y, sw, z, K, fit_intercept, alpha_penalty,
                                    KN, DN, DK, KD, N4, bits, g)
        g[:n_fixed] = 0.0
        history[0] = fbox[0]
        ints[0], ints[1], ints[2], ints[3], ints[4] = 0, mem - 1, 0, 1, 1
    it, newest, count, n_eval = ints[0], ints[1], ints[2], ints[3]
    f = fbox[0]
    status = 0
    while it < max_iter:
        if count == 0:
            gn = 0.0
            for j in range(n):
                d[j] = -g[j]
                gn += g[j] * g[j]
            step = min(1.0, 1.0 / math.sqrt(gn)) if gn > 0.0 else 1.0
        else:
            two_loop(g, S, Y, rho, newest, count, d, alpha)
            step = 1.0
        d0 = 0.0
        for j in range(n):
            d0 += g[j] * d[j]
        if not d0 < 0.0:  # not a descent direction (rounding): restart from -g
            if count == 0:
                status = 3
                break
            count = 0
            continue
        # line search (Nocedal & Wright Algorithms 3.5 / 3.6)
        f_prev_step, d_prev_step, a_prev = f, d0, 0.0
        found = False
        zoom = False
        a_lo = a_hi = f_lo = f_hi = d_lo = d_hi = 0.0
        evals = 0
        while evals < MAX_LINE_SEARCH:
            ft, dt = _latent_phi(step, z, d, znew, gnew, lp, XT, VT, y, sw, K,
                                 fit_intercept, alpha_penalty, KN, DN, DK, KD, N4, bits,
                                 n_fixed)
            evals += 1
            if not zoom:
                if (not ft <= f + _C1 * step * d0) or (evals > 1 and ft >= f_prev_step):
                    zoom = True
                    a_lo, f_lo, d_lo = a_prev, f_prev_step, d_prev_step
                    a_hi, f_hi, d_hi = step, ft, dt
                elif abs(dt) <= -_C2 * d0:
                    found = True
                    break
                elif dt >= 0.0:
                    zoom = True
                    a_lo, f_lo, d_lo = step, ft, dt
                    a_hi, f_hi, d_hi = a_prev, f_prev_step, d_prev_step
                    for j in range(n):
                        zlo[j] = znew[j]
                        glo[j] = gnew[j]
                else:
                    a_prev, f_prev_step, d_prev_step = step, ft, dt
                    for j in range(n):
                        zlo[j] = znew[j]
                        glo[j] = gnew[j]
                    step = 4.0 * step
                    continue
            else:
                if (not ft <= f + _C1 * step * d0) or ft >= f_lo:
                    a_hi, f_hi, d_hi = step, ft, dt
                else:
                    if abs(dt) <= -_C2 * d0:
                        found = True
                        break
                    if dt * (a_hi - a_lo) >= 0.0:
                        a_hi, f_hi, d_hi = a_lo, f_lo, d_lo
                    a_lo, f_lo, d_lo = step, ft, dt
                    for j in range(n):
                        zlo[j] = znew[j]
                        glo[j] = gnew[j]
            if abs(a_hi - a_lo) <= _EPS * max(a_lo, a_hi):
                break
            step = cubic_step(a_lo, f_lo, d_lo, a_hi, f_hi, d_hi)
        n_eval += evals
        if not found:
            # the best point seen (a_lo > 0: lower than f, satisfying sufficient decrease)
            if a_lo > 0.0 and f_lo < f:
                for j in range(n):
                    znew[j] = zlo[j]
                    gnew[j] = glo[j]
                ft = f_lo
            else:
                status = 3
                break
        it += 1
        # curvature pair (stored only if s^T y > eps y^T y)
        sy = 0.0
        yy = 0.0
        for j in range(n):
            sj = znew[j] - z[j]
            yj = gnew[j] - g[j]
            sy += sj * yj
            yy += yj * yj
        if sy > _EPS * yy:
            newest = newest + 1 if newest < mem - 1 else 0
            for j in range(n):
                S[newest, j] = znew[j] - z[j]
                Y[newest, j] = gnew[j] - g[j]
            rho[newest] = 1.0 / sy
            count = min(count + 1, mem)
        f_old = f
        f = ft
        for j in range(n):
            z[j] = znew[j]
            g[j] = gnew[j]
        history[it] = f
        if not found:
            status = 3
            break
        if it >= window and history[it - window] - f <= tol * max(abs(f), 1.0):
            status = 1
            break
        if f_old - f <= 64.0 * _EPS * max(abs(f_old), abs(f), 1.0):
            status = 2
            break
    ints[0], ints[1], ints[2], ints[3] = it, newest, count, n_eval
    fbox[0] = f
    return it, status, n_eval


def lbfgs_state(n):
    """A fresh ``state`` of :func:`lbfgs_latent` for ``n`` variables."""
    return (np.zeros((MEMORY, n)), np.zeros((MEMORY, n)), np.zeros(MEMORY), np.empty(n),
            np.zeros(5, dtype=np.int64), np.zeros(1))


@_jit.njit(cache=True, nogil=True)
def _row_means(XT, sw):
    """``XT sw / sum(sw)`` by :func:`_dot` (fixed summation order)."""
    total = 0.0
    for i in range(sw.shape[0]):
        total += sw[i]
    out = np.empty(XT.shape[0])
    for d in range(XT.shape[0]):
        out[d] = _dot(XT[d], sw) / total
    return out


def input_mean(X, weights=None):
    """The weighted mean of the rows of ``X`` (dense or sparse; ``weights`` None: all 1),
    the centre of :class:`CompiledLatent`'s coordinates."""
    sw = np.ones(X.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    if sp.issparse(X):
        return np.asarray(X.T @ sw, dtype=np.float64).ravel() / sw.sum()
    return _row_means(np.array(X.T, dtype=np.float64, order="C"), np.ascontiguousarray(sw))


def shift_biases(alpha, mean, sign):
    """``c <- c + sign * alpha_{:D}^T mean`` in place on ``alpha`` of shape (D + 1, K)
    (hidden biases in its last row): ``sign = 1`` maps to centred coordinates, ``-1`` back."""
    alpha[-1] += sign * (mean @ alpha[:-1])
    return alpha


def centred_objective(fun, mean, n_theta, shape):
    """``fun(z) -> (J, grad)`` in the coordinates of ``X`` as a function of the centred
    coordinates ``z'`` (hidden biases ``c' = c + alpha^T mean``) -- the change of
    variables of :class:`CompiledLatent` for code that does not centre ``X`` itself
    (sparse ``X``, whose centring would fill it in): ``J'(z') = J(z)``,
    ``dJ'/dalpha_{:D} = dJ/dalpha_{:D} - mean (dJ/dc)^T``, the rest unchanged."""
    def centred(zc):
        z = np.array(zc, dtype=np.float64)
        shift_biases(z[n_theta:].reshape(shape), mean, -1.0)
        J, grad = fun(z)
        grad = np.array(grad, dtype=np.float64)
        g_alpha = grad[n_theta:].reshape(shape)
        g_alpha[:-1] -= np.outer(mean, g_alpha[-1])
        return J, grad
    return centred


class CompiledLatent:
    """A dense latent problem's arrays for :func:`lbfgs_latent`, prepared once.

    Holds feature-major copies ``(X - 1 mu^T)^T`` and ``V^T`` (two more ``N x D`` arrays
    than the design and its noise entries) and the work arrays of
    :class:`bayesdrop.model._latent_compiled.LatentWork`.

    **Centred inputs.** :meth:`run` minimises ``J`` over the hidden biases
    ``c' = c + alpha_{:D}^T mu`` instead of ``c`` (``mu`` the weighted mean of the rows of
    ``X``): the pre-activations ``X alpha_{:D} + c = (X - 1 mu^T) alpha_{:D} + c'`` are
    the same, the noise variances ``s`` and the penalty do not involve ``c``, so this is
    an exact change of variables -- the same ``J``, the same minimisers, mapped back
    before :meth:`run` returns. L-BFGS is not invariant to it: with inputs of non-zero
    mean (digits' pixels, 0..1) a step in ``alpha`` also moves every pre-activation's
    mean, coupling ``alpha`` with ``c`` and ``w``; centred, the curvature is closer to
    diagonal -- the input centring of LeCun, Bottou, Orr & Mueller, *Efficient BackProp*
    (1998), section 4.3, applied to the optimiser's coordinates rather than to the data
    (the model, its dropout variances included, stays that of ``X``). Measured on digits
    (q = 0.2, 10 seeds x 10 one-vs-rest problems): 29% fewer iterations, the final ``J``
    the same within its spread over local minima. Scaling the inputs as well (by their
    standard deviations) makes the penalty's curvature ``alpha_penalty / sd_d^2``
    ill-conditioned and took three times the iterations; not done.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    entries : tuple
        :func:`bayesdrop.model.latent.noise_entries` of ``X``.
    y : ndarray of shape (n_samples,)
    loss : Loss
        A loss with compiled kernels (:meth:`applies`).
    n_hidden : int
    fit_intercept : bool
    alpha_penalty : float
    """

    def __init__(self, X, entries, y, loss, n_hidden, fit_intercept, alpha_penalty):
        n, d = X.shape
        sw = (np.ones(n) if loss.weights is None
              else np.ascontiguousarray(loss.weights, dtype=np.float64))
        # feature-major copies (see bayesdrop.model._latent_compiled), X centred
        XT = np.array(X.T, dtype=np.float64, order="C")
        #: the centre of the inputs (see the class docstring): the weighted mean of the
        #: rows, summed in fixed lanes (the same for any number of BLAS threads)
        self.mean = _row_means(XT, sw)
        XT -= self.mean[:, None]
        self._head = (loss.kernel_params, XT)
        self._V = (np.ascontiguousarray(entries[3].T) if entries[3] is not None
                   else np.zeros((0, 0)))
        self._data = (np.ascontiguousarray(y, dtype=np.float64), sw)
        self._shape = (int(n_hidden), bool(fit_intercept), float(alpha_penalty))
        self._work = LatentWork(n, d, int(n_hidden))

    @staticmethod
    def applies(X, loss):
        """Dense ``X`` and a loss with compiled terms."""
        return has_kernels(loss) and not sp.issparse(X)

    def _hidden_layer(self, z):
        """``alpha`` of ``z = [w, b, alpha.ravel()]`` as a view of shape (D + 1, K)."""
        K, fit_intercept, _ = self._shape
        return z[K + (1 if fit_intercept else 0):].reshape(self.mean.shape[0] + 1, K)

    def run(self, z, iterations, tol, window, clean=False, n_fixed=0):
        """:func:`lbfgs_latent` from ``z`` (overwritten) for at most ``iterations``
        iterations, on the clean ``J`` if ``clean``; returns ``(history, n_iter,
        status)``. ``z = [w, b, alpha.ravel()]`` as :func:`lbfgs_latent`'s, in the
        coordinates of ``X`` (the centring is internal)."""
        iterations = int(iterations)
        history = np.empty(iterations + 1)
        V = np.zeros((0, 0)) if clean else self._V
        state = lbfgs_state(z.shape[0])
        alpha = shift_biases(self._hidden_layer(z), self.mean, 1.0)  # c' = c + alpha^T mu
        status = [0]

        def advance(stop):
            done, status[0], _ = lbfgs_latent(
                *self._head, V, *self._data, z, *self._shape, stop, float(tol),
                int(window), history, *self._work.arrays(), int(n_fixed), state)
            return done, status[0] != 0

        try:  # in blocks of about BLOCK_SECONDS: Ctrl-C acts between them
            n_iter = in_blocks(advance, iterations, _FIRST_BLOCK)
        finally:  # z back in the coordinates of X, also when interrupted
            shift_biases(alpha, self.mean, -1.0)
        return history[:n_iter + 1].copy(), n_iter, status[0]

    def value_grad(self, z, clean=False):
        """``J(z)`` and its gradient in the coordinates of ``X``, evaluated as :meth:`run`
        does (centred inputs; ``dJ/dalpha_{:D} = dJ/dalpha'_{:D} + mu (dJ/dc')^T``)."""
        z = np.array(z, dtype=np.float64)
        grad = np.empty_like(z)
        shift_biases(self._hidden_layer(z), self.mean, 1.0)
        V = np.zeros((0, 0)) if clean else self._V
        K, fit_intercept, pen = self._shape
        J = latent_value_grad(*self._head, V, *self._data, z, K, fit_intercept, pen,
                              *self._work.arrays(), grad)
        g_alpha = self._hidden_layer(grad)
        g_alpha[:-1] += np.outer(self.mean, g_alpha[-1])
        return J, grad
