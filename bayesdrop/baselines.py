"""Baselines from the related papers (MATH.md section 7), with the estimators' conventions.

============================================  ==============================================
estimator                                     objective (per binary problem, ``y`` in +-1)
============================================  ==============================================
:class:`MCFQuadraticClassifier`               ``1/2 ||w||^2 + (C/2) sum_n E (y_n - w.x~_n - b)^2``
:class:`MCFLogisticRegression`                ``1/2 ||w||^2 + C sum_n log(1 + E exp(-y_n w.x~_n - y_n b))``
:class:`WagerDropoutLogisticRegression`       ``1/2 ||w||^2 + C [sum_n log(1 + e^{-y_n m_n}) + R_q]``
:class:`TLogisticRegression`                  ``1/2 ||W||^2 - C sum_n log p_t(y_n | x_n)``
:class:`InvariantSVC`                         ``1/2 ||(w, b/s)||^2 + C sum_n max(0, 1 - min_{x' in S(x_n)} y_n f(x'))``
:class:`ExplicitCorruptionClassifier`         any estimator fitted on ``M`` corrupted copies
============================================  ==============================================

All are scikit-learn classifiers (``fit`` returns ``self``; ``coef_``, ``intercept_``,
``classes_``, ``n_iter_``); multiclass problems are one-vs-rest except for the t-logistic
regression, whose multiclass model is the joint one of the paper. ``C`` means what it
means for :class:`sklearn.linear_model.LogisticRegression`: at zero noise (``t = 1``,
no deleted features) each reduces to the ordinary model, which the tests check.
"""

from __future__ import annotations

import time

import numba
import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._validation import check_random_state, check_scalar
from .design import Design
from .estimators import _class_index, _DropoutClassifier, _one_vs_rest, _set_classes
from .posterior import sigmoid_proba
from .losses import SquaredLoss
from .noise import Dropout, MultiplicativeGaussian, AdditiveGaussian, NoNoise, make_noise

__all__ = [
    "MCFQuadraticClassifier",
    "MCFLogisticRegression",
    "WagerDropoutLogisticRegression",
    "TLogisticRegression",
    "InvariantSVC",
    "ExplicitCorruptionClassifier",
    "exp_t",
    "log_t",
    "t_partition",
    "worst_case_margin",
]

_ACCEPT_SPARSE = ["csr", "csc", "coo"]


# ---------------------------------------------------------------------------------------
# shared plumbing: classes, one-vs-rest, L-BFGS
# ---------------------------------------------------------------------------------------
class _LinearClassifier(ClassifierMixin, BaseEstimator):
    """Validation, classes and one-vs-rest for the baselines fitted problem by problem."""

    def _validate_fit(self, X, y):
        X, y = validate_data(self, X, y, accept_sparse=_ACCEPT_SPARSE, dtype=np.float64)
        y_idx = _set_classes(self, y)
        if sp.issparse(X):
            X = X.tocsr()
        return X, y_idx

    def _targets(self, y_idx):
        return _one_vs_rest(self.classes_.shape[0], y_idx)

    def _validate_X(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, accept_sparse=_ACCEPT_SPARSE,
                             dtype=np.float64)

    def decision_function(self, X):
        """Scores ``w.x + b`` (one column per class, or the score of ``classes_[1]``)."""
        X = self._validate_X(X)
        scores = np.asarray(X @ self.coef_.T) + self.intercept_
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Class with the largest score."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def _lbfgs(fun, theta0, tol, max_iter, scale):
    """Minimise ``fun(theta) -> (value, grad)`` by L-BFGS-B; return the scipy result.

    L-BFGS-B runs on ``fun / scale`` with ``scale = C n``, the mean loss plus
    ``||w||^2 / (2 C n)`` -- scikit-learn's scaling of ``LogisticRegression`` -- so that
    ``tol`` (the projected-gradient tolerance ``gtol``) means the same at every ``n`` and
    ``C``. ``res.fun`` is returned on the original scale.
    """
    def scaled(theta):
        value, grad = fun(theta)
        return value / scale, grad / scale

    res = minimize(scaled, theta0, jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "gtol": tol,
                            "ftol": 64 * np.finfo(float).eps, "maxcor": 20, "maxls": 50})
    res.fun = float(res.fun) * scale
    return res


class _LBFGSBinaryOVR(_LinearClassifier):
    """One-vs-rest fit of a smooth binary objective ``J(theta; X, y)`` by L-BFGS."""

    def _check_common(self):
        check_scalar(self.C, "C", min_val=0.0, include_min=False)
        check_scalar(self.tol, "tol", min_val=0.0, include_min=False)
        check_scalar(self.max_iter, "max_iter", min_val=1, integer=True)

    def _fit_ovr(self, X, y_idx, make_objective):
        targets = self._targets(y_idx)
        D = X.shape[1]
        n_params = D + int(self.fit_intercept)
        coefs = np.zeros((targets.shape[1], D))
        intercepts = np.zeros(targets.shape[1])
        n_iter, objective, converged = [], [], []
        start = time.perf_counter()
        for k in range(targets.shape[1]):
            fun = make_objective(np.ascontiguousarray(targets[:, k]))
            res = _lbfgs(fun, np.zeros(n_params), self.tol, self.max_iter,
                         float(self.C) * X.shape[0])
            coefs[k] = res.x[:D]
            intercepts[k] = res.x[D] if self.fit_intercept else 0.0
            n_iter.append(res.nit)
            objective.append(float(res.fun))
            converged.append(bool(res.success))
        self.coef_, self.intercept_ = coefs, intercepts
        self.n_iter_ = np.array(n_iter)
        self.objective_ = np.array(objective)
        self.converged_ = np.array(converged)
        self.fit_time_ = time.perf_counter() - start
        return self

    def predict_proba(self, X):
        """``sigmoid(w.x + b)`` (one-vs-rest sigmoids normalised to sum to one)."""
        scores = self.decision_function(X)
        return sigmoid_proba(scores[:, None] if scores.ndim == 1 else scores)


# ---------------------------------------------------------------------------------------
# MCF-quadratic
# ---------------------------------------------------------------------------------------
class MCFQuadraticClassifier(_DropoutClassifier):
    """Marginalized corrupted features with the quadratic loss (van der Maaten et al. 2013).

    Minimises the expected squared loss on ``y`` in {-1, +1}::

        1/2 ||w||^2 + (C/2) sum_n E (y_n - w.x~_n - b)^2
            = 1/2 ||w||^2 + (C/2) sum_n ((y_n - m_n)^2 + v_n.(w*w))

    in closed form: one step of the shared weighted-least-squares core with constant
    weights ``rho_n = 2C`` (:class:`bayesdrop.losses.SquaredLoss` with ``C' = 2C``,
    MATH.md section 7), ``(2 I' + 2C (Xbar^T Xbar + diag(sum_n vbar_n))) theta = 2C Xbar^T y``.
    At zero noise it is :class:`sklearn.linear_model.RidgeClassifier` with ``alpha = 1/C``.
    Multiclass: one-vs-rest. ``sample_posterior`` samples the Gaussian pseudo-posterior.

    Parameters
    ----------
    C : float, default=1.0
    noise, noise_level
        As for :class:`bayesdrop.DropoutSVC`.
    fit_intercept : bool, default=True
    solver : {"auto", "cholesky", "woodbury", "cg"}, default="auto"
    tol, max_iter, accelerate, warm_start
        As for :class:`bayesdrop.DropoutSVC` (one IRLS step is exact here).

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
                 solver="auto", tol=1e-8, max_iter=100, accelerate=False, warm_start=False):
        self.C = C
        self.noise = noise
        self.noise_level = noise_level
        self.fit_intercept = fit_intercept
        self.solver = solver
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


@numba.njit(cache=True)
def _mcf_dropout_rows(indptr, indices, data, w, b, y, q, C, fit_intercept, lo, hi, grad, pi):
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
            value += a + np.log1p(np.exp(-a))
            sig = 1.0 / (1.0 + np.exp(-a))
        else:
            value += np.log1p(np.exp(a))
            ea = np.exp(a)
            sig = ea / (1.0 + ea)
        c = C * sig * y[i] * scale
        for j in range(start, indptr[i + 1]):
            grad[indices[j]] -= c * pi[j - start] * data[j]
        if fit_intercept:
            grad[grad.shape[0] - 1] -= C * sig * y[i]
    return value


@numba.njit(cache=True, parallel=True)
def _mcf_dropout_chunks(indptr, indices, data, w, b, y, q, C, fit_intercept, n_params, width):
    """Values and gradients of :data:`_MCF_CHUNKS` row chunks, computed in parallel."""
    n = indptr.shape[0] - 1
    grads = np.zeros((_MCF_CHUNKS, n_params))
    values = np.zeros(_MCF_CHUNKS)
    for k in numba.prange(_MCF_CHUNKS):
        pi = np.empty(width)
        values[k] = _mcf_dropout_rows(indptr, indices, data, w, b, y, q, C, fit_intercept,
                                      k * n // _MCF_CHUNKS, (k + 1) * n // _MCF_CHUNKS,
                                      grads[k], pi)
    return values, grads


def _mcf_dropout_pass(indptr, indices, data, w, b, y, q, C, fit_intercept, grad):
    """Value and gradient of ``sum_n log(1 + E exp(-y_n omega~_n))`` under dropout.

    ``log E exp(-y omega~) = -y b + sum_{d: x_nd != 0} logaddexp(log q, log(1-q) + z_nd)``
    with ``z_nd = -y w_d x_nd / (1-q)``; ``dL/dw_d = sigmoid(a_n) pi_nd (-y x_nd / (1-q))``
    with ``pi_nd = (1-q) e^{z} / (q + (1-q) e^{z})``, the softmax weight of the
    log-sum-exp (so it costs no extra exponential). Rows are processed in
    :data:`_MCF_CHUNKS` chunks in parallel, each with its own gradient, summed in chunk
    order (the same result for any number of threads). The gradient is added to ``grad``.
    """
    width = max(int(np.diff(indptr).max(initial=0)), 1)
    values, grads = _mcf_dropout_chunks(indptr, indices, data, w, float(b), y, float(q),
                                        float(C), bool(fit_intercept), grad.shape[0], width)
    grad += grads.sum(axis=0)
    return float(values.sum())


class MCFLogisticRegression(_LBFGSBinaryOVR):
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
        ``q`` for dropout (``None``: 0.5), ``sigma`` or ``a`` for the Gaussian noises.
    fit_intercept : bool, default=True
    tol : float, default=1e-6
        Projected-gradient tolerance of L-BFGS-B on the objective divided by ``C n``
        (scikit-learn's scaling: the mean loss plus ``||w||^2 / (2 C n)``).
    max_iter : int, default=1000

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
                 tol=1e-6, max_iter=1000):
        self.C = C
        self.noise = noise
        self.noise_level = noise_level
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter

    def fit(self, X, y):
        """Fit by L-BFGS, one binary problem per class (one-vs-rest).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

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
                                            grad)
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
                    sig = expit(a)
                    grad = design.rmatvec(-C * yk * sig)
                    grad[:D] += w + C * design.noise_apply(sig, w)
                    return 0.5 * w @ w + C * np.sum(-log_expit(-a)), grad
                return fun

        return self._fit_ovr(X, y_idx, make_objective)


# ---------------------------------------------------------------------------------------
# Wager et al. quadratic dropout penalty
# ---------------------------------------------------------------------------------------
def _wager_penalty(design, theta, weight):
    """``weight * R_q`` and its gradient; ``R_q = 1/2 sum_n p_n (1 - p_n) s_n``.

    ``dR_q/dtheta = 1/2 sum_n [p(1-p)(1-2p) s_n xbar_n] + (sum_n p(1-p) diag(v_n)) w``.
    """
    w, _ = design.split(theta)
    m, s = design.scores(theta)
    p = expit(m)
    g = p * (1.0 - p)
    value = 0.5 * np.sum(g * s)
    grad = design.rmatvec(0.5 * g * (1.0 - 2.0 * p) * s)
    grad[: design.n_features] += design.noise_apply(g, w)
    return weight * value, weight * grad


class WagerDropoutLogisticRegression(_LBFGSBinaryOVR):
    """Logistic regression with the quadratic dropout penalty of Wager, Wang & Liang (2013).

    Minimises::

        1/2 ||w||^2 + C [ sum_n log(1 + exp(-y_n m_n)) + kappa (R_q(X) + a R_q(X_u)) ],
        R_q(X) = 1/2 sum_n p_n (1 - p_n) Var[w.x~_n],   p_n = sigmoid(m_n),

    the second-order approximation of the dropout (noising) penalty; ``Var[w.x~_n] =
    v_n.(w*w)`` comes from the noise model. With unlabeled data ``X_u`` (``n_u`` rows,
    passed to :meth:`fit`) the penalty is the semi-supervised estimate with
    ``kappa = n / (n + a n_u)`` and discount ``a`` in (0, 1]; without, ``kappa = 1``.
    ``R_q`` is not convex; L-BFGS from zero finds a stationary point. The small ridge term
    keeps the problem well posed (``C = inf`` is not allowed). Multiclass: one-vs-rest.

    Parameters
    ----------
    C : float, default=1.0
    noise, noise_level
        Noise model of the penalty (default dropout, ``q = 0.5``).
    unlabeled_discount : float in (0, 1], default=0.3
        ``a``; the paper finds 0.1-0.4 works well.
    fit_intercept : bool, default=True
    tol : float, default=1e-6
        Projected-gradient tolerance of L-BFGS-B on the objective divided by ``C n``
        (scikit-learn's scaling: the mean loss plus ``||w||^2 / (2 C n)``).
    max_iter : int, default=1000

    Attributes
    ----------
    classes_, coef_, intercept_, n_iter_, objective_, converged_, noise_, fit_time_

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 4)); y = np.sign(X[:, 0] + rng.normal(size=60))
    >>> clf = WagerDropoutLogisticRegression(C=1.0, noise_level=0.5).fit(X, y)
    >>> clf.coef_.shape
    (1, 4)
    """

    def __init__(self, C=1.0, *, noise="dropout", noise_level=None, unlabeled_discount=0.3,
                 fit_intercept=True, tol=1e-6, max_iter=1000):
        self.C = C
        self.noise = noise
        self.noise_level = noise_level
        self.unlabeled_discount = unlabeled_discount
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter

    def fit(self, X, y, X_unlabeled=None):
        """Fit by L-BFGS (one-vs-rest).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        X_unlabeled : {array-like, sparse matrix} of shape (n_unlabeled, n_features), optional
            Unlabeled rows for the semi-supervised penalty.

        Returns
        -------
        self
        """
        self._check_common()
        a = check_scalar(self.unlabeled_discount, "unlabeled_discount", min_val=0.0,
                         max_val=1.0, include_min=False)
        noise = make_noise(self.noise, self.noise_level)
        X, y_idx = self._validate_fit(X, y)
        self.noise_ = noise
        C, fi, D = float(self.C), bool(self.fit_intercept), X.shape[1]
        design = Design(X, noise, fi)
        n = X.shape[0]
        unlabeled = None
        if X_unlabeled is not None:
            Xu = validate_data(self, X_unlabeled, reset=False, accept_sparse=_ACCEPT_SPARSE,
                               dtype=np.float64)
            unlabeled = Design(Xu, noise, fi)
            kappa = n / (n + a * Xu.shape[0])
        else:
            kappa = 1.0

        def make_objective(yk):
            def fun(theta):
                w, _ = design.split(theta)
                m = design.matvec(theta)
                value = 0.5 * w @ w + C * np.sum(-log_expit(yk * m))
                grad = design.rmatvec(-C * yk * expit(-yk * m))
                grad[:D] += w
                pv, pg = _wager_penalty(design, theta, C * kappa)
                value, grad = value + pv, grad + pg
                if unlabeled is not None:
                    uv, ug = _wager_penalty(unlabeled, theta, C * kappa * a)
                    value, grad = value + uv, grad + ug
                return value, grad
            return fun

        return self._fit_ovr(X, y_idx, make_objective)


# ---------------------------------------------------------------------------------------
# t-logistic regression
# ---------------------------------------------------------------------------------------
def exp_t(x, t):
    """The t-exponential ``exp_t(x) = [1 + (1 - t) x]_+^{1/(1-t)}`` (``exp`` at ``t = 1``).

    Examples
    --------
    >>> float(exp_t(-1.0, 2.0)), float(exp_t(0.3, 1.0)) == float(np.exp(0.3))
    (0.5, True)
    """
    x = np.asarray(x, dtype=float)
    if t == 1.0:
        return np.exp(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.maximum(1.0 + (1.0 - t) * x, 0.0) ** (1.0 / (1.0 - t))


def log_t(x, t):
    """The t-logarithm ``log_t(x) = (x^{1-t} - 1) / (1 - t)``, inverse of :func:`exp_t`.

    Examples
    --------
    >>> round(float(log_t(exp_t(-0.7, 1.5), 1.5)), 12)
    -0.7
    """
    x = np.asarray(x, dtype=float)
    if t == 1.0:
        return np.log(x)
    return (x ** (1.0 - t) - 1.0) / (1.0 - t)


def t_partition(U, t, tol=1e-13, max_iter=100):
    """Log-partition ``g_t(u)`` of the t-logistic model, row by row.

    Solves ``sum_c exp_t(u_c - g) = 1`` (t-logistic paper, eq. 39). The left side ``f(g)``
    is convex and decreasing, so Newton's method from ``g_0 = max_c u_c`` (where
    ``f >= 0``) increases monotonically to the root. At ``t = 1``, ``g = logsumexp(u)``.

    Parameters
    ----------
    U : ndarray of shape (n_samples, n_classes)
    t : float >= 1

    Returns
    -------
    g : ndarray of shape (n_samples,)
    P : ndarray of shape (n_samples, n_classes)
        ``p(c | u) = exp_t(u_c - g)`` (rows sum to one).
    Q : ndarray of shape (n_samples, n_classes)
        Escort probabilities ``q_c = p_c^t / sum p^t`` ``= dg/du_c``.

    Examples
    --------
    >>> g, P, Q = t_partition(np.array([[0.0, 1.0, -2.0]]), 1.7)
    >>> bool(np.isclose(P.sum(), 1.0))
    True
    """
    U = np.asarray(U, dtype=float)
    umax = U.max(axis=1)
    Z = U - umax[:, None]
    if t == 1.0:
        E = np.exp(Z)
        s = E.sum(axis=1)
        P = E / s[:, None]
        return umax + np.log(s), P, P
    g = np.zeros(U.shape[0])  # relative to umax
    for _ in range(max_iter):
        base = 1.0 + (t - 1.0) * (g[:, None] - Z)  # >= 1
        P = base ** (-1.0 / (t - 1.0))
        f = P.sum(axis=1) - 1.0
        fprime = (P ** t).sum(axis=1)  # -f'(g)
        step = f / fprime
        g = g + step
        if np.all(np.abs(step) <= tol * (1.0 + np.abs(g))):
            break
    base = 1.0 + (t - 1.0) * (g[:, None] - Z)
    P = base ** (-1.0 / (t - 1.0))
    Pt = P ** t
    return umax + g, P, Pt / Pt.sum(axis=1, keepdims=True)


class TLogisticRegression(_LinearClassifier):
    """t-logistic regression (Ding & Vishwanathan; seed 003), binary and multiclass.

    The class probabilities come from the t-exponential family,
    ``p(c | x) = exp_t(u_c - g_t(u))`` with ``u_c = w_c.x + b_c`` and the log-partition
    ``g_t`` solving ``sum_c exp_t(u_c - g_t) = 1`` (:func:`t_partition`). Minimises::

        1/2 ||W||^2 - C sum_n log p(y_n | x_n),
        -log p(y | x) = log(1 + (t - 1)(g_t(u) - u_y)) / (t - 1)       (t > 1)

    by L-BFGS with ``d(-log p)/du = -p_y^{t-1} (e_y - q)``, ``q`` the escort probabilities.
    For ``t > 1`` the loss is bounded in the margin (non-convex), which caps the influence
    ``xi_n = p(y_n | x_n)^{t-1}`` of mislabeled points; at ``t = 1`` it is (multinomial)
    logistic regression. Binary problems use one weight vector, ``u = (+f/2, -f/2)``,
    ``f = w.x + b``, so that ``t = 1`` gives ``log(1 + exp(-y f))`` exactly as
    :class:`sklearn.linear_model.LogisticRegression`.

    Parameters
    ----------
    t : float >= 1, default=1.9
        The paper's Figure 7 uses 1.9.
    C : float, default=1.0
    fit_intercept : bool, default=True
    tol : float, default=1e-6
        Projected-gradient tolerance of L-BFGS-B on the objective divided by ``C n``
        (scikit-learn's scaling: the mean loss plus ``||w||^2 / (2 C n)``).
    max_iter : int, default=1000
    init : {"zero", "logistic"}, default="zero"
        Start L-BFGS at zero or at the ``t = 1`` solution (the objective is non-convex).

    Attributes
    ----------
    classes_ : ndarray
    coef_ : ndarray of shape (1, n_features) (binary) or (n_classes, n_features)
    intercept_ : ndarray
    n_iter_ : int
    objective_ : float
    converged_ : bool

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 3)); y = np.sign(X[:, 0] + rng.normal(size=80))
    >>> ours = TLogisticRegression(t=1.0, C=0.5, tol=1e-9).fit(X, y)
    >>> ref = LogisticRegression(C=0.5, tol=1e-10).fit(X, y)
    >>> bool(np.allclose(ours.coef_, ref.coef_, atol=1e-5))
    True
    """

    def __init__(self, t=1.9, C=1.0, *, fit_intercept=True, tol=1e-6, max_iter=1000,
                 init="zero"):
        self.t = t
        self.C = C
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.init = init

    def _scores(self, X, theta, K):
        D = X.shape[1]
        W = theta[: K * D].reshape(K, D)
        F = np.asarray(X @ W.T)
        if self.fit_intercept:
            F = F + theta[K * D:]
        return W, F

    def _objective(self, theta, X, y_idx, K, t):
        C = float(self.C)
        W, F = self._scores(X, theta, K)
        U = np.column_stack([0.5 * F[:, 0], -0.5 * F[:, 0]]) if K == 1 else F
        g, _, Q = t_partition(U, t)
        rows = np.arange(U.shape[0])
        gap = g - U[rows, y_idx]  # >= 0
        if t == 1.0:
            loss = gap
            xi = np.ones_like(gap)
        else:
            loss = np.log1p((t - 1.0) * gap) / (t - 1.0)
            xi = 1.0 / (1.0 + (t - 1.0) * gap)  # p_y^{t-1}
        E = -Q
        E[rows, y_idx] += 1.0
        dU = -(xi[:, None] * E)  # d(-log p)/du
        dF = 0.5 * (dU[:, :1] - dU[:, 1:]) if K == 1 else dU
        gW = C * np.asarray(X.T @ dF).T + W
        grad = gW.ravel()
        if self.fit_intercept:
            grad = np.concatenate([grad, C * dF.sum(axis=0)])
        return 0.5 * np.sum(W * W) + C * np.sum(loss), grad

    def fit(self, X, y):
        """Fit by L-BFGS.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        t = check_scalar(self.t, "t", min_val=1.0)
        check_scalar(self.C, "C", min_val=0.0, include_min=False)
        check_scalar(self.tol, "tol", min_val=0.0, include_min=False)
        check_scalar(self.max_iter, "max_iter", min_val=1, integer=True)
        if self.init not in ("zero", "logistic"):
            raise ValueError(f"init must be 'zero' or 'logistic', got {self.init!r}")
        X, y_idx = self._validate_fit(X, y)
        n_classes = self.classes_.shape[0]
        K = 1 if n_classes == 2 else n_classes
        # binary: y_idx 1 (classes_[1], y = +1) is the first column of u = (f/2, -f/2)
        yk = (1 - y_idx) if K == 1 else y_idx
        D = X.shape[1]
        theta0 = np.zeros(K * D + (K if self.fit_intercept else 0))
        scale = float(self.C) * X.shape[0]
        start = time.perf_counter()
        if self.init == "logistic" and t > 1.0:
            res0 = _lbfgs(lambda th: self._objective(th, X, yk, K, 1.0), theta0, self.tol,
                          self.max_iter, scale)
            theta0 = res0.x
        res = _lbfgs(lambda th: self._objective(th, X, yk, K, t), theta0, self.tol,
                     self.max_iter, scale)
        W, _ = self._scores(X[:1], res.x, K)
        self.coef_ = W.copy()
        self.intercept_ = res.x[K * D:].copy() if self.fit_intercept else np.zeros(K)
        self.n_iter_ = int(res.nit)
        self.objective_ = float(res.fun)
        self.converged_ = bool(res.success)
        self.fit_time_ = time.perf_counter() - start
        return self

    def predict_proba(self, X):
        """``p(c | x) = exp_t(u_c - g_t(u))``.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        F = np.atleast_2d(self.decision_function(X))
        if self.coef_.shape[0] == 1:
            F = F.reshape(-1, 1)
            _, P, _ = t_partition(np.column_stack([-0.5 * F[:, 0], 0.5 * F[:, 0]]),
                                  float(self.t))
            return P
        return t_partition(F, float(self.t))[1]

    def influence(self, X, y):
        """Influence ``xi_n = p(y_n | x_n)^{t-1}`` of each example (1 at ``t = 1``).

        Small for points the model considers mislabeled (the paper's Figure 7).

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        P = self.predict_proba(X)
        idx = _class_index(self.classes_, y)
        return P[np.arange(P.shape[0]), idx] ** (float(self.t) - 1.0)


# ---------------------------------------------------------------------------------------
# invariant SVM: worst-case feature deletion / scaling
# ---------------------------------------------------------------------------------------
def worst_case_margin(B, n_changes, lower=0.0, upper=1.0):
    """Smallest margin ``min_alpha sum_d B_d alpha_d`` over the FSCALE set.

    The set (Teo et al. 2008, eq. 10) allows at most ``n_changes`` features to be scaled by
    ``alpha_d`` in ``[lower, upper]`` (``lower <= 1 <= upper``; FDROP is ``(0, 1)``). The
    objective is linear, so the worst case scales feature ``d`` to ``lower`` if
    ``B_d > 0`` and to ``upper`` if ``B_d < 0``, lowering the margin by
    ``r_d = max(B_d (1 - lower), B_d (1 - upper)) >= 0``, and picks the ``n_changes``
    largest ``r_d``; this is what the paper's Algorithm 3 computes by sorting. It runs the
    jitted row kernel of :class:`InvariantSVC`'s fit.

    Parameters
    ----------
    B : ndarray of shape (n_samples, n_features)
        Per-feature margin contributions ``y_n w_d x_nd``.
    n_changes : int >= 0
    lower, upper : float

    Returns
    -------
    margin : ndarray of shape (n_samples,)
    alpha : ndarray of shape (n_samples, n_features)
        The worst-case scaling factors.

    Examples
    --------
    >>> m, alpha = worst_case_margin(np.array([[3.0, -1.0, 0.5]]), 1)
    >>> float(m[0]), alpha.tolist()
    (-0.5, [[0.0, 1.0, 1.0]])
    """
    B = np.ascontiguousarray(B, dtype=float)
    margin = np.empty(B.shape[0])
    alpha = np.empty_like(B)
    _worst_case_rows(B, int(n_changes), float(lower), float(upper), margin, alpha)
    return margin, alpha


#: row chunks of the invariant-SVM risk pass (fixed: thread-independent sums)
_RISK_CHUNKS = 32

#: cutting planes BMRM stores before it doubles its storage
_BMRM_CAPACITY = 64


@numba.njit(cache=True)
def _worst_case_row(idx, vals, w, y, b, K, lower, upper, r, alpha):
    """Worst-case margin of one row (:func:`worst_case_margin` for a single row, jitted).

    ``r_d = max(B_d (1 - lower), B_d (1 - upper))`` with ``B_d = y w_d x_d`` over the
    stored entries (zeros have ``r_d = 0`` and never matter); the ``K`` largest positive
    ``r_d`` are found through their threshold (``np.partition``, ``O(nnz)``), ties at the
    threshold filled in index order. Fills ``alpha[:nnz]`` with the worst-case scaling
    factors and returns ``y b + sum_d B_d alpha_d``.
    """
    nnz = idx.shape[0]
    margin = y * b
    for j in range(nnz):
        u = y * w[idx[j]] * vals[j]
        margin += u
        down = u * (1.0 - lower)
        up = u * (1.0 - upper)
        if down >= up:
            r[j] = down
            alpha[j] = lower
        else:
            r[j] = up
            alpha[j] = upper
    kk = min(K, nnz)
    if kk > 0:
        tau = np.partition(r[:nnz], nnz - kk)[nnz - kk]
        n_above = 0
        for j in range(nnz):
            if r[j] > tau:
                n_above += 1
        ties = kk - n_above
        for j in range(nnz):
            if r[j] > tau and r[j] > 0.0:
                margin -= r[j]
            elif r[j] == tau and ties > 0 and r[j] > 0.0:
                margin -= r[j]
                ties -= 1
            else:
                alpha[j] = 1.0
    else:
        for j in range(nnz):
            alpha[j] = 1.0
    return margin


@numba.njit(cache=True)
def _worst_case_rows(B, K, lower, upper, margin, alpha):
    """:func:`_worst_case_row` for every row of the contributions ``B`` (``w = 1``)."""
    D = B.shape[1]
    idx = np.arange(D)
    ones = np.ones(D)
    r = np.empty(D)
    for i in range(B.shape[0]):
        margin[i] = _worst_case_row(idx, B[i], ones, 1.0, 0.0, K, lower, upper, r, alpha[i])


@numba.njit(cache=True)
def _invariant_hinge_row(idx, vals, w, y, b, K, lower, upper, r, alpha, gw):
    """Invariant hinge loss of one row; on the active side adds its subgradient to ``gw``.

    Returns ``(max(0, 1 - worst margin), active)``.
    """
    margin = _worst_case_row(idx, vals, w, y, b, K, lower, upper, r, alpha)
    if margin >= 1.0:
        return 0.0, False
    for j in range(idx.shape[0]):
        gw[idx[j]] -= y * alpha[j] * vals[j]
    return 1.0 - margin, True


@numba.njit(cache=True)
def _bcfw_epoch(indptr, indices, data, dense, y, order, theta, beta, c, K, lower, upper, s,
                C, fit_intercept):
    """Passes of block-coordinate Frank-Wolfe over the rows in ``order`` (in place).

    ``order`` holds one permutation of the rows per epoch (shape ``(epochs, n)``).

    The dual block of example ``i`` is a convex combination of the zero-loss vertex and
    the worst-case vertices ``phi_i(alpha) = y_i (x_i * alpha, s)``; it is stored as the
    per-entry mixture ``beta_i`` and the active mass ``c_i``, so that
    ``theta_i = C y_i (x_i * beta_i, s c_i)`` and ``theta = sum_i theta_i``. Each step
    calls the worst-case oracle at ``theta``, moves the block towards the new vertex
    ``(c_s, c_s alpha*)`` with ``c_s = 1[worst margin < 1]`` by the exact line search
    ``gamma = clip(g_i / (C ||delta_i||^2), 0, 1)``, where
    ``g_i = y_i delta_i . theta - c_i + c_s`` is the block duality gap (Lacoste-Julien et
    al. 2013, Algorithm 4, in the unscaled objective). Returns ``C sum_i g_i``.
    """
    use_dense = dense.shape[0] > 0
    D = theta.shape[0] - 1
    r = np.empty(D)
    alpha = np.empty(D)
    delta = np.empty(D)
    all_idx = np.empty(D, dtype=indices.dtype)
    for d in range(D):
        all_idx[d] = d
    gap = 0.0
    for i in order.ravel():
        if use_dense:
            idx = all_idx
            vals = dense[i]
            lo = i * D
        else:
            lo = indptr[i]
            idx = indices[lo:indptr[i + 1]]
            vals = data[lo:indptr[i + 1]]
        nnz = idx.shape[0]
        b = s * theta[D] if fit_intercept else 0.0
        margin = _worst_case_row(idx, vals, theta, y[i], b, K, lower, upper, r, alpha)
        cs = 1.0 if margin < 1.0 else 0.0
        num = 0.0
        den = 0.0
        for j in range(nnz):
            dj = beta[lo + j] - cs * alpha[j]
            delta[j] = dj
            num += vals[j] * dj * theta[idx[j]]
            den += vals[j] * vals[j] * dj * dj
        db = s * (c[i] - cs) if fit_intercept else 0.0
        num = y[i] * (num + db * theta[D]) - c[i] + cs
        den = C * (den + db * db)
        gap += C * num
        if den <= 0.0 or num <= 0.0:
            continue
        gamma = min(num / den, 1.0)
        step = gamma * C * y[i]
        for j in range(nnz):
            beta[lo + j] -= gamma * delta[j]
            theta[idx[j]] -= step * vals[j] * delta[j]
        c[i] -= gamma * (c[i] - cs)
        theta[D] -= step * db
    return gap


@numba.njit(cache=True, parallel=True)
def _invariant_risk_chunks(indptr, indices, data, dense, y, w, b, K, lower, upper, s):
    """Per-chunk ``sum_n hinge``, ``d/dw`` and ``d/dw_b`` (``b = s w_b``), in parallel.

    ``dense`` is a C-contiguous 2-D array (then ``indptr``/``indices``/``data`` are
    unused) or has zero rows (then the CSR arrays hold ``X``).
    """
    use_dense = dense.shape[0] > 0
    n = dense.shape[0] if use_dense else indptr.shape[0] - 1
    D = w.shape[0]
    risks = np.zeros(_RISK_CHUNKS)
    gbs = np.zeros(_RISK_CHUNKS)
    gws = np.zeros((_RISK_CHUNKS, D))
    all_idx = np.arange(D)
    for k in numba.prange(_RISK_CHUNKS):
        r = np.empty(D)
        alpha = np.empty(D)
        for i in range(k * n // _RISK_CHUNKS, (k + 1) * n // _RISK_CHUNKS):
            if use_dense:
                loss, active = _invariant_hinge_row(all_idx, dense[i], w, y[i], b, K, lower,
                                                    upper, r, alpha, gws[k])
            else:
                lo, hi = indptr[i], indptr[i + 1]
                loss, active = _invariant_hinge_row(indices[lo:hi], data[lo:hi], w, y[i], b,
                                                    K, lower, upper, r, alpha, gws[k])
            if active:
                risks[k] += loss
                gbs[k] -= s * y[i]
    return risks, gws, gbs


def _row_arrays(X):
    """``(indptr, indices, data, dense)`` for the row kernels: CSR arrays and an empty
    ``dense``, or dummy CSR arrays and the C-contiguous dense ``X`` (no copy if it is one)."""
    if sp.issparse(X):
        X = X.tocsr()
        return X.indptr, X.indices, X.data, np.zeros((0, X.shape[1]))
    dummy = np.zeros(1, dtype=np.int32)
    return dummy, dummy, np.zeros(0), np.ascontiguousarray(X, dtype=np.float64)


class InvariantSVC(_LinearClassifier):
    """Linear SVM with worst-case feature deletion (FDROP) or scaling (FSCALE).

    Teo, Globerson, Roweis & Smola (2008): the invariant hinge loss is the hinge loss of the
    worst transformed input, ``max(0, 1 - y b - min_alpha sum_d y w_d x_d alpha_d)`` over
    at most ``n_changes`` features scaled into ``[lower, upper]`` (:func:`worst_case_margin`,
    their Algorithm 3). Minimises::

        1/2 ||w||^2 + 1/2 w_b^2 + C sum_n max(0, 1 - y_n (s w_b) - worst-case margin_n)

    with the intercept ``b = s w_b`` as an uncorrupted constant feature ``s =
    intercept_scaling`` (penalised, as in :class:`sklearn.svm.LinearSVC`). The paper runs
    its Algorithm 3 inside SVMStruct / BMRM / Pegasos solvers; Pegasos with the step
    ``1 / (lambda t)`` needs ``O(C n / epochs)`` accuracy and stalled far from the optimum
    at ``C = 1`` in our tests, so this class uses the bundle method BMRM (Teo et al.
    2010) with the same worst-case oracle: each iteration adds the cutting plane of the
    exact risk at the current point and solves the small dual QP on the simplex. It stops
    when the duality gap is below ``tol`` times the objective, so the result is certified.
    ``solver="bcfw"`` runs block-coordinate Frank-Wolfe on the dual instead, with the same
    oracle and the same certificate. The oracle is one jitted pass over the rows (in
    parallel, sparse input never densified). ``n_changes = 0`` is the plain hinge-loss
    SVM. Multiclass: one-vs-rest.

    Parameters
    ----------
    C : float, default=1.0
    n_changes : int, default=10
        ``K``, the number of features the adversary may delete / scale.
    lower, upper : float, default=(0.0, 1.0)
        FDROP is ``(0, 1)``; the paper's FSCALE uses e.g. ``(0.5, 8)``.
    fit_intercept : bool, default=True
    intercept_scaling : float, default=1.0
    solver : {"bmrm", "bcfw"}, default="bmrm"
        ``"bmrm"``: the bundle method above; few, costly iterations, reaches high
        accuracy on small and medium ``n``. ``"bcfw"``: block-coordinate Frank-Wolfe on
        the dual (Lacoste-Julien et al. 2013; one worst-case oracle call per example and
        step, exact line search); memory ``O(nnz)``, no QP, faster
        to a coarse gap on large ``n`` but sublinear, so slow to high accuracy for
        ``n_changes > 0`` (measured: Fashion-MNIST, 10 000 images, ``K = 20``: 5% gap
        in 347 epochs, 140 s, where BMRM had not reached it after 11 CPU minutes).
    tol : float, default=1e-3
        Relative duality gap at which the solver stops (both certify it).
    max_iter : int, default=1000
        Maximum cutting planes (BMRM) or epochs (BCFW) per binary problem.
    random_state : None, int or numpy.random.Generator
        Order of the rows in the BCFW epochs (unused by BMRM).

    Attributes
    ----------
    classes_, coef_, intercept_
    n_iter_ : ndarray
        BMRM iterations or BCFW epochs per binary problem.
    objective_ : ndarray
        Best objective per binary problem.
    duality_gap_ : ndarray
        Objective minus the certified lower bound.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 6)); y = np.sign(X.sum(axis=1))
    >>> clf = InvariantSVC(C=1.0, n_changes=1).fit(X, y)  # worst case: one feature deleted
    >>> bool(clf.duality_gap_[0] <= 1e-3 * clf.objective_[0]), clf.score(X, y) > 0.8
    (True, True)
    """

    def __init__(self, C=1.0, *, n_changes=10, lower=0.0, upper=1.0, fit_intercept=True,
                 intercept_scaling=1.0, solver="bmrm", tol=1e-3, max_iter=1000,
                 random_state=None):
        self.C = C
        self.n_changes = n_changes
        self.lower = lower
        self.upper = upper
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.random_state = random_state

    def objective(self, X, y):
        """The invariant-SVM objective of the fitted model on ``(X, y)``, per binary problem.

        Returns
        -------
        ndarray of shape (n_problems,)
        """
        X = self._validate_X(X)
        targets = self._targets(_class_index(self.classes_, y))
        s = float(self.intercept_scaling)
        out = []
        for k in range(targets.shape[1]):
            w, b = self.coef_[k], self.intercept_[k]
            wb = b / s if self.fit_intercept else 0.0
            out.append(0.5 * (w @ w + wb * wb) + self._risk(X, targets[:, k], w, b)[0])
        return np.array(out)

    def _risk(self, X, yk, w, b):
        """``R = C sum_n max(0, 1 - worst margin_n)`` and its subgradient in ``(w, w_b)``.

        One jitted pass over the rows (:func:`_invariant_hinge_row`, parallel in fixed
        chunks); sparse ``X`` is never densified.
        """
        s = float(self.intercept_scaling)
        args = _row_arrays(X)
        risks, gws, gbs = _invariant_risk_chunks(*args, np.asarray(yk, dtype=np.float64),
                                                 np.ascontiguousarray(w, dtype=np.float64),
                                                 float(b), int(self.n_changes),
                                                 float(self.lower), float(self.upper), s)
        C = float(self.C)
        return C * float(risks.sum()), C * gws.sum(axis=0), C * float(gbs.sum())

    def fit(self, X, y):
        """Fit by the bundle method (BMRM), one binary problem per class.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        check_scalar(self.C, "C", min_val=0.0, include_min=False)
        check_scalar(self.n_changes, "n_changes", min_val=0, integer=True)
        check_scalar(self.lower, "lower", min_val=0.0, max_val=1.0)
        check_scalar(self.upper, "upper", min_val=1.0)
        s = check_scalar(self.intercept_scaling, "intercept_scaling", min_val=0.0,
                         include_min=False)
        max_iter = check_scalar(self.max_iter, "max_iter", min_val=1, integer=True)
        tol = check_scalar(self.tol, "tol", min_val=0.0, include_min=False)
        X, y_idx = self._validate_fit(X, y)
        targets = self._targets(y_idx)
        D = X.shape[1]
        if self.solver not in ("bcfw", "bmrm"):
            raise ValueError(f"solver must be 'bcfw' or 'bmrm', got {self.solver!r}")
        rng = check_random_state(self.random_state)
        coefs, intercepts, n_iter, objective, gaps = [], [], [], [], []
        start_time = time.perf_counter()
        for k in range(targets.shape[1]):
            yk = np.ascontiguousarray(targets[:, k])
            if self.solver == "bmrm":
                theta, it, obj, gap = self._bmrm(X, yk, D, s, tol, max_iter)
            else:
                theta, it, obj, gap = self._bcfw(X, yk, D, s, tol, max_iter, rng)
            coefs.append(theta[:D].copy())
            intercepts.append(s * theta[D] if self.fit_intercept else 0.0)
            n_iter.append(it)
            objective.append(obj)
            gaps.append(gap)
        self.coef_ = np.array(coefs)
        self.intercept_ = np.array(intercepts)
        self.n_iter_ = np.array(n_iter)
        self.objective_ = np.array(objective)
        self.duality_gap_ = np.array(gaps)
        self.fit_time_ = time.perf_counter() - start_time
        return self

    def _bcfw(self, X, yk, D, s, tol, max_iter, rng):
        """Block-coordinate Frank-Wolfe on the dual (:func:`_bcfw_epoch`).

        Iterations are epochs (passes over the rows in a fresh random order); the
        certified gap ``P(theta) - D(beta, c) = ||theta||^2 + R(theta) - C sum_i c_i`` is
        checked between them (every epoch for large ``n``).
        """
        args = _row_arrays(X)
        data, dense = args[2], args[3]
        beta = np.zeros(data.size + dense.size)  # one per stored entry (one of them is empty)
        n = yk.shape[0]
        C = float(self.C)
        theta = np.zeros(D + 1)
        c = np.zeros(n)
        obj, gap, it = np.inf, np.inf, 0
        # epochs between two certified-gap checks: one for large n, up to 100 for tiny n
        # (a check costs about one epoch plus a fixed overhead)
        per_check = int(np.clip(20000 // max(n, 1), 1, 100))
        while it < max_iter:
            epochs = min(per_check, max_iter - it)
            order = rng.permuted(np.tile(np.arange(n), (epochs, 1)), axis=1)
            it += epochs
            _bcfw_epoch(*args, yk, order, theta, beta, c, int(self.n_changes),
                        float(self.lower), float(self.upper), s, C, bool(self.fit_intercept))
            b = s * theta[D] if self.fit_intercept else 0.0
            risk = self._risk(X, yk, theta[:D], b)[0]
            sq = float(theta @ theta)
            obj = 0.5 * sq + risk
            gap = obj - (-0.5 * sq + C * float(c.sum()))
            if gap <= tol * abs(obj):
                break
        return theta, it, obj, gap

    def _bmrm(self, X, yk, D, s, tol, max_iter):
        """The bundle method: cutting planes of the risk, simplex QP for the dual."""
        theta = np.zeros(D + 1)
        cap = min(max_iter, _BMRM_CAPACITY)    # storage, doubled when full
        planes = np.zeros((cap, D + 1))        # cutting planes a_i (subgradients)
        offsets = np.zeros(cap)                # R(theta_i) - a_i . theta_i
        H = np.zeros((cap, cap))               # a_i . a_j, grown one row at a time
        best_obj, best_theta, beta = np.inf, theta, np.zeros(0)
        lower_bound = -np.inf
        it = 0
        for it in range(1, max_iter + 1):
            w, wb = theta[:D], theta[D]
            b = s * wb if self.fit_intercept else 0.0
            risk, gw, gb = self._risk(X, yk, w, b)
            obj = 0.5 * theta @ theta + risk
            if obj < best_obj:
                best_obj, best_theta = obj, theta
            t = it - 1
            if t == cap:
                cap = min(2 * cap, max_iter)
                planes = np.vstack([planes, np.zeros((cap - t, D + 1))])
                offsets = np.append(offsets, np.zeros(cap - t))
                H = np.pad(H, ((0, cap - t), (0, cap - t)))
            planes[t, :D] = gw
            planes[t, D] = gb if self.fit_intercept else 0.0
            offsets[t] = risk - planes[t] @ theta
            H[t, :it] = planes[:it] @ planes[t]
            H[:it, t] = H[t, :it]
            # the QP only has to be accurate to a small part of the stopping gap
            beta = _simplex_qp(np.ascontiguousarray(H[:it, :it]), offsets[:it],
                               np.append(beta, 0.0),
                               abs_tol=0.05 * tol * best_obj)
            theta = -(planes[:it].T @ beta)
            lower_bound = max(lower_bound, float(-0.5 * theta @ theta + offsets[:it] @ beta))
            if best_obj - lower_bound <= tol * abs(best_obj):
                break
        return best_theta, it, float(best_obj), float(best_obj - lower_bound)


@numba.njit(cache=True)
def _project_simplex(v):
    """Euclidean projection on the probability simplex (sort-based, Held et al. 1974)."""
    u = np.sort(v)[::-1]
    css = 0.0
    theta = 0.0
    for k in range(u.shape[0]):
        css += u[k]
        t = (css - 1.0) / (k + 1.0)
        if u[k] - t > 0:
            theta = t
    return np.maximum(v - theta, 0.0)


@numba.njit(cache=True)
def _simplex_qp(H, c, beta0, max_iter=5000, tol=1e-10, abs_tol=0.0):
    """``argmax_{beta in simplex} -1/2 beta' H beta + c' beta`` (FISTA with restarts).

    Stops when the Frank-Wolfe gap ``max_i grad_i - grad.beta`` (an upper bound on the
    suboptimality) is below ``max(tol (1 + |value|), abs_tol)``.
    """
    L = max(np.linalg.eigvalsh(H)[-1], 1e-300)
    beta = _project_simplex(beta0)
    z = beta.copy()
    t_acc = 1.0
    for it in range(max_iter):
        grad = c - H @ z
        new = _project_simplex(z + grad / L)
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t_acc * t_acc))
        z = new + ((t_acc - 1.0) / t_new) * (new - beta)
        beta = new
        t_acc = t_new
        if it % 10 == 0:
            g = c - H @ beta
            value = c @ beta - 0.5 * beta @ (H @ beta)
            if np.max(g) - g @ beta <= max(tol * (1.0 + abs(value)), abs_tol):
                break
    return beta


# ---------------------------------------------------------------------------------------
# explicit corruption
# ---------------------------------------------------------------------------------------
class ExplicitCorruptionClassifier(ClassifierMixin, BaseEstimator):
    """Train any classifier on ``M`` seeded corrupted copies of the training set.

    The Monte Carlo counterpart of the expected-noise models: the data are replaced by
    ``M`` stacked copies ``x~ ~ p(x~ | x)`` (labels repeated) and ``estimator`` is fitted
    on them; the expected-noise objective is the ``M -> infinity`` limit (up to scaling
    ``C`` by ``M``, which this class does when ``scale_C=True`` so that ``C`` keeps its
    per-example meaning).

    Parameters
    ----------
    estimator : classifier
        Cloned before fitting; e.g. ``LogisticRegression()`` or ``LinearSVC()``.
    noise : str or NoiseModel, default="dropout"
    noise_level : float or None, default=None
    n_copies : int, default=16
        ``M``.
    scale_C : bool, default=True
        Divide the estimator's ``C`` by ``M`` (if it has one).
    random_state : None, int or numpy.random.Generator

    Attributes
    ----------
    estimator_ : the fitted clone
    classes_, coef_, intercept_ (when the estimator has them)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 3)); y = np.sign(X[:, 0])
    >>> clf = ExplicitCorruptionClassifier(LogisticRegression(), noise_level=0.3,
    ...                                    n_copies=8, random_state=0).fit(X, y)
    >>> clf.estimator_.n_features_in_, clf.score(X, y) > 0.9
    (3, True)
    """

    def __init__(self, estimator, *, noise="dropout", noise_level=None, n_copies=16,
                 scale_C=True, random_state=None):
        self.estimator = estimator
        self.noise = noise
        self.noise_level = noise_level
        self.n_copies = n_copies
        self.scale_C = scale_C
        self.random_state = random_state

    def fit(self, X, y):
        """Fit ``estimator`` on ``n_copies`` corrupted copies of ``(X, y)``.

        Returns
        -------
        self
        """
        M = check_scalar(self.n_copies, "n_copies", min_val=1, integer=True)
        noise = make_noise(self.noise, self.noise_level)
        X, y = validate_data(self, X, y, accept_sparse=_ACCEPT_SPARSE, dtype=np.float64)
        check_classification_targets(y)
        if np.unique(y).shape[0] < 2:
            raise ValueError("y contains only one class; at least two classes are needed")
        rng = check_random_state(self.random_state)
        copies = [noise.corrupt(X, rng) for _ in range(M)]
        Xc = sp.vstack(copies, format="csr") if sp.issparse(X) else np.vstack(copies)
        est = clone(self.estimator)
        if self.scale_C and "C" in est.get_params():
            est.set_params(C=est.get_params()["C"] / M)
        est.fit(Xc, np.tile(y, M))
        self.estimator_ = est
        self.noise_ = noise
        self.classes_ = est.classes_
        for name in ("coef_", "intercept_"):
            if hasattr(est, name):
                setattr(self, name, getattr(est, name))
        return self

    def _check(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, accept_sparse=_ACCEPT_SPARSE,
                             dtype=np.float64)

    def predict(self, X):
        """Predictions of the fitted estimator (on clean inputs)."""
        X = self._check(X)
        return self.estimator_.predict(X)

    def decision_function(self, X):
        """Scores of the fitted estimator."""
        X = self._check(X)
        return self.estimator_.decision_function(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
