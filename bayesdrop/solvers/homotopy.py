"""The zero-noise piecewise-linear losses along a path in ``C``, exactly: the solution
path followed from a neighbouring ``C``'s optimum (homotopy).

At zero noise the hinge and epsilon-insensitive terms are piecewise linear in the score
(kinks ``p_nj``, slopes ``s_nj``: :meth:`bayesdrop.model.losses.Loss.kinks`), and ``C``
scales every slope. Write the problem at ``t C`` (``t = 1``: the target) as

    J_t(w, b) = ||w||^2 + sum_n t l_n(m_n),     m_n = x_n.w + b.

Its optimum is fixed by the set ``E`` of examples on a kink (``m_n = p_n``, multiplier
``u_n`` in the subgradient interval ``[t s_left, t s_right]``) and the piece every other
example lies on (slope ``t s_n``). For a fixed assignment the KKT conditions

    2 w + X_E^T u + t f_w = 0,   1^T u + t f_b = 0,   X_E w + b 1 = p_E,
    f = Xbar_F^T s_F  (the examples off their kinks),

are linear with a right-hand side affine in ``t``, so ``(w, b, u)`` is affine in ``t``:
eliminating ``w`` gives the bordered system

    [[X_E X_E^T / 2, -1], [-1^T, 0]] [u; b] = [-p_E - t X_E f_w / 2; t f_b]

(two right-hand sides: the parts constant and linear in ``t``). The path is piecewise
affine (the regularisation path of Hastie, Rosset, Tibshirani & Zhu 2004 for the SVM,
here in the primal for any convex piecewise-linear term): it changes direction only at
an *event*, where an example off its kinks reaches one (it joins ``E``) or a multiplier
reaches an end of its interval (the example leaves ``E`` for the piece on that side).
:func:`follow` walks from ``t0`` (where ``theta0`` is the exact optimum) to ``t = 1``
event by event -- each event a ``(k + 1)``-system (``k = |E| <= n_params``), ``O(k D)``
for the kink rows and one product with ``X`` (the scores' slope in ``t``; the scores
themselves move along each segment) -- and its end point is kept only where the KKT
conditions hold there, checked afresh from the scores
(:func:`~bayesdrop.solvers.irls.kkt_certificate`: every example on its piece or kink,
every multiplier in its interval, ``2 w + Xbar_w^T a = 0`` and ``sum_n a_n = 0``); where
the rounding summed over the events left the end point off its kinks (unscaled features:
scores drifting 46 times their slack over 131 events), the exact point of the final
assignment is solved afresh (:func:`~bayesdrop.solvers.irls.active_set_polish`) and
certified instead. With no example on a kink (balanced slopes: ``J`` flat in ``b``) the
walk keeps ``b`` where it is; any point of that stretch is optimal.

Between two grid points of a cross-validation path (``C`` a factor 7.7 apart) the
events are a few to a few hundred (most at small ``C``), where SMO (:mod:`.dual`) takes
up to thousands of two-variable steps and the smoothing solver (:mod:`.smoothing`) tens
of Newton steps on ``J_mu`` from its warm start. Where the walk cannot go on -- a start
that is not the optimum (1e-6), more examples on kinks than parameters (duplicated
rows), a singular system, :data:`MAX_EVENTS` events (fewer on many examples:
:data:`EVENT_WORK`), an end point without certificate --
:func:`follow` returns None and the caller's solver runs from ``theta0`` as before.
"""

from __future__ import annotations

import time

import numpy as np

from ._homotopy_compiled import OK, walk
from .irls import active_set_polish, kink_assignment, kink_tolerance, kkt_certificate
from .polish import exact_result

__all__ = ["EVENT_WORK", "MAX_EVENTS", "MAX_PARAMS", "applicable", "follow"]

#: Most parameters for which the path is followed (each event forms ``X_E X_E^T``,
#: ``O(k^2 D)`` with ``k`` up to ``n_params``).
MAX_PARAMS = 300

#: Events per call at most (then the caller's solver takes over).
MAX_EVENTS = 2000

#: ... and at most ``EVENT_WORK / (n_samples n_params)`` of them (at least 100): an event
#: costs a product with ``X``, so on many examples a long walk costs more than the
#: smoothing solver's tens of Newton steps. 20000 x 20 epsilon-insensitive, C 0.01 ->
#: 0.077: more than 2000 events (0.54 s, then the smoothing solver) against the smoothing
#: solver's 0.29 s; hinge 1649 events, 0.48 s against 0.09 s. Breast cancer (455 x 31)
#: keeps up to 1400 events, diabetes (353 x 11) the full 2000.
EVENT_WORK = 2e7


def applicable(problem):
    """Whether the path can be followed: a piecewise-linear loss (hinge,
    epsilon-insensitive) at zero noise, a dense ``X`` and at most :data:`MAX_PARAMS`
    parameters.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from bayesdrop import Problem, EpsilonInsensitiveLoss
    >>> X = np.eye(3); y = np.array([0.5, -1.0, 2.0])
    >>> loss = EpsilonInsensitiveLoss(1.0, 0.1)
    >>> applicable(Problem.create(X, y, loss, "none"))
    True
    >>> applicable(Problem.create(sp.csr_matrix(X), y, loss, "none"))  # dense X only
    False
    """
    from . import smoothing  # the same losses and noise (and its bound on parameters)

    design = problem.design
    return bool(smoothing.applicable(problem) and not design.sparse
                and design.n_params <= MAX_PARAMS)


def follow(problem, theta0, t0, max_events=None):
    """The exact optimum of ``problem`` by following its solution path from ``t0``.

    Parameters
    ----------
    problem : Problem
        See :func:`applicable`.
    theta0 : ndarray
        The exact optimum of the same problem with every slope of the loss multiplied by
        ``t0`` (``C`` times ``t0``), e.g. the previous fit of a path over ``C``.
    t0 : float > 0
    max_events : int, optional
        Events walked at most (then None); default :data:`MAX_EVENTS`, and at most
        ``EVENT_WORK / (n_samples n_params)`` (at least 100).

    Returns
    -------
    SolverResult or None
        Certified by :func:`~bayesdrop.solvers.irls.kkt_certificate`
        (``solver="homotopy"``, ``n_iter`` the events walked); None where the walk cannot
        go on (see the module docstring) or the end point is not certified.

    Examples
    --------
    From the optimum at ``C = 1`` to ``C = 8``, against libsvm at ``C = 8``:

    >>> from bayesdrop import Problem, HingeLoss
    >>> from bayesdrop.solvers import dual
    >>> from sklearn.svm import SVC
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=80))
    >>> start = dual.fit(Problem.create(X, y, HingeLoss(1.0), "none")).theta
    >>> res = follow(Problem.create(X, y, HingeLoss(8.0), "none"), start, 1.0 / 8.0)
    >>> ref = SVC(kernel="linear", C=8.0, tol=1e-10).fit(X, y)
    >>> res.solver, bool(np.allclose(res.theta[:3], ref.coef_[0], atol=1e-6))
    ('homotopy', True)
    """
    if not applicable(problem):
        raise ValueError("the path can be followed for a piecewise-linear loss at zero "
                         f"noise, a dense X and at most {MAX_PARAMS} parameters")
    start = time.perf_counter()
    design, loss, y = problem
    if max_events is None:
        work = EVENT_WORK / (design.n_samples * design.n_params)
        max_events = min(MAX_EVENTS, max(100, int(work)))
    pos, slopes = loss.kinks(y)
    pos = np.ascontiguousarray(pos, dtype=np.float64)
    slopes = np.ascontiguousarray(slopes, dtype=np.float64)
    theta0 = np.ascontiguousarray(theta0, dtype=np.float64)
    # the examples on a kink (E, with its index) and the piece of the others
    kink, dist, piece = kink_assignment(design.matvec(theta0), pos)
    on = dist <= kink_tolerance(design, theta0, pos)
    kink, piece = kink.astype(np.int64), piece.astype(np.int64)
    a = np.empty(design.n_samples)
    status, events, theta = walk(np.ascontiguousarray(design.X), design.fit_intercept, pos,
                                 slopes, on, kink, piece, theta0, float(t0), int(max_events),
                                 a)
    if status != OK:
        return None
    if not kkt_certificate(problem, theta, on, kink, piece, a, pieces=(pos, slopes)):
        # the walk's rounding, summed over its events, may leave the end point off its
        # kinks: the exact point of the final assignment (the polish's equilibrated,
        # refined solve) where it is certified
        theta, _ = active_set_polish(problem, theta, on, (kink, piece))
        if theta is None:
            return None
    # the history starts at theta0 (the previous optimum) on this problem
    return exact_result(problem, theta, [problem.objective(theta0), problem.objective(theta)],
                        events, start, "homotopy", events + 1)
