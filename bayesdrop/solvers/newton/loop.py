"""Newton's method on ``J``, written once: the phases of the iteration over a *step
evaluator*.

:func:`newton_loop` is the whole iteration (its phases named as in scikit-learn's
``linear_model/_glm/_newton_solver.py``): **setup** (``J`` and the gradient at the start),
**inner solve** (a Newton direction with a new Hessian, or a chord / BFGS-updated one
with the kept factor, :func:`qn_direction`), **line search** (backtracking Armijo from the
full step, a far full step doubled while ``J`` falls), **update of the gradient and
Hessian** at the accepted point, and the **convergence check** (the Newton decrement
``lambda^2 = -g.p``). Where the data live and how the Hessian is factored or applied is
the evaluator's business, through seven operations with the evaluator as first argument:

=====================================  ==============================================
``start(ev, theta)``                   ``(J, g)`` at ``theta``
``newton_direction(ev, g, rtol)``      ``p = -H^{-1} g`` with ``H`` at the current point
                                       (an exact factor, or CG to the relative residual
                                       ``rtol``); the factor is kept
``chord_solve(ev, q)``                 ``H_k^{-1} q`` with the kept factor
``trial(ev, theta, step, t, slot,      ``J(theta + t step)``, its scores kept in
derivs)``                              ``slot`` 0 (the line search) or 1 (a doubling);
                                       ``derivs``: keep its first derivatives too
``take_doubled(ev)``                   slot 1 becomes slot 0
``retry_exact(ev, fresh)``             after a failed line search with a fresh factor:
                                       whether one more exact factor may help (a
                                       float32 factor is then recomputed in float64)
``accept(ev, theta, second)``          move to slot 0's point ``theta``; ``(J, g)``
                                       there, and the second derivatives if ``second``
=====================================  ==============================================

and one attribute, ``ev.exact`` (an exact factor: its steps may be kept, updated by BFGS
and doubled; False for CG). Each operation is a plain function that calls the
evaluator's method of that name -- :mod:`.steps` holds the evaluators of a ``Design``
(dense or CSR, Cholesky or CG) and of a row back-end (dask) -- and the compiled dense
evaluator of :mod:`.compiled` overloads them for numba, which compiles **this same
function** into a loop with no Python between the steps.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import _jit

__all__ = ["ROUNDING_RTOL", "STAGNATION_RTOL", "STAGNATION_STEPS", "STALL_RTOL",
           "KeptFactor", "NewtonOptions", "accept", "add_pair", "chord_solve",
           "newton_direction", "newton_loop", "qn_direction", "retry_exact", "start",
           "take_doubled", "trial"]

#: status codes of :func:`newton_loop`
CONVERGED, MAX_ITER, NO_DECREASE, STALLED, NONFINITE_DIRECTION, NONFINITE_START = \
    1, 0, 2, 3, -1, -2
#: a decrement at the tolerance with a gradient still above ``STALL_RTOL`` of the first
#: one (and above ``sqrt(tol) max(|J|, 1)``) is a stall, not convergence (see
#: :func:`newton_loop`)
STALL_RTOL = 1e-4
#: a stall also when ``J`` fell by at most ``STAGNATION_RTOL max(|J|, 1)`` over the last
#: ``STAGNATION_STEPS`` steps while the gradient is large (as for :data:`STALL_RTOL`):
#: the trap near ``w = 0`` crawls rather than stops (digits one-vs-rest, hinge
#: ``q = 0.2``, ``C = 0.1``, the class whose optimum is ``w = 0``: ``J`` fell by about
#: 1e-7 of itself per step for 30 steps, to ``max_iter``); ``solver="auto"`` continues
STAGNATION_STEPS = 5
STAGNATION_RTOL = 1e-6
#: a full step whose decrement is at most ``ROUNDING_RTOL max(|J|, 1)`` -- a predicted
#: decrease below the rounding of ``J`` -- passes the line search unless ``J`` rose by
#: more than that: the Armijo test cannot see such a decrease, and refusing the step left
#: the gradient where rounding stopped it (sample weights against repeated rows, 3
#: classes of 15 x 30: coefficients 1e-8 apart, gradients 6e-8, whatever ``tol``)
ROUNDING_RTOL = 64.0 * 2.220446049250313e-16


class NewtonOptions(NamedTuple):
    """The constants of one run (the module constants of :mod:`bayesdrop.solvers.newton`,
    read when a fit starts).

    Attributes
    ----------
    tol, max_iter : float, int
        Stop after the step whose decrement satisfies
        ``lambda^2 / 2 <= tol max(|J|, 1)``; at most ``max_iter`` steps.
    armijo, min_step : float
        Sufficient-decrease constant; smallest step length tried.
    reuse : float
        A full step whose decrement is at most ``reuse * max(|J|, 1)`` keeps its factor
        for the next direction (``REUSE_DECREMENT``; 0: never).
    contraction : float
        A kept factor's direction is used only while its decrement is at most this times
        the previous one.
    chord_stop : float
        A kept factor's step ends the iteration at this times the Newton threshold.
    expand_steps, expand_ratio : int, float
        Doublings of a far full step, tried when ``J`` fell by more than
        ``expand_ratio * lambda^2 / 2``.
    qn_memory : int
        BFGS pairs that update a kept factor.
    cg_floor : float
        Smallest relative residual asked of an inexact (CG) direction.
    bare_J : float
        ``J`` of the best bare model ``(0, b)`` (``inf``: no check).
    trap_steps : int
        From this many steps on, an iterate still above ``bare_J`` after a cut step ends
        the run as a stall (``TRAP_STEPS`` of :mod:`bayesdrop.solvers.newton`).
    check_start : bool
        A start at or above ``bare_J`` ends the run before its first step, as a stall
        (``n_iter = 0``): where the bare model is the optimum no point lies below it, so
        the caller tries its certificate first (``check_start`` of
        :func:`bayesdrop.solvers.newton.fit`).
    """

    tol: float
    max_iter: int
    armijo: float
    min_step: float
    reuse: float
    contraction: float
    chord_stop: float
    expand_steps: int
    expand_ratio: float
    qn_memory: int
    cg_floor: float
    bare_J: float = math.inf
    trap_steps: int = 0
    check_start: bool = False


# -- the evaluator's operations (numba overloads them for the compiled evaluator) ----------

def start(ev, theta):
    """``(J, g)`` at ``theta``."""
    return ev.start(theta)


def newton_direction(ev, g, rtol):
    """``-H^{-1} g``, ``H`` the Hessian at the current point (factored and kept)."""
    return ev.newton_direction(g, rtol)


def chord_solve(ev, q):
    """``H_k^{-1} q`` with the kept factor."""
    return ev.chord_solve(q)


def trial(ev, theta, step, t, slot, derivs):
    """``J(theta + t step)``, its scores kept in ``slot``."""
    return ev.trial(theta, step, t, slot, derivs)


def take_doubled(ev):
    """The doubled step's point (slot 1) becomes the line search's (slot 0)."""
    ev.take_doubled()


def retry_exact(ev, fresh):
    """Whether a failed line search with a fresh factor is retried with an exact one."""
    return ev.retry_exact(fresh)


def accept(ev, theta, second):
    """Move to slot 0's point ``theta``; ``(J, g)`` there."""
    return ev.accept(theta, second)


# -- vector arithmetic: numpy in Python, loops compiled (numba's array expressions would
#    compile their broadcasting and its error messages, seconds of a first fit) ---------

def dot(a, b):
    """``a . b`` of two vectors (numpy's in Python; a left-to-right sum compiled)."""
    return float(np.dot(a, b))


def add_scaled(x, t, y):
    """``x + t y``, a new vector."""
    return x + t * y


def put(dst, src):
    """``dst[:] = src`` for vectors."""
    dst[:] = src


def _vectors(*args):
    from numba import types

    return all(isinstance(a, types.Array) and a.ndim == 1 for a in args)


@_jit.overload(dot)
def _dot_compiled(a, b):
    if _vectors(a, b):
        def impl(a, b):
            total = 0.0
            for i in range(a.shape[0]):
                total += a[i] * b[i]
            return total
        return impl
    return None


@_jit.overload(add_scaled)
def _add_scaled_compiled(x, t, y):
    if _vectors(x, y):
        def impl(x, t, y):
            out = np.empty(x.shape[0])
            for i in range(x.shape[0]):
                out[i] = x[i] + t * y[i]
            return out
        return impl
    return None


@_jit.overload(put)
def _put_compiled(dst, src):
    if _vectors(dst, src):
        def impl(dst, src):
            for i in range(dst.shape[0]):
                dst[i] = src[i]
        return impl
    return None


# -- the BFGS update of a kept factor ------------------------------------------------------

class KeptFactor(NamedTuple):
    """An evaluator that is only a kept lower Cholesky factor ``L`` of a Hessian ``H_k``
    (its lower triangle; the upper one is not read): the ``chord_solve`` of
    :func:`qn_direction` for a loop that takes its own steps
    (:func:`bayesdrop.solvers.bare.bare_newton`). Compiled code solves with the factor
    as :mod:`.compiled`'s evaluator does.

    Examples
    --------
    >>> H = np.array([[4.0, 1.0], [1.0, 3.0]])
    >>> ev = KeptFactor(np.linalg.cholesky(H))
    >>> bool(np.allclose(H @ chord_solve(ev, np.array([1.0, 2.0])), [1.0, 2.0]))
    True
    """

    L: np.ndarray

    def chord_solve(self, q):
        """``H_k^{-1} q`` by the two triangular solves."""
        from scipy.linalg import cho_solve

        return cho_solve((self.L, True), q, check_finite=False)


@_jit.jitable
def qn_direction(ev, g, S, Yq, rho, k):
    """``-B^{-1} g`` for ``B`` the kept factor's Hessian updated by BFGS with the ``k``
    pairs ``S[i], Yq[i]``, ``rho[i] = 1 / S[i].Yq[i]`` (oldest first): the two-loop
    recursion (Nocedal & Wright 2006, algorithm 7.4) with ``H_k^{-1}`` as its initial
    inverse instead of a multiple of the identity. Without pairs the chord step
    ``-H_k^{-1} g``."""
    q = g
    alphas = np.empty(max(k, 1))
    for i in range(k - 1, -1, -1):
        a = rho[i] * dot(S[i], q)
        q = add_scaled(q, -a, Yq[i])
        alphas[i] = a
    r = chord_solve(ev, q)
    for i in range(k):
        r = add_scaled(r, alphas[i] - rho[i] * dot(Yq[i], r), S[i])
    return add_scaled(np.zeros(r.shape[0]), -1.0, r)


@_jit.jitable
def add_pair(S, Yq, rho, k, s_k, y_k, memory):
    """Append the pair ``(s_k, y_k)`` if it has positive curvature
    (``s.y > 1e-12 ||s|| ||y||``; ``J`` is convex, so only rounding can break it),
    keeping the newest ``memory``; returns the new number of pairs."""
    sy = dot(s_k, y_k)
    if not sy > 1e-12 * math.sqrt(dot(s_k, s_k)) * math.sqrt(dot(y_k, y_k)):
        return k
    if k == memory:  # drop the oldest
        for i in range(1, k):
            put(S[i - 1], S[i])
            put(Yq[i - 1], Yq[i])
            rho[i - 1] = rho[i]
        k -= 1
    put(S[k], s_k)
    put(Yq[k], y_k)
    rho[k] = 1.0 / sy
    return k + 1


# -- the iteration ---------------------------------------------------------------------------

def newton_loop(ev, theta0, opts, fresh_first):
    """Minimise ``J`` from ``theta0`` by Newton's method over the evaluator ``ev``.

    ``fresh_first``: the first direction needs a new Hessian (False when ``ev`` starts
    with a factor, e.g. a subsample's). Returns ``(theta, J, g, history, n_iter, status,
    n_factors)``: ``status`` is :data:`CONVERGED`, :data:`MAX_ITER`, :data:`NO_DECREASE`
    (the line search found no decrease short of the tolerance: rounding level),
    :data:`STALLED` (the decrement reached the tolerance but the gradient did not shrink:
    not converged), :data:`NONFINITE_DIRECTION` or :data:`NONFINITE_START`;
    ``n_factors`` counts the new Hessians (factorisations or CG solves).
    """
    # setup
    theta = theta0.copy()
    p = theta.shape[0]
    history = np.empty(opts.max_iter + 1)
    J, g = start(ev, theta)
    history[0] = J
    if not np.isfinite(J):
        return theta, J, g, history[:1], 0, NONFINITE_START, 0
    if opts.check_start and J >= opts.bare_J:
        return theta, J, g, history[:1], 0, STALLED, 0
    memory = opts.qn_memory if ev.exact else 0
    S = np.empty((max(memory, 1), p))
    Yq = np.empty((max(memory, 1), p))
    rho = np.empty(max(memory, 1))
    n_pairs = 0
    g0 = max(math.sqrt(dot(g, g)), 1e-300)
    status = MAX_ITER
    it = 0
    n_factors = 0
    fresh_next = fresh_first
    prev_dec = np.inf
    step = np.zeros(p)
    decrement = 0.0
    while it < opts.max_iter:
        it += 1
        # inner solve: a new Hessian, or the kept factor while it contracts
        fresh = fresh_next or not ev.exact
        for _ in range(2):
            if fresh:
                rtol = max(min(0.5, math.sqrt(math.sqrt(dot(g, g)) / g0)), opts.cg_floor)
                step = newton_direction(ev, g, rtol)
                n_factors += 1
                n_pairs = 0
            else:
                step = qn_direction(ev, g, S, Yq, rho, n_pairs)
            decrement = -dot(g, step)
            if fresh or (np.isfinite(decrement) and decrement <= opts.contraction * prev_dec):
                break
            fresh = True
        if not np.isfinite(decrement):
            status = NONFINITE_DIRECTION
            break
        if decrement <= 0.0:  # at the optimum to rounding: no descent direction left
            status = CONVERGED
            it -= 1
            break
        # line search: backtracking Armijo from the full step; near the optimum the full
        # step is taken and the next direction reuses the factor, so the trial point's
        # first derivatives serve as the next gradient
        near = decrement <= opts.reuse * max(abs(J), 1.0)
        chord_next = ev.exact and near
        t = 1.0
        rounding = ROUNDING_RTOL * max(abs(J), 1.0)
        while True:
            J_c = trial(ev, theta, step, t, 0, t == 1.0 and chord_next)
            if J_c <= J - opts.armijo * t * decrement or t < opts.min_step:
                break
            if t == 1.0 and decrement <= rounding and J_c <= J + rounding:
                break  # a decrease below the rounding of J (see ROUNDING_RTOL)
            t *= 0.5
        if (t == 1.0 and ev.exact and not near
                and J - J_c > opts.expand_ratio * 0.5 * decrement):
            # far from the optimum: longer steps while J keeps falling
            for _ in range(opts.expand_steps):
                J_e = trial(ev, theta, step, 2.0 * t, 1, False)
                if not J_e < J_c:
                    break
                t *= 2.0
                J_c = J_e
                take_doubled(ev)
        if t < opts.min_step and J_c > J:  # no decrease possible
            if not fresh or retry_exact(ev, fresh):  # the same step with a new factor
                fresh_next = True
                it -= 1
                continue
            status = CONVERGED if decrement <= 2.0 * opts.tol * max(abs(J), 1.0) \
                else NO_DECREASE
            it -= 1
            break
        # update the gradient (and the Hessian's derivatives unless the factor is kept)
        theta = add_scaled(theta, t, step)
        prev_dec = decrement
        fresh_next = not (t == 1.0 and decrement <= opts.reuse * max(abs(J_c), 1.0))
        # the second derivatives come with the gradient (one pass over the data) where the
        # next direction needs them -- a new Hessian, or CG (a new one every step) -- and
        # not after the last step (the decrement test below, with J_c for J)
        last = decrement <= (2.0 * opts.tol * (1.0 if fresh else opts.chord_stop)
                             * max(abs(J_c), 1.0))
        J, g_new = accept(ev, theta, (fresh_next or not ev.exact) and not last)
        if memory > 0 and not fresh_next:
            n_pairs = add_pair(S, Yq, rho, n_pairs, add_scaled(np.zeros(p), t, step),
                               add_scaled(g_new, -1.0, g), memory)
        g = g_new
        history[it] = J
        # convergence check: the Newton decrement (a kept factor's step converges only
        # linearly, so it must be CHORD_STOP times smaller)
        if decrement <= 2.0 * opts.tol * (1.0 if fresh else opts.chord_stop) * max(abs(J), 1.0):
            # a small decrement with a large gradient means a huge Hessian, not the
            # optimum: near w = 0 every score variance vanishes and the examples on their
            # kinks give a curvature ~ C / sqrt(s_n) -- a trap of tiny steps (Fashion-MNIST,
            # hinge q = 0.5, C = 0.1: lambda^2 ~ 1e-6 with |g| = 60, J 2e-4 above J*)
            status = STALLED if _large(g, g0, J, opts.tol) else CONVERGED
            break
        if (it >= STAGNATION_STEPS and history[it - STAGNATION_STEPS] - J
                <= STAGNATION_RTOL * max(abs(J), 1.0) and _large(g, g0, J, opts.tol)):
            status = STALLED  # crawling in the trap (see STAGNATION_RTOL)
            break
        if it >= opts.trap_steps and J > opts.bare_J and t < 1.0:
            # no better than w = 0 and the line search cutting the steps: the trap's
            # curvature, not the quadratic convergence of full steps (see newton.TRAP_STEPS)
            status = STALLED
            break
    if (status == MAX_ITER or status == NO_DECREASE) and _large(g, g0, J, opts.tol):
        status = STALLED  # the same trap, where the steps did not even reach the tolerance
    return theta, J, g, history[: it + 1], it, status, n_factors


@_jit.jitable
def _large(g, g0, J, tol):
    """Whether the gradient is still large: above :data:`STALL_RTOL` of the first one and
    above ``sqrt(tol) max(|J|, 1)``."""
    gnorm = math.sqrt(dot(g, g))
    return gnorm > STALL_RTOL * g0 and gnorm > math.sqrt(tol) * max(abs(J), 1.0)
