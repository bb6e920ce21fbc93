"""One-vs-rest fit of a smooth binary objective by L-BFGS (MCF-logistic, Wager)."""

from __future__ import annotations

import numpy as np

from .._validation import MAX_ITER, check_bool, check_C, check_scalar
from ..estimators._base import BinaryFit, OneVsRestClassifier
from ..predictive import sigmoid_proba
from ..solvers.lbfgs import minimize_lbfgs


class SmoothBinaryClassifier(OneVsRestClassifier):
    """Baselines whose binary problem is a smooth objective ``J(theta; y_k)``."""

    def _check_common(self):
        check_C(self.C)
        check_scalar(self.tol, "tol", min_val=0.0, include_min=False)
        check_scalar(self.max_iter, "max_iter", min_val=1, max_val=MAX_ITER, integer=True)
        check_bool(self.fit_intercept, "fit_intercept")

    def _fit_smooth(self, X, y_idx, make_objective, total_weight=None):
        """L-BFGS on ``make_objective(y_k)`` for every one-vs-rest target ``y_k``;
        ``total_weight`` (default ``n``) is the sum of the sample weights, which scales
        the objective as scikit-learn does."""
        scale = float(self.C) * (X.shape[0] if total_weight is None else float(total_weight))
        D = X.shape[1]
        fi = bool(self.fit_intercept)

        def fit_binary(k, yk, start):
            theta0 = np.zeros(D + int(fi))
            if start is not None:
                theta0[:D] = start[0]
                if fi:
                    theta0[D] = start[1]
            res = minimize_lbfgs(make_objective(yk), theta0, self.tol, self.max_iter, scale)
            return BinaryFit(res.x[:D], res.x[D] if fi else 0.0, res.nit, bool(res.success),
                             float(res.fun))

        return self.fit_problems(self._targets(y_idx), fit_binary, D)

    def predict_proba(self, X):
        """``sigmoid(w.x + b)`` (one-vs-rest sigmoids normalised to sum to one)."""
        return sigmoid_proba(self._decision(X))
