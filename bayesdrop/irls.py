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

The kernel API follows BlackJAX: :func:`init` builds an :class:`IRLSState`,
:func:`step` returns the next state and an :class:`IRLSInfo`; :func:`fit` is the driver.
"""

from __future__ import annotations

import time
import warnings
from typing import NamedTuple

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from . import wls
from ._validation import check_scalar

__all__ = ["IRLSState", "IRLSInfo", "IRLSResult", "irls_map", "init", "step", "fit"]


class IRLSState(NamedTuple):
    """Current iterate ``theta`` and its objective ``J(theta)``."""

    theta: np.ndarray
    objective: float


class IRLSInfo(NamedTuple):
    """What one :func:`step` did."""

    n_maps: int  # IRLS maps evaluated (1 plain, 3 accelerated)
    accelerated: bool  # whether the extrapolated point was accepted
    solver_info: dict


class IRLSResult(NamedTuple):
    """Outcome of :func:`fit`."""

    theta: np.ndarray
    objective: np.ndarray  # history, J(theta_0), J(theta_1), ...
    n_iter: int
    n_maps: int
    converged: bool
    time: float


def irls_map(problem, theta, *, solver="auto", cg_tol=1e-10):
    """One IRLS map ``F(theta)``: expected weights at ``theta``, then solve ``A theta' = r``.

    Returns
    -------
    theta_new : ndarray
    info : dict
        From :func:`bayesdrop.wls.solve`.
    """
    rho, t = problem.irls_weights(theta)
    return wls.solve(problem.design, rho, t, solver=solver, x0=theta, cg_tol=cg_tol)


def init(problem, theta0=None):
    """Initial state; ``theta0`` defaults to zeros."""
    if theta0 is None:
        theta0 = np.zeros(problem.design.n_params)
    theta0 = np.array(theta0, dtype=float, copy=True)
    if theta0.shape != (problem.design.n_params,):
        raise ValueError(
            f"theta0 must have shape ({problem.design.n_params},), got {theta0.shape}"
        )
    return IRLSState(theta0, problem.objective(theta0))


def step(problem, state, *, accelerate=True, solver="auto", cg_tol=1e-10):
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

    Returns
    -------
    IRLSState, IRLSInfo
    """
    kw = {"solver": solver, "cg_tol": cg_tol}
    theta0 = state.theta
    theta1, info = irls_map(problem, theta0, **kw)
    if not accelerate:
        return IRLSState(theta1, problem.objective(theta1)), IRLSInfo(1, False, info)
    theta2, info = irls_map(problem, theta1, **kw)
    J2 = problem.objective(theta2)
    r = theta1 - theta0
    v = theta2 - theta1 - r
    nr, nv = np.linalg.norm(r), np.linalg.norm(v)
    if nv == 0.0 or not np.isfinite(nv) or nr == 0.0:
        return IRLSState(theta2, J2), IRLSInfo(2, False, info)
    alpha = min(-nr / nv, -1.0)
    theta_x = theta0 - 2.0 * alpha * r + alpha * alpha * v
    theta3, info3 = irls_map(problem, theta_x, **kw)
    J3 = problem.objective(theta3)
    if np.isfinite(J3) and J3 <= J2:
        return IRLSState(theta3, J3), IRLSInfo(3, True, info3)
    return IRLSState(theta2, J2), IRLSInfo(3, False, info)


def fit(problem, theta0=None, *, tol=1e-8, max_iter=1000, accelerate=True, solver="auto",
        cg_tol=None, warn=True):
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
    solver : {"auto", "cholesky", "cg"}
    cg_tol : float, optional
        Relative residual of conjugate gradients; default ``min(1e-10, tol * 1e-2)``.
    warn : bool
        Emit a :class:`~sklearn.exceptions.ConvergenceWarning` if ``max_iter`` is reached.

    Returns
    -------
    IRLSResult
    """
    tol = check_scalar(tol, "tol", min_val=0.0, include_min=False)
    max_iter = check_scalar(max_iter, "max_iter", min_val=1, integer=True)
    cg_tol = min(1e-10, tol * 1e-2) if cg_tol is None else cg_tol
    start = time.perf_counter()
    state = init(problem, theta0)
    history = [state.objective]
    n_maps = 0
    converged = False
    param_tol = np.sqrt(tol)
    it = 0
    for it in range(1, max_iter + 1):
        new, info = step(problem, state, accelerate=accelerate, solver=solver, cg_tol=cg_tol)
        n_maps += info.n_maps
        if not np.isfinite(new.objective):
            raise FloatingPointError(f"IRLS produced a non-finite objective at iteration {it}")
        history.append(new.objective)
        dJ = state.objective - new.objective
        dtheta = np.max(np.abs(new.theta - state.theta), initial=0.0)
        scale = max(np.max(np.abs(new.theta), initial=0.0), 1.0)
        state = new
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
    return IRLSResult(state.theta, np.asarray(history), it, n_maps, converged,
                      time.perf_counter() - start)
