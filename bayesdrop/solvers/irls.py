"""Variational IRLS (an MM / EM algorithm) for the expected-noise objectives.

One IRLS map (MATH.md section 4) replaces each augmentation variable by its conditional
mean at the current ``theta`` and solves the shared weighted least-squares system::

    (rho, t) = loss.irls_weights(m(theta), s(theta), y)
    F(theta) = A(rho)^{-1} r(t)

``J`` never increases along ``theta_{k+1} = F(theta_k)`` (it minimises a surrogate that
touches ``J`` at ``theta_k``) and the fixed point is ``argmin J``. Near the margin of the
zero-noise hinge loss this map converges slowly, so by default the iterations are
accelerated by SQUAREM (Varadhan & Roland 2008, scheme S3) with a monotone safeguard: an
extrapolated point is used only if, after one more IRLS map, its objective is not above
that of two plain maps. Every accepted iterate therefore has ``J`` no larger than plain
IRLS would have reached from the same start, and the history is monotone.

At zero noise the hinge and epsilon-insensitive objectives are piecewise linear-quadratic
and plain IRLS converges sublinearly for the examples that end exactly on a kink (the
margin, the tube's edge): their weights grow without bound. Each step then also tries an
**active-set polish** (:func:`active_set_polish`): starting from the kinks read off the
IRLS iterate, a few primal-dual active-set rounds solve the equality-constrained quadratic
problem exactly. The result is kept only with a KKT certificate (it is then the exact
minimiser and IRLS stops) and if it does not raise ``J``.

The kernel API follows BlackJAX: :func:`init` builds an :class:`IRLSState`,
:func:`step` returns the next state and an :class:`IRLSInfo`; :func:`fit` is the driver.
"""

from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla
from sklearn.exceptions import ConvergenceWarning

from .._threads import with_single_blas_pool
from .._validation import MAX_ITER, check_scalar
from ..linalg import wls
from .result import SolverResult

__all__ = ["IRLSState", "IRLSInfo", "IRLSResult", "irls_map", "init", "step", "squarem", "fit",
           "fit_rows", "KINK_RTOL", "active_set_polish", "kink_tolerance",
           "kkt_certificate"]


class IRLSState(NamedTuple):
    """Current iterate ``theta``, its objective ``J(theta)`` and (zero-noise
    piecewise-linear losses) the examples within :data:`POLISH_TAU` of a kink."""

    theta: np.ndarray
    objective: float
    kinks: np.ndarray | None = None


class IRLSInfo(NamedTuple):
    """What one :func:`step` did."""

    n_maps: int  # IRLS maps evaluated (1 plain, 3 accelerated)
    accelerated: bool  # whether the extrapolated point was accepted
    linalg_info: dict
    polished: bool = False  # whether the active-set polish was accepted


#: The result of :func:`fit` (the common result type of the solvers).
IRLSResult = SolverResult


def irls_map(problem, theta, *, linalg="auto", cg_tol=1e-10):
    """One IRLS map ``F(theta)``: expected weights at ``theta``, then solve ``A theta' = r``.

    Returns
    -------
    theta_new : ndarray
    info : dict
        From :func:`bayesdrop.linalg.wls.solve`.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop.solvers import irls
    >>> problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))
    >>> theta_hat = irls.fit(problem, tol=1e-12).theta
    >>> theta_next = irls.irls_map(problem, theta_hat)[0]  # the optimum is a fixed point
    >>> bool(np.allclose(theta_next, theta_hat, atol=1e-5))
    True
    """
    rho, t = problem.irls_weights(theta)
    return wls.solve(problem.design, rho, t, linalg=linalg, x0=theta, cg_tol=cg_tol)


#: Distance to a kink (relative to the kink spacing scale) below which the polish starts
#: an example on the kink.
POLISH_TAU = 1e-3
#: Relative decrease of ``J`` in one step below which the polish is attempted.
POLISH_SETTLED = 1e-3
#: Rounds of active-set updates the polish may take.
POLISH_ROUNDS = 8


def _solve_or_lstsq(K, rhs):
    try:
        sol = np.linalg.solve(K, rhs)
        if np.all(np.isfinite(sol)):
            return sol
    except np.linalg.LinAlgError:
        pass
    return np.linalg.lstsq(K, rhs, rcond=None)[0]


def kink_assignment(m, pos):
    """Where each score lies among its example's kinks ``pos`` (n, k): the nearest kink,
    the distance to it and the piece (``0`` to ``k``: the number of kinks below the score) --
    the assignment the active-set polish and the homotopy start from."""
    dist = np.abs(m[:, None] - pos)
    kink = np.argmin(dist, axis=1)
    return kink, dist[np.arange(m.size), kink], np.sum(m[:, None] > pos, axis=1)


#: Relative slack of the zero-noise exact solvers' checks (:func:`kkt_certificate`): the
#: scores within ``KINK_RTOL max(|p|, 1, sum_j |x_nj w_j| + |b|)`` of their piece or kink
#: (:func:`kink_tolerance`), the multipliers within ``KINK_RTOL max(|s|, 1)`` of their
#: interval, the stationarity residuals within ``KINK_RTOL`` of the sums they cancel.
KINK_RTOL = 1e-9


def kink_tolerance(design, theta, pos, rtol=KINK_RTOL, block=None):
    """Each example's slack for its score against its kinks at ``theta``:
    ``rtol max(max |p|, 1, sum_j |x_nj w_j| + |b|)`` (only the examples whose rows of
    ``X`` are ``block``, if given; ``pos`` the kinks of all of them).

    A score ``m_n = x_n . w + b`` is computed to a few rounding units of the magnitude of
    its terms, ``sum_j |x_nj w_j| + |b|``, and the solvers' updates of it drift by some
    more: a slack fixed by the kinks alone (``max |p|``, the hinge's margin 1) asks more
    than the arithmetic can give where the features are large. Unscaled breast cancer
    (areas in the thousands; hinge, zero noise, ``C = 1``): scores of the examples on the
    margin within 1.1e-9 of it after a walk of 183 events (:mod:`.homotopy`), 1e-11 of
    their terms' magnitude, the next example 3e-2 away -- a slack of 1e-9 left it off.

    Examples
    --------
    >>> from bayesdrop import Design
    >>> design = Design(np.array([[1000.0, 0.0], [0.0, 0.5]]))
    >>> pos = np.ones((2, 1))  # the hinge's kink at the margin
    >>> kink_tolerance(design, np.array([0.002, 1.0, -1.0]), pos, rtol=0.5).tolist()
    [1.5, 0.75]
    """
    w, b = design.split(theta)
    X = design.X if block is None else block
    size = np.asarray(abs(X) @ np.abs(w), dtype=np.float64).ravel() + abs(b)
    return rtol * np.maximum(size, max(float(np.max(np.abs(pos), initial=0.0)), 1.0))


def off_piece(m, pos, piece, rows, tol):
    """``(below, above)``: whether the score ``m_n`` of each example ``n`` of ``rows`` (off
    its kinks) lies below, or above, its piece ``piece_n`` -- between kinks
    ``piece_n - 1`` and ``piece_n`` of ``pos`` -- by more than ``tol``."""
    k = pos.shape[1]
    p = piece[rows]
    lower = np.where(p > 0, pos[rows, np.maximum(p - 1, 0)], -np.inf)
    upper = np.where(p < k, pos[rows, np.minimum(p, k - 1)], np.inf)
    return m[rows] < lower - tol, m[rows] > upper + tol


def outside_interval(a, slopes, rows, kink, tol):
    """``(left, right)``: whether the multiplier ``a`` of each example ``n`` of ``rows`` (on
    kink ``kink_n``; ``a`` aligned with ``rows``) lies left, or right, of its subgradient
    interval ``[slopes_n,kink_n, slopes_n,kink_n+1]`` by more than ``tol``."""
    j = kink[rows]
    return a < slopes[rows, j] - tol, a > slopes[rows, j + 1] + tol


def kkt_certificate(problem, theta, on, kink, piece, a, rtol=KINK_RTOL, pieces=None):
    """Whether ``theta`` minimises the zero-noise piecewise-linear ``J`` of ``problem``,
    by its KKT conditions with the derivatives ``a`` of the terms.

    ``J`` is convex, so ``theta`` is optimal exactly when some ``a_n`` in the
    subdifferential of each term at its score ``m_n`` gives ``2 w + Xbar_w^T a = 0`` and,
    with an intercept, ``sum_n a_n = 0``. Checked from the scores ``m = Xbar theta``
    computed afresh: an example off its kinks (``on_n`` False) lies on piece ``piece_n``
    (between kinks ``piece_n - 1`` and ``piece_n``) and ``a_n`` is that piece's slope; an
    example on kink ``kink_n`` sits at it, with ``a_n`` between the slopes on either
    side. Each within the slack ``rtol`` (see :data:`KINK_RTOL`; for the scores relative to
    the magnitude of their terms, :func:`kink_tolerance`). ``pieces``: the loss's
    ``kinks(y)`` if the caller has them.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss
    >>> X = np.array([[1.0], [-1.0]]); y = np.array([1.0, -1.0])
    >>> problem = Problem.create(X, y, HingeLoss(1.0), "none", fit_intercept=False)
    >>> on = np.array([True, True]); kink = np.zeros(2, dtype=int); piece = kink
    >>> kkt_certificate(problem, np.array([1.0]), on, kink, piece, np.array([-1.0, 1.0]))
    True
    >>> kkt_certificate(problem, np.array([0.5]), on, kink, piece, np.array([-0.5, 0.5]))
    False
    """
    design, loss, y = problem
    pos, slopes = loss.kinks(y) if pieces is None else pieces
    m = design.matvec(theta)
    tol_m = kink_tolerance(design, theta, pos, rtol)
    tol_a = rtol * max(float(np.max(np.abs(slopes))), 1.0)
    off, at = np.flatnonzero(~on), np.flatnonzero(on)
    below, above = off_piece(m, pos, piece, off, tol_m[off])
    left, right = outside_interval(a[at], slopes, at, kink, tol_a)
    if (np.any(below | above) or np.any(left | right)
            or np.any(np.abs(a[off] - slopes[off, piece[off]]) > tol_a)
            or np.any(np.abs(m[at] - pos[at, kink[at]]) > tol_m[at])):
        return False
    D = design.n_features
    grad = design.rmatvec(a)
    # the magnitude of the terms each sum cancels, sum_n |x_nj a_n| (not X^T |a|, which
    # features of both signs shrink, even below zero)
    scale = np.asarray(abs(design.X).T @ np.abs(a), dtype=np.float64).ravel()
    if np.any(np.abs(2.0 * theta[:D] + grad[:D]) > rtol * np.maximum(scale, 1.0)):
        return False
    total = float(np.sum(np.abs(a)))
    return not design.fit_intercept or abs(grad[D]) <= rtol * max(total, 1.0)


def kink_set(problem, theta):
    """Examples within ``POLISH_TAU`` of a kink at ``theta`` (None if not applicable)."""
    design, loss, y = problem
    pieces = loss.kinks(y) if design.noise_free else None
    if pieces is None:
        return None
    pos = pieces[0]
    scale = max(float(np.max(np.abs(pos))), 1.0)
    m = design.matvec(theta)
    return np.min(np.abs(m[:, None] - pos), axis=1) <= POLISH_TAU * scale


#: Refinement steps of :func:`_equality_qp`'s solve (each from the residuals of the kink
#: equations computed afresh).
QP_REFINE = 3

#: ... ending early once a step moves the solution by at most this relative amount
#: (1e-3 of the checks' slack :data:`KINK_RTOL`).
REFINED = 1e-12

#: :func:`_equality_qp` refines (or solves the KKT system itself) only where the first
#: solve leaves an equation above this share of its slack.
REFINE_ABOVE = 1e-2

#: Largest ``n_params + |E|`` for which :func:`_equality_qp` solves the KKT system itself
#: (a dense design): its LU is ``O((n_params + |E|)^3)``.
AUGMENTED_MAX = 600


def _equality_qp(design, on_kink, target, slope, pos):
    """Minimise ``theta^T I' theta + sum_n slope_n m_n`` s.t. ``m_n = target_n`` on kinks.

    With ``g = -Xbar^T slope`` the KKT conditions give ``w = (g_w + X_E^T beta) / 2`` and
    the bordered system ``[[X_E X_E^T / 2, 1], [1^T, 0]] [beta; b] = [c_E - X_E g_w / 2;
    -g_b]`` (least squares, as it may be singular). Its matrix has the squared condition
    of ``X_E``, so the solve is equilibrated (``X_E X_E^T`` scaled to a unit diagonal),
    and where the residuals of the equations themselves, ``c_E - X_E w - b`` and ``-g_b -
    1^T beta`` computed afresh, are above :data:`REFINE_ABOVE` of their slack, the KKT
    system itself is solved instead on a small dense design
    (:func:`_equality_qp_augmented`), else the solve refined up to :data:`QP_REFINE`
    times from those residuals: unscaled breast cancer (hinge, zero noise, ``C = 10^4``,
    21 examples on the margin) left them at up to 46 times :func:`kink_tolerance`
    without and at 1e-7 of it with (and ``J`` 0.9 lower).

    ``pos``: the kinks of every example (the slack's scale). Returns ``theta``, ``beta``
    and whether the equations hold (the scores of the kink rows within
    :func:`kink_tolerance` of their targets, the intercept's equation within ``1e-9`` of
    its scale): a singular system with an inconsistent right-hand side (more
    examples on kinks than the rank of ``[X_E, 1]``, e.g. linearly dependent features)
    has no solution, and its least-squares point violates ``m_n = target_n``.
    """
    idx = np.flatnonzero(on_kink)
    g = -design.rmatvec(np.where(on_kink, 0.0, slope))
    g_w = g[: design.n_features]
    XE = design.row_block(idx)
    full = getattr(design, "_row_gram", None)  # X X^T, if the dual solver formed it
    if full is not None:
        G = full[np.ix_(idx, idx)] / 2.0
    else:
        G = XE @ XE.T
        G = (G.toarray() if hasattr(G, "toarray") else np.asarray(G)) / 2.0
    k = idx.size
    fi = design.fit_intercept
    K = np.zeros((k + fi, k + fi))
    K[:k, :k] = G
    if fi:
        K[:k, k] = K[k, :k] = 1.0
    # equilibrated: D K D with D = diag(G)^{-1/2} on the kink rows (1 on the border)
    d = np.ones(k + fi)
    diag = np.diag(G)
    d[:k] = np.where(diag > 0.0, 1.0 / np.sqrt(np.where(diag > 0.0, diag, 1.0)), 1.0)
    K *= d[:, None]  # in place: k may be in the thousands (newsgroups' margin)
    K *= d[None, :]

    def solve(r):
        return d * _solve_or_lstsq(K, d * r) if k + fi else np.zeros(0)

    def point(sol):
        beta, b = sol[:k], (sol[k] if fi else 0.0)
        w = (g_w + np.asarray(XE.T @ beta).ravel()) / 2.0
        return (np.append(w, b) if fi else w), beta

    def residual(theta, beta):  # the equations themselves, afresh
        r = target[idx] - np.asarray(XE @ theta[: design.n_features]).ravel()
        if fi:
            r = np.append(r - theta[-1], -g[-1] - np.sum(beta))
        return r

    def within(r, theta, beta):  # each equation's residual over its slack, the largest
        share = float(np.max(np.abs(r[:k]) / kink_tolerance(design, theta, pos, block=XE),
                             initial=0.0))
        if fi:
            scale = max(float(np.sum(np.abs(beta))), abs(float(g[-1])), 1.0)
            share = max(share, abs(r[k]) / (KINK_RTOL * scale))
        return share

    sol = solve(np.append(target[idx] - np.asarray(XE @ g_w).ravel() / 2.0, -g[-1])
                if fi else target[idx] - np.asarray(XE @ g_w).ravel() / 2.0)
    theta, beta = point(sol)
    r = residual(theta, beta)
    share = within(r, theta, beta)
    if k and share > REFINE_ABOVE:  # ill-conditioned: more accuracy
        if not design.sparse and design.n_params + k <= AUGMENTED_MAX:
            return _equality_qp_augmented(design, idx, XE, g, target, pos)
        for _ in range(QP_REFINE):
            step = solve(r)
            sol = sol + step
            theta, beta = point(sol)
            r = residual(theta, beta)
            if np.max(np.abs(step)) <= REFINED * np.max(np.abs(sol)):
                break
        share = within(r, theta, beta)
    return theta, beta, share <= 1.0


def _equality_qp_augmented(design, idx, XE, g, target, pos):
    """:func:`_equality_qp` by the KKT system itself, ``[[2 I', Xbar_E^T], [Xbar_E, 0]]
    [theta; a_E] = [g; c_E]`` (``a_E = -beta``), whose condition is that of ``Xbar_E``,
    not its square: rows and columns scaled to unit largest entries, then refined up to
    :data:`QP_REFINE` times."""
    D, p, k = design.n_features, design.n_params, idx.size
    XbE = np.asarray(XE, dtype=np.float64)
    if design.fit_intercept:
        XbE = np.column_stack([XbE, np.ones(k)])
    K = np.zeros((p + k, p + k))
    K[np.arange(D), np.arange(D)] = 2.0
    K[:p, p:] = XbE.T
    K[p:, :p] = XbE
    rhs = np.append(g, target[idx])
    big = np.max(np.abs(K), axis=1)
    d = 1.0 / np.sqrt(np.where(big > 0.0, big, 1.0))
    Ks = d[:, None] * K * d[None, :]
    sol = d * _solve_or_lstsq(Ks, d * rhs)
    for _ in range(QP_REFINE):
        step = d * _solve_or_lstsq(Ks, d * (rhs - K @ sol))
        sol = sol + step
        if np.max(np.abs(step)) <= REFINED * np.max(np.abs(sol)):
            break
    theta, beta = sol[:p], -sol[p:]
    r = target[idx] - XbE @ theta  # the kink equations afresh
    stationary = 2.0 * design.penalty_mask() * theta - XbE.T @ beta - g
    scale = np.maximum(np.abs(XbE.T) @ np.abs(beta) + np.abs(g), 1.0)
    consistent = bool(np.all(np.abs(r) <= kink_tolerance(design, theta, pos, block=XE))
                      and np.all(np.abs(stationary) <= KINK_RTOL * scale))
    return theta, beta, consistent


def active_set_polish(problem, theta, on_kink=None, assignment=None):
    """Exact minimiser of a piecewise linear-quadratic ``J`` from the IRLS active set.

    At zero noise the hinge and epsilon-insensitive terms are piecewise linear in the
    score ``m_n`` (:meth:`bayesdrop.model.losses.Loss.kinks`). Examples within
    :data:`POLISH_TAU` of a kink at ``theta`` start on it (at most ``n_params``, the
    closest); the others on the piece they lie in. A primal-dual active-set iteration then solves the equality-constrained quadratic
    problem (:func:`_equality_qp`), moves kink examples whose multiplier ``a_n = -beta_n``
    leaves the subgradient interval ``[left slope, right slope]`` onto that piece, and
    examples that crossed a kink onto it, until nothing moves. Then the KKT conditions of
    the convex problem hold -- checked afresh, with the slacks of
    :func:`kkt_certificate` -- and the result is the exact
    minimiser; otherwise (noise
    present, smooth loss, or no certificate within :data:`POLISH_ROUNDS` rounds) returns
    None.

    ``on_kink``: the start set instead of the examples near a kink; ``assignment``: the
    kink and piece of every example, ``(kink, piece)`` as :func:`kink_assignment` returns
    them, instead of those read off the scores at ``theta`` (which rounding may have moved
    across a kink).

    Returns
    -------
    theta : ndarray or None
    objective : float
    """
    design, loss, y = problem
    pieces = loss.kinks(y) if design.noise_free else None
    if pieces is None:
        return None, np.inf
    pos, slopes = pieces
    n = pos.shape[0]
    rows = np.arange(n)
    scale = max(float(np.max(np.abs(pos))), 1.0)
    tol_a = KINK_RTOL * max(float(np.max(np.abs(slopes))), 1.0)
    m = design.matvec(theta)
    kink_j, d_min, piece = kink_assignment(m, pos)
    if assignment is not None:  # the kinks and pieces of a walk's end (not read off m)
        kink_j, piece = (np.array(v, dtype=np.int64, copy=True) for v in assignment)
    if on_kink is None:
        on_kink = d_min <= POLISH_TAU * scale
    else:  # a start set given (the dual's free support vectors)
        on_kink = np.array(on_kink, dtype=bool, copy=True)
    if np.count_nonzero(on_kink) > design.n_params:  # keep the closest n_params
        on_kink[:] = False
        on_kink[np.argsort(d_min)[: design.n_params]] = True
    for _ in range(POLISH_ROUNDS):
        if np.count_nonzero(on_kink) > design.n_params:
            return None, np.inf  # more equalities than unknowns: not a generic optimum
        slope = slopes[rows, piece]
        target = pos[rows, kink_j]
        cand, beta, consistent = _equality_qp(design, on_kink, target, slope, pos)
        if not consistent:
            return None, np.inf  # no point satisfies these kink equalities: no certificate
        m = design.matvec(cand)
        changed = False
        # kink examples whose multiplier leaves the subgradient interval
        idx = np.flatnonzero(on_kink)
        go_left, go_right = outside_interval(-beta, slopes, idx, kink_j, tol_a)
        if np.any(go_left | go_right):
            changed = True
            on_kink[idx[go_left | go_right]] = False
            piece[idx[go_left]] = kink_j[idx[go_left]]
            piece[idx[go_right]] = kink_j[idx[go_right]] + 1
        # piece examples that crossed a kink
        free = np.flatnonzero(~on_kink)
        p = piece[free]
        tol_m = kink_tolerance(design, cand, pos)
        below, above = off_piece(m, pos, piece, free, tol_m[free])
        if np.any(below | above):
            changed = True
            on_kink[free[below | above]] = True
            kink_j[free[below]] = p[below] - 1
            kink_j[free[above]] = p[above]
        if not changed:
            # the KKT conditions afresh (:func:`kkt_certificate`): the multipliers that
            # the equalities gave, the rest on their pieces' slopes
            a = slopes[rows, piece]
            a[idx] = -beta
            if not kkt_certificate(problem, cand, on_kink, kink_j, piece, a, pieces=pieces):
                return None, np.inf
            return cand, problem.objective(cand)
    return None, np.inf


def init(problem, theta0=None):
    """Initial state; ``theta0`` defaults to zeros.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop.solvers import irls
    >>> state = irls.init(Problem.create(X, y, HingeLoss(1.0), Dropout(0.3)))
    >>> state.theta.tolist()
    [0.0, 0.0, 0.0, 0.0]
    """
    if theta0 is None:
        theta0 = np.zeros(problem.design.n_params)
    theta0 = np.array(theta0, dtype=float, copy=True)
    if theta0.shape != (problem.design.n_params,):
        raise ValueError(
            f"theta0 must have shape ({problem.design.n_params},), got {theta0.shape}"
        )
    return IRLSState(theta0, problem.objective(theta0))


def step(problem, state, *, accelerate=True, polish=True, linalg="auto", cg_tol=1e-10):
    """One IRLS iteration (plain, or SQUAREM-accelerated with a monotone safeguard).

    Parameters
    ----------
    problem : Problem
    state : IRLSState
    accelerate : bool
        SQUAREM-S3: ``theta1 = F(theta0)``, ``theta2 = F(theta1)``, ``r = theta1 - theta0``,
        ``v = theta2 - 2 theta1 + theta0``, ``alpha = -||r|| / ||v||`` (at most -1),
        ``theta' = F(theta0 - 2 alpha r + alpha^2 v)``; ``theta'`` is kept if
        ``J(theta') <= J(theta2)``, otherwise ``theta2``.
    polish : bool
        Also try :func:`active_set_polish` (zero-noise piecewise-linear losses only,
        once the relative decrease of ``J`` is below :data:`POLISH_SETTLED`) and keep it
        if it is certified optimal and does not raise ``J``.

    Returns
    -------
    IRLSState, IRLSInfo

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop.solvers import irls
    >>> problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))
    >>> state = irls.init(problem)
    >>> new, info = irls.step(problem, state)
    >>> bool(problem.objective(new.theta) < problem.objective(state.theta))  # MM: J decreases
    True
    """
    new, info = _mm_step(problem, state, accelerate, {"linalg": linalg, "cg_tol": cg_tol})
    if not polish:
        return new, info
    kinks = kink_set(problem, new.theta)
    new = new._replace(kinks=kinks)
    # attempt the polish once J has nearly settled
    settled = state.objective - new.objective <= POLISH_SETTLED * abs(new.objective)
    if kinks is not None and settled:
        theta_p, J_p = active_set_polish(problem, new.theta)
        if theta_p is not None and J_p <= new.objective:
            return IRLSState(theta_p, J_p, kinks), info._replace(polished=True)
    return new, info


def squarem(F, objective, theta0, accelerate=True):
    """One step of the MM map ``F`` from ``theta0``, SQUAREM-accelerated (Varadhan & Roland
    2008, scheme S3) with a monotone safeguard -- the one implementation behind
    :func:`step` (in memory) and :func:`fit_rows` (a row back-end).

    ``theta1 = F(theta0)``, ``theta2 = F(theta1)``, ``r = theta1 - theta0``,
    ``v = theta2 - 2 theta1 + theta0``, ``alpha = -||r|| / ||v||`` (at most -1),
    ``theta3 = F(theta0 - 2 alpha r + alpha^2 v)``, kept if ``J(theta3) <= J(theta2)``,
    otherwise ``theta2``. ``F(theta)`` returns ``(theta', info)``; ``objective(theta)``
    returns ``J(theta)``. Returns ``(theta, J, n_maps, accelerated, info)``.

    Examples
    --------
    >>> F = lambda th: (0.5 * th + 1.0, None)  # a linear contraction to theta* = 2
    >>> theta, J, n_maps, accelerated, _ = squarem(F, lambda th: float((th - 2.0) @ (th - 2.0)),
    ...                                           np.zeros(2))
    >>> theta.tolist(), n_maps, accelerated  # SQUAREM solves a linear map in one step
    ([2.0, 2.0], 3, True)
    """
    theta1, info = F(theta0)
    if not accelerate:
        return theta1, objective(theta1), 1, False, info
    theta2, info = F(theta1)
    J2 = objective(theta2)
    r = theta1 - theta0
    v = theta2 - theta1 - r
    nr, nv = np.linalg.norm(r), np.linalg.norm(v)
    if nv == 0.0 or not np.isfinite(nv) or nr == 0.0:
        return theta2, J2, 2, False, info
    alpha = min(-nr / nv, -1.0)
    theta_x = theta0 - 2.0 * alpha * r + alpha * alpha * v
    theta3, info3 = F(theta_x)
    J3 = objective(theta3)
    if np.isfinite(J3) and J3 <= J2:
        return theta3, J3, 3, True, info3
    return theta2, J2, 3, False, info


def _mm_step(problem, state, accelerate, kw):
    theta, J, n_maps, accelerated, info = squarem(
        lambda th: irls_map(problem, th, **kw), problem.objective, state.theta, accelerate)
    return IRLSState(theta, J), IRLSInfo(n_maps, accelerated, info)


@with_single_blas_pool
def fit(problem, theta0=None, *, tol=1e-8, max_iter=1000, accelerate=True, polish=True,
        linalg="auto", cg_tol=None, warn=True):
    """Run IRLS to convergence.

    Stops when both the relative decrease of ``J`` and the relative change of the
    parameters are small::

        (J_k - J_{k+1}) <= tol * max(|J_{k+1}|, 1)   and
        ||theta_{k+1} - theta_k||_inf <= sqrt(tol) * max(||theta_{k+1}||_inf, 1)

    (``sqrt(tol)`` because ``J`` is quadratic near its minimum).

    Parameters
    ----------
    problem : Problem
    theta0 : ndarray, optional
        Starting point (warm start); zeros by default.
    tol : float > 0
    max_iter : int >= 1
        Maximum number of iterations (each is 1 map, or 3 when accelerated).
    accelerate : bool, default=True
        SQUAREM acceleration with monotone safeguard (see :func:`step`).
    polish : bool, default=True
        Active-set polish at zero noise (see :func:`active_set_polish`).
    linalg : {"auto", "cholesky", "cg"}
    cg_tol : float, optional
        Relative residual of conjugate gradients; default ``min(1e-10, tol * 1e-2)``.
    warn : bool
        Emit a :class:`~sklearn.exceptions.ConvergenceWarning` if ``max_iter`` is reached.

    Returns
    -------
    SolverResult
        ``n_solves`` counts IRLS maps.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop.solvers import irls
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    >>> res = irls.fit(problem)
    >>> bool(res.converged), bool(np.all(np.diff(res.objective) <= 1e-12))
    (True, True)
    """
    tol = check_scalar(tol, "tol", min_val=0.0, include_min=False)
    max_iter = check_scalar(max_iter, "max_iter", min_val=1, max_val=MAX_ITER, integer=True)
    cg_tol = min(1e-10, tol * 1e-2) if cg_tol is None else cg_tol
    start = time.perf_counter()
    state = init(problem, theta0)
    history = [state.objective]
    n_maps = 0
    converged = False
    param_tol = np.sqrt(tol)
    it = 0
    for it in range(1, max_iter + 1):
        new, info = step(problem, state, accelerate=accelerate, polish=polish, linalg=linalg,
                         cg_tol=cg_tol)
        n_maps += info.n_maps
        if not np.isfinite(new.objective):
            raise FloatingPointError(f"IRLS produced a non-finite objective at iteration {it}")
        history.append(new.objective)
        dJ = state.objective - new.objective
        dtheta = np.max(np.abs(new.theta - state.theta), initial=0.0)
        scale = max(np.max(np.abs(new.theta), initial=0.0), 1.0)
        state = new
        if info.polished:  # KKT certificate: exact minimiser
            converged = True
            break
        if dJ <= tol * max(abs(new.objective), 1.0) and dtheta <= param_tol * scale:
            converged = True
            break
    if not converged and warn:
        warnings.warn(
            f"IRLS did not converge in max_iter={max_iter} iterations (tol={tol:g}); "
            "increase max_iter or tol",
            ConvergenceWarning,
            stacklevel=2,
        )
    grad = problem.objective(state.theta, gradient=True)[1]
    return SolverResult(state.theta, np.asarray(history), it, converged,
                        float(np.max(np.abs(grad), initial=0.0)), time.perf_counter() - start,
                        "irls", n_maps, wls.choose_linalg(problem.design, linalg))


class _RowMaps:
    """``F`` and ``J`` of :func:`squarem` through a row back-end: one pass at ``theta``
    returns both ``J(theta)`` and the system whose solution is ``F(theta)``, so each
    pass's pair is kept (the last :data:`KEEP` points) and asking for the other half at
    the same point costs no pass."""

    KEEP = 4

    def __init__(self, rows):
        self.rows = rows
        self.known = {}

    def _pass(self, theta):
        key = theta.tobytes()
        if key not in self.known:
            J, A, r = self.rows.irls(theta)
            nxt = theta if not np.isfinite(J) else sla.cho_solve(
                (wls.cholesky_factor(A), True), r, check_finite=False)
            self.known[key] = (J, nxt)
            while len(self.known) > self.KEEP:
                del self.known[next(iter(self.known))]
        return self.known[key]

    def F(self, theta):
        return self._pass(theta)[1], None

    def J(self, theta):
        return self._pass(theta)[0]


@with_single_blas_pool
def fit_rows(rows, theta0=None, *, tol=1e-8, max_iter=1000, accelerate=True, warn=True):
    """IRLS through a row back-end (:mod:`bayesdrop.linalg.backend`): one pass per map.

    The iteration, SQUAREM acceleration and stopping rule of :func:`fit` (without the
    zero-noise active-set polish, which needs the rows themselves): each pass returns
    ``J(theta)`` and the ``D x D`` system ``(A, r)`` at ``theta``, whose solution is the
    next map. For the dask back-end this is the fallback where Newton does not apply (the
    zero-noise hinge and epsilon-insensitive losses), and it converges linearly there.

    Returns
    -------
    SolverResult
        ``n_solves`` counts IRLS maps and ``n_passes`` the passes over the data; ``grad_norm`` is NaN (``J`` may have
        kinks at the result).

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> from bayesdrop.linalg.backend import InMemoryRows
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))
    >>> a = fit_rows(InMemoryRows(problem), tol=1e-12)
    >>> b = fit(problem, tol=1e-12)
    >>> bool(abs(a.objective[-1] - b.objective[-1]) <= 1e-9 * b.objective[-1])
    True
    """
    tol = check_scalar(tol, "tol", min_val=0.0, include_min=False)
    max_iter = check_scalar(max_iter, "max_iter", min_val=1, max_val=MAX_ITER, integer=True)
    start = time.perf_counter()
    passes = getattr(rows, "n_passes", 0)
    theta = np.zeros(rows.n_params) if theta0 is None else np.array(theta0, dtype=float)
    if theta.shape != (rows.n_params,):
        raise ValueError(f"theta0 must have shape ({rows.n_params},), got {theta.shape}")
    maps = _RowMaps(rows)
    n_maps = 0
    J = maps.J(theta)
    if not np.isfinite(J):
        raise FloatingPointError("J is not finite at the starting point")
    history = [J]
    converged = False
    param_tol = np.sqrt(tol)
    it = 0
    for it in range(1, max_iter + 1):
        new, J_new, n_new, *_ = squarem(maps.F, maps.J, theta, accelerate)
        n_maps += n_new
        if not np.isfinite(J_new):
            raise FloatingPointError(f"IRLS produced a non-finite objective at iteration {it}")
        history.append(J_new)
        dJ = J - J_new
        dtheta = np.max(np.abs(new - theta), initial=0.0)
        scale = max(np.max(np.abs(new), initial=0.0), 1.0)
        theta, J = new, J_new
        if dJ <= tol * max(abs(J), 1.0) and dtheta <= param_tol * scale:
            converged = True
            break
    if not converged and warn:
        warnings.warn(f"IRLS did not converge in max_iter={max_iter} iterations "
                      f"(tol={tol:g}); increase max_iter or tol", ConvergenceWarning,
                      stacklevel=2)
    return SolverResult(theta, np.asarray(history), it, converged, float("nan"),
                        time.perf_counter() - start, "irls", n_maps, "cholesky",
                        n_passes=getattr(rows, "n_passes", 0) - passes)
