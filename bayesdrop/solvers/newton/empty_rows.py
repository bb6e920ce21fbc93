"""Newton's method when the only non-smooth terms of ``J`` are those of *empty rows*.

Under a loss that is piecewise linear at zero noise (hinge, epsilon-insensitive), an
example with ``x_n = 0`` -- an empty document, an all-zero row -- has score variance
``s_n = 0`` for every ``w`` under dropout-like noise, and its score is the intercept
alone: ``m_n = b``. Its term keeps its kink, so ``J`` is not twice differentiable and
:func:`bayesdrop.solvers.newton.applicable` would send the whole problem to IRLS (on
newsgroups one empty document made the fit 100x slower). But these terms depend on one
variable:

    J(w, b) = J_N(w, b) + g(b),    g(b) = sum_{n empty} l_n(b),

with ``J_N`` (the penalty and every other, noisy, example) twice differentiable and ``g``
convex and piecewise linear in ``b``, with kinks ``K_1 < ... < K_r`` (the hinge: at most
two, ``b = +-margin``). :func:`solve` finds the exact minimiser:

1. Newton on ``J`` (the loss kernels give each empty row's exact value and slope on its
   piece, and zero curvature). If it converges, ``J`` is smooth around the point (or
   ``b`` sits in the closure of the piece whose slope it used; ``g`` is the maximum of
   its pieces' linear extensions, so ``J >= J_N + that extension``, whose minimum it
   is): the optimum, to Newton's tolerance.
2. Otherwise the optimum has ``b`` on a kink, or Newton stalled beside one. Take the
   nearest kink ``K``, minimise over ``w`` with ``b = K`` fixed (Newton on ``w`` alone:
   :class:`FixedInterceptSteps`), and check the optimality condition of the convex ``J``
   in ``b``: ``-d J_N / d b`` in ``[g'(K-), g'(K+)]`` (to :data:`KINK_RTOL`). If it holds,
   that point is the minimiser (certified). If not, ``J`` falls on one side of ``K``:
   Newton on ``J`` restarts there, and the round repeats (at most ``r + 1`` rounds).

If no round certifies (or a quiet row is not empty: its term then depends on ``w``),
:func:`solve` returns None and the caller goes on with IRLS.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from . import loop, steps

__all__ = ["KINK_RTOL", "FixedInterceptSteps", "empty_rows", "solve"]

#: relative tolerance of the kink's optimality condition (in units of the sum of the
#: slopes' sizes and ``|dJ_N/db|``)
KINK_RTOL = 1e-7


def empty_rows(problem):
    """Indices of the examples whose term is a piecewise-linear function of the intercept
    alone -- rows with ``x_n = 0`` and zero noise variance, under a loss with kinks at
    zero noise and a design with an intercept -- when these are the only examples with
    zero noise variance; None otherwise (no such row, a quiet row with ``x_n != 0``,
    a smooth loss, no intercept, or not a diagonal-noise design).

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, LogisticLoss, Dropout
    >>> X = np.array([[1.0, 2.0], [0.0, 0.0], [3.0, 0.0]]); y = np.array([1.0, -1.0, 1.0])
    >>> empty_rows(Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))).tolist()
    [1]
    >>> empty_rows(Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))) is None
    True
    """
    design, loss, y = problem
    if (loss.smooth or not design.fit_intercept or not design.diagonal_noise
            or loss.kinks(y[:1]) is None):
        return None
    quiet = design.quiet_rows()
    if quiet is None or not quiet.any():
        return None
    if np.any(quiet & design.nonzero_rows()):
        return None
    return np.flatnonzero(quiet)


class FixedInterceptSteps(steps.DesignSteps):
    """The steps of Newton's method on ``w`` alone, the intercept fixed at its value in
    ``theta0``: the intercept's gradient entry is dropped and the directions come from
    the ``w`` block of the Hessian (the design without its intercept column: the same
    ``X`` and variances), so every step keeps ``b``."""

    def __init__(self, problem, linalg, opts, **kwargs):
        super().__init__(problem, linalg, opts, **kwargs)
        self.inner = problem.design.without_intercept()

    def start(self, theta):
        J, g = super().start(theta)
        return J, _fixed(g)

    def accept(self, theta, second):
        J, g = super().accept(theta, second)
        return J, _fixed(g)

    def newton_direction(self, g, rtol):
        from ...linalg import hessian as hess

        if self.curv is None:
            _, _, self.curv = hess.curvature(self.problem, self.theta, self.m, self.s)
        if self.exact:
            self.new_factor(self.inner)
            return np.append(-sla.cho_solve(self.factor, g[:-1], check_finite=False), 0.0)
        return np.append(steps.direction_cg(self.inner, self.curv, g[:-1], rtol,
                                            self.cg_maxiter, self.opts.ridge)[0], 0.0)

    def chord_solve(self, q):
        return np.append(sla.cho_solve(self.factor, q[:-1], check_finite=False), 0.0)


def _fixed(g):
    g = np.array(g, dtype=float, copy=True)
    g[-1] = 0.0
    return g


def _slopes(kinks, rows, K):
    """``(g'(K-), g'(K+))``: the left and right slopes at ``K`` of the empty rows' sum."""
    pos, slopes = kinks
    pos, slopes = pos[rows], slopes[rows]
    left = np.sum(slopes[np.arange(len(rows)), np.sum(pos < K, axis=1)])
    right = np.sum(slopes[np.arange(len(rows)), np.sum(pos <= K, axis=1)])
    return float(left), float(right)


def solve(problem, rows, out, rerun, *, linalg, cg_maxiter, opts, factor_opts):
    """Minimise ``J`` of ``problem`` whose empty rows ``rows`` (:func:`empty_rows`) are its
    only non-smooth terms (see the module docstring), from ``out``: the output of
    :func:`~bayesdrop.solvers.newton.loop.newton_loop` on ``J`` (round 1).

    ``rerun(theta)`` runs that loop on ``J`` again from ``theta``. Returns the loop output
    ``(theta, J, g, history, n_iter, status, n_factors)`` of the certified point (the
    histories joined, the counts summed over the rounds), or None.
    """
    design, loss, y = problem
    kinks = loss.kinks(y)
    K_all = np.unique(kinks[0][rows])
    history, n_iter, n_factors = list(out[3]), out[4], out[6]
    for _ in range(len(K_all) + 1):
        if out[5] == loop.CONVERGED:
            return out[0], out[1], out[2], np.asarray(history), n_iter, out[5], n_factors
        theta = out[0]
        # the nearest kink: b fixed there, Newton on w
        K = float(K_all[np.argmin(np.abs(K_all - theta[-1]))])
        start = np.array(theta, dtype=float, copy=True)
        start[-1] = K
        ev = FixedInterceptSteps(problem, linalg, factor_opts, cg_maxiter=cg_maxiter)
        fixed = loop.newton_loop(ev, start, opts, True)
        history += list(fixed[3])
        n_iter += fixed[4]
        n_factors += fixed[6]
        if fixed[5] != loop.CONVERGED:
            return None
        # optimality in b: -dJ_N/db in [g'(K-), g'(K+)]
        theta_K = fixed[0]
        m, s = design.scores(theta_K)
        d_m = loss.terms(m, s, y)[1]
        noisy = np.ones(len(y), dtype=bool)
        noisy[rows] = False
        G = float(np.sum(d_m[noisy]))
        left, right = _slopes(kinks, rows, K)
        slack = KINK_RTOL * (abs(G) + float(np.sum(np.abs(kinks[1][rows]))))
        if left - slack <= -G <= right + slack:
            return (theta_K, fixed[1], fixed[2], np.asarray(history), n_iter,
                    loop.CONVERGED, n_factors)
        # J falls on the side where -G leaves the interval: Newton on J from there
        restart = theta_K.copy()
        restart[-1] = K + (1e-6 if -G > right else -1e-6) * max(abs(K), 1.0)
        out = rerun(restart)
        history += list(out[3])
        n_iter += out[4]
        n_factors += out[6]
    return None
