"""t-logistic regression (Ding & Vishwanathan; seed 003) and the t-exponential family."""

from __future__ import annotations

import time

import numpy as np

from .._validation import MAX_ITER, check_bool, check_C, check_scalar
from ..estimators._base import OneVsRestClassifier, class_index
from ..solvers.lbfgs import minimize_lbfgs

__all__ = ["TLogisticRegression", "exp_t", "log_t", "t_partition"]

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


class TLogisticRegression(OneVsRestClassifier):
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

    def _objective(self, theta, X, y_idx, K, t, sw=None):
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
        if sw is not None:  # example n's term scaled by its weight
            loss = sw * loss
            xi = sw * xi
        dU = -(xi[:, None] * E)  # d(-log p)/du
        dF = 0.5 * (dU[:, :1] - dU[:, 1:]) if K == 1 else dU
        gW = C * np.asarray(X.T @ dF).T + W
        grad = gW.ravel()
        if self.fit_intercept:
            grad = np.concatenate([grad, C * dF.sum(axis=0)])
        return 0.5 * np.sum(W * W) + C * np.sum(loss), grad

    def fit(self, X, y, sample_weight=None):
        """Fit by L-BFGS.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional
            Scales each example's term (integer weights are copies).

        Returns
        -------
        self
        """
        t = check_scalar(self.t, "t", min_val=1.0)
        check_C(self.C)
        check_scalar(self.tol, "tol", min_val=0.0, include_min=False)
        check_scalar(self.max_iter, "max_iter", min_val=1, max_val=MAX_ITER, integer=True)
        check_bool(self.fit_intercept, "fit_intercept")
        if self.init not in ("zero", "logistic"):
            raise ValueError(f"init must be 'zero' or 'logistic', got {self.init!r}")
        X, y_idx = self._validate_fit(X, y)
        sw = self._example_weights(y, sample_weight, X.shape[0])
        n_classes = self.classes_.shape[0]
        K = 1 if n_classes == 2 else n_classes
        # binary: y_idx 1 (classes_[1], y = +1) is the first column of u = (f/2, -f/2)
        yk = (1 - y_idx) if K == 1 else y_idx
        D = X.shape[1]
        theta0 = np.zeros(K * D + (K if self.fit_intercept else 0))
        scale = float(self.C) * (X.shape[0] if sw is None else float(sw.sum()))
        start = time.perf_counter()
        if self.init == "logistic" and t > 1.0:
            res0 = minimize_lbfgs(lambda th: self._objective(th, X, yk, K, 1.0, sw), theta0, self.tol,
                          self.max_iter, scale)
            theta0 = res0.x
        res = minimize_lbfgs(lambda th: self._objective(th, X, yk, K, t, sw), theta0, self.tol,
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
        idx = class_index(self.classes_, y)
        return P[np.arange(P.shape[0]), idx] ** (float(self.t) - 1.0)


