"""Logistic regression with the quadratic dropout penalty of Wager, Wang & Liang (2013)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit
from sklearn.utils.validation import validate_data

from .._validation import check_scalar, reject_dask
from ..estimators._base import ACCEPT_SPARSE
from ..model.design import Design
from ..model.noise import make_noise
from ._smooth import SmoothBinaryClassifier

__all__ = ["WagerDropoutLogisticRegression"]

def _wager_penalty(design, theta, weight, sw=None):
    """``weight * R_q`` and its gradient; ``R_q = 1/2 sum_n sw_n p_n (1 - p_n) s_n``
    (``sw`` the sample weights, default 1).

    ``dR_q/dtheta = 1/2 sum_n [p(1-p)(1-2p) s_n xbar_n] + (sum_n p(1-p) diag(v_n)) w``.
    """
    w, _ = design.split(theta)
    m, s = design.scores(theta)
    p = expit(m)
    g = p * (1.0 - p) if sw is None else sw * p * (1.0 - p)
    value = 0.5 * np.sum(g * s)
    grad = design.rmatvec(0.5 * g * (1.0 - 2.0 * p) * s)  # g carries sw
    grad[: design.n_features] += design.noise_apply(g, w)
    return weight * value, weight * grad


class WagerDropoutLogisticRegression(SmoothBinaryClassifier):
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
    warm_start : bool, default=False
        Start L-BFGS from the previous solution when refitting with the same classes
        and features.

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
                 fit_intercept=True, tol=1e-6, max_iter=1000, warm_start=False):
        self.C = C
        self.noise = noise
        self.noise_level = noise_level
        self.unlabeled_discount = unlabeled_discount
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.warm_start = warm_start

    def fit(self, X, y, X_unlabeled=None, sample_weight=None):
        """Fit by L-BFGS (one-vs-rest).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        X_unlabeled : {array-like, sparse matrix} of shape (n_unlabeled, n_features), optional
            Unlabeled rows for the semi-supervised penalty.
        sample_weight : array-like of shape (n_samples,), optional
            Scales each labeled example's loss and penalty term (integer weights are
            copies; ``n`` in ``kappa`` becomes the sum of the weights).

        Returns
        -------
        self
        """
        self._check_common()
        a = check_scalar(self.unlabeled_discount, "unlabeled_discount", min_val=0.0,
                         max_val=1.0, include_min=False)
        noise = make_noise(self.noise, self.noise_level)
        X, y_idx = self._validate_fit(X, y)
        sw = self._example_weights(y, sample_weight, X.shape[0])
        sw = np.ones(X.shape[0]) if sw is None else sw
        self.noise_ = noise
        C, fi, D = float(self.C), bool(self.fit_intercept), X.shape[1]
        design = Design(X, noise, fi)
        n = float(sw.sum())
        unlabeled = None
        if X_unlabeled is not None:
            reject_dask(X_unlabeled, "X_unlabeled", f"{type(self).__name__}.fit")
            Xu = validate_data(self, X_unlabeled, reset=False, accept_sparse=ACCEPT_SPARSE,
                               dtype=np.float64)
            unlabeled = Design(Xu, noise, fi)
            kappa = n / (n + a * Xu.shape[0])
        else:
            kappa = 1.0

        def make_objective(yk):
            def fun(theta):
                w, _ = design.split(theta)
                m = design.matvec(theta)
                value = 0.5 * w @ w + C * np.sum(sw * -log_expit(yk * m))
                grad = design.rmatvec(-C * yk * sw * expit(-yk * m))
                grad[:D] += w
                pv, pg = _wager_penalty(design, theta, C * kappa, sw)
                value, grad = value + pv, grad + pg
                if unlabeled is not None:
                    uv, ug = _wager_penalty(unlabeled, theta, C * kappa * a)
                    value, grad = value + uv, grad + ug
                return value, grad
            return fun

        return self._fit_smooth(X, y_idx, make_objective, n)


