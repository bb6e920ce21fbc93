"""The zero-noise hinge loss with an unpenalised intercept, exactly: SMO on the dual, then
the active-set polish.

At zero noise ``J = ||w||^2 + 2C sum_n max(0, 1 - y_n (w.x_n + b))`` has the minimiser of
the linear SVM ``1/2 ||w||^2 + C sum_n hinge``, whose dual is::

    min_a  1/2 a^T Q a - 1^T a,   Q_nk = y_n y_k x_n.x_k,   0 <= a_n <= C,   y^T a = 0,

with ``w = sum_n a_n y_n x_n``. The equality constraint (the unpenalised intercept -- the
reason liblinear's coordinate descent does not apply) is kept by updating two variables
at a time: sequential minimal optimisation with the second-order working-set selection of
Fan, Chen & Lin (2005, libsvm's WSS 3), on the precomputed Gram matrix ``X X^T``. SMO is
run to a maximal KKT violation of 3e-2 (then 1e-3, 1e-6, 1e-9: :data:`SMO_STAGES`); from its
point the active-set polish of
:func:`bayesdrop.solvers.irls.active_set_polish`, started from the free support vectors
(``0 < a_n < C``, :data:`FREE_TOL`), solves the equality-constrained problem on the margin
exactly and certifies it by the KKT conditions. Where the smoothing solver
(:mod:`bayesdrop.solvers.smoothing`) applies (at most 2000 parameters) it continues from
the SMO point when a stage does not reach its tolerance within :data:`STAGE_STEPS`
``N`` steps (SMO converges slowly on ill-conditioned data, e.g. redundant features) or
the last stage does not certify; otherwise IRLS does.

The compiled loop is :func:`_smo` (numba, ``O(N)`` per step with the Gram matrix in
memory, ``O(working set)`` once libsvm's shrinking has left out the variables at a bound
that cannot enter a violating pair: :data:`SHRINK_EVERY`, :data:`SHRINK_FRACTION`); the
solver applies up to :data:`MAX_DUAL_SAMPLES` examples.
"""

from __future__ import annotations

import time

import numpy as np

from .. import _jit
from .._threads import with_single_blas_pool
from ..model.losses import HingeLoss
from .polish import certify, exact_result

__all__ = ["MAX_DUAL_SAMPLES", "SMO_TOL", "applicable", "fit"]

#: Largest number of examples for which the Gram matrix ``X X^T`` is formed (memory
#: ``8 N^2`` bytes: 200 MB at 5000).
MAX_DUAL_SAMPLES = 5000

#: Smallest maximal KKT violation ``m(a) - M(a)`` SMO is run to.
SMO_TOL = 1e-9

#: Where SMO stalls, the solution path starts at ``C`` times this
#: (:func:`_along_the_path`): small enough that SMO certifies there in few steps.
PATH_T0 = 1e-4

#: KKT violations after which the polish is tried, SMO continuing from its point between
#: them. From the free support vectors of a rough SMO point the polish usually certifies
#: the optimum (breast cancer and newsgroups at 3e-2; 1e-3 is libsvm's default).
SMO_STAGES = (3e-2, 1e-3, 1e-6, 1e-9)

#: SMO steps per example and stage when the smoothing solver can take over
STAGE_STEPS = 5

_TAU = 1e-12

#: a dual variable counts as free (its example on the margin: the polish's start set) when
#: ``FREE_TOL C_n < a_n < (1 - FREE_TOL) C_n``
FREE_TOL = 1e-8


def applicable(problem):
    """Whether the dual solver applies: the hinge loss (margin 1 or any ``l > 0``) at zero
    noise, with an intercept, and at most :data:`MAX_DUAL_SAMPLES` examples.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> X = np.eye(3); y = np.array([1.0, -1.0, 1.0])
    >>> applicable(Problem.create(X, y, HingeLoss(1.0), "none"))
    True
    >>> applicable(Problem.create(X, y, HingeLoss(1.0), Dropout(0.2)))
    False
    """
    design, loss, _ = problem
    return bool(type(loss) is HingeLoss and loss.margin > 0 and design.noise_free
                and design.fit_intercept and design.diagonal_noise
                and design.n_samples <= MAX_DUAL_SAMPLES)


#: SMO steps between two shrinking passes (libsvm shrinks every ``min(N, 1000)`` steps. More often here: with the Gram matrix in memory a step costs
#: ``O(working set)`` and there is no kernel cache to keep warm, so early shrinking costs
#: only the gradient reconstructions. Measured on breast cancer (569 examples, 41 support
#: vectors, SMO to a violation of 3e-2, 957-986 steps): every 1000 / 200 / 100 / 50 / 20
#: steps 954 / 453 / 397 / 335 / 326 us, against 816 us for the loop without shrinking)
SHRINK_EVERY = 50
#: a shrinking pass from the full set is kept only if it leaves at most this fraction of
#: the variables: the loops over a working set read through an index array, slower per
#: element than the contiguous loops (newsgroups, 827 of 1427 left: 9.8 against 6.2 ms)
SHRINK_FRACTION = 0.5


@_jit.njit(cache=True, nogil=True)
def _reconstruct(K, y, a, G, idx, n_act):
    """``G_t = sum_s y_t y_s K_ts a_s - 1`` for the shrunk indices ``idx[n_act:]`` (their
    gradient is not updated while they are out of the working set)."""
    n = y.shape[0]
    for k in range(n_act, n):
        G[idx[k]] = -1.0
    for s in range(n):
        if a[s] != 0.0:
            ya = y[s] * a[s]
            Ks = K[s]
            for k in range(n_act, n):
                t = idx[k]
                G[t] += y[t] * ya * Ks[t]


@_jit.njit(cache=True, nogil=True, inline="always")
def _pair_all(K, Kd, y, a, C, G):
    """WSS 3 over all variables: ``(i, j, m(a), M(a))``; ``i`` or ``j`` is -1 if none."""
    n = y.shape[0]
    gmax = -np.inf
    i = -1
    for t in range(n):  # i: the maximal violating index in I_up
        if (y[t] > 0 and a[t] < C[t]) or (y[t] < 0 and a[t] > 0):
            v = -y[t] * G[t]
            if v >= gmax:
                gmax = v
                i = t
    gmin = np.inf
    j = -1
    obj_min = np.inf
    Ki = K[max(i, 0)]
    for t in range(n):  # j: the largest second-order decrease with i, in I_low
        if (y[t] > 0 and a[t] > 0) or (y[t] < 0 and a[t] < C[t]):
            v = -y[t] * G[t]
            if v < gmin:
                gmin = v
            if i >= 0:
                b = gmax - v
                if b > 0.0:
                    quad = Kd[i] + Kd[t] - 2.0 * Ki[t]
                    if quad <= 0.0:
                        quad = _TAU
                    val = -(b * b) / quad
                    if val <= obj_min:
                        obj_min = val
                        j = t
    return i, j, gmax, gmin


@_jit.njit(cache=True, nogil=True, inline="always")
def _pair_set(K, Kd, y, a, C, G, idx, n_act):
    """:func:`_pair_all` over the working set ``idx[:n_act]`` (the same loops through the
    index array: one function indexing every element was 30-40% slower on the full set,
    breast cancer 1100 against 770 us, so the full set keeps its contiguous copy)."""
    gmax = -np.inf
    i = -1
    for k in range(n_act):
        t = idx[k]
        if (y[t] > 0 and a[t] < C[t]) or (y[t] < 0 and a[t] > 0):
            v = -y[t] * G[t]
            if v >= gmax:
                gmax = v
                i = t
    gmin = np.inf
    j = -1
    obj_min = np.inf
    Ki = K[max(i, 0)]
    for k in range(n_act):
        t = idx[k]
        if (y[t] > 0 and a[t] > 0) or (y[t] < 0 and a[t] < C[t]):
            v = -y[t] * G[t]
            if v < gmin:
                gmin = v
            if i >= 0:
                b = gmax - v
                if b > 0.0:
                    quad = Kd[i] + Kd[t] - 2.0 * Ki[t]
                    if quad <= 0.0:
                        quad = _TAU
                    val = -(b * b) / quad
                    if val <= obj_min:
                        obj_min = val
                        j = t
    return i, j, gmax, gmin


@_jit.njit(cache=True, nogil=True)
def _smo(K, y, C, tol, max_iter, a, G, shrink_every=SHRINK_EVERY):
    """SMO with WSS 3 on ``min 1/2 a^T Q a - 1^T a``, ``0 <= a_n <= C_n``, from
    ``(a, G = Q a - 1)``, in place; returns the number of steps and the smallest working
    set. ``K`` is symmetric: rows are read, never columns. ``C`` holds each example's box
    (``C w_n`` when weighted).

    Shrinking (libsvm's rule, Fan, Chen & Lin 2005, section 4): every ``shrink_every``
    steps the variables at a bound that cannot enter a violating pair are left out of the
    working-set selection and of the gradient update; at the first KKT violation below
    ``10 tol`` and before stopping, their gradient is reconstructed and every variable
    checked again, so the stopping rule holds for all of them. ``G`` is complete on
    return."""
    n = y.shape[0]
    Kd = np.empty(n)
    for t in range(n):
        Kd[t] = K[t, t]
    idx = np.arange(n)
    n_act = n
    counter = shrink_every
    unshrunk = False
    it = 0
    smallest = n
    while it < max_iter:
        counter -= 1
        if counter == 0:
            counter = shrink_every
            # m(a) and -M(a) on the working set, then libsvm's be_shrunk test
            g1 = -np.inf
            g2 = -np.inf
            for k in range(n_act):
                t = idx[k]
                if (y[t] > 0 and a[t] < C[t]) or (y[t] < 0 and a[t] > 0):
                    g1 = max(g1, -y[t] * G[t])
                if (y[t] > 0 and a[t] > 0) or (y[t] < 0 and a[t] < C[t]):
                    g2 = max(g2, y[t] * G[t])
            if not unshrunk and g1 + g2 <= 10.0 * tol:
                unshrunk = True
                _reconstruct(K, y, a, G, idx, n_act)
                n_act = n
            was = n_act
            k = 0
            while k < n_act:
                t = idx[k]
                if a[t] >= C[t]:
                    out = -G[t] > (g1 if y[t] > 0 else g2)
                elif a[t] <= 0.0:
                    out = G[t] > (g2 if y[t] > 0 else g1)
                else:
                    out = False
                if out:
                    n_act -= 1
                    idx[k] = idx[n_act]
                    idx[n_act] = t
                else:
                    k += 1
            if was == n and n_act > SHRINK_FRACTION * n:
                n_act = n  # too few left out to pay for the indexed loops
            smallest = min(smallest, n_act)
        if n_act == n:  # nothing shrunk: contiguous loops
            i, j, gmax, gmin = _pair_all(K, Kd, y, a, C, G)
        else:
            i, j, gmax, gmin = _pair_set(K, Kd, y, a, C, G, idx, n_act)
        if i < 0 or j < 0 or gmax - gmin < tol:
            if n_act < n:  # optimal on the working set: check every variable
                _reconstruct(K, y, a, G, idx, n_act)
                n_act = n
                counter = 2  # select on all of them now, shrink again after the step
                continue
            break
        it += 1
        Ki = K[i]
        # two-variable update (libsvm's solver, with clipping to the box)
        Qii, Qjj = Kd[i], Kd[j]
        Qij = y[i] * y[j] * K[i, j]
        ai_old, aj_old = a[i], a[j]
        if y[i] != y[j]:
            quad = Qii + Qjj + 2.0 * Qij
            if quad <= 0.0:
                quad = _TAU
            delta = (-G[i] - G[j]) / quad
            diff = a[i] - a[j]
            a[i] += delta
            a[j] += delta
            if diff > 0.0:
                if a[j] < 0.0:
                    a[j] = 0.0
                    a[i] = diff
            else:
                if a[i] < 0.0:
                    a[i] = 0.0
                    a[j] = -diff
            if diff > C[i] - C[j]:
                if a[i] > C[i]:
                    a[i] = C[i]
                    a[j] = C[i] - diff
            else:
                if a[j] > C[j]:
                    a[j] = C[j]
                    a[i] = C[j] + diff
        else:
            quad = Qii + Qjj - 2.0 * Qij
            if quad <= 0.0:
                quad = _TAU
            delta = (G[i] - G[j]) / quad
            total = a[i] + a[j]
            a[i] -= delta
            a[j] += delta
            if total > C[i]:
                if a[i] > C[i]:
                    a[i] = C[i]
                    a[j] = total - C[i]
            else:
                if a[j] < 0.0:
                    a[j] = 0.0
                    a[i] = total
            if total > C[j]:
                if a[j] > C[j]:
                    a[j] = C[j]
                    a[i] = total - C[j]
            else:
                if a[i] < 0.0:
                    a[i] = 0.0
                    a[j] = total
        di = (a[i] - ai_old) * y[i]
        dj = (a[j] - aj_old) * y[j]
        Kj = K[j]
        if n_act == n:
            for t in range(n):
                G[t] += y[t] * (Ki[t] * di + Kj[t] * dj)
        else:
            for k in range(n_act):
                t = idx[k]
                G[t] += y[t] * (Ki[t] * di + Kj[t] * dj)
    if n_act < n:
        _reconstruct(K, y, a, G, idx, n_act)
    return it, smallest


def _intercept(a, G, y, C):
    """libsvm's ``b``: the average of ``-y G`` over the free variables, else the midpoint
    of the feasible interval."""
    yG = -y * G
    free = (a > 0.0) & (a < C)
    if np.any(free):
        return float(np.mean(yG[free]))
    up = ((y > 0) & (a < C)) | ((y < 0) & (a > 0))
    low = ((y > 0) & (a > 0)) | ((y < 0) & (a < C))
    hi = np.max(yG[up]) if np.any(up) else 0.0
    lo = np.min(yG[low]) if np.any(low) else 0.0
    return float(0.5 * (hi + lo))


def _along_the_path(problem, history, it, start):
    """The exact optimum of ``problem`` by its solution path (:func:`.homotopy.follow`)
    from ``C`` times :data:`PATH_T0`, whose dual SMO certifies in few steps (its box is
    tiny), or None (the path does not apply, the small problem is not certified, the walk
    stops or its end is not certified). Unscaled breast cancer (341 examples, 31
    parameters; areas in the thousands), ``C = 10^4``: SMO stalls and the smoothing solver
    hands over to IRLS, unconverged after 2.4 s at ``J`` 5e-4 above the optimum that 297
    events (of 1e-4 -> 1 -> 10^4) reach in milliseconds."""
    from . import homotopy

    if not homotopy.applicable(problem):
        return None
    small = problem._replace(loss=problem.loss.with_C(problem.loss.C * PATH_T0))
    first = fit(small, warn=False, path=False)
    if not first.converged or "irls" in first.solver:  # certified: dual, dual+smoothing
        return None
    res = homotopy.follow(problem, first.theta, PATH_T0)
    if res is None:
        return None
    return exact_result(problem, res.theta, history + [res.objective[-1]],
                        it + first.n_iter + res.n_iter, start, "dual+homotopy",
                        1 + res.n_solves)


@with_single_blas_pool
def fit(problem, theta0=None, *, tol=1e-8, max_iter=1000, warn=True, smo_tol=SMO_TOL,
        smo_max_iter=None, path=True):
    """Minimise the zero-noise hinge ``J`` by SMO on the dual plus the exact polish.

    Parameters
    ----------
    problem : Problem
        See :func:`applicable`.
    theta0 : ndarray, optional
        Warm start: if the polish certifies the optimum from ``theta0`` no SMO runs
        (the estimators' ``warm_start`` and the mode in ``sample_posterior``); otherwise
        SMO starts from ``a = 0``.
    tol, max_iter, warn
        Passed to IRLS when the polish does not certify the SMO point.
    smo_tol : float
        Smallest maximal KKT violation SMO is run to.
    smo_max_iter : int, optional
        Default ``max(10^5, 100 N)``.
    path : bool, default=True
        Where SMO stalls, first try the exact solution path from a small ``C``
        (:func:`_along_the_path`), then the smoothing solver.

    Returns
    -------
    SolverResult
        ``solver`` is ``"dual"`` (certified by the polish), ``"dual+homotopy"`` (certified
        at the end of the path), ``"dual+smoothing"`` or ``"dual+irls"``.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss
    >>> from sklearn.svm import SVC
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=80))
    >>> problem = Problem.create(X, y, HingeLoss(1.0), "none")
    >>> res = fit(problem)
    >>> ref = SVC(kernel="linear", C=1.0, tol=1e-10).fit(X, y)
    >>> res.solver, bool(np.allclose(res.theta[:3], ref.coef_[0], atol=1e-6))
    ('dual', True)
    """
    from . import irls, smoothing

    if not applicable(problem):
        raise ValueError("the dual solver needs the hinge loss at zero noise with an "
                         f"intercept and at most {MAX_DUAL_SAMPLES} examples")
    start = time.perf_counter()
    if theta0 is not None:  # a warm start that the polish certifies is the optimum
        theta0 = np.asarray(theta0, dtype=float)
        certified = certify(problem, theta0, [problem.objective(theta0)], 0, start)
        if certified is not None:
            return certified
    design, loss, y = problem
    C = np.ascontiguousarray(loss.c * np.ones(design.n_samples), dtype=np.float64)
    # margin l: hinge(l - y m) = l hinge(1 - y m / l): the dual of the problem in w / l
    scale = float(loss.margin)
    K = design.row_gram()
    n = design.n_samples
    smo_max_iter = max(100_000, 100 * n) if smo_max_iter is None else int(smo_max_iter)
    yc = np.ascontiguousarray(y, dtype=np.float64)
    a, G = np.zeros(n), -np.ones(n)
    it = 0
    history = []
    handover = smoothing.applicable(problem)
    for stage_tol in SMO_STAGES:
        # SMO to a KKT violation stage_tol, then try to certify the exact optimum; with
        # the smoothing solver to hand over to, a stage gets STAGE_STEPS n steps
        budget = smo_max_iter - it
        if handover:
            budget = min(budget, STAGE_STEPS * n)
        steps = _smo(K, yc, C / scale, max(stage_tol, smo_tol), budget, a, G)[0]
        it += steps
        w = design.rmatvec(a * y)[: design.n_features] * scale
        b = _intercept(a, G, y, C / scale) * scale
        theta = np.append(w, b)
        history.append(problem.objective(theta))
        # the polish starts from the free support vectors (0 < a_n < C_n: on the margin);
        # at the last stage also from the examples near the margin at theta
        box = C / scale
        free = (a > FREE_TOL * box) & (a < (1.0 - FREE_TOL) * box)
        certified = certify(problem, theta, history, it, start, free)
        last = stage_tol <= smo_tol or it >= smo_max_iter
        if certified is None and last:
            certified = certify(problem, theta, history, it, start)
        if certified is not None:
            return certified
        if handover and (steps >= budget or last):
            # SMO stalls (ill-conditioned data, e.g. redundant features) or its last
            # stage did not certify: the solution path from a small C, else the smoothing
            # solver from SMO's point
            if path:
                walked = _along_the_path(problem, history, it, start)
                if walked is not None:
                    return walked
            res = smoothing.fit(problem, theta, tol=tol, max_iter=max_iter, warn=warn)
            return res.after(history, it, 0, start, "dual+" + res.solver)
        if last:
            break
    res = irls.fit(problem, theta, tol=tol, max_iter=max_iter, warn=warn)
    return res.after(history, it, 0, start, "dual+irls")
