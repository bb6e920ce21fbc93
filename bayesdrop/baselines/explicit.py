"""Explicit corruption: any classifier trained on ``M`` seeded corrupted copies."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import (check_fits_in_memory, check_random_state, check_sample_weight,
                           check_scalar, reject_dask)
from ..estimators._base import ACCEPT_SPARSE
from ..model.noise import make_noise

__all__ = ["ExplicitCorruptionClassifier"]

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
        As for :class:`bayesdrop.DropoutSVC` (``None``: 0.1).
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

    def fit(self, X, y, sample_weight=None):
        """Fit ``estimator`` on ``n_copies`` corrupted copies of ``(X, y)``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional
            Each copy of an example carries its weight (passed to the wrapped
            estimator's ``fit``, which must accept ``sample_weight``).

        Returns
        -------
        self
        """
        M = check_scalar(self.n_copies, "n_copies", min_val=1, integer=True)
        noise = make_noise(self.noise, self.noise_level)
        reject_dask(X, "X", f"{type(self).__name__}.fit")
        X, y = validate_data(self, X, y, accept_sparse=ACCEPT_SPARSE, dtype=np.float64)
        check_classification_targets(y)
        if np.unique(y).shape[0] < 2:
            raise ValueError("y contains only one class; at least two classes are needed")
        stored = X.nnz if sp.issparse(X) else X.size
        check_fits_in_memory(12.0 * M * stored, "n_copies", f"{M} corrupted copies of X",
                             "use fewer copies")
        rng = check_random_state(self.random_state)
        copies = [noise.corrupt(X, rng) for _ in range(M)]
        Xc = sp.vstack(copies, format="csr") if sp.issparse(X) else np.vstack(copies)
        est = clone(self.estimator)
        if self.scale_C and "C" in est.get_params():
            est.set_params(C=est.get_params()["C"] / M)
        if sample_weight is None:
            est.fit(Xc, np.tile(y, M))
        else:
            weights = check_sample_weight(sample_weight, X.shape[0])
            weights = np.ones(X.shape[0]) if weights is None else weights
            est.fit(Xc, np.tile(y, M), sample_weight=np.tile(weights, M))
        self.estimator_ = est
        self.noise_ = noise
        self.classes_ = est.classes_
        for name in ("coef_", "intercept_"):
            if hasattr(est, name):
                setattr(self, name, getattr(est, name))
        return self

    def _check(self, X):
        check_is_fitted(self)
        reject_dask(X, "X", type(self).__name__)
        return validate_data(self, X, reset=False, accept_sparse=ACCEPT_SPARSE,
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

