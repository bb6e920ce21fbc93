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
           "fit_rows"]


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


def _equality_qp(design, on_kink, target, slope):
    """Minimise ``theta^T I' theta + sum_n slope_n m_n`` s.t. ``m_n = target_n`` on kinks.

    With ``g = -Xbar^T slope`` the KKT conditions give ``w = (g_w + X_E^T beta) / 2`` and
    the bordered system ``[[X_E X_E^T / 2, 1], [1^T, 0]] [beta; b] = [c_E - X_E g_w / 2;
    -g_b]`` (least squares, as it may be singular). Returns ``theta``, ``beta`` and
    whether the system holds (residual at most ``1e-9`` of its scale): a singular system
    with an inconsistent right-hand side (more examples on kinks than the rank of
    ``[X_E, 1]``, e.g. linearly dependent features) has no solution, and its least-squares
    point violates ``m_n = target_n``.
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
    rhs = target[idx] - np.asarray(XE @ g_w).ravel() / 2.0
    k = idx.size
    if design.fit_intercept:
        K = np.zeros((k + 1, k + 1))
        K[:k, :k] = G
        K[:k, k] = K[k, :k] = 1.0
        full_rhs = np.append(rhs, -g[-1])
        sol = _solve_or_lstsq(K, full_rhs)
        beta, b = sol[:k], sol[k]
        residual = K @ sol - full_rhs
    else:
        K, full_rhs = G, rhs
        beta = _solve_or_lstsq(G, rhs) if k else np.zeros(0)
        residual = G @ beta - rhs
    w = (g_w + np.asarray(XE.T @ beta).ravel()) / 2.0
    theta = np.append(w, b) if design.fit_intercept else w
    scale = max(float(np.max(np.abs(full_rhs), initial=0.0)),
                float(np.max(np.abs(target[idx]), initial=0.0)), 1.0)
    return theta, beta, bool(np.max(np.abs(residual), initial=0.0) <= 1e-9 * scale)


def active_set_polish(problem, theta, on_kink=None):
    """Exact minimiser of a piecewise linear-quadratic ``J`` from the IRLS active set.

    At zero noise the hinge and epsilon-insensitive terms are piecewise linear in the
    score ``m_n`` (:meth:`bayesdrop.model.losses.Loss.kinks`). Examples within
    :data:`POLISH_TAU` of a kink at ``theta`` start on it (at most ``n_params``, the
    closest); the others on the piece they lie in. A primal-dual active-set iteration then solves the equality-constrained quadratic
    problem (:func:`_equality_qp`), moves kink examples whose multiplier ``a_n = -beta_n``
    leaves the subgradient interval ``[left slope, right slope]`` onto that piece, and
    examples that crossed a kink onto it, until nothing moves. Then the KKT conditions of
    the convex problem hold and the result is the exact minimiser; otherwise (noise
    present, smooth loss, or no certificate within :data:`POLISH_ROUNDS` rounds) returns
    None.

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
    tol_m = 1e-9 * scale
    tol_a = 1e-9 * max(float(np.max(np.abs(slopes))), 1.0)
    m = design.matvec(theta)
    kink_j, d_min, piece = kink_assignment(m, pos)
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
        cand, beta, consistent = _equality_qp(design, on_kink, target, slope)
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
        below, above = off_piece(m, pos, piece, free, tol_m)
        if np.any(below | above):
            changed = True
            on_kink[free[below | above]] = True
            kink_j[free[below]] = p[below] - 1
            kink_j[free[above]] = p[above]
        if not changed:
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
