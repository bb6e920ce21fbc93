"""scikit-learn estimators of the one-hidden-layer (latent) models.

Thin layers over the one-vs-rest engine (:mod:`bayesdrop.estimators._base`); each binary
problem is fitted by L-BFGS in all parameters (:func:`bayesdrop.solvers.lbfgs.fit_latent`)
or by the alternating solver (:func:`bayesdrop.solvers.alternating.fit_latent`) on the
latent design of :mod:`bayesdrop.model.latent`.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit
from threadpoolctl import threadpool_limits
from sklearn.utils.validation import check_is_fitted

from .._validation import (MAX_ABS, MAX_ITER, check_bool, check_C, check_fits_in_memory,
                           check_random_state, check_scalar, reject_dask)
from ..model.latent import LatentDesign, noise_entries
from ..model.losses import HingeLoss, LogisticLoss
from ..model.noise import make_noise
from ..model.problem import Problem, drop_zero_weights
from ..solvers import lbfgs
from ..solvers.alternating import fit_latent
from ._base import BinaryFit, warns_at_caller
from .linear import _NOISE_DOC, _DropoutClassifier

__all__ = ["DropoutLatentSVC", "DropoutLatentLogisticRegression"]

_LATENT_DOC = """
    n_hidden : int, default=20
        Number ``K`` of sigmoid hidden units (per one-vs-rest problem).
    alpha_penalty : float, default=0.01
        Weight of ``||alpha||_F^2`` (hidden weights; hidden biases are not penalised).
    solver : {{"auto", "lbfgs", "alternating"}}, default="auto"
        The optimiser. ``"lbfgs"``: L-BFGS in all parameters at once
        (:func:`bayesdrop.solvers.lbfgs.fit_latent`, compiled for dense ``X``; ``J`` must
        be smooth: the logistic
        loss, or the hinge loss under noise). ``"alternating"``: IRLS ``w``-steps and
        L-BFGS ``alpha``-steps in turn (:func:`bayesdrop.solvers.alternating.fit_latent`).
        ``"auto"``: ``"lbfgs"`` where it applies (measured on digits: 2.4-4x faster, to
        as low or a lower ``J``), else ``"alternating"``.
    max_iter : int or None, default=None
        L-BFGS iterations (default 5000), or alternations (default 50).
    w_iter : int, default=100
        IRLS iterations per ``w``-step (the alternation; the first ``w``-step of L-BFGS).
    alpha_iter : int, default=20
        L-BFGS iterations per ``alpha``-step (the alternation).
    tol : float, default=1e-6
        Stop when an alternation, or 20 L-BFGS iterations, lower ``J`` by less than
        ``tol * max(|J|, 1)``.
    fit_intercept : bool, default=True
    random_state : None, int or numpy.random.Generator
        Initial hidden weights ``N(0, (2 / r)^2)``, ``r`` the root mean square of the
        rows' norms ``||x_n||`` (:func:`bayesdrop.solvers.alternating.initial_alpha`; one
        generator spawned per one-vs-rest problem).
    n_jobs : int or None, default=None
        Threads fitting the one-vs-rest problems at once (joblib; ``-1``: all cores).
        The dense L-BFGS loop runs compiled without the GIL, so the threads share the
        cores (digits, 10 problems: 1.8-1.9x on 2 cores); every BLAS runs on one thread
        during the fit. Same result for any value.
"""


class _DropoutLatentClassifier(_DropoutClassifier):
    """Shared code of the one-hidden-layer classifiers (:mod:`bayesdrop.model.latent`)."""

    linalg = "cholesky"

    def _solvers(self):
        """The output layer given the hidden layer (posterior mode) is fitted by IRLS."""
        return "irls", "cholesky"

    def _latent_solver(self, noise):
        """``"lbfgs"`` or ``"alternating"`` (see the ``solver`` parameter)."""
        if self.solver not in ("auto", "lbfgs", "alternating"):
            raise ValueError("solver must be 'auto', 'lbfgs' or 'alternating', got "
                             f"{self.solver!r}")
        smooth = self._make_loss().smooth or noise.level > 0
        if self.solver == "lbfgs" and not smooth:
            raise ValueError("solver='lbfgs' needs a smooth J: the logistic loss, or the "
                             "hinge loss under noise; use solver='alternating'")
        if self.solver == "auto":
            return "lbfgs" if smooth else "alternating"
        return self.solver

    def _check_params(self):
        check_C(self.C)
        check_scalar(self.n_hidden, "n_hidden", min_val=1, integer=True)
        check_scalar(self.alpha_penalty, "alpha_penalty", min_val=0.0, max_val=MAX_ABS)
        if self.max_iter is not None:
            check_scalar(self.max_iter, "max_iter", min_val=1, max_val=MAX_ITER, integer=True)
        check_scalar(self.w_iter, "w_iter", min_val=1, max_val=MAX_ITER, integer=True)
        check_scalar(self.alpha_iter, "alpha_iter", min_val=1, max_val=MAX_ITER, integer=True)
        check_bool(self.fit_intercept, "fit_intercept")
        check_scalar(self.tol, "tol", min_val=0.0, include_min=False)
        return make_noise(self.noise, self.noise_level)

    def _fit_problems(self, X, targets, noise, weights=None):
        if weights is not None and not np.all(weights > 0):
            X, targets, noise, weights = drop_zero_weights(X, targets, noise, weights)
        loss = self._make_loss().weighted(weights)
        rng = check_random_state(self.random_state)
        K = self.n_hidden
        # the hidden units' per-example scores and their work copies: a clear error before
        # a MemoryError deep in the solver
        check_fits_in_memory(8.0 * 4 * K * (X.shape[0] + X.shape[1] + 2), "n_hidden",
                             f"{K} hidden units' scores and parameters",
                             "use fewer hidden units")
        n_problems = targets if isinstance(targets, (int, np.integer)) else targets.shape[1]
        # one generator per problem, spawned up front: the same fit for any n_jobs
        rngs = rng.spawn(int(n_problems))

        solver = self._latent_solver(noise)

        def fit_binary(k, yk, start):
            y = loss.check_target(yk, X.shape[0])
            kw = {"n_hidden": K, "alpha_penalty": self.alpha_penalty,
                  "fit_intercept": self.fit_intercept, "random_state": rngs[k],
                  "w_iter": self.w_iter, "tol": self.tol}
            if solver == "lbfgs":
                res = lbfgs.fit_latent(X, y, loss, noise, max_iter=self.max_iter or 5000,
                                       **kw)
            else:
                res = fit_latent(X, y, loss, noise, max_iter=self.max_iter or 50,
                                 alpha_iter=self.alpha_iter, **kw)
            intercept = res.theta[K] if self.fit_intercept else 0.0
            return BinaryFit(res.theta[:K], intercept, res.n_iter, res.converged,
                             res.objective, {"hidden_weights_": res.alpha[:-1],
                                             "hidden_bias_": res.alpha[-1]})

        self.noise_, self.loss_ = noise, self._make_loss()
        # every BLAS on one thread, sequential or not: the compiled L-BFGS loop calls
        # scipy's BLAS on one thread anyway (bayesdrop._threads), n_jobs threads are the
        # parallelism, and the (non-convex) fit is then the same for any n_jobs
        with threadpool_limits(1):
            return self.fit_problems(targets, fit_binary, K)

    def _hidden(self, X, k):
        return expit(np.asarray(X @ self.hidden_weights_[k]) + self.hidden_bias_[k])

    def transform(self, X):
        """Hidden features ``sigmoid(X alpha_k + c_k)`` of every one-vs-rest problem.

        Returns
        -------
        ndarray of shape (n_samples, n_problems * n_hidden)
        """
        check_is_fitted(self)
        X = self._validate_X(X)
        return np.hstack([self._hidden(X, k) for k in range(self.coef_.shape[0])])

    def _decision_validated(self, X):
        return np.column_stack([self._hidden(X, k) @ self.coef_[k] + self.intercept_[k]
                                for k in range(self.coef_.shape[0])])

    def _problems(self, X, y, sample_weight=None):
        """Output-layer problems given the fitted hidden layer (conditional posterior)."""
        check_is_fitted(self)
        X = self._validate_X(X)
        targets = self._encode_targets(y, X.shape[0])
        weights = self._example_weights(y, sample_weight, X.shape[0])
        if weights is not None and not np.all(weights > 0):
            X, targets, _, weights = drop_zero_weights(X, targets, "none", weights)
        loss = self._make_loss().weighted(weights)
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

    def _posterior_transform(self):
        """The posterior's coefficients act on problem ``k``'s hidden features."""
        return self._hidden

    def _mode(self, problem, theta):
        """``argmin J`` of the output layer given the fitted hidden layer (a convex
        problem), from the fitted output weights: its own solver at its default settings
        (``solver``, ``max_iter`` and ``tol`` of this estimator are those of the joint,
        non-convex fit)."""
        from ..solvers import fit_problem

        return fit_problem(problem, theta, solver="auto", tol=1e-8, max_iter=1000,
                           warn=False)

    @warns_at_caller
    def fit(self, X, y, sample_weight=None):
        """Fit the hidden and output layers (see the class docstring; ``sample_weight`` as
        in :meth:`DropoutSVC.fit`). A dask ``X`` raises a ``TypeError``: the latent fit
        needs ``X`` in memory (the prediction methods do work chunk by chunk on one)."""
        reject_dask(X, "X", f"{type(self).__name__}.fit")
        return super().fit(X, y, sample_weight)

    def sample_posterior(self, X, y, **kwargs):
        """Gibbs sampling of the output weights **given the fitted hidden layer**.

        This is the conditional posterior ``exp(-J(w, b | alpha_hat))`` of the output layer
        (with the full-covariance noise term of the hidden features), not a posterior over
        the hidden weights. Arguments as for :meth:`DropoutSVC.sample_posterior`; the
        ``feature`` coordinate names the hidden units ``h0, h1, ...``. ``lp`` includes the constant
        ``alpha_penalty ||alpha||_F^2`` so that it is comparable with ``objective_``.
        """
        reject_dask(X, "X", f"{type(self).__name__}.sample_posterior")
        idata = super().sample_posterior(X, y, **kwargs)
        # lp = -J including the (here constant) hidden-layer penalty, as in objective_
        penalty = self.alpha_penalty * np.sum(self.hidden_weights_**2, axis=(1, 2))
        for group in ("sample_stats", "mode"):
            lp = idata[group]["lp"]
            idata[group]["lp"] = lp - (penalty if "class" in lp.dims else penalty[0])
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

    by L-BFGS in all parameters under noise, or by alternating IRLS in ``(w, b)`` and
    L-BFGS in ``alpha`` (``solver``; :mod:`bayesdrop.model.latent`).

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
                 n_hidden=20, alpha_penalty=0.01, solver="auto", max_iter=None, w_iter=100,
                 alpha_iter=20, tol=1e-6, fit_intercept=True, random_state=None,
                 n_jobs=None):
        self.C = C
        self.noise = noise
        self.noise_level = noise_level
        self.margin = margin
        self.n_hidden = n_hidden
        self.alpha_penalty = alpha_penalty
        self.solver = solver
        self.max_iter = max_iter
        self.w_iter = w_iter
        self.alpha_iter = alpha_iter
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.n_jobs = n_jobs

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
                 alpha_penalty=0.01, solver="auto", max_iter=None, w_iter=100, alpha_iter=20,
                 tol=1e-6, fit_intercept=True, random_state=None, n_jobs=None):
        self.C = C
        self.noise = noise
        self.noise_level = noise_level
        self.n_hidden = n_hidden
        self.alpha_penalty = alpha_penalty
        self.solver = solver
        self.max_iter = max_iter
        self.w_iter = w_iter
        self.alpha_iter = alpha_iter
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _make_loss(self):
        return LogisticLoss(self.C)

    def predict_proba(self, X):
        """Class probabilities ``sigmoid(w.g(x) + b)`` (one-vs-rest normalised; a lazy
        dask array for a dask ``X``)."""
        return self._proba(X)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        return self._proba(X, log=True)

