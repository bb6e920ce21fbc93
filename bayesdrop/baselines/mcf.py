"""Marginalized corrupted features (van der Maaten et al. 2013): quadratic and logistic loss.

* :class:`MCFQuadraticClassifier` -- the expected squared loss, closed form through the
  shared weighted least-squares core;
* :class:`MCFLogisticRegression` -- Jensen's bound ``log(1 + E exp(-y w.x~))`` with the
  exact moment-generating function of the noise, by L-BFGS; the dropout pass is one
  jitted, chunk-parallel kernel (:func:`_mcf_dropout_pass`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import expit, log_expit

from .. import _jit
from ..estimators.linear import _DropoutClassifier
from ..model.design import Design
from ..model.losses import SquaredLoss
from ..model.noise import AdditiveGaussian, Dropout, MultiplicativeGaussian, NoNoise, make_noise
from ._smooth import SmoothBinaryClassifier

__all__ = ["MCFQuadraticClassifier", "MCFLogisticRegression"]

class MCFQuadraticClassifier(_DropoutClassifier):
    """Marginalized corrupted features with the quadratic loss (van der Maaten et al. 2013).

    Minimises the expected squared loss on ``y`` in {-1, +1}::

        1/2 ||w||^2 + (C/2) sum_n E (y_n - w.x~_n - b)^2
            = 1/2 ||w||^2 + (C/2) sum_n ((y_n - m_n)^2 + v_n.(w*w))

    in closed form: one step of the shared weighted-least-squares core with constant
    weights ``rho_n = 2C`` (:class:`bayesdrop.model.losses.SquaredLoss` with ``C' = 2C``,
    MATH.md section 7), ``(2 I' + 2C (Xbar^T Xbar + diag(sum_n vbar_n))) theta = 2C Xbar^T y``.
    At zero noise it is :class:`sklearn.linear_model.RidgeClassifier` with ``alpha = 1/C``.
    Multiclass: one-vs-rest. ``sample_posterior`` samples the Gaussian pseudo-posterior.

    Parameters
    ----------
    C : float, default=1.0
        The weight of the expected squared loss in the objective above: at zero noise
        ``RidgeClassifier(alpha=1/C)``. In the ``J`` of the library this is the squared
        loss with weight ``2C`` (``loss_ = SquaredLoss(2C)``): compared with the
        dropout estimators at the same noise, ``MCFQuadraticClassifier(C)`` is the
        squared-loss counterpart of ``DropoutSVC(2C)`` / ``DropoutLogisticRegression(2C)``,
        not of ``DropoutSVC(C)``.
    noise, noise_level
        As for :class:`bayesdrop.DropoutSVC`.
    fit_intercept : bool, default=True
    solver, linalg, tol, max_iter, accelerate, warm_start
        As for :class:`bayesdrop.DropoutSVC` (``J`` is quadratic: one Newton or IRLS step
        is exact here).

    Attributes
    ----------
    classes_, coef_, intercept_, n_iter_, objective_, noise_, loss_

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import RidgeClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 3)); y = np.sign(X[:, 0] + 0.3 * rng.normal(size=50))
    >>> ours = MCFQuadraticClassifier(C=2.0, noise_level=0).fit(X, y)
    >>> bool(np.allclose(ours.coef_, RidgeClassifier(alpha=0.5).fit(X, y).coef_))
    True
    """

    def __init__(self, C=1.0, *, noise="dropout", noise_level=None, fit_intercept=True,
                 solver="auto", linalg="auto", tol=1e-8, max_iter=100, accelerate=False, warm_start=False):
        self.C = C
        self.noise = noise
        self.noise_level = noise_level
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.linalg = linalg
        self.tol = tol
        self.max_iter = max_iter
        self.accelerate = accelerate
        self.warm_start = warm_start

    def _make_loss(self):
        return SquaredLoss(2.0 * self.C)


# ---------------------------------------------------------------------------------------
# MCF-logistic
# ---------------------------------------------------------------------------------------
#: row chunks of the MCF-logistic pass: fixed, so that the summation order (and the
#: result, to the last bit) does not depend on the number of threads
_MCF_CHUNKS = 32


@_jit.njit(cache=True)
def _mcf_dropout_rows(indptr, indices, data, w, b, y, sw, q, C, fit_intercept, lo, hi, grad,
                      pi):
    """Rows ``lo:hi`` of :func:`_mcf_dropout_pass`; adds to ``grad``, returns the value."""
    scale = 1.0 / (1.0 - q)
    log_q = np.log(q) if q > 0 else -np.inf
    log_keep = np.log1p(-q)
    value = 0.0
    for i in range(lo, hi):
        a = -y[i] * b
        start = indptr[i]
        for j in range(start, indptr[i + 1]):
            z = log_keep - y[i] * w[indices[j]] * data[j] * scale
            if q > 0:
                top = max(log_q, z)
                e_q = np.exp(log_q - top)
                e_z = np.exp(z - top)
                a += top + np.log(e_q + e_z)
                pi[j - start] = e_z / (e_q + e_z)
            else:
                a += z
                pi[j - start] = 1.0
        # softplus(a) and sigmoid(a), stably
        if a > 0:
            value += sw[i] * (a + np.log1p(np.exp(-a)))
            sig = sw[i] / (1.0 + np.exp(-a))
        else:
            value += sw[i] * np.log1p(np.exp(a))
            ea = np.exp(a)
            sig = sw[i] * ea / (1.0 + ea)
        c = C * sig * y[i] * scale
        for j in range(start, indptr[i + 1]):
            grad[indices[j]] -= c * pi[j - start] * data[j]
        if fit_intercept:
            grad[grad.shape[0] - 1] -= C * sig * y[i]
    return value


@_jit.njit(cache=True, parallel=True)
def _mcf_dropout_chunks(indptr, indices, data, w, b, y, sw, q, C, fit_intercept, n_params,
                        width):
    """Values and gradients of :data:`_MCF_CHUNKS` row chunks, computed in parallel."""
    n = indptr.shape[0] - 1
    grads = np.zeros((_MCF_CHUNKS, n_params))
    values = np.zeros(_MCF_CHUNKS)
    for k in _jit.prange(_MCF_CHUNKS):
        pi = np.empty(width)
        values[k] = _mcf_dropout_rows(indptr, indices, data, w, b, y, sw, q, C, fit_intercept,
                                      k * n // _MCF_CHUNKS, (k + 1) * n // _MCF_CHUNKS,
                                      grads[k], pi)
    return values, grads


def _mcf_dropout_pass(indptr, indices, data, w, b, y, q, C, fit_intercept, grad, sw=None):
    """Value and gradient of ``sum_n log(1 + E exp(-y_n omega~_n))`` under dropout.

    ``log E exp(-y omega~) = -y b + sum_{d: x_nd != 0} logaddexp(log q, log(1-q) + z_nd)``
    with ``z_nd = -y w_d x_nd / (1-q)``; ``dL/dw_d = sigmoid(a_n) pi_nd (-y x_nd / (1-q))``
    with ``pi_nd = (1-q) e^{z} / (q + (1-q) e^{z})``, the softmax weight of the
    log-sum-exp (so it costs no extra exponential). Rows are processed in
    :data:`_MCF_CHUNKS` chunks in parallel, each with its own gradient, summed in chunk
    order (the same result for any number of threads). The gradient is added to ``grad``.
    Example ``n``'s term is scaled by ``sw[n]`` (its sample weight; default 1).
    """
    width = max(int(np.diff(indptr).max(initial=0)), 1)
    sw = np.ones(y.shape[0]) if sw is None else sw
    values, grads = _mcf_dropout_chunks(indptr, indices, data, w, float(b), y, sw, float(q),
                                        float(C), bool(fit_intercept), grad.shape[0], width)
    grad += grads.sum(axis=0)
    return float(values.sum())


class MCFLogisticRegression(SmoothBinaryClassifier):
    """Marginalized corrupted features with the logistic loss (van der Maaten et al. 2013).

    Minimises Jensen's upper bound on the expected logistic loss::

        1/2 ||w||^2 + C sum_n log(1 + E exp(-y_n (w.x~_n + b)))

    with the exact moment-generating functions

    - dropout (rate ``q``): ``E exp(-y w.x~) = prod_d (q + (1-q) exp(-y w_d x_d / (1-q)))``
      (features with ``x_d = 0`` contribute 1, so sparse input costs ``O(nnz)``);
    - Gaussian noise (additive or multiplicative): ``exp(-y m + s/2)``, ``s = v.(w*w)``,

    by L-BFGS with the analytic gradient, evaluated in log space (log-sum-exp per feature,
    stable softplus). At zero noise it is :class:`sklearn.linear_model.LogisticRegression`.
    Multiclass: one-vs-rest.

    Parameters
    ----------
    C : float, default=1.0
    noise : {"dropout", "gaussian", "multiplicative", "none"} or NoiseModel, default="dropout"
    noise_level : float or None, default=None
        ``q`` for dropout, ``sigma`` or ``a`` for the Gaussian noises (``None``: 0.1, as
        for every estimator: ``bayesdrop.model.noise.DEFAULT_LEVEL``).
    fit_intercept : bool, default=True
    tol : float, default=1e-6
        Projected-gradient tolerance of L-BFGS-B on the objective divided by ``C n``
        (scikit-learn's scaling: the mean loss plus ``||w||^2 / (2 C n)``).
    max_iter : int, default=1000
    warm_start : bool, default=False
        Start L-BFGS from the previous solution when refitting with the same classes
        and features.

    Attributes
    ----------
    classes_, coef_, intercept_, n_iter_, objective_, converged_, noise_, fit_time_

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 3)); y = np.sign(X[:, 0] + rng.normal(size=80))
    >>> ours = MCFLogisticRegression(C=0.5, noise_level=0.0, tol=1e-9).fit(X, y)
    >>> ref = LogisticRegression(C=0.5, tol=1e-10).fit(X, y)
    >>> bool(np.allclose(ours.coef_, ref.coef_, atol=1e-5))
    True
    """

    def __init__(self, C=1.0, *, noise="dropout", noise_level=None, fit_intercept=True,
                 tol=1e-6, max_iter=1000, warm_start=False):
        self.C = C
        self.noise = noise
        self.noise_level = noise_level
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start

    def fit(self, X, y, sample_weight=None):
        """Fit by L-BFGS, one binary problem per class (one-vs-rest).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional
            Scales each example's term of the objective (integer weights are copies).

        Returns
        -------
        self
        """
        self._check_common()
        noise = make_noise(self.noise, self.noise_level)
        if not isinstance(noise, (Dropout, AdditiveGaussian, MultiplicativeGaussian, NoNoise)):
            raise ValueError(
                "noise must be dropout, gaussian, multiplicative or none for "
                f"MCFLogisticRegression (a closed-form moment-generating function), got {noise!r}"
            )
        X, y_idx = self._validate_fit(X, y)
        sw = self._example_weights(y, sample_weight, X.shape[0])
        sw = np.ones(X.shape[0]) if sw is None else sw
        noise.check_input(X)
        self.noise_ = noise
        C, fi = float(self.C), bool(self.fit_intercept)
        D = X.shape[1]
        if isinstance(noise, Dropout) and noise.level > 0:
            Xc = X if sp.issparse(X) else sp.csr_matrix(X)
            indptr, indices, data = Xc.indptr, Xc.indices, Xc.data
            q = noise.level

            def make_objective(yk):
                def fun(theta):
                    grad = np.zeros_like(theta)
                    b = theta[D] if fi else 0.0
                    val = _mcf_dropout_pass(indptr, indices, data, theta[:D], b, yk, q, C, fi,
                                            grad, sw)
                    w = theta[:D]
                    grad[:D] += w
                    return 0.5 * w @ w + C * val, grad
                return fun
        else:
            design = Design(X, noise, fi)

            def make_objective(yk):
                def fun(theta):
                    w, _ = design.split(theta)
                    m, s = design.scores(theta)
                    a = -yk * m + 0.5 * s
                    sig = sw * expit(a)
                    grad = design.rmatvec(-C * yk * sig)
                    grad[:D] += w + C * design.noise_apply(sig, w)
                    return 0.5 * w @ w + C * np.sum(sw * -log_expit(-a)), grad
                return fun

        return self._fit_smooth(X, y_idx, make_objective, sw.sum())


