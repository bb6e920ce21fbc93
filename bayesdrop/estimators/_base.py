"""The one engine behind every linear estimator: validation, classes, one-vs-rest.

Every classifier in bayesdrop (the dropout models, the latent models and the baselines
fitted problem by problem) is a set of **binary problems** with targets in {-1, +1}: one
for two classes, one per class otherwise (one-vs-rest). A regressor is one problem with
real targets. This module owns that loop so that ``classes_``, ``warm_start``,
``coef_`` / ``intercept_``, ``n_iter_``, ``converged_``, ``objective_``, ``fit_time_`` and
``decision_function`` / ``predict`` behave the same for all of them:

* :class:`LinearModel` -- ``fit_problems(X, targets, fit_binary)`` runs one fit per target
  column and stacks the results;
* :class:`OneVsRestClassifier` -- label validation, ``classes_``, the +-1 target
  columns, scores and predictions.

An estimator supplies only ``fit_binary(k, y_k, start)``: fit binary problem ``k`` with
targets ``y_k`` from ``start`` (None, or ``(coef, intercept)`` of the previous fit when
``warm_start`` is on and the shapes match) and return a :class:`BinaryFit`.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from .._progress import ProgressBar
from .._threads import single_blas_pool
from .._validation import (
    check_n_jobs,
    check_sample_weight,
    check_verbose,
    encode_labels,
    reject_dask,
)
from ._placement import placement

__all__ = ["ACCEPT_SPARSE", "BinaryFit", "LinearModel", "OneVsRestClassifier",
           "set_classes", "class_index", "one_vs_rest_targets", "validate_arrays"]

#: sparse formats the estimators accept (converted to CSR where it matters)
ACCEPT_SPARSE = ["csr", "csc", "coo"]


def warns_at_caller(method):
    """Decorate an estimator method so that the ``ConvergenceWarning`` s raised inside it
    (by a solver, several calls deep, on any back-end) point at the line that called the
    method, as scikit-learn's own warnings do; other warnings pass through unchanged.

    Examples
    --------
    >>> import warnings
    >>> from sklearn.exceptions import ConvergenceWarning
    >>> class E:
    ...     @warns_at_caller
    ...     def fit(self):
    ...         warnings.warn("slow", ConvergenceWarning)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     E().fit()
    >>> caught[0].filename.startswith("<doctest")  # the caller's line, not fit's
    True
    """
    import functools
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            result = method(*args, **kwargs)
        for w in caught:
            if issubclass(w.category, ConvergenceWarning):
                warnings.warn(w.message, w.category, stacklevel=2)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno,
                                       source=w.source)
        return result

    return wrapper


def validate_arrays(estimator, X, y="no_validation", *, reset=True, y_numeric=False):
    """scikit-learn's ``validate_data(estimator, X, y, reset=reset,
    accept_sparse=ACCEPT_SPARSE, dtype=np.float64[, y_numeric])``, with a shortcut for
    the commonest input (``y`` as there: ``"no_validation"``, the default, for none).

    ``validate_data`` costs about 110 us per call whatever the size of the data (its
    dataframe-library checks), a sixth of a whole fit on a few hundred examples. When
    ``X`` is a plain finite float64 ``ndarray`` of shape (n >= 1, d >= 1) and ``y`` (if
    given) a plain 1-D numeric ``ndarray`` of ``n`` finite entries, it would return them
    unchanged and only set ``n_features_in_`` and remove ``feature_names_in_`` (``reset``),
    or only check both (``reset=False``); that is done here directly, in a few
    microseconds. Anything else -- other types or dtypes, NaN / inf, a shape it would
    reject, a fitted estimator with feature names or another ``n_features_in_`` -- goes
    through ``validate_data``, with its conversions, warnings and error messages.

    Finiteness is tested by ``isfinite(sum)``, as scikit-learn's own first test: a finite
    sum proves every entry finite; an infinite one (also from finite values whose sum
    overflows) defers to ``validate_data``.

    Returns
    -------
    X, or (X, y)

    Examples
    --------
    >>> from sklearn.linear_model import LinearRegression
    >>> est = LinearRegression()
    >>> X = np.ones((3, 2)); y = np.arange(3.0)
    >>> Xv, yv = validate_arrays(est, X, y)
    >>> Xv is X, yv is y, est.n_features_in_
    (True, True, 2)
    """
    no_y = isinstance(y, str) and y == "no_validation"
    reject_complex(X, "X")
    if not no_y:
        reject_complex(y, "y")
    if (type(X) is np.ndarray and X.dtype == np.float64 and X.ndim == 2 and X.size
            and (no_y or (type(y) is np.ndarray and y.ndim == 1
                          and y.shape[0] == X.shape[0] and y.dtype.kind in "biuf"))
            and _finite_sum(X) and (no_y or y.dtype.kind != "f" or _finite_sum(y))):
        if reset:
            estimator.n_features_in_ = X.shape[1]
            if hasattr(estimator, "feature_names_in_"):
                del estimator.feature_names_in_
            return X if no_y else (X, y)
        if (not hasattr(estimator, "feature_names_in_")
                and getattr(estimator, "n_features_in_", None) == X.shape[1]):
            return X if no_y else (X, y)
    kwargs = {} if no_y else {"y_numeric": y_numeric}
    return validate_data(estimator, X, y, reset=reset, accept_sparse=ACCEPT_SPARSE,
                         dtype=np.float64, **kwargs)


def reject_complex(a, name):
    """Raise a short ``ValueError`` naming ``name`` for complex data (scikit-learn's
    message prints the whole array).

    Examples
    --------
    >>> reject_complex(np.ones((2, 2)) + 1j, "X")
    Traceback (most recent call last):
    ...
    ValueError: X: Complex data not supported (got complex128 of shape (2, 2))
    """
    dtype = getattr(a, "dtype", None)
    if dtype is None and isinstance(a, (list, tuple)):
        dtype = np.asarray(a).dtype
    if dtype is not None and getattr(dtype, "kind", None) == "c":
        raise ValueError(f"{name}: Complex data not supported (got {dtype} of shape "
                         f"{np.shape(a)})")


def _finite_sum(a):
    """True if ``sum(a)`` is finite (then so is every entry); no overflow warning."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(np.sum(a)))


class BinaryFit(NamedTuple):
    """Result of fitting one binary (or the one regression) problem.

    Attributes
    ----------
    coef : ndarray of shape (n_coef,)
    intercept : float
    n_iter : int
    converged : bool
    objective : float or ndarray
        Final objective, or its history (the dropout models keep the monotone history).
    extra : dict
        Further per-problem results; each key ``name`` becomes the fitted attribute
        ``name`` holding ``np.stack`` of the values over the problems.
    """

    coef: np.ndarray
    intercept: float
    n_iter: int
    converged: bool
    objective: object
    extra: dict = {}


def set_classes(estimator, y):
    """Set ``estimator.classes_`` and return the class index of each label.

    Raises
    ------
    ValueError
        If ``y`` has fewer than two classes.

    Examples
    --------
    >>> class E: pass
    >>> e = E(); set_classes(e, np.array(["b", "a", "b"])).tolist(), e.classes_.tolist()
    ([1, 0, 1], ['a', 'b'])
    """
    estimator.classes_, y_idx = encode_labels(y)
    if estimator.classes_.shape[0] < 2:
        raise ValueError(
            f"y contains only one class ({estimator.classes_[0]!r}); at least two classes "
            "are needed"
        )
    return y_idx



def column_vector(y, n_samples, name="y"):
    """``y`` as a 1-D array of ``n_samples`` entries; a column ``(n_samples, 1)`` is
    raveled with scikit-learn's ``DataConversionWarning``, as ``fit`` does; complex data
    is rejected (:func:`reject_complex`).

    Examples
    --------
    >>> column_vector([1, 2], 2).tolist()
    [1, 2]
    """
    reject_complex(y, name)
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = column_or_1d(y, warn=True)
    if y.shape != (n_samples,):
        raise ValueError(f"{name} must have shape ({n_samples},), got {y.shape}")
    return y


def class_index(classes, y):
    """Index of each label of ``y`` in the sorted ``classes``; unseen labels raise.

    Examples
    --------
    >>> class_index(np.array([2, 5, 7]), [7, 2]).tolist()
    [2, 0]
    """
    y = np.asarray(y)
    idx = np.clip(np.searchsorted(classes, y), 0, classes.shape[0] - 1)
    if not np.all(classes[idx] == y):
        raise ValueError("y contains labels not seen in fit")
    return idx


def one_vs_rest_targets(n_classes, y_idx):
    """Targets in {-1, +1}: one column (``+1`` for ``classes_[1]``) for two classes, else
    one column per class (``+1`` for that class).

    Examples
    --------
    >>> one_vs_rest_targets(2, np.array([0, 1])).ravel().tolist()
    [-1.0, 1.0]
    >>> one_vs_rest_targets(3, np.array([2])).tolist()
    [[-1.0, -1.0, 1.0]]
    """
    if n_classes == 2:
        return np.where(y_idx == 1, 1.0, -1.0)[:, None]
    return np.where(y_idx[:, None] == np.arange(n_classes), 1.0, -1.0)


class LinearModel(BaseEstimator):
    """Shared fitting loop: one :class:`BinaryFit` per target column.

    Fitted attributes set by :meth:`fit_problems` (``n_problems`` target columns):
    ``coef_`` (n_problems, n_coef), ``intercept_`` (n_problems,), ``n_iter_``,
    ``converged_`` (n_problems,), ``objective_`` (array of final values, or a list of
    histories), ``fit_time_`` and one attribute per key of :attr:`BinaryFit.extra`.
    """

    def _validate_X(self, X, reset=False):
        check_is_fitted(self)
        reject_dask(X, "X", f"{type(self).__name__} here")
        return validate_arrays(self, X, reset=reset)

    def _warm_start_points(self, n_problems, n_coef):
        """``(coef_, intercept_)`` rows to start from, or None (cold start)."""
        coef = getattr(self, "coef_", None)
        if not getattr(self, "warm_start", False) or coef is None:
            return None
        coef = np.atleast_2d(coef)
        if coef.shape != (n_problems, n_coef):
            return None
        return coef, np.atleast_1d(self.intercept_)

    def fit_problems(self, targets, fit_binary, n_coef):
        """Fit one problem per column of ``targets``; set the fitted attributes.

        Parameters
        ----------
        targets : ndarray of shape (n_samples, n_problems) or int
            The target columns, or only their number (rows that stay on a cluster:
            ``y_k`` is then None).
        fit_binary : callable ``(k, y_k, start) -> BinaryFit``
            ``start`` is None or ``(coef, intercept)`` (warm start).
        n_coef : int
            Length of each problem's ``coef`` (``n_features``, or ``n_hidden``).

        Returns
        -------
        self
        """
        if isinstance(targets, (int, np.integer)):
            n_problems = int(targets)

            def column(k):
                return None
        else:
            n_problems = targets.shape[1]

            def column(k):
                return np.ascontiguousarray(targets[:, k])
        warm = self._warm_start_points(n_problems, n_coef)
        start_time = time.perf_counter()
        starts = [None if warm is None else (warm[0][k], float(warm[1][k]))
                  for k in range(n_problems)]
        n_jobs = check_n_jobs(getattr(self, "n_jobs", None))
        verbose = check_verbose(getattr(self, "verbose", 0))
        if n_jobs in (None, 1) or n_problems == 1:
            fits = []
            with ProgressBar(n_problems, enabled=verbose > 0, unit="problem",
                             description=f"{type(self).__name__}.fit") as bar:
                for k in range(n_problems):
                    t0 = time.perf_counter()
                    fits.append(fit_binary(k, column(k), starts[k]))
                    bar.update(k + 1)
                    if verbose > 1:
                        f = fits[-1]
                        bar.write(f"problem {k + 1}/{n_problems}: {f.n_iter} iterations, "
                                  f"J = {float(np.ravel(f.objective)[-1]):.10g}, "
                                  f"converged {bool(f.converged)}, "
                                  f"{time.perf_counter() - t0:.3f} s")
        else:
            # threads: the compiled solver loops and BLAS release the GIL, and the
            # problems share one design (no copies, no process start-up)
            from joblib import Parallel, delayed

            # this thread holds the BLAS limit around every problem: a worker's own block
            # (each solver's) ending would otherwise lift it while the other worker's
            # problem computes (digits, 10 classes, n_jobs=2: 72 ms without it, 24 with)
            with single_blas_pool():
                fits = Parallel(n_jobs=n_jobs, prefer="threads")(
                    delayed(fit_binary)(k, column(k), starts[k])
                    for k in range(n_problems))
        return self._store_fits(fits, n_coef, time.perf_counter() - start_time)

    def _store_fits(self, fits, n_coef, fit_time):
        """Set the fitted attributes from one :class:`BinaryFit` per problem; returns
        ``self``."""
        self.coef_ = np.array([f.coef for f in fits], dtype=float).reshape(len(fits), n_coef)
        self.intercept_ = np.array([f.intercept for f in fits], dtype=float)
        self.n_iter_ = np.array([f.n_iter for f in fits], dtype=int)
        self.converged_ = np.array([f.converged for f in fits], dtype=bool)
        if any(np.ndim(f.objective) for f in fits):
            self.objective_ = [np.asarray(f.objective) for f in fits]
        else:
            self.objective_ = np.array([f.objective for f in fits], dtype=float)
        for key in fits[0].extra:
            setattr(self, key, np.array([f.extra[key] for f in fits]))
        self.fit_time_ = fit_time
        return self

    def _example_weights(self, y, sample_weight, n_samples):
        """Validated per-example weights (None: all 1); see
        :func:`bayesdrop._validation.check_sample_weight`."""
        return check_sample_weight(sample_weight, n_samples)

    def _map(self, method, X, n_columns=None, dtype=np.float64):
        """``method(X)`` -- or, for a dask ``X``, ``method`` mapped lazily over its row
        chunks (a dask array with ``n_columns`` columns, None: one dimension; see
        :mod:`._placement`). The estimator must be
        fitted (checked here, before the lazy map, so that an unfitted estimator raises
        at the call)."""
        check_is_fitted(self)
        return placement(X).map(method, X, n_columns, dtype)

    def _decision(self, X):
        """Scores ``X coef_^T + intercept_`` of shape (n_samples, n_problems)."""
        check_is_fitted(self)
        return self._map(self._decision_rows, X, np.atleast_2d(self.coef_).shape[0])

    def _decision_rows(self, X):
        return self._decision_validated(self._validate_X(X))

    def _decision_validated(self, X):
        """:meth:`_decision_rows` of an ``X`` validated already (the held-out rows of a
        cross-validation path, scored after every fit)."""
        return np.asarray(X @ np.atleast_2d(self.coef_).T) + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class OneVsRestClassifier(ClassifierMixin, LinearModel):
    """Classifier over binary problems: ``classes_``, +-1 targets, scores, predictions."""

    def _validate_fit(self, X, y):
        """Validated ``X`` (CSR if sparse) and the class index of each label; sets
        ``classes_`` and ``n_features_in_``."""
        reject_dask(X, "X", f"{type(self).__name__}.fit")
        X, y = validate_arrays(self, X, y)
        y_idx = set_classes(self, y)
        if sp.issparse(X):
            X = X.tocsr()
        return X, y_idx

    def _example_weights(self, y, sample_weight, n_samples):
        """``sample_weight_n * class_weight[y_n]`` (None: all 1), as scikit-learn's
        classifiers: ``class_weight="balanced"`` gives class ``k`` the weight
        ``n_samples / (n_classes * n_k)`` with the counts weighted by ``sample_weight``."""
        weights = check_sample_weight(sample_weight, n_samples)
        class_weight = getattr(self, "class_weight", None)
        if class_weight is None:
            return weights
        if not (isinstance(class_weight, dict) or class_weight == "balanced"):
            raise ValueError("class_weight must be None, 'balanced' or a dict, got "
                             f"{class_weight!r}")
        y = np.asarray(y)
        if isinstance(class_weight, str) and weights is not None:
            for c in self.classes_:  # 'balanced' divides by each class's total weight
                if not weights[y == c].sum() > 0:
                    raise ValueError(f"class_weight='balanced' needs a positive total "
                                     f"sample_weight in every class; class {c} has 0")
        per_class = compute_class_weight(class_weight, classes=self.classes_, y=y,
                                         sample_weight=weights)
        if not np.all(np.isfinite(per_class) & (per_class >= 0)):
            raise ValueError("class_weight must hold finite weights >= 0")
        per_example = per_class[class_index(self.classes_, y)]
        return check_sample_weight(per_example if weights is None else weights * per_example,
                                   n_samples, "sample_weight * class_weight")

    def _targets(self, y_idx):
        return one_vs_rest_targets(self.classes_.shape[0], y_idx)

    def _encode_targets(self, y, n_samples):
        """The fitted model's +-1 target columns for labels ``y`` (unseen labels raise)."""
        y = column_vector(y, n_samples)
        return self._targets(class_index(self.classes_, y))

    def decision_function(self, X):
        """Scores of each binary problem.

        Returns
        -------
        ndarray of shape (n_samples,) for two classes (score of ``classes_[1]``), else
        (n_samples, n_classes).
        """
        check_is_fitted(self)
        k = np.atleast_2d(self.coef_).shape[0]
        return self._map(self._decision_function_rows, X, None if k == 1 else k)

    def _decision_function_rows(self, X, validated=False):
        scores = self._decision_validated(X) if validated else self._decision_rows(X)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Class with the largest score (one-vs-rest)."""
        check_is_fitted(self)
        return self._map(self._predict_rows, X, None, self.classes_.dtype)

    def _proba(self, X, log=False):
        """``sigmoid_proba`` of the scores (its logarithm with ``log``): the logistic
        classifiers' ``predict_proba`` / ``predict_log_proba``, lazy on a dask ``X``."""
        from ..predictive import sigmoid_proba

        check_is_fitted(self)

        def proba(rows):
            p = sigmoid_proba(self._decision_rows(rows))
            if not log:
                return p
            with np.errstate(divide="ignore"):
                return np.log(p)
        return self._map(proba, X, self.classes_.shape[0])

    def _predict_rows(self, X, validated=False):
        scores = self._decision_function_rows(X, validated)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]
