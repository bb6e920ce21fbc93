"""scikit-learn estimators: thin layers over :mod:`bayesdrop.irls`.

All three minimise (MATH.md section 2)::

    J(w, b) = ||w||^2 + 2C sum_n (bound on) E_p[loss(x~_n, y_n; w, b)]

which has the minimiser of scikit-learn's ``1/2 ||w||^2 + C sum loss`` at zero noise, so
``C`` means what it means for ``SVC(kernel="linear")``, ``LogisticRegression`` and
``LinearSVR`` (with an unpenalised intercept). Multiclass problems are solved one-vs-rest.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from . import irls
from ._arviz import to_inference_data
from ._validation import check_scalar
from .losses import EpsilonInsensitiveLoss, HingeLoss, LogisticLoss
from .noise import make_noise
from .posterior import sample_problems, sigmoid_proba, vote_fractions
from .problem import Problem
from .wls import SOLVERS

__all__ = ["DropoutSVC", "DropoutLogisticRegression", "DropoutSVR", "DropoutLatentSVC",
           "DropoutLatentLogisticRegression"]


_NOISE_DOC = """
    noise : {"dropout", "none", "multiplicative", "gaussian", "laplace", "poisson"} or \
NoiseModel, default="dropout"
        Corrupting distribution (see :mod:`bayesdrop.noise`).
    noise_level : float or None, default=None
        Its level: ``q`` for dropout, ``a`` for multiplicative, ``sigma`` for Gaussian,
        ``beta`` for Laplace, ``kappa`` for Poisson. ``0`` means clean data. ``None``
        keeps the level of a noise object and means 0.5 for a named noise (1 for
        Poisson); a number replaces the level of a noise object, so that
        ``GridSearchCV`` over ``noise_level`` works for either.
"""

_SOLVER_DOC = """
    fit_intercept : bool, default=True
        Fit an unpenalised, uncorrupted intercept.
    solver : {"auto", "cholesky", "cg"}, default="auto"
        Back-end of the weighted least-squares step (:mod:`bayesdrop.wls`): dense
        Cholesky, or matrix-free conjugate gradients (never forms a ``D x D`` matrix).
        ``"auto"`` uses Cholesky up to 2000 parameters.
    tol : float, default=1e-8
        Relative decrease of ``J`` (and ``sqrt(tol)`` relative change of the parameters)
        at which IRLS stops.
    max_iter : int, default=1000
        Maximum IRLS iterations per binary problem.
    accelerate : bool, default=True
        SQUAREM acceleration of the IRLS map, monotone in ``J`` (:mod:`bayesdrop.irls`).
    warm_start : bool, default=False
        Start from the previous solution when refitting on data of the same shape.
"""


def _set_classes(estimator, y):
    """Set ``classes_`` and return the class index of each label; refuse a single class."""
    check_classification_targets(y)
    estimator.classes_, y_idx = np.unique(y, return_inverse=True)
    if estimator.classes_.shape[0] < 2:
        raise ValueError(
            f"y contains only one class ({estimator.classes_[0]!r}); at least two classes "
            "are needed"
        )
    return y_idx


def _class_index(classes, y):
    """Index of each label of ``y`` in ``classes``; unseen labels are a ValueError."""
    y = np.asarray(y)
    idx = np.clip(np.searchsorted(classes, y), 0, classes.shape[0] - 1)
    if not np.all(classes[idx] == y):
        raise ValueError("y contains labels not seen in fit")
    return idx


def _one_vs_rest(n_classes, y_idx):
    """Targets in {-1, +1}: one column for two classes, else one column per class."""
    if n_classes == 2:
        return np.where(y_idx == 1, 1.0, -1.0)[:, None]
    return np.where(y_idx[:, None] == np.arange(n_classes), 1.0, -1.0)


class _DropoutLinearModel(BaseEstimator):
    """Shared fitting code: validation, noise, one IRLS fit per binary problem."""

    _loss_name = "base"

    def _check_params(self):
        check_scalar(self.C, "C", min_val=0.0, include_min=False)
        check_scalar(self.tol, "tol", min_val=0.0, include_min=False)
        check_scalar(self.max_iter, "max_iter", min_val=1, integer=True)
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {self.solver!r}")
        return make_noise(self.noise, self.noise_level)

    def _validate_X(self, X, reset):
        return validate_data(self, X, reset=reset, accept_sparse=["csr", "csc", "coo"],
                             dtype=np.float64)

    def _fit_problems(self, X, targets, noise):
        """Fit one IRLS problem per column of ``targets``; set the fitted attributes."""
        loss = self._make_loss()
        n_problems = targets.shape[1]
        warm = (
            self.warm_start
            and hasattr(self, "coef_")
            and self.coef_.shape == (n_problems, X.shape[1])
        )
        coefs = np.empty((n_problems, X.shape[1]))
        intercepts = np.zeros(n_problems)
        histories, n_iter, converged = [], np.empty(n_problems, dtype=int), []
        start = time.perf_counter()
        problem = None
        for k in range(n_problems):
            if problem is None:
                problem = Problem.create(X, targets[:, k], loss, noise, self.fit_intercept)
            else:  # reuse the design (and its noise variances) across one-vs-rest problems
                problem = problem._replace(y=loss.check_target(targets[:, k], X.shape[0]))
            theta0 = None
            if warm:
                theta0 = problem.design.pack(self.coef_[k], self.intercept_[k])
            res = irls.fit(problem, theta0, tol=self.tol, max_iter=self.max_iter,
                           accelerate=self.accelerate, solver=self.solver)
            coefs[k], intercepts[k] = problem.design.split(res.theta)
            histories.append(res.objective)
            n_iter[k] = res.n_iter
            converged.append(res.converged)
        self.coef_ = coefs
        self.intercept_ = intercepts
        self.n_iter_ = n_iter
        self.objective_ = histories
        self.converged_ = np.array(converged)
        self.noise_ = noise
        self.loss_ = loss
        self.fit_time_ = time.perf_counter() - start
        return self

    def _problems(self, X, y):
        """The fitted model's binary problems on ``(X, y)`` and their IRLS estimates."""
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        targets = self._encode_targets(y, X.shape[0])
        loss = self._make_loss()
        coef = np.atleast_2d(self.coef_)
        intercept = np.atleast_1d(self.intercept_)
        problems, thetas, problem = [], [], None
        for k in range(targets.shape[1]):
            if problem is None:
                problem = Problem.create(X, targets[:, k], loss, self.noise_, self.fit_intercept)
            else:
                problem = problem._replace(y=loss.check_target(targets[:, k], X.shape[0]))
            problems.append(problem)
            thetas.append(problem.design.pack(coef[k], intercept[k]))
        return problems, thetas

    def sample_posterior(self, X, y, *, draws=1000, tune=500, chains=4, thin=1,
                         random_state=None, progressbar=True, init="irls", cores=None,
                         store_augmentation=False, overrelax=-0.5):
        """Fit by IRLS, then sample the pseudo-posterior ``exp(-J(w, b))`` by Gibbs.

        Each binary (one-vs-rest) problem is sampled by :func:`bayesdrop.gibbs.sample`:
        augmentation variables and ``theta`` drawn in turn from the same weighted
        least-squares system that IRLS solves. The chains are independent processes by
        default; the same ``random_state`` gives the same draws either way.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        draws : int, default=1000
            Kept draws per chain.
        tune : int, default=500
            Burn-in sweeps per chain.
        chains : int, default=4
        thin : int, default=1
        random_state : None, int, SeedSequence or numpy.random.Generator
        progressbar : bool, default=True
            Quiet anyway when the ``CI`` environment variable is set.
        init : {"irls", "overdispersed"} or ndarray, default="irls"
            Start at the IRLS estimate, or at it plus three times a draw from the Gaussian
            of the IRLS system (see :func:`bayesdrop.gibbs.sample`).
        cores : int, optional
            Parallel chain processes (default ``min(chains, cpu_count)``; 1: in sequence).
        store_augmentation : bool, default=False
            Keep full traces of the augmentation variables; their posterior means per
            example are always kept (group ``augmentation_mean``).
        overrelax : float in (-1, 1), default=-0.5
            Over-relaxation of the Gaussian step (distribution-preserving; 0 gives the
            plain Gibbs sampler); see :func:`bayesdrop.gibbs.step`.

        Returns
        -------
        arviz.InferenceData
            ``posterior`` (``coef`` with dims ``(chain, draw, [class,] feature)``,
            ``intercept``), ``sample_stats`` (``lp = -J``), ``observed_data`` (``y``),
            ``augmentation_mean``; attributes name the loss, ``C``, the noise and its
            level, timings and the library version.
        """
        self.fit(X, y)
        problems, thetas = self._problems(X, y)
        results = sample_problems(problems, thetas, random_state=random_state, draws=draws,
                                  tune=tune, chains=chains, thin=thin, init=init,
                                  progressbar=progressbar, cores=cores,
                                  store_augmentation=store_augmentation, solver=self.solver,
                                  overrelax=overrelax)
        classes = getattr(self, "classes_", None)
        class_names = list(classes) if classes is not None and len(problems) > 1 else None
        attrs = {"estimator": type(self).__name__}
        if classes is not None:
            attrs["classes"] = ",".join(str(c) for c in classes)
        return to_inference_data(results, loss=self.loss_, noise=self.noise_,
                                 fit_intercept=self.fit_intercept, y=np.asarray(y),
                                 feature_names=self._posterior_feature_names(),
                                 class_names=class_names, attrs=attrs)

    def _posterior_feature_names(self):
        return getattr(self, "feature_names_in_", None)

    def _decision(self, X):
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        return np.asarray(X @ self.coef_.T) + self.intercept_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class _DropoutClassifier(ClassifierMixin, _DropoutLinearModel):
    """One-vs-rest binary problems with labels in {-1, +1}."""

    def fit(self, X, y):
        """Fit the model by IRLS (one problem per class, one-vs-rest, if multiclass).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        noise = self._check_params()
        X, y = validate_data(self, X, y, accept_sparse=["csr", "csc", "coo"],
                             dtype=np.float64)
        y_idx = _set_classes(self, y)
        return self._fit_problems(X, self._one_vs_rest(y_idx), noise)

    def _one_vs_rest(self, y_idx):
        return _one_vs_rest(self.classes_.shape[0], y_idx)

    def _encode_targets(self, y, n_samples):
        y = np.asarray(y)
        if y.shape != (n_samples,):
            raise ValueError(f"y must have shape ({n_samples},), got {y.shape}")
        return self._one_vs_rest(_class_index(self.classes_, y))

    def predict_vote_fractions(self, X, idata):
        """Posterior predictive class probabilities as vote fractions of the draws.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        idata : arviz.InferenceData
            From :meth:`sample_posterior`.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Fraction of posterior draws whose prediction is each class of ``classes_``.
        """
        check_is_fitted(self)
        return vote_fractions(idata, self._validate_X(X, reset=False))

    def decision_function(self, X):
        """Mean scores ``w.x + b``.

        Returns
        -------
        ndarray of shape (n_samples,) for two classes (score of ``classes_[1]``), else
        (n_samples, n_classes).
        """
        scores = self._decision(X)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Class with the largest score (one-vs-rest)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(int)]
        return self.classes_[np.argmax(scores, axis=1)]


class DropoutSVC(_DropoutClassifier):
    __doc__ = f"""Linear SVM trained under expected feature noise (Dropout-SVM).

    Minimises ``J(w, b) = ||w||^2 + C sum_n (E zeta_n + sqrt(E zeta_n^2))`` with
    ``zeta_n = margin - y_n (w.x~_n + b)``, the data-augmentation bound on
    ``2C sum_n E max(0, zeta_n)`` (exact at zero noise), by variational IRLS with weights
    ``gamma_n = 1 / (C sqrt(E zeta_n^2))``.

    Parameters
    ----------
    C : float, default=1.0
        Regularisation; as in ``sklearn.svm.SVC(kernel="linear", C=C)``.
    {_NOISE_DOC}
    margin : float, default=1.0
        Margin ``l`` of the hinge loss.
    {_SOLVER_DOC}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_iter_ : ndarray of shape (n_problems,)
        IRLS iterations of each binary (one-vs-rest) problem.
    objective_ : list of ndarray
        History of ``J`` for each binary problem (monotone non-increasing).
    converged_ : ndarray of bool
    noise_ : NoiseModel
    loss_ : HingeLoss
    n_features_in_ : int
    fit_time_ : float

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import scale
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> clf = DropoutSVC(C=0.1, noise_level=0.3).fit(scale(X), y)
    >>> round(clf.score(scale(X), y), 2)
    0.98
    """

    def __init__(self, C=1.0, *, noise="dropout", noise_level=None, margin=1.0,
                 fit_intercept=True, solver="auto", tol=1e-8, max_iter=1000,
                 accelerate=True, warm_start=False):
        self.C = C
        self.noise = noise
        self.noise_level = noise_level
        self.margin = margin
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.accelerate = accelerate
        self.warm_start = warm_start

    def _make_loss(self):
        return HingeLoss(self.C, self.margin)


class DropoutLogisticRegression(_DropoutClassifier):
    __doc__ = f"""Logistic regression trained under expected feature noise (Dropout-LR).

    Minimises ``J(w, b) = ||w||^2 + sum_n [h log(2 cosh(psi_n/2)) - (h/2) y_n m_n]`` with
    ``h = 2C``, ``m_n = w.x_n + b`` and ``psi_n = sqrt(m_n^2 + s_n)``, the Polya-Gamma
    bound on ``2C sum_n E log(1 + exp(-y_n (w.x~_n + b)))`` (exact at zero noise), by
    variational IRLS with weights ``E[lambda_n] = (h / (2 psi_n)) tanh(psi_n / 2)``.

    Parameters
    ----------
    C : float, default=1.0
        Regularisation; as in ``sklearn.linear_model.LogisticRegression(C=C)``.
    {_NOISE_DOC}
    {_SOLVER_DOC}

    Attributes
    ----------
    classes_, coef_, intercept_, n_iter_, objective_, converged_, noise_, loss_,
    n_features_in_, fit_time_
        As for :class:`DropoutSVC`.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.preprocessing import scale
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> Xs = scale(X)
    >>> clf = DropoutLogisticRegression(C=0.1, noise_level=0.3).fit(Xs, y)
    >>> clf.predict_proba(Xs[:2]).round(3)
    array([[1.   , 0.   ],
           [0.986, 0.014]])
    """

    def __init__(self, C=1.0, *, noise="dropout", noise_level=None, fit_intercept=True,
                 solver="auto", tol=1e-8, max_iter=1000, accelerate=True,
                 warm_start=False):
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
        return LogisticLoss(self.C)

    def predict_proba(self, X):
        """Class probabilities ``sigmoid(w.x + b)`` on clean inputs.

        Multiclass: the one-vs-rest sigmoids normalised to sum to one.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        return sigmoid_proba(self._decision(X))

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


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
                 fit_intercept=True, solver="auto", tol=1e-8, max_iter=1000,
                 accelerate=True, warm_start=False):
        self.C = C
        self.epsilon = epsilon
        self.noise = noise
        self.noise_level = noise_level
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.accelerate = accelerate
        self.warm_start = warm_start

    def _make_loss(self):
        return EpsilonInsensitiveLoss(self.C, self.epsilon)

    def fit(self, X, y):
        """Fit the model by IRLS.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        noise = self._check_params()
        if self.warm_start and hasattr(self, "coef_"):
            self.coef_ = np.atleast_2d(self.coef_)
            self.intercept_ = np.atleast_1d(self.intercept_)
        X, y = validate_data(self, X, y, accept_sparse=["csr", "csc", "coo"],
                             dtype=np.float64, y_numeric=True)
        self._fit_problems(X, np.asarray(y, dtype=float)[:, None], noise)
        self.coef_ = self.coef_[0]
        self.intercept_ = float(self.intercept_[0])
        self.n_iter_ = int(self.n_iter_[0])
        self.objective_ = self.objective_[0]
        self.converged_ = bool(self.converged_[0])
        return self

    def _encode_targets(self, y, n_samples):
        y = np.asarray(y, dtype=float)
        if y.shape != (n_samples,):
            raise ValueError(f"y must have shape ({n_samples},), got {y.shape}")
        return y[:, None]

    def predict_interval(self, X, idata, prob=0.94):
        """Posterior mean and central ``prob`` interval of ``w.x + b`` for each row.

        See :func:`bayesdrop.posterior.predictive_interval`.

        Returns
        -------
        mean : ndarray of shape (n_samples,)
        interval : ndarray of shape (n_samples, 2)
        """
        from .posterior import predictive_interval

        check_is_fitted(self)
        return predictive_interval(idata, self._validate_X(X, reset=False), prob)

    def predict(self, X):
        """Predictions ``w.x + b``."""
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        return np.asarray(X @ self.coef_).ravel() + self.intercept_


# ------------------------------------------------------------------ latent (hidden layer)
_LATENT_DOC = """
    n_hidden : int, default=20
        Number ``K`` of sigmoid hidden units (per one-vs-rest problem).
    alpha_penalty : float, default=0.01
        Weight of ``||alpha||_F^2`` (hidden weights; hidden biases are not penalised).
    max_iter : int, default=50
        Alternations of the ``w``-step (IRLS) and the ``alpha``-step (L-BFGS).
    w_iter : int, default=100
        IRLS iterations per ``w``-step.
    alpha_iter : int, default=20
        L-BFGS iterations per ``alpha``-step.
    tol : float, default=1e-6
        Stop when an alternation lowers ``J`` by less than ``tol * max(|J|, 1)``.
    fit_intercept : bool, default=True
    random_state : None, int or numpy.random.Generator
        Initial hidden weights ``N(0, 1/D)``.
"""


class _DropoutLatentClassifier(_DropoutClassifier):
    """Shared code of the one-hidden-layer classifiers (:mod:`bayesdrop.latent`)."""

    solver = "cholesky"

    def _check_params(self):
        check_scalar(self.C, "C", min_val=0.0, include_min=False)
        check_scalar(self.n_hidden, "n_hidden", min_val=1, integer=True)
        check_scalar(self.alpha_penalty, "alpha_penalty", min_val=0.0)
        check_scalar(self.max_iter, "max_iter", min_val=1, integer=True)
        check_scalar(self.w_iter, "w_iter", min_val=1, integer=True)
        check_scalar(self.alpha_iter, "alpha_iter", min_val=1, integer=True)
        check_scalar(self.tol, "tol", min_val=0.0, include_min=False)
        return make_noise(self.noise, self.noise_level)

    def _fit_problems(self, X, targets, noise):
        from .latent import fit_latent
        from ._validation import check_random_state

        loss = self._make_loss()
        rng = check_random_state(self.random_state)
        n_problems, K = targets.shape[1], self.n_hidden
        coefs, intercepts = np.empty((n_problems, K)), np.zeros(n_problems)
        alphas = np.empty((n_problems, X.shape[1] + 1, K))
        histories, n_iter, converged = [], np.empty(n_problems, dtype=int), []
        start = time.perf_counter()
        for k in range(n_problems):
            y = loss.check_target(targets[:, k], X.shape[0])
            res = fit_latent(X, y, loss, noise, n_hidden=K, alpha_penalty=self.alpha_penalty,
                             fit_intercept=self.fit_intercept, random_state=rng,
                             max_iter=self.max_iter, w_iter=self.w_iter,
                             alpha_iter=self.alpha_iter, tol=self.tol)
            w = res.theta[:K]
            coefs[k] = w
            intercepts[k] = res.theta[K] if self.fit_intercept else 0.0
            alphas[k] = res.alpha
            histories.append(res.objective)
            n_iter[k] = res.n_iter
            converged.append(res.converged)
        self.coef_, self.intercept_ = coefs, intercepts
        self.hidden_weights_ = alphas[:, :-1]
        self.hidden_bias_ = alphas[:, -1]
        self.n_iter_, self.objective_ = n_iter, histories
        self.converged_ = np.array(converged)
        self.noise_, self.loss_ = noise, loss
        self.fit_time_ = time.perf_counter() - start
        return self

    def _hidden(self, X, k):
        return expit(np.asarray(X @ self.hidden_weights_[k]) + self.hidden_bias_[k])

    def transform(self, X):
        """Hidden features ``sigmoid(X alpha_k + c_k)`` of every one-vs-rest problem.

        Returns
        -------
        ndarray of shape (n_samples, n_problems * n_hidden)
        """
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        return np.hstack([self._hidden(X, k) for k in range(self.coef_.shape[0])])

    def _decision(self, X):
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        return np.column_stack([self._hidden(X, k) @ self.coef_[k] + self.intercept_[k]
                                for k in range(self.coef_.shape[0])])

    def _problems(self, X, y):
        """Output-layer problems given the fitted hidden layer (conditional posterior)."""
        from .latent import LatentDesign, noise_entries

        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        targets = self._encode_targets(y, X.shape[0])
        loss = self._make_loss()
        entries = noise_entries(X, self.noise_)
        problems, thetas = [], []
        for k in range(targets.shape[1]):
            alpha = np.vstack([self.hidden_weights_[k], self.hidden_bias_[k]])
            design = LatentDesign(X, entries, alpha, self.fit_intercept)
            problems.append(Problem(design, loss, loss.check_target(targets[:, k], X.shape[0])))
            thetas.append(design.pack(self.coef_[k], self.intercept_[k]))
        return problems, thetas

    def _posterior_feature_names(self):
        return [f"h{k}" for k in range(self.n_hidden)]

    def sample_posterior(self, X, y, **kwargs):
        """Gibbs sampling of the output weights **given the fitted hidden layer**.

        This is the conditional posterior ``exp(-J(w, b | alpha_hat))`` of the output layer
        (with the full-covariance noise term of the hidden features), not a posterior over
        the hidden weights. Arguments as for :meth:`DropoutSVC.sample_posterior`; the
        ``feature`` coordinate names the hidden units ``h0, h1, ...``. ``lp`` includes the constant
        ``alpha_penalty ||alpha||_F^2`` so that it is comparable with ``objective_``.
        """
        idata = super().sample_posterior(X, y, **kwargs)
        # lp = -J including the (here constant) hidden-layer penalty, as in objective_
        penalty = self.alpha_penalty * np.sum(self.hidden_weights_**2, axis=(1, 2))
        lp = idata.sample_stats["lp"]
        idata.sample_stats["lp"] = lp - (penalty if "class" in lp.dims else penalty[0])
        for group in idata.groups():
            idata[group].attrs["conditional_on_hidden_layer"] = 1
        return idata

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags


class DropoutLatentSVC(_DropoutLatentClassifier):
    __doc__ = f"""One-hidden-layer SVM under expected feature noise (latent Dropout-SVM).

    Hidden features ``g_k(x) = sigmoid(alpha_k . x + c_k)``; the noise reaches them through
    a first-order Taylor expansion (full ``K x K`` covariance per example), and the
    output layer minimises the Dropout-SVM objective on them::

        J = ||w||^2 + alpha_penalty ||alpha||_F^2 + C sum_n (E zeta_n + sqrt(E zeta_n^2))

    by alternating IRLS in ``(w, b)`` and L-BFGS in ``alpha`` (:mod:`bayesdrop.latent`).

    Parameters
    ----------
    C : float, default=1.0
    {_NOISE_DOC}
    margin : float, default=1.0
    {_LATENT_DOC}

    Attributes
    ----------
    classes_, coef_ (n_problems, n_hidden), intercept_, hidden_weights_
    (n_problems, n_features, n_hidden), hidden_bias_ (n_problems, n_hidden), n_iter_,
    objective_ (histories of J after each half-step, non-increasing), converged_, noise_,
    loss_, fit_time_

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> X, y = make_moons(200, noise=0.1, random_state=0)
    >>> clf = DropoutLatentSVC(C=1.0, noise_level=0.1, n_hidden=10, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.95)
    True
    """

    def __init__(self, C=1.0, *, noise="dropout", noise_level=None, margin=1.0,
                 n_hidden=20, alpha_penalty=0.01, max_iter=50, w_iter=100, alpha_iter=20,
                 tol=1e-6, fit_intercept=True, random_state=None):
        self.C = C
        self.noise = noise
        self.noise_level = noise_level
        self.margin = margin
        self.n_hidden = n_hidden
        self.alpha_penalty = alpha_penalty
        self.max_iter = max_iter
        self.w_iter = w_iter
        self.alpha_iter = alpha_iter
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.random_state = random_state

    def _make_loss(self):
        return HingeLoss(self.C, self.margin)


class DropoutLatentLogisticRegression(_DropoutLatentClassifier):
    __doc__ = f"""One-hidden-layer logistic regression under expected feature noise.

    As :class:`DropoutLatentSVC` with the Polya-Gamma bound of the expected logistic loss
    (``h = 2C``) in the output layer.

    Parameters
    ----------
    C : float, default=1.0
    {_NOISE_DOC}
    {_LATENT_DOC}

    Examples
    --------
    >>> from sklearn.datasets import make_moons
    >>> X, y = make_moons(200, noise=0.1, random_state=0)
    >>> clf = DropoutLatentLogisticRegression(C=1.0, noise_level=0.1, n_hidden=10,
    ...                                       random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.95)
    True
    """

    def __init__(self, C=1.0, *, noise="dropout", noise_level=None, n_hidden=20,
                 alpha_penalty=0.01, max_iter=50, w_iter=100, alpha_iter=20, tol=1e-6,
                 fit_intercept=True, random_state=None):
        self.C = C
        self.noise = noise
        self.noise_level = noise_level
        self.n_hidden = n_hidden
        self.alpha_penalty = alpha_penalty
        self.max_iter = max_iter
        self.w_iter = w_iter
        self.alpha_iter = alpha_iter
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.random_state = random_state

    def _make_loss(self):
        return LogisticLoss(self.C)

    def predict_proba(self, X):
        """Class probabilities ``sigmoid(w.g(x) + b)`` (one-vs-rest normalised)."""
        return sigmoid_proba(self._decision(X))

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))
