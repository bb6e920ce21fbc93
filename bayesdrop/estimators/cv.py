"""Cross-validated estimators: ``noise_level`` and ``C`` chosen on a warm-started path.

:class:`DropoutLogisticRegressionCV`, :class:`DropoutSVCCV` and :class:`DropoutSVRCV`
score every point of the grid ``noise_levels x Cs`` on every fold, as
``GridSearchCV(estimator, {"C": Cs, "noise_level": noise_levels}, cv=cv, scoring=scoring)``
would, and make the same choice (the same folds, scores and tie-breaking), for less:

* on each fold the inputs are validated once per noise level and the design (with its
  noise variances) is built once per noise level; changing ``C`` only rescales the
  loss;
* every fit starts from the solutions at neighbouring grid points, so that Newton needs
  few steps: the noise levels are walked from the noisiest to the clean data, at each
  level ``C`` ascends, and the first fit of a level starts from the previous level's fit
  at the smallest ``C`` (there the solutions of neighbouring levels are close; a turn
  at the largest ``C``, as a snake walk takes every other time, cost newsgroups 12-17
  Newton steps instead of 3-5: the search 4.6 -> 4.2 s, breast cancer and diabetes 4-7 %
  less); the first level's other fits start from the fit at the previous ``C``, later
  levels' from the parallelogram of the three fitted neighbours
  (:func:`bayesdrop.solvers.fit_path`; breast cancer, one fold, 5 levels x 10 ``C``:
  Newton steps 220 -> 189 logistic, 256 -> 224 hinge, newsgroups 281 -> 254 -- choosing
  among it, the secant in ``log C`` and the neighbours by ``J`` took fewer steps but
  cost more than they saved). The noisiest level first: its solution saturates in
  ``C`` (the noise regularises), so the previous ``C``'s fit is a close start (1-4
  Newton steps at the largest ``C`` where the clean level took 8-9), and the clean
  level, whose solutions grow with ``C``, comes last (breast cancer logistic, default
  grid: 274 -> 235 Newton steps per fold, the search 0.105 -> 0.089 s); at zero noise
  the hinge and epsilon-insensitive fits follow the exact solution path from the
  previous ``C``'s optimum instead (:mod:`bayesdrop.solvers.homotopy`: a few to a few
  hundred events of a few microseconds, where SMO takes up to thousands of steps and
  the smoothing solver tens of Newton steps);
* on a small dense design a level's Newton fits run in one compiled call
  (:func:`bayesdrop.solvers.newton.fit_path`: the same iterations, without Python
  between the fits);
* the held-out rows are validated once per fold, and the BLAS limit of
  :func:`bayesdrop._threads.single_blas_pool` is set once per fold, not per fit;
* the folds run in parallel (``n_jobs``) in joblib's worker processes, as
  ``GridSearchCV``'s do (threads gained nothing: the zero-noise solvers of the hinge and
  epsilon-insensitive losses hold the GIL).

Each fit still runs to the estimator's ``tol`` (the exact solvers: to their certificate),
so the path's solutions are those of cold fits (within ``tol``), and so are its scores --
except where the optimum is not unique: at tiny ``C`` the epsilon-insensitive ``J`` can be
flat in the intercept over a stretch, and the path and a cold fit may return different
points of it (the same ``J``; ``R^2`` differing by up to 5e-4 on diabetes at ``C`` = 2e-4).
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import is_classifier
from sklearn.metrics import check_scoring
from sklearn.model_selection import check_cv
from sklearn.utils import _safe_indexing

from .._threads import single_blas_pool
from .._validation import check_n_jobs, check_sample_weight
from ..model.losses import EpsilonInsensitiveLoss, HingeLoss, LogisticLoss
from ..model.noise import make_noise
from ._base import reject_dask, validate_arrays
from .linear import DropoutLogisticRegression, DropoutSVC
from .regressor import DropoutSVR

__all__ = ["DropoutLogisticRegressionCV", "DropoutSVCCV", "DropoutSVRCV", "DEFAULT_NOISE_LEVELS"]

#: The noise levels tried by default: clean data, and the range in which the levels
#: that lost least accuracy in 5-fold CV on standard data sets lie (0.05-0.1, text 0.5).
DEFAULT_NOISE_LEVELS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)

#: Parameters of the base estimator that the CV estimators set themselves.
_SEARCHED = ("C", "noise_level", "warm_start")


#: the most values of a grid (``Cs``, ``noise_levels``): each is a fit per fold
MAX_GRID = 10_000


def _grid(values, name, default):
    """A validated 1-D grid of finite numbers >= 0 (``C``: > 0)."""
    if values is None:
        values = default
    if name == "Cs" and isinstance(values, numbers.Integral) and not isinstance(values, bool):
        if not 1 <= values <= MAX_GRID:
            raise ValueError(f"Cs must be in [1, {MAX_GRID}] when an integer (the number of "
                             f"values of logspace(-4, 4)), got {values}")
        return np.logspace(-4, 4, int(values))
    try:
        grid = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of numbers, got {values!r}") from None
    if grid.ndim != 1 or grid.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence, got shape {grid.shape}")
    if grid.size > MAX_GRID:
        raise ValueError(f"{name} must hold at most {MAX_GRID} values, got {grid.size}")
    low = 0.0 if name == "noise_levels" else np.nextafter(0.0, 1.0)
    if not np.all(np.isfinite(grid)) or np.any(grid < low):
        raise ValueError(f"{name} must hold finite values "
                         f"{'>= 0' if name == 'noise_levels' else '> 0'}, got {grid}")
    return grid


def _default_score(estimator, X, y, sample_weight=None):
    """``estimator.score(X, y)`` -- accuracy, or ``R^2`` for the regressor -- with the
    same arithmetic as scikit-learn's ``accuracy_score`` / ``r2_score`` but without their
    input checks (about a millisecond a call; the path's fits take about as long), on an
    ``X`` validated by the caller (the held-out rows, scored after every fit).

    Examples
    --------
    >>> from bayesdrop import DropoutSVR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 2)); y = X @ [1.0, 2.0] + rng.normal(size=50)
    >>> reg = DropoutSVR().fit(X, y)
    >>> bool(_default_score(reg, X, y) == reg.score(X, y))
    True
    """
    pred = estimator._predict_rows(X, validated=True)
    if is_classifier(estimator):
        return float(np.average(pred == y, weights=sample_weight))
    y = np.asarray(y, dtype=np.float64)
    weight = 1.0 if sample_weight is None else sample_weight
    numerator = (weight * (y - pred) ** 2).sum(axis=0)
    denominator = (weight * (y - np.average(y, axis=0, weights=sample_weight)) ** 2).sum(axis=0)
    if denominator == 0:
        return 1.0 if numerator == 0 else 0.0
    return float(1 - numerator / denominator)


def _accepts_sample_weight(scorer):
    """Whether ``GridSearchCV`` would pass ``sample_weight`` to ``scorer`` (it does when
    the scorer takes it)."""
    from inspect import signature

    accept = getattr(scorer, "_accept_sample_weight", None)
    if accept is not None:
        return bool(accept())
    return "sample_weight" in signature(scorer).parameters


class _PathCV:
    """The search shared by the CV estimators (mixed in before the base estimator).

    The base estimator's own ``fit`` fits the chosen model (``refit=True``); its other
    methods then work as on the base estimator, with ``C_`` and ``noise_level_`` in place
    of ``C`` and ``noise_level``.
    """

    _base = None  # the estimator class searched over

    def _base_params(self):
        """The base estimator's parameters that this estimator shares."""
        names = self._base._get_param_names()
        return {k: getattr(self, k) for k in names if k not in _SEARCHED}

    def __sklearn_is_fitted__(self):
        return hasattr(self, "coef_")

    def _check_params(self):
        """The shared checks of the base estimator, at the chosen ``C_``; the noise at
        the chosen level."""
        self._base(C=self.C_, noise_level=self.noise_level_,
                   **self._base_params())._check_params()
        self._solver, self._linalg = self._solvers()
        return make_noise(self.noise, self.noise_level_)

    def fit(self, X, y, sample_weight=None, groups=None):
        """Score every ``(noise_level, C)`` on every fold; then (``refit=True``) fit the
        best on all of ``(X, y)``.

        The score of a grid point is the mean over the folds of ``scoring`` on the
        held-out fold (default: the estimator's ``score``: accuracy, or ``R^2`` for the
        regressor); the best is the first grid point, in the order of ``cv_results_``,
        with the highest mean -- as ``GridSearchCV`` chooses.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional
            Passed (the training rows' part) to every fit and (the held-out rows' part)
            to the score, as ``GridSearchCV`` passes it (a scorer without a
            ``sample_weight`` argument scores unweighted).
        groups : array-like of shape (n_samples,), optional
            Group labels of the examples for a group-wise ``cv`` (``GroupKFold`` and the
            like), passed to its ``split`` as ``GridSearchCV.fit`` passes ``groups``.

        Returns
        -------
        self
        """
        from joblib import Parallel, delayed

        reject_dask(X, "X", f"{type(self).__name__}.fit (use dask-ml's GridSearchCV)")
        Cs = _grid(self.Cs, "Cs", 10)
        levels = _grid(self.noise_levels, "noise_levels", DEFAULT_NOISE_LEVELS)
        if not isinstance(self.refit, (bool, np.bool_)):
            raise TypeError(f"refit must be a bool, got {self.refit!r}")
        base = self._base(C=float(Cs[0]), noise_level=float(levels[0]), **self._base_params())
        base._check_params()  # the shared parameters, before any fold
        for q in np.unique(levels):
            make_noise(self.noise, float(q))
        X_in, y_in = X, y  # the refit takes them as given (pandas column names and all)
        X, y = validate_arrays(base, X, y, y_numeric=not is_classifier(self))
        if sp.issparse(X):
            X = X.tocsr()  # rows indexable (a COO matrix is not)
        weights = check_sample_weight(sample_weight, X.shape[0])
        if groups is not None:
            groups = np.asarray(groups)
            if groups.ndim != 1 or groups.shape[0] != X.shape[0]:
                raise ValueError(f"groups must have shape ({X.shape[0]},), got "
                                 f"{groups.shape}")
        try:  # scikit-learn's messages, prefixed with the argument they are about
            splits = list(check_cv(self.cv, y, classifier=is_classifier(self))
                          .split(X, y, groups))
        except (TypeError, ValueError) as exc:
            kind = TypeError if isinstance(exc, TypeError) else ValueError
            raise kind(f"cv: {exc}") from exc
        if not splits:
            raise ValueError(f"cv gave no train/test splits, got cv={self.cv!r}")
        if self.scoring is not None and not (isinstance(self.scoring, str)
                                             or callable(self.scoring)):
            raise TypeError("scoring must be None, a scorer name or a callable (one metric; "
                            f"GridSearchCV's multi-metric lists and dicts are not supported), "
                            f"got {type(self.scoring).__name__}")
        scorer = (_default_score if self.scoring is None
                  else check_scoring(base, scoring=self.scoring))
        weighted_scores = weights is not None and _accepts_sample_weight(scorer)
        if weights is not None:  # a fold with no weight has no fit or no weighted score
            for i, (train, test) in enumerate(splits):
                for rows, part in ((train, "training"), (test, "held-out")):
                    if (part == "training" or weighted_scores) and not weights[rows].sum() > 0:
                        raise ValueError(
                            f"sample_weight: the {part} rows of fold {i} have zero total "
                            "weight (no fit, or an undefined weighted score); give them "
                            "weight or choose other folds (cv)")

        def fold(train, test):
            est = self._base(**base.get_params())
            est.n_jobs = None  # the folds are the parallel tasks
            X_train, y_train = _safe_indexing(X, train), _safe_indexing(y, train)
            w_train = None if weights is None else weights[train]
            X_test, y_test = _safe_indexing(X, test), _safe_indexing(y, test)
            score_kw = {"sample_weight": weights[test]} if weighted_scores else {}
            scores = np.empty((levels.size, Cs.size))
            order = np.argsort(Cs, kind="stable")
            previous = None  # the previous level's fits, C ascending
            with single_blas_pool():  # once for the fold's fits, not per fit
                for j in np.argsort(-levels, kind="stable"):  # the noisiest first
                    est.noise_level = float(levels[j])
                    fits = []
                    for k, fitted in zip(order, est._fit_path(X_train, y_train, w_train,
                                                              Cs[order], previous)):
                        fits.append((np.copy(fitted.coef_), np.copy(fitted.intercept_)))
                        scores[j, k] = scorer(fitted, X_test, y_test, **score_kw)
                    previous = fits
            return scores

        n_jobs = check_n_jobs(self.n_jobs) if len(splits) > 1 else None
        if n_jobs is not None and n_jobs > len(splits):  # no more workers than folds
            n_jobs = len(splits)
        per_fold = Parallel(n_jobs=n_jobs)(
            delayed(fold)(train, test) for train, test in splits)
        self.scores_ = np.stack(per_fold)  # (n_splits, n_noise_levels, n_Cs)
        self.Cs_, self.noise_levels_, self.n_splits_ = Cs, levels, len(splits)
        self._store_results()
        best = self.cv_results_["params"][self.best_index_]
        self.C_, self.noise_level_ = best["C"], best["noise_level"]
        if self.refit:
            chosen = self._base(C=self.C_, noise_level=self.noise_level_,
                                **self._base_params()).fit(X_in, y_in, sample_weight)
            for key, value in vars(chosen).items():
                if key.endswith("_") and not key.startswith("_"):
                    setattr(self, key, value)
        elif hasattr(self, "coef_"):
            del self.coef_
        return self

    def _store_results(self):
        """``cv_results_``, ``best_index_``, ``best_score_``, ``best_params_`` as
        ``GridSearchCV`` lays them out: candidates in the order of
        ``ParameterGrid({"C": Cs, "noise_level": noise_levels})`` (``C`` outer)."""
        from scipy.stats import rankdata

        # (n_splits, n_levels, n_Cs) -> (n_candidates, n_splits), C outer, level inner
        per_candidate = self.scores_.transpose(2, 1, 0).reshape(-1, self.n_splits_)
        means = np.average(per_candidate, axis=1)
        stds = np.sqrt(np.average((per_candidate - means[:, None]) ** 2, axis=1))
        params = [{"C": float(C), "noise_level": float(q)}
                  for C in self.Cs_ for q in self.noise_levels_]
        results = {"params": params,
                   "param_C": np.array([p["C"] for p in params]),
                   "param_noise_level": np.array([p["noise_level"] for p in params])}
        for s in range(self.n_splits_):
            results[f"split{s}_test_score"] = per_candidate[:, s].copy()
        results["mean_test_score"] = means
        results["std_test_score"] = stds
        if np.isnan(means).all():
            ranks = np.ones(means.size, dtype=np.int32)
        else:
            lowest = np.nanmin(means) - 1
            ranks = rankdata(-np.where(np.isnan(means), lowest, means),
                             method="min").astype(np.int32)
        results["rank_test_score"] = ranks
        self.cv_results_ = results
        self.best_index_ = int(ranks.argmin())
        self.best_score_ = float(means[self.best_index_])
        self.best_params_ = dict(params[self.best_index_])


_CV_DOC = """
    Cs : int or array-like of float, default=10
        The values of ``C`` tried; an integer ``n`` means ``n`` values on a log scale
        from ``1e-4`` to ``1e4`` (as ``LogisticRegressionCV``).
    noise_levels : array-like of float or None, default=None
        The values of ``noise_level`` tried (for the ``noise`` given; 0 is clean data);
        None means ``DEFAULT_NOISE_LEVELS`` = (0, 0.05, 0.1, 0.2, 0.3, 0.5).
    cv : int, cross-validation generator or iterable, default=None
        The folds, as in ``GridSearchCV`` (None: 5-fold, stratified for the classifiers).
    scoring : str, callable or None, default=None
        The held-out score (higher is better), as in ``GridSearchCV``; None uses the
        estimator's ``score``.
    refit : bool, default=True
        Fit the chosen ``(noise_level, C)`` on all the data; the estimator then predicts
        and samples as the base estimator with those parameters.
"""

_CV_ATTRIBUTES = """
    C_, noise_level_ : float
        The chosen values.
    Cs_, noise_levels_ : ndarray
        The grid.
    scores_ : ndarray of shape (n_splits, n_noise_levels, n_Cs)
        Held-out score of every grid point on every fold.
    cv_results_ : dict of ndarray
        As ``GridSearchCV.cv_results_`` over ``{"C": Cs, "noise_level": noise_levels}``
        (``params``, ``param_C``, ``param_noise_level``, ``split<k>_test_score``,
        ``mean_test_score``, ``std_test_score``, ``rank_test_score``); it loads into
        ``pandas.DataFrame``.
    best_index_, best_score_, best_params_
        As in ``GridSearchCV``.
    n_splits_ : int
"""

_COMMON = """
    The other parameters are those of :class:`~bayesdrop.{name}`; ``n_jobs`` runs the
    folds in parallel processes (joblib; same result for any value). After ``fit`` with
    ``refit=True`` the estimator has the fitted attributes of
    :class:`~bayesdrop.{name}` (``coef_``, ``intercept_``, ...) at ``C_`` and
    ``noise_level_``, and its methods (``predict``, ``sample_posterior``, ...).
"""


class DropoutLogisticRegressionCV(_PathCV, DropoutLogisticRegression):
    __doc__ = f"""Dropout logistic regression with ``noise_level`` and ``C`` chosen by
    cross-validation on a warm-started path (see :mod:`bayesdrop.estimators.cv`).

    Chooses what ``GridSearchCV(DropoutLogisticRegression(), {{"C": Cs, "noise_level":
    noise_levels}})`` chooses, for a fraction of its time
    (``benchmarks/results/cv_path.txt``).

    Parameters
    ----------
    {_CV_DOC}
    {_COMMON.format(name="DropoutLogisticRegression")}

    Attributes
    ----------
    {_CV_ATTRIBUTES}

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import scale
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> clf = DropoutLogisticRegressionCV(Cs=[0.01, 0.1, 1.0], noise_levels=[0.0, 0.3])
    >>> clf = clf.fit(scale(X), y)
    >>> clf.scores_.shape, (clf.C_, clf.noise_level_) in [(c, q) for c in clf.Cs_
    ...                                                   for q in clf.noise_levels_]
    ((5, 2, 3), True)
    """

    _base = DropoutLogisticRegression

    def __init__(self, Cs=10, *, noise_levels=None, cv=None, scoring=None, refit=True,
                 noise="dropout", class_weight=None, fit_intercept=True, solver="auto",
                 linalg="auto", tol=1e-8, max_iter=1000, accelerate=True, n_jobs=None,
                 verbose=0):
        self.Cs = Cs
        self.noise_levels = noise_levels
        self.cv = cv
        self.scoring = scoring
        self.refit = refit
        self.noise = noise
        self.class_weight = class_weight
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.linalg = linalg
        self.tol = tol
        self.max_iter = max_iter
        self.accelerate = accelerate
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _make_loss(self):
        return LogisticLoss(self.C_)


class DropoutSVCCV(_PathCV, DropoutSVC):
    __doc__ = f"""Dropout linear SVM with ``noise_level`` and ``C`` chosen by
    cross-validation on a warm-started path (see :mod:`bayesdrop.estimators.cv`).

    Parameters
    ----------
    {_CV_DOC}
    {_COMMON.format(name="DropoutSVC")}

    Attributes
    ----------
    {_CV_ATTRIBUTES}

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = DropoutSVCCV(Cs=[0.1, 1.0, 10.0], noise_levels=[0.05, 0.2]).fit(X, y)
    >>> sorted(clf.best_params_) , clf.coef_.shape
    (['C', 'noise_level'], (3, 4))
    """

    _base = DropoutSVC

    def __init__(self, Cs=10, *, noise_levels=None, cv=None, scoring=None, refit=True,
                 noise="dropout", margin=1.0, class_weight=None, fit_intercept=True,
                 solver="auto", linalg="auto", tol=1e-8, max_iter=1000, accelerate=True,
                 n_jobs=None, verbose=0):
        self.Cs = Cs
        self.noise_levels = noise_levels
        self.cv = cv
        self.scoring = scoring
        self.refit = refit
        self.noise = noise
        self.margin = margin
        self.class_weight = class_weight
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.linalg = linalg
        self.tol = tol
        self.max_iter = max_iter
        self.accelerate = accelerate
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _make_loss(self):
        return HingeLoss(self.C_, self.margin)


class DropoutSVRCV(_PathCV, DropoutSVR):
    __doc__ = f"""Dropout linear support vector regression with ``noise_level`` and ``C``
    chosen by cross-validation on a warm-started path (see
    :mod:`bayesdrop.estimators.cv`).

    Parameters
    ----------
    {_CV_DOC}
    epsilon : float, default=0.1
        Width of the insensitive tube (not searched).
    {_COMMON.format(name="DropoutSVR")}

    Attributes
    ----------
    {_CV_ATTRIBUTES}

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.preprocessing import scale
    >>> X, y = load_diabetes(return_X_y=True)
    >>> reg = DropoutSVRCV(Cs=[0.1, 1.0, 10.0], noise_levels=[0.0, 0.2])
    >>> reg = reg.fit(scale(X), scale(y))
    >>> reg.cv_results_["mean_test_score"].shape, round(reg.best_score_, 2) > 0.3
    ((6,), True)
    """

    _base = DropoutSVR

    def __init__(self, Cs=10, *, noise_levels=None, epsilon=0.1, cv=None, scoring=None,
                 refit=True, noise="dropout", fit_intercept=True, solver="auto",
                 linalg="auto", tol=1e-8, max_iter=1000, accelerate=True, n_jobs=None,
                 verbose=0):
        self.Cs = Cs
        self.noise_levels = noise_levels
        self.epsilon = epsilon
        self.cv = cv
        self.scoring = scoring
        self.refit = refit
        self.noise = noise
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.linalg = linalg
        self.tol = tol
        self.max_iter = max_iter
        self.accelerate = accelerate
        self.n_jobs = n_jobs
        self.verbose = verbose

    def _make_loss(self):
        return EpsilonInsensitiveLoss(self.C_, self.epsilon)
