"""L-BFGS-B on a smooth objective, with scikit-learn's scaling of the tolerance.

Used by the baselines whose objectives are smooth but not of the augmented form (MCF,
Wager's penalty, t-logistic regression), by the latent ``alpha``-step of the alternation,
and (:func:`fit_latent`) for the latent objective in all its parameters at once -- there,
for dense ``X`` and the built-in losses, by the compiled L-BFGS of
:mod:`bayesdrop.solvers._lbfgs_compiled` instead of scipy's (no GIL, no Python per step:
digits q = 0.2 7.0 -> about 4 s sequential, and one-vs-rest problems in threads).
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import minimize

from .._threads import with_single_blas_pool
from ..model.latent import LatentDesign, latent_gradients, noise_entries
from ..model.noise import make_noise
from ._lbfgs_compiled import (CompiledLatent, centred_objective, input_mean,
                              shift_biases)
from .alternating import LatentResult, clean_start_point, latent_setup, w_step

__all__ = ["LATENT_WINDOW", "fit_latent", "minimize_lbfgs"]


@with_single_blas_pool
def minimize_lbfgs(fun, theta0, tol, max_iter, scale):
    """Minimise ``fun(theta) -> (value, grad)`` by L-BFGS-B; return the scipy result.

    L-BFGS-B runs on ``fun / scale``; with ``scale = C n`` that is the mean loss plus
    ``||w||^2 / (2 C n)`` -- scikit-learn's scaling of ``LogisticRegression`` -- so that
    ``tol`` (the projected-gradient tolerance ``gtol``) means the same at every ``n`` and
    ``C``. ``res.fun`` is returned on the original scale.

    Examples
    --------
    >>> res = minimize_lbfgs(lambda t: ((t - 3.0) @ (t - 3.0), 2 * (t - 3.0)),
    ...                      np.zeros(2), 1e-10, 100, 1.0)
    >>> res.x.round(6).tolist(), bool(res.success)
    ([3.0, 3.0], True)
    """
    def scaled(theta):
        value, grad = fun(theta)
        return value / scale, grad / scale

    res = minimize(scaled, theta0, jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "gtol": tol,
                            "ftol": 64 * np.finfo(float).eps, "maxcor": 20, "maxls": 50})
    res.fun = float(res.fun) * scale
    return res


#: L-BFGS iterations per window of :func:`fit_latent`'s stopping rule (about the work of
#: one alternation of :func:`bayesdrop.solvers.alternating.fit_latent`)
LATENT_WINDOW = 20


@with_single_blas_pool
def fit_latent(X, y, loss, noise, *, n_hidden=20, alpha_penalty=1.0, fit_intercept=True,
               alpha0=None, theta0=None, random_state=None, max_iter=5000, tol=1e-6,
               init_scale=2.0, w_iter=100, clean_start=5):
    """The latent (one-hidden-layer) objective by L-BFGS in all parameters at once.

    ``J(w, b, alpha)`` (MATH.md section 6) is smooth wherever every score variance is
    positive -- the logistic loss always, the hinge loss under noise -- and L-BFGS moves
    the output weights and the hidden layer together, with the analytic gradients of
    :func:`bayesdrop.model.latent.latent_gradients` (five ``N x D x K`` products per
    evaluation). Dense ``X`` with a built-in loss runs the compiled loop of
    :func:`bayesdrop.solvers._lbfgs_compiled.lbfgs_latent` (strong-Wolfe line search,
    memory 20) on :func:`bayesdrop.model._latent_compiled.latent_value_grad`; sparse ``X``
    scipy's L-BFGS-B (``maxcor=20``). Both move in centred coordinates (hidden biases
    shifted by ``alpha^T mean(x)``, an exact change of variables; see
    :class:`bayesdrop.solvers._lbfgs_compiled.CompiledLatent`). It starts from the hidden
    layer of :func:`bayesdrop.solvers.alternating.initial_alpha` and the output weights of one
    IRLS ``w``-step on it (or ``theta0``; see also ``clean_start``), and stops when the last
    :data:`LATENT_WINDOW` iterations lowered ``J`` by less than ``tol * max(|J|, 1)`` in
    total (or after ``max_iter`` iterations).

    Parameters
    ----------
    X, y, loss, noise, n_hidden, alpha_penalty, fit_intercept, alpha0, theta0,
    random_state, init_scale
        As for :func:`bayesdrop.solvers.alternating.fit_latent`.
    max_iter : int
        L-BFGS iterations.
    tol : float
    w_iter : int
        IRLS iterations of the starting ``w``-step.
    clean_start : int
        With noise and neither ``alpha0`` nor ``theta0``: start from this many
        alternations on clean data, as :func:`bayesdrop.solvers.alternating.fit_latent`
        does (from a random hidden layer under noise the first ``w``-step can give
        ``w = 0``, a stationary point for the hinge loss) -- or, on the compiled path with
        a smooth loss (logistic), from ``clean_start * LATENT_WINDOW`` iterations of the
        same L-BFGS on the clean ``J`` (from the ``w``-step on the clean hidden features).

    Returns
    -------
    bayesdrop.solvers.alternating.LatentResult
        ``objective`` holds ``J`` at the start and after every iteration (non-increasing).

    Examples
    --------
    >>> from bayesdrop import LogisticLoss, Dropout
    >>> from bayesdrop.solvers import alternating
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 2)); y = np.sign(X[:, 0] * X[:, 1])  # XOR-like
    >>> kw = dict(n_hidden=4, alpha_penalty=0.1, random_state=0)
    >>> res = fit_latent(X, y, LogisticLoss(1.0), Dropout(0.1), **kw)
    >>> bool(np.all(np.diff(res.objective) <= 0)), res.converged
    (True, True)
    >>> alt = alternating.fit_latent(X, y, LogisticLoss(1.0), Dropout(0.1), **kw)
    >>> bool(res.objective[-1] <= alt.objective[-1] * (1 + 1e-3))  # as low a J
    True
    """
    X, entries, rng, alpha = latent_setup(X, loss, noise, n_hidden, random_state,
                                          init_scale, alpha0)
    start = time.perf_counter()
    pen = float(alpha_penalty)
    # dense X, built-in loss: the compiled loop (no GIL, no Python per step)
    compiled = (CompiledLatent(X, entries, y, loss, alpha.shape[1], fit_intercept, pen)
                if CompiledLatent.applies(X, loss) else None)
    noisy = entries[2].size > 0
    cold = bool(clean_start) and alpha0 is None and theta0 is None and noisy
    smooth_start = cold and compiled is not None and loss.smooth
    if cold and not smooth_start:
        alpha, theta0 = clean_start_point(
            X, y, loss, alpha, rng, n_hidden=n_hidden, alpha_penalty=alpha_penalty,
            fit_intercept=fit_intercept, clean_start=clean_start, w_iter=w_iter, tol=tol)
    if theta0 is None:
        design = LatentDesign(X, entries if not smooth_start
                              else noise_entries(X, make_noise("none")), alpha, fit_intercept)
        theta0 = w_step(design, loss, y, None, w_iter).theta
    theta0 = np.asarray(theta0, dtype=float)
    n_theta = theta0.shape[0]
    shape = alpha.shape
    if compiled is not None:
        z = np.concatenate([theta0, alpha.ravel()])
        if smooth_start:
            # a smooth loss: the clean-data start by this same L-BFGS on the clean J
            # (``clean_start`` windows of iterations) instead of alternations
            compiled.run(z, clean_start * LATENT_WINDOW, tol, LATENT_WINDOW, clean=True)
        history, n_iter, status = compiled.run(z, max_iter, tol, LATENT_WINDOW,
                                               clean=not noisy)
        converged = status in (1, 2)
    else:
        z, history, n_iter, converged = _scipy_latent(
            X, entries, y, loss, theta0, alpha, pen, fit_intercept, max_iter, tol)
    return LatentResult(theta=z[:n_theta].copy(), alpha=z[n_theta:].reshape(shape).copy(),
                        objective=np.asarray(history, dtype=float), n_iter=int(n_iter),
                        converged=bool(converged), time=time.perf_counter() - start,
                        entries=entries)


def _scipy_latent(X, entries, y, loss, theta0, alpha, pen, fit_intercept, max_iter, tol):
    """:func:`fit_latent`'s minimisation by scipy's L-BFGS-B (sparse ``X``, losses with
    no compiled terms): ``(z, history, n_iter, converged)``."""
    n_theta = theta0.shape[0]
    shape = alpha.shape
    work = {}

    def fun_x(z):
        J, g_theta, g_alpha = latent_gradients(X, entries, y, loss, z[:n_theta],
                                               z[n_theta:].reshape(shape), pen,
                                               fit_intercept, work)
        return J, np.concatenate([g_theta, g_alpha.ravel()])

    # centred coordinates, as the compiled loop (CompiledLatent), without centring X
    mean = input_mean(X, loss.weights)
    fun = centred_objective(fun_x, mean, n_theta, shape)
    z0 = np.concatenate([theta0, alpha.ravel()])
    shift_biases(z0[n_theta:].reshape(shape), mean, 1.0)
    history = [fun(z0)[0]]
    state = {"converged": False}

    def callback(intermediate_result):
        history.append(float(intermediate_result.fun))
        if len(history) > LATENT_WINDOW:
            J = history[-1]
            if history[-1 - LATENT_WINDOW] - J <= tol * max(abs(J), 1.0):
                state["converged"] = True
                raise StopIteration

    res = minimize(fun, z0, jac=True, method="L-BFGS-B", callback=callback,
                   options={"maxiter": int(max_iter), "ftol": 64 * np.finfo(float).eps,
                            "gtol": 0.0, "maxcor": 20, "maxls": 50})
    shift_biases(res.x[n_theta:].reshape(shape), mean, -1.0)  # back to X's coordinates
    return res.x, history, int(res.nit), state["converged"] or bool(res.success)
