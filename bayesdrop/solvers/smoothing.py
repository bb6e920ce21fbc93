"""Piecewise-linear losses at zero noise, exactly: Newton on a smoothed ``J`` with
continuation, then the certified active-set polish.

At zero noise the hinge and epsilon-insensitive terms ``l_n(m)`` are convex and piecewise
linear in the score ``m_n`` (kinks ``p_nj``, slopes ``s_n0 < s_n1 < ...``:
:meth:`bayesdrop.model.losses.Loss.kinks`), so ``J = theta^T I' theta + sum_n l_n(m_n)``
is not twice differentiable and Newton's method does not apply. Its smoothing by the
Moreau envelope of each term,

    e_n(m) = min_u  l_n(u) + (m - u)^2 / (2 mu),

is: ``e_n`` equals ``l_n(m) - mu s^2 / 2`` on each piece of slope ``s`` shifted by
``mu s``, and ``l_n(p_j) + (m - p_j)^2 / (2 mu)`` in the zone ``p_j + mu s_{j-1} <= m <=
p_j + mu s_j`` around each kink, so ``e_n' = s`` or ``(m - p_j) / mu`` and ``e_n'' = 0``
or ``1 / mu`` -- a piecewise quadratic ``J_mu`` whose Hessian
``2 I' + Xbar_Z^T Xbar_Z / mu`` involves only the examples ``Z`` in a zone. Newton's
method minimises ``J_mu`` in a few steps: the step length is the exact minimiser along
the direction (:func:`exact_step`; Armijo's condition is checked as a safeguard), and the
step is exact once ``Z`` no longer changes; ``mu`` then shrinks tenfold from that
optimum, the first direction keeping that ``Z`` in its zones (:func:`_predictor`). As ``mu -> 0`` the zone examples become the examples on the margin (the kinks)
at the optimum of ``J``; from them the active-set polish
(:func:`bayesdrop.solvers.irls.active_set_polish`) solves the equality-constrained
problem on the margin exactly and certifies it by the KKT conditions. The polish is
tried after every ``mu`` from :data:`POLISH_FROM_MU` on. Where it cannot certify (a
degenerate optimum with more examples on the margin than parameters, as with duplicated
rows) the envelope bounds the excess: ``J_mu <= J <= J_mu + mu sum_n max_j s_nj^2 / 2``,
so the exact minimiser of ``J_mu`` is within ``mu sum_n max_j s_nj^2 / 2`` of ``J*``;
the solver returns it once that is at most ``GAP_FACTOR tol |J|``.

One Newton step costs a product with ``Xbar`` and ``Xbar^T`` (``O(N D)``) and the Gram
matrix of the zone rows (``O(|Z| D^2)``, ``|Z|`` about the number of support vectors on
the margin): the solver is for a dense or sparse ``X`` with at most
:data:`~bayesdrop.linalg.wls.MAX_CHOLESKY_PARAMS` parameters and any number of examples.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from .._threads import with_single_blas_pool
from ..linalg.wls import MAX_CHOLESKY_PARAMS

__all__ = ["MU_FACTOR", "applicable", "envelope", "fit"]

#: ``mu`` shrinks by this factor after each smoothed problem.
MU_FACTOR = 0.1

#: The polish is tried once ``mu * max slope jump`` (the widest zone, in units of the
#: score) is at most this.
POLISH_FROM_MU = 1.0

#: ``mu * max slope jump`` of the first round from a warm start (cold: 2).
WARM_MU = 0.1

#: Smallest ``mu * max slope jump``; below it the solver gives up (IRLS continues).
MIN_MU = 1e-14

#: Without a polish certificate (a degenerate optimum) the solver stops at the exact
#: minimiser of ``J_mu`` once its bound ``J - J* <= mu sum_n max_j s_nj^2 / 2`` is at most
#: ``GAP_FACTOR tol |J|``.
GAP_FACTOR = 1e-3

#: Newton steps per smoothed problem at most.
MAX_NEWTON = 50

#: Start each smoothed problem after the first with :func:`_predictor`'s direction
#: (measured on make_classification 20000 x 200, hinge, C = 1: 112 Newton steps instead of
#: 150, 0.53 against 0.64 s).
PREDICT = True

ARMIJO = 1e-4


def applicable(problem):
    """Whether the smoothing solver applies: a piecewise-linear loss (hinge,
    epsilon-insensitive) at zero noise, the plain design, at most
    :data:`~bayesdrop.linalg.wls.MAX_CHOLESKY_PARAMS` parameters.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, LogisticLoss, Dropout
    >>> X = np.eye(3); y = np.array([1.0, -1.0, 1.0])
    >>> applicable(Problem.create(X, y, HingeLoss(1.0), "none"))
    True
    >>> applicable(Problem.create(X, y, HingeLoss(1.0), Dropout(0.2)))
    False
    >>> applicable(Problem.create(X, y, LogisticLoss(1.0), "none"))
    False
    """
    design, loss, y = problem
    return bool(design.noise_free and design.diagonal_noise
                and loss.kinks(y[:1]) is not None
                and design.n_params <= MAX_CHOLESKY_PARAMS)


def piecewise_term(m, pos, slopes):
    """``l_n(m_n) = s_0 (m - p_0) + sum_j (s_{j+1} - s_j) max(0, m - p_j)`` per example:
    the zero-noise term of a piecewise-linear loss from its kinks and slopes (zero at the
    first kink, as the hinge and epsilon-insensitive terms are). ``m`` of shape (n,), or
    (k, 1) for ``k`` common scores (the result is then (k, n))."""
    out = slopes[:, 0] * (m - pos[:, 0])
    for j in range(pos.shape[1]):
        out += (slopes[:, j + 1] - slopes[:, j]) * np.maximum(m - pos[:, j], 0.0)
    return out


def envelope(m, pos, slopes, mu):
    """Moreau envelope ``e_n(m_n)`` of convex piecewise-linear terms, up to a constant
    per example, with its first and second derivatives.

    Parameters
    ----------
    m : ndarray of shape (n,)
    pos, slopes : ndarray of shape (n, k), (n, k + 1)
        Kinks (sorted per row) and slopes of the pieces between them.
    mu : float > 0

    Returns
    -------
    value, d1, d2 : ndarray of shape (n,)
        ``e_n = l_n(m) - mu s^2 / 2`` on a piece of slope ``s`` (for
        ``p_{j-1} + mu s <= m <= p_j + mu s``), ``l_n(p_j) + (m - p_j)^2 / (2 mu)`` in the
        zone of kink ``j``; ``l_n(m) = s_0 (m - p_0) + sum_j (s_{j+1} - s_j)
        max(0, m - p_j)`` (zero at the first kink).

    Examples
    --------
    The hinge ``2 max(0, 1 - m)`` (kink 1, slopes -2 and 0) with ``mu = 0.25``: zone
    ``[0.5, 1]``:

    >>> pos, slopes = np.array([[1.0]] * 3), np.array([[-2.0, 0.0]] * 3)
    >>> v, d1, d2 = envelope(np.array([0.0, 0.75, 2.0]), pos, slopes, 0.25)
    >>> v.tolist(), d1.tolist(), d2.tolist()
    ([1.5, 0.125, 0.0], [-2.0, -1.0, 0.0], [0.0, 4.0, 0.0])
    """
    n, k = pos.shape
    value = np.empty(n)
    d1 = np.empty(n)
    d2 = np.zeros(n)
    # pieces: s_0 left of the first zone, s_j between zones j-1 and j, s_k right of the last
    lin = piecewise_term(m, pos, slopes)
    s = slopes[:, 0].copy()
    done = np.zeros(n, dtype=bool)
    for j in range(k):
        lo = pos[:, j] + mu * slopes[:, j]
        hi = pos[:, j] + mu * slopes[:, j + 1]
        zone = (m >= lo) & (m <= hi) & ~done
        r = m - pos[:, j]
        value = np.where(zone, piecewise_term(pos[:, j], pos, slopes) + r * r / (2.0 * mu), value)
        d1 = np.where(zone, r / mu, d1)
        d2 = np.where(zone, 1.0 / mu, d2)
        done |= zone
        s = np.where(m > hi, slopes[:, j + 1], s)
    value = np.where(done, value, lin - 0.5 * mu * s * s)
    d1 = np.where(done, d1, s)
    return value, d1, d2


def _smoothed(problem, theta, m, pos, slopes, mu):
    """``J_mu`` with its gradient and the envelopes' derivatives at ``theta``."""
    design = problem.design
    value, d1, d2 = envelope(m, pos, slopes, mu)
    w = theta[: design.n_features]
    J = float(w @ w + np.sum(value))
    g = design.rmatvec(d1)
    g[: design.n_features] += 2.0 * w
    return J, g, d1, d2


def _newton_direction(design, g, d2, intercept_floor):
    """``-H^{-1} g`` with ``H = 2 I' + Xbar_Z^T diag(d2_Z) Xbar_Z`` (Cholesky)."""
    D, p = design.n_features, design.n_params
    idx = np.flatnonzero(d2 > 0.0)
    H = np.zeros((p, p))
    if idx.size:
        XZ = design.row_block(idx)
        if sp.issparse(XZ):
            XZ = XZ.toarray()
        sw = np.sqrt(d2[idx])
        XZs = XZ * sw[:, None]
        H[:D, :D] = XZs.T @ XZs
        if design.fit_intercept:
            col = XZs.T @ sw
            H[:D, D] = col
            H[D, :D] = col
            H[D, D] = float(sw @ sw)
    H[np.arange(D), np.arange(D)] += 2.0
    if design.fit_intercept:  # no zone example: J_mu is linear in b; keep the step finite
        H[D, D] = max(H[D, D], intercept_floor)
    try:
        return -sla.cho_solve(sla.cho_factor(H, lower=True, check_finite=False), g,
                              check_finite=False)
    except np.linalg.LinAlgError:
        return -np.linalg.lstsq(H, g, rcond=None)[0]


def _predictor(design, m, pos, zone, g, d1, mu, floor):
    """The first direction after ``mu`` shrinks: Newton's direction for ``J_mu`` as if the
    examples of ``zone`` (the zone set at the optimum of the previous, larger ``mu``) were
    in the quadratic zone of their nearest kink -- the step to the exact minimiser of
    ``J_mu`` if the zone set stays the same. (From the previous optimum their scores lie
    outside the narrower zones, so the plain Newton direction leaves them out and the next
    steps re-discover them a few at a time.)"""
    d1_model = d1.copy()
    idx = np.flatnonzero(zone)
    kink = np.argmin(np.abs(m[idx, None] - pos[idx]), axis=1)
    d1_model[idx] = (m[idx] - pos[idx, kink]) / mu
    g_model = g + design.rmatvec(d1_model - d1)
    return _newton_direction(design, g_model, np.where(zone, 1.0 / mu, 0.0), floor / mu)


def _derivative_at(m1, dm, pos, slopes, mu, slope0, curv_w, d1_0):
    """``phi'(1) = phi'(0) + curv_w + sum_n (e_n'(m_n + dm_n) - e_n'(m_n)) dm_n``."""
    d1_1 = envelope(m1, pos, slopes, mu)[1]
    return slope0 + curv_w + float((d1_1 - d1_0) @ dm)


def exact_step(m, dm, pos, slopes, mu, slope0, curv_w, d1_0):
    """Minimiser ``t > 0`` of ``phi(t) = J_mu(theta + t p)`` along a descent direction.

    ``phi`` is convex and piecewise quadratic: ``phi''(t) = curv_w + sum_n e_n'' dm_n^2``
    changes by ``+- dm_n^2 / mu`` where ``m_n + t dm_n`` enters or leaves a zone, and
    ``phi'`` is continuous. The breakpoints are sorted and ``phi'`` followed from
    ``phi'(0) = slope0 < 0`` to its root (``O(N k log(N k))``).

    Parameters
    ----------
    m, dm : ndarray of shape (n,)
        Scores at ``theta`` and their change ``Xbar p``.
    pos, slopes, mu
        As in :func:`envelope`.
    slope0 : float
        ``phi'(0) = g.p``.
    d1_0 : ndarray of shape (n,)
        ``e_n'(m_n)`` (to locate the root against ``t = 1`` first, sorting only the
        breakpoints before it).
    curv_w : float
        The penalty's curvature along ``p``: ``2 ||p_w||^2``.

    Examples
    --------
    One hinge term ``2 max(0, 1 - m)`` at ``m = 0`` moving with ``dm = 1``, no penalty,
    ``mu = 0.25``: ``phi' = -2`` until the zone ``[0.5, 1]``, then rises to 0 at ``t = 1``:

    >>> pos, slopes = np.array([[1.0]]), np.array([[-2.0, 0.0]])
    >>> float(exact_step(np.zeros(1), np.ones(1), pos, slopes, 0.25, -2.0, 0.0,
    ...                  np.array([-2.0])))
    1.0
    """
    lo = pos + mu * slopes[:, :-1]
    hi = pos + mu * slopes[:, 1:]
    inside = (m[:, None] >= lo) & (m[:, None] <= hi)
    dm2 = (dm * dm / mu)[:, None]
    curv = curv_w + float(np.sum(np.where(inside, dm2, 0.0)))
    with np.errstate(divide="ignore", invalid="ignore"):
        t_lo = (lo - m[:, None]) / dm[:, None]
        t_hi = (hi - m[:, None]) / dm[:, None]
    up = (dm > 0.0)[:, None]
    # moving up, a zone is entered at lo and left at hi; moving down the reverse
    enter = np.where(up, t_lo, t_hi)
    leave = np.where(up, t_hi, t_lo)
    dm2 = np.broadcast_to(dm2, lo.shape)
    t_all = np.concatenate([enter.ravel(), leave.ravel()])
    change = np.concatenate([dm2.ravel(), -dm2.ravel()])
    keep = np.isfinite(t_all) & (t_all > 0.0)
    # the root is usually at most 1 (the Newton step): then only breakpoints up to 1 count
    if _derivative_at(m + dm, dm, pos, slopes, mu, slope0, curv_w, d1_0) >= 0.0:
        keep &= t_all <= 1.0
    t_all, change = t_all[keep], change[keep]
    order = np.argsort(t_all, kind="stable")
    t_all, change = t_all[order], change[order]
    # phi' at the breakpoints: curvature c_i on the segment before breakpoint i
    curvs = np.maximum(curv + np.concatenate([[0.0], np.cumsum(change)]), curv_w)
    starts = np.concatenate([[0.0], t_all])
    d = slope0 + np.concatenate([[0.0], np.cumsum(curvs[:-1] * np.diff(starts))])
    i = int(np.argmax(d >= 0.0)) if d[-1] >= 0.0 else d.size  # first breakpoint past the root
    i -= 1  # the root lies in the segment starting at starts[i]
    if curvs[i] > 0.0:
        return float(starts[i] - d[i] / curvs[i])
    return float(max(starts[i], 1.0))


@with_single_blas_pool
def fit(problem, theta0=None, *, tol=1e-8, max_iter=1000, warn=True):
    """Minimise ``J`` of a piecewise-linear loss at zero noise exactly: Newton on the
    smoothed ``J_mu`` for ``mu`` shrinking tenfold, then the active-set polish.

    Parameters
    ----------
    problem : Problem
        See :func:`applicable`.
    theta0 : ndarray, optional
        Warm start: if the polish certifies the optimum from ``theta0`` nothing else runs;
        otherwise the first Newton step starts there.
    tol, max_iter, warn
        Passed to IRLS if the polish never certifies (the smoothing reaching
        :data:`MIN_MU`; not seen in the conformance suite).

    Returns
    -------
    SolverResult
        ``solver`` is ``"smoothing"`` (certified) or ``"smoothing+irls"``; ``n_iter``
        counts Newton steps, ``n_solves`` their systems (and the polish's).

    Examples
    --------
    Linear support-vector regression (libsvm's ``SVR`` minimises the same objective):

    >>> from bayesdrop import Problem, EpsilonInsensitiveLoss
    >>> from sklearn.svm import SVR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 4)); y = X @ [1.0, -2.0, 0.0, 0.5] + rng.normal(size=120)
    >>> res = fit(Problem.create(X, y, EpsilonInsensitiveLoss(2.0, 0.3), "none"))
    >>> ref = SVR(kernel="linear", C=2.0, epsilon=0.3, tol=1e-10).fit(X, y)
    >>> res.solver, bool(np.allclose(res.theta, np.append(ref.coef_, ref.intercept_),
    ...                               atol=1e-6))
    ('smoothing', True)
    """
    from . import irls
    from .polish import certify, exact_result

    if not applicable(problem):
        raise ValueError("the smoothing solver needs a piecewise-linear loss (hinge, "
                         f"epsilon-insensitive) at zero noise and at most "
                         f"{MAX_CHOLESKY_PARAMS} parameters")
    start = time.perf_counter()
    design, loss, y = problem
    pos, slopes = loss.kinks(y)
    if theta0 is not None:
        # a warm start at the optimum: the examples on a kink there (to rounding), then
        # those near one, start the polish
        theta = np.array(theta0, dtype=float)
        dist = np.min(np.abs(design.matvec(theta)[:, None] - pos), axis=1)
        tight = dist <= irls.kink_tolerance(design, theta, pos)
        for on_kink in (tight, None):
            certified = certify(problem, theta, [problem.objective(theta)], 0, start,
                                 on_kink)
            if certified is not None:
                return certified._replace(solver="smoothing")
    else:
        theta = np.zeros(design.n_params)
    jump = float(np.max(np.diff(slopes, axis=1)))
    gap = 0.5 * float(np.sum(np.max(slopes * slopes, axis=1)))  # J - J_mu <= mu gap
    # cold: zones of width 2 in the score, every example starts in one; warm (theta0
    # near the optimum, e.g. from a neighbouring C on a path): from where the polish is
    # tried, so that the first round does not leave the optimum for J_mu's at a large mu
    mu = (2.0 if theta0 is None else WARM_MU) / jump
    floor = 1e-10 * max(float(design.n_samples), 1.0)
    history = [problem.objective(theta)]
    steps = rounds = 0
    m = design.matvec(theta)
    prev_zone = None
    while mu * jump >= MIN_MU:
        rounds += 1
        J, g, d1, d2 = _smoothed(problem, theta, m, pos, slopes, mu)
        exact = False
        for k in range(MAX_NEWTON):
            zone = d2 > 0.0
            p = None
            if k == 0 and prev_zone is not None and PREDICT:
                # the previous mu's zone set kept (see _predictor); a Newton step if it is
                # not a descent direction
                p = _predictor(design, m, pos, prev_zone, g, d1, mu, floor)
                dm = design.matvec(p)
                slope = float(g @ p)
                if not slope < 0.0:
                    p = None
            if p is None:
                p = _newton_direction(design, g, d2, floor / mu)
                dm = design.matvec(p)
                slope = float(g @ p)
            if not slope < 0.0:
                break
            pw = p[: design.n_features]
            t = exact_step(m, dm, pos, slopes, mu, slope, 2.0 * float(pw @ pw), d1)
            while True:
                m_t = m + t * dm
                J_t, g_t, d1_t, d2_t = _smoothed(problem, theta + t * p, m_t, pos, slopes, mu)
                if J_t <= J + ARMIJO * t * slope or t < 1e-12:
                    break
                t *= 0.5
            steps += 1
            theta = theta + t * p
            m, J, g, d1, d2 = m_t, J_t, g_t, d1_t, d2_t
            if np.array_equal(d2 > 0.0, zone) and abs(t - 1.0) <= 1e-12:
                exact = True
                break  # J_mu is quadratic on this zone set: the step was exact
        history.append(problem.objective(theta))
        zone = d2 > 0.0
        prev_zone = zone
        if mu * jump <= POLISH_FROM_MU:
            certified = certify(problem, theta, history, steps, start, zone)
            if certified is not None:
                return certified._replace(solver="smoothing", n_solves=steps + 1)
        if exact and mu * gap <= GAP_FACTOR * tol * max(abs(history[-1]), 1.0):
            # no polish certificate (a degenerate optimum: more examples on the margin
            # than parameters), but J(theta) - J* <= J(theta) - J_mu(theta) <= mu gap
            return exact_result(problem, theta, history, steps, start, "smoothing", steps)
        mu *= MU_FACTOR
    res = irls.fit(problem, theta, tol=tol, max_iter=max_iter, warn=warn)
    return res.after(history, steps, steps, start, "smoothing+irls")
