"""The linear support vector regressor under expected feature noise: a thin layer over the
engine of :mod:`bayesdrop.estimators.linear` (one regression problem)."""

from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted

from .._validation import as_float_vector
from ..model.losses import EpsilonInsensitiveLoss
from ._base import column_vector, validate_arrays, warns_at_caller
from ._dask import fit_dask
from ._placement import placement
from .linear import _NOISE_DOC, _SOLVER_DOC, _DropoutLinearModel

__all__ = ["DropoutSVR"]


class DropoutSVR(RegressorMixin, _DropoutLinearModel):
    __doc__ = f"""Linear support vector regression under expected feature noise.

    Minimises ``J(w, b) = ||w||^2 + C sum_n (sqrt(e+_n) + sqrt(e-_n) - 2 epsilon)`` with
    ``e+-_n = (y_n - m_n -+ epsilon)^2 + s_n``, the bound on
    ``2C sum_n E max(0, |y_n - w.x~_n - b| - epsilon)`` (exact at zero noise), by
    variational IRLS with two weights per example.

    Parameters
    ----------
    C : float, default=1.0
        Regularisation; as in ``sklearn.svm.LinearSVR(C=C)`` with an unpenalised intercept.
    epsilon : float, default=0.1
        Width of the insensitive tube.
    {_NOISE_DOC}
    {_SOLVER_DOC}

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_iter_ : int
    solver_ : str
        The optimiser used (see the ``solver`` parameter).
    objective_ : ndarray
        History of ``J``.
    converged_ : bool
    noise_, loss_, n_features_in_, fit_time_

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = X @ [1.0, -2.0, 0.5] + 0.1 * rng.normal(size=200)
    >>> reg = DropoutSVR(C=10.0, epsilon=0.1, noise="none").fit(X, y)
    >>> reg.coef_.round(1)
    array([ 1. , -2. ,  0.5])
    """

    def __init__(self, C=1.0, *, epsilon=0.1, noise="dropout", noise_level=None,
                 fit_intercept=True, solver="auto", linalg="auto", tol=1e-8, max_iter=1000,
                 accelerate=True, warm_start=False, verbose=0):
        self.C = C
        self.verbose = verbose
        self.epsilon = epsilon
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
        return EpsilonInsensitiveLoss(self.C, self.epsilon)

    @warns_at_caller
    def fit(self, X, y, sample_weight=None):
        """Minimise ``J``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional
            Scales each example's loss term (``C_n = C sample_weight_n``); an integer
            weight equals that many copies of the example, weight 0 removes it.

        Returns
        -------
        self
        """
        return placement(X).fit(self, X, y, sample_weight)

    def _fit_in_memory(self, X, y, sample_weight):
        return self._finish(self._fit_problems(*self._prepared(X, y, sample_weight)))

    def _fit_on_cluster(self, X, y, sample_weight):
        fit_dask(self, X, y, sample_weight)
        return self._single_problem()

    def _prepared(self, X, y, sample_weight):
        """``(X, targets, noise, weights)``: the validated inputs of a fit (one target
        column); sets ``n_features_in_``."""
        noise = self._check_params()
        X, y = validate_arrays(self, X, y, y_numeric=True)
        weights = self._example_weights(y, sample_weight, X.shape[0])
        return X, np.asarray(y, dtype=float)[:, None], noise, weights

    def _finish(self, fitted):
        return self._single_problem()

    def _single_problem(self):
        """The fitted attributes of the one regression problem, unstacked."""
        self.coef_ = self.coef_[0]
        self.intercept_ = float(self.intercept_[0])
        self.n_iter_ = int(self.n_iter_[0])
        self.objective_ = self.objective_[0]
        self.converged_ = bool(self.converged_[0])
        self.solver_ = str(self.solver_[0])
        if hasattr(self, "n_passes_"):
            self.n_passes_ = int(np.ravel(self.n_passes_)[0])
        return self

    def _encode_targets(self, y, n_samples):
        y = column_vector(y, n_samples)
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"y must hold numbers, got dtype {y.dtype}") from None
        return as_float_vector(y, n_samples)[:, None]

    def predict_interval(self, X, idata, prob=0.94, *, kind="predictive", random_state=0,
                         calibrate=None):
        """Posterior mean of ``w.x + b`` and a central ``prob`` interval for each row:
        for a new ``y`` (``kind="predictive"``, the default) or for ``w.x + b`` only
        (``kind="mean"``, a credible band). ``calibrate=(X_cal, y_cal)``, held-out rows,
        rescales the predictive intervals to cover ``prob`` of new observations (split
        conformal; the model's own intervals cover ``prob`` only when ``C`` and the scale
        of ``y`` match the data's noise). See
        :func:`bayesdrop.predictive.predictive_interval`.

        Returns
        -------
        mean : ndarray of shape (n_samples,)
            The posterior mean of ``w.x + b``.
        interval : ndarray of shape (n_samples, 2)
            Lower and upper ends (columns 0 and 1) of the central ``prob`` interval.

        Examples
        --------
        >>> from bayesdrop import DropoutSVR
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(80, 2)); y = X @ [1.0, -0.5] + 0.3 * rng.normal(size=80)
        >>> reg = DropoutSVR(noise_level=0.2).fit(X, y)
        >>> idata = reg.sample_posterior(X, y, draws=100, tune=50, chains=1,
        ...                              random_state=0, progressbar=False)
        >>> mean, interval = reg.predict_interval(X[:3], idata, prob=0.9)
        >>> mean.shape, interval.shape, bool(np.all(interval[:, 0] < interval[:, 1]))
        ((3,), (3, 2), True)
        """
        from ..predictive import calibration_pair, predictive_interval

        check_is_fitted(self)
        if calibrate is not None:
            X_cal, y_cal = calibration_pair(calibrate)
            calibrate = (self._validate_X(X_cal), y_cal)
        return predictive_interval(idata, self._validate_X(X), prob, kind=kind,
                                   random_state=random_state, calibrate=calibrate)

    def predict(self, X):
        """Predictions ``w.x + b`` (a lazy dask array for a dask ``X``)."""
        return self._map(self._predict_rows, X)

    def _predict_rows(self, X, validated=False):
        if not validated:
            X = self._validate_X(X)
        return np.asarray(X @ self.coef_).ravel() + self.intercept_


