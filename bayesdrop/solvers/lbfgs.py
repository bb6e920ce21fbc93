"""L-BFGS-B on a smooth objective, with scikit-learn's scaling of the tolerance.

Used by the baselines whose objectives are smooth but not of the augmented form (MCF,
Wager's penalty, t-logistic regression) and by the latent ``alpha``-step.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from .._threads import with_single_blas_pool

__all__ = ["minimize_lbfgs"]


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
