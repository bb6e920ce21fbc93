"""Alternating minimisation of the latent (one-hidden-layer) objective (MATH.md section 6).

``J(w, b, alpha)`` is minimised block by block: the ``w``-step is IRLS on the hidden
features (:class:`bayesdrop.model.latent.LatentDesign` through the shared weighted
least-squares core), the ``alpha``-step L-BFGS on
:func:`bayesdrop.model.latent.latent_objective` with its analytic gradient (for dense
``X`` the compiled loop of :mod:`bayesdrop.solvers._lbfgs_compiled` with ``theta``
held fixed, else scipy's L-BFGS-B). Both steps
decrease ``J``, so the objective history of :func:`fit_latent` is monotone.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize

from .._threads import with_single_blas_pool
from .._validation import as_float_design, check_random_state
from ..model.design import Design
from ..model.latent import LatentDesign, latent_objective, noise_entries
from ..model.noise import make_noise
from ..model.problem import Problem
from . import irls, newton
from ._lbfgs_compiled import (CompiledLatent, centred_objective, input_mean,
                              shift_biases)

__all__ = ["LatentResult", "clean_start_point", "fit_latent", "initial_alpha",
           "latent_setup", "w_step"]


class LatentResult(NamedTuple):
    """Outcome of :func:`fit_latent`.

    Attributes
    ----------
    theta : ndarray of shape (n_hidden + fit_intercept,)
        Output weights and intercept.
    alpha : ndarray of shape (n_features + 1, n_hidden)
        Hidden weights, hidden biases in the last row.
    objective : ndarray
        ``J`` after each half-step (non-increasing).
    n_iter : int
    converged : bool
    time : float
    entries : tuple
        The noise entries of :func:`bayesdrop.model.latent.noise_entries`.
    """

    theta: np.ndarray
    alpha: np.ndarray
    objective: np.ndarray
    n_iter: int
    converged: bool
    time: float
    entries: tuple


def _alpha_step(X, entries, y, loss, theta, alpha, pen, fit_intercept, alpha_iter, work):
    """``alpha_iter`` L-BFGS iterations in ``alpha`` at fixed ``theta``: ``(J, alpha)``.

    Dense ``X`` with a built-in loss: the compiled L-BFGS of
    :mod:`bayesdrop.solvers._lbfgs_compiled` with ``theta`` held fixed; otherwise scipy's
    L-BFGS-B on :func:`bayesdrop.model.latent.latent_objective`. Both in centred
    coordinates (:class:`bayesdrop.solvers._lbfgs_compiled.CompiledLatent`).
    """
    if CompiledLatent.applies(X, loss):
        if "compiled" not in work:
            work["compiled"] = CompiledLatent(X, entries, y, loss, alpha.shape[1],
                                              fit_intercept, pen)
        theta = np.asarray(theta, dtype=float)
        z = np.concatenate([theta, alpha.ravel()])
        history, n_iter, _ = work["compiled"].run(z, alpha_iter, 0.0, alpha_iter + 1,
                                                  n_fixed=theta.shape[0])
        return float(history[n_iter]), z[theta.shape[0]:].reshape(alpha.shape).copy()

    def fun_x(a_flat):
        J, g = latent_objective(X, entries, y, loss, theta, a_flat.reshape(alpha.shape),
                                pen, fit_intercept)
        return J, g.ravel()

    # centred coordinates, as the compiled loop (CompiledLatent), without centring X
    if "mean" not in work:
        work["mean"] = input_mean(X, loss.weights)
    fun = centred_objective(fun_x, work["mean"], 0, alpha.shape)
    start = shift_biases(np.array(alpha, dtype=float), work["mean"], 1.0)
    opt = minimize(fun, start.ravel(), jac=True, method="L-BFGS-B",
                   options={"maxiter": alpha_iter})
    return float(opt.fun), shift_biases(opt.x.reshape(alpha.shape), work["mean"], -1.0)


def w_step(design, loss, y, theta, w_iter):
    """The output weights for a fixed hidden layer: the minimiser of ``J`` over
    ``theta = (w, b)`` on the latent design, from ``theta`` (or zero).

    IRLS (``tol = 1e-10``, at most ``w_iter`` iterations) -- except for a smooth loss on
    noise-free hidden features (the clean-data alternations, ``q = 0``), where the design
    is ordinary (``G`` with no noise) and Newton's method reaches the optimum in a few
    steps (logistic on digits: 6 steps against 18 IRLS iterations, 7 times faster).

    Returns
    -------
    bayesdrop.solvers.result.SolverResult
    """
    if loss.smooth and not design.v.size:
        plain = Problem(Design(design.G, "none", design.fit_intercept), loss, y)
        if newton.applicable(plain):
            return newton.fit(plain, theta, tol=1e-10, max_iter=w_iter, warn=False)
    return irls.fit(Problem(design, loss, y), theta, tol=1e-10, max_iter=w_iter,
                    warn=False)


def initial_alpha(X, loss, n_hidden, rng, init_scale=2.0, alpha0=None):
    """The starting hidden layer: ``alpha0``, or ``N(0, (init_scale / rms)^2)`` weights with
    ``rms`` the root mean square of ``||x_n||`` (weighted as the loss weighs the examples)
    and zero biases -- pre-activations with sd about ``init_scale``, hidden features that
    vary (a near-constant layer makes ``w = 0`` a stationary point)."""
    if alpha0 is not None:
        return np.array(alpha0, dtype=float)
    d = X.shape[1]
    sq = X.multiply(X).sum(axis=1) if sp.issparse(X) else np.sum(X * X, axis=1)
    rms = float(np.sqrt(np.average(np.asarray(sq).ravel(), weights=loss.weights))) or 1.0
    alpha = np.zeros((d + 1, n_hidden))
    alpha[:-1] = rng.normal(scale=init_scale / rms, size=(d, n_hidden))
    return alpha


def latent_setup(X, loss, noise, n_hidden, random_state, init_scale=2.0, alpha0=None):
    """``(X, entries, rng, alpha)``: the validated design, its noise entries
    (:func:`bayesdrop.model.latent.noise_entries`), the generator and the starting hidden
    layer (:func:`initial_alpha`) -- the set-up both latent optimisers share."""
    X = as_float_design(X)
    noise = make_noise(noise) if not hasattr(noise, "variance") else noise
    entries = noise_entries(X, noise)
    rng = check_random_state(random_state)
    return X, entries, rng, initial_alpha(X, loss, n_hidden, rng, init_scale, alpha0)


def clean_start_point(X, y, loss, alpha, rng, *, n_hidden, alpha_penalty, fit_intercept,
                      clean_start, w_iter, tol, alpha_iter=20):
    """``(alpha, theta)`` after ``clean_start`` alternations on clean data from ``alpha``.

    Under noise a random hidden layer carries so little signal that the first step can
    collapse to the trivial ``w = 0`` (for the hinge loss a stationary point); both latent
    optimisers start from this continuation instead."""
    pre = fit_latent(X, y, loss, make_noise("none"), n_hidden=n_hidden,
                     alpha_penalty=alpha_penalty, fit_intercept=fit_intercept,
                     alpha0=alpha, random_state=rng, max_iter=clean_start,
                     w_iter=w_iter, alpha_iter=alpha_iter, tol=tol, clean_start=0)
    return pre.alpha, pre.theta


@with_single_blas_pool
def fit_latent(X, y, loss, noise, *, n_hidden=20, alpha_penalty=1.0, fit_intercept=True,
               alpha0=None, theta0=None, random_state=None, max_iter=50, w_iter=100,
               alpha_iter=20, tol=1e-6, init_scale=2.0, clean_start=5):
    """Alternate the ``w``-step (IRLS on the hidden features) and the ``alpha``-step.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,)
    loss : Loss
    noise : NoiseModel or str
    n_hidden : int
    alpha_penalty : float >= 0
    fit_intercept : bool
    alpha0 : ndarray of shape (n_features + 1, n_hidden), optional
        Initial hidden layer; default ``N(0, (init_scale / rms)^2)`` weights with ``rms``
        the root mean square of ``||x_n||`` (pre-activations of sd about ``init_scale``)
        and zero biases.
    theta0 : ndarray, optional
    random_state : None, int or Generator
    max_iter : int
        Outer alternations.
    w_iter, alpha_iter : int
        IRLS iterations per ``w``-step and L-BFGS iterations per ``alpha``-step.
    tol : float
        Stop when one alternation lowers ``J`` by less than ``tol * max(|J|, 1)``.
    init_scale : float
        See ``alpha0``.
    clean_start : int
        With noise and no ``alpha0``: first run this many alternations on clean data
        (zero noise) and start from their result. The objective history reported is
        that of the noisy problem only.

    Returns
    -------
    LatentResult
        ``theta``, ``alpha``, ``objective`` (history after each half-step), ``n_iter``,
        ``converged``, ``time``.

    Examples
    --------
    >>> from bayesdrop import HingeLoss, Dropout
    >>> from bayesdrop.solvers.alternating import fit_latent
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 2)); y = np.sign(X[:, 0] * X[:, 1])  # XOR-like
    >>> res = fit_latent(X, y, HingeLoss(1.0), Dropout(0.1), n_hidden=4, max_iter=5,
    ...                  random_state=0)
    >>> bool(np.all(np.diff(res.objective) <= 1e-9))  # monotone by construction
    True
    """
    X, entries, rng, alpha = latent_setup(X, loss, noise, n_hidden, random_state,
                                          init_scale, alpha0)
    theta = theta0
    start = time.perf_counter()
    if clean_start and alpha0 is None and entries[2].size:
        alpha, theta = clean_start_point(
            X, y, loss, alpha, rng, n_hidden=n_hidden, alpha_penalty=alpha_penalty,
            fit_intercept=fit_intercept, clean_start=clean_start, w_iter=w_iter, tol=tol,
            alpha_iter=alpha_iter)
    history = []
    converged = False
    it = 0
    pen = float(alpha_penalty)
    work = {}
    for it in range(1, max_iter + 1):
        design = LatentDesign(X, entries, alpha, fit_intercept)
        res = w_step(design, loss, y, theta, w_iter)
        theta = res.theta
        aw = alpha[:-1]
        history.append(res.objective[-1] + pen * float(np.sum(aw * aw)))

        J_alpha, alpha_new = _alpha_step(X, entries, y, loss, theta, alpha, pen,
                                         fit_intercept, alpha_iter, work)
        if J_alpha <= history[-1]:
            alpha = alpha_new
            history.append(J_alpha)
        else:  # keep the objective monotone
            history.append(history[-1])
        if len(history) >= 4:
            prev, cur = history[-3], history[-1]
            if prev - cur <= tol * max(abs(cur), 1.0):
                converged = True
                break
    # finish with a w-step at the final alpha so theta is optimal for it
    design = LatentDesign(X, entries, alpha, fit_intercept)
    res = w_step(design, loss, y, theta, w_iter)
    theta = res.theta
    history.append(res.objective[-1] + pen * float(np.sum(alpha[:-1] ** 2)))
    return LatentResult(theta=theta, alpha=alpha, objective=np.array(history), n_iter=it,
                        converged=converged, time=time.perf_counter() - start,
                        entries=entries)
