"""scikit-learn estimators of the linear models: thin layers over the one-vs-rest engine
(the classifiers here, :class:`~bayesdrop.estimators.regressor.DropoutSVR` in
:mod:`.regressor`).

All three minimise (MATH.md section 2)::

    J(w, b) = ||w||^2 + 2C sum_n (bound on) E_p[loss(x~_n, y_n; w, b)]

which has the minimiser of scikit-learn's ``1/2 ||w||^2 + C sum loss`` at zero noise, so
``C`` means what it means for ``SVC(kernel="linear")``, ``LogisticRegression`` and
``LinearSVR`` (with an unpenalised intercept). Multiclass problems are solved one-vs-rest
by :mod:`bayesdrop.estimators._base`; each binary problem is fitted by
:func:`bayesdrop.solvers.irls.fit` and sampled by :func:`bayesdrop.samplers.sample`.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.utils.validation import _num_samples, check_is_fitted

from .._arviz import convergence_warning, to_inference_data
from .._arviz import prefetch as prefetch_arviz
from .._validation import (MAX_ITER, check_bool, check_C, check_n_jobs, check_scalar,
                           check_verbose)
from ..model.losses import HingeLoss, LogisticLoss
from ..model.noise import make_noise
from ..model.problem import Problem, drop_zero_weights
from ..posterior import maybe_log_likelihood, sample_problems, store_log_likelihood
from ..predictive import check_posterior_of, vote_fractions
from ..linalg.backend import RowBackend
from ..solvers import check_solver, first_newton_runs, fit_path, fit_problem, fit_rows
from ._base import (BinaryFit, LinearModel, OneVsRestClassifier, class_index, column_vector,
                    warns_at_caller)
from ._dask import dask_problems, fit_dask
from ._placement import placement

__all__ = ["DropoutSVC", "DropoutLogisticRegression"]


def row_index(X):
    """The row labels of a pandas ``X`` (its ``index``), else None (a list's ``index`` is
    a method, not labels).

    Examples
    --------
    >>> import pandas as pd
    >>> row_index(pd.DataFrame({"a": [1, 2]}, index=["r", "s"])).tolist(), row_index([[1]])
    (['r', 's'], None)
    """
    index = getattr(X, "index", None)
    return None if index is None or callable(index) else index

_NOISE_DOC = """
    noise : {"dropout", "none", "multiplicative", "gaussian", "laplace", "poisson"} or \
NoiseModel, default="dropout"
        Corrupting distribution (see :mod:`bayesdrop.model.noise`).
    noise_level : float or None, default=None
        Its level: ``q`` for dropout, ``a`` for multiplicative, ``sigma`` for Gaussian,
        ``beta`` for Laplace, ``kappa`` for Poisson. ``0`` means clean data. ``None``
        keeps the level of a noise object and means 0.1 for a named noise (1 for
        Poisson): in 5-fold CV on five standard data sets 0.05-0.1 lost least accuracy
        on average (``benchmarks/results/defaults.txt``); sparse text gains from more
        noise (0.5), so tune ``noise_level`` (e.g. ``GridSearchCV``) when it matters. A
        number replaces the level of a noise object, so that ``GridSearchCV`` over
        ``noise_level`` works for either.
"""

_CLASS_WEIGHT_DOC = """class_weight : dict, "balanced" or None, default=None
        Multiplies the weight of every example of class ``k`` by ``class_weight[k]``
        (``C_n = C class_weight[y_n] sample_weight_n``), as in scikit-learn;
        ``"balanced"`` uses ``n_samples / (n_classes * bincount(y))``.
"""

_SOLVER_DOC = """
    fit_intercept : bool, default=True
        Fit an unpenalised, uncorrupted intercept.
    solver : {"auto", "newton", "irls", "smoothing", "dual"}, default="auto"
        The optimiser of ``J`` (:mod:`bayesdrop.solvers`): Newton's method with a line
        search (:mod:`bayesdrop.solvers.newton`), variational IRLS
        (:mod:`bayesdrop.solvers.irls`), or -- the zero-noise hinge and
        epsilon-insensitive losses only -- Newton on the smoothed ``J`` with an exact
        polish (:mod:`bayesdrop.solvers.smoothing`) or, the hinge loss only, SMO on the
        dual with an exact polish (:mod:`bayesdrop.solvers.dual`). ``"auto"`` uses
        Newton whenever ``J`` is twice differentiable (the logistic loss, and the hinge /
        epsilon-insensitive losses under non-zero noise); at zero noise the dual for the
        hinge loss with an intercept up to 1000 examples (and up to 5000 beyond 2000
        parameters), else the smoothing solver up to 2000 parameters; IRLS (with its
        exact active-set polish) otherwise (:func:`bayesdrop.solvers.choose_solver`).
        All reach the same optimum.
    linalg : {"auto", "cholesky", "woodbury", "cg"}, default="auto"
        The linear-algebra back-end: dense Cholesky, the Woodbury dual (IRLS only,
        ``D > N``), or matrix-free conjugate gradients (never forms a ``D x D``
        matrix). ``"auto"`` uses Cholesky up to 2000 parameters.
    tol : float, default=1e-8
        Newton: stop after the step whose decrement ``lambda^2 / 2`` (an estimate of
        ``J - J*``) is below ``tol * max(|J|, 1)``. IRLS: relative decrease of ``J`` (and
        ``sqrt(tol)`` relative change of the parameters).
    max_iter : int, default=1000
        Maximum iterations (Newton or IRLS steps) per binary problem.
    accelerate : bool, default=True
        SQUAREM acceleration of the IRLS map, monotone in ``J`` (IRLS only).
    warm_start : bool, default=False
        Start from the previous solution when refitting on data of the same shape.
    verbose : int, default=0
        ``1``: a progress bar over the binary (one-vs-rest) problems (tqdm; quiet under
        ``CI``); ``2``: also one line per problem (iterations, ``J``, convergence, time).
        Sequential fits only (``n_jobs`` of 1 or None).
"""

_N_JOBS_DOC = """n_jobs : int or None, default=None
        Threads fitting the one-vs-rest problems of a multiclass fit at once (joblib;
        ``-1``: all cores). Threads, not processes: the compiled solver loops and BLAS
        release the GIL, and the problems share one design. Same result for any value.
"""


def _binary_fit(design, result):
    """The :class:`BinaryFit` of a :class:`~bayesdrop.solvers.SolverResult` on ``design``."""
    coef, intercept = design.split(result.theta)
    return BinaryFit(coef, intercept, result.n_iter, result.converged, result.objective,
                     {"solver_": result.solver})


class _DropoutLinearModel(LinearModel):
    """Shared code of the dropout models: parameters, noise, one IRLS fit per problem."""

    def _check_params(self):
        check_C(self.C)
        check_scalar(self.tol, "tol", min_val=0.0, include_min=False)
        check_scalar(self.max_iter, "max_iter", min_val=1, max_val=MAX_ITER, integer=True)
        check_bool(self.fit_intercept, "fit_intercept")
        check_verbose(getattr(self, "verbose", 0))
        self._solver, self._linalg = self._solvers()
        return make_noise(self.noise, self.noise_level)

    def _binary_problems(self, X, targets, noise, loss, weights=None):
        """One :class:`~bayesdrop.model.problem.Problem` per target column, all sharing
        one design (and its noise variances); ``weights`` from :meth:`_example_weights`
        (examples of weight 0 are dropped)."""
        if weights is not None and not np.all(weights > 0):
            X, targets, noise, weights = drop_zero_weights(X, targets, noise, weights)
        problems = []
        for k in range(targets.shape[1]):
            if not problems:
                problems.append(Problem.create(X, targets[:, k], loss, noise,
                                               self.fit_intercept, sample_weight=weights))
            else:
                y = loss.check_target(targets[:, k], X.shape[0])
                problems.append(problems[0]._replace(y=y))
        return problems

    def _fit_problems(self, X, targets, noise, weights=None):
        """Fit one problem per column of ``targets``; set the fitted attributes."""
        loss = self._make_loss()
        return self._fit_built(self._binary_problems(X, targets, noise, loss, weights),
                               noise, loss)

    def _fit_path(self, X, y, sample_weight, Cs, previous=None):
        """Fit at each ``C`` of ``Cs`` in turn by :func:`~bayesdrop.solvers.fit_path`
        (each problem's fits warm-started along ``Cs``; the first from ``previous[0]``,
        else from the current ``coef_`` if ``warm_start``), the inputs validated and the
        problems built once; yields ``self``, fitted, at each ``C``.

        ``previous``: the fits of a neighbouring path at the same ``Cs``, a
        ``(coef_, intercept_)`` per ``C`` (the previous noise level's, on the CV path:
        the parallelogram starts of ``fit_path``). The path of the CV estimators
        (:mod:`.cv`). It sets ``self.C`` and ``self.warm_start`` (the CV estimators call
        it on a private copy)."""
        start_time = time.perf_counter()
        X, targets, noise, weights = self._prepared(X, y, sample_weight)
        losses = []
        for C in Cs:
            self.C = float(C)
            losses.append(self._make_loss())
        problems = self._binary_problems(X, targets, noise, losses[0], weights)
        n_coef = problems[0].design.n_features
        warm = (self._warm_start_points(len(problems), n_coef) if previous is None
                else previous[0])

        def row(fit, k):  # problem k's (coef, intercept) of a fit
            return np.atleast_2d(fit[0])[k], float(np.atleast_1d(fit[1])[k])

        paths = []
        for k, problem in enumerate(problems):
            pack = problem.design.pack
            paths.append(fit_path(
                problem, [loss.C for loss in losses],
                None if warm is None else pack(*row(warm, k)),
                None if previous is None else np.array([pack(*row(f, k)) for f in previous]),
                solver=self._solver, linalg=self._linalg, tol=self.tol,
                max_iter=self.max_iter, accelerate=self.accelerate))
        share = (time.perf_counter() - start_time) / len(losses)
        for i, loss in enumerate(losses):
            self.C, self.noise_, self.loss_ = float(Cs[i]), noise, loss
            self._finish(self._store_fits([_binary_fit(pr.design, path[i])
                                           for pr, path in zip(problems, paths)],
                                          n_coef, share))
            self.warm_start = True
            yield self

    def _finish(self, fitted):
        """The fitted estimator as :meth:`fit` returns it (overridden by the regressor,
        which unstacks its one problem)."""
        return fitted

    def _fit_built(self, problems, noise, loss):
        """Fit the built binary ``problems``; set the fitted attributes."""

        options = {"solver": self._solver, "linalg": self._linalg, "tol": self.tol,
                   "max_iter": self.max_iter}
        # from zero, one after the other: the first Newton runs of all the problems in one
        # compiled call (first_newton_runs), each fit going on from its own
        firsts = None
        if (check_n_jobs(getattr(self, "n_jobs", None)) in (None, 1)
                and self._warm_start_points(len(problems),
                                            problems[0].design.n_features) is None):
            firsts = first_newton_runs(problems, **options)

        def fit_binary(k, _, start):
            design = problems[k].design
            theta0 = None if start is None else design.pack(*start)
            first = None if firsts is None or theta0 is not None else firsts[k]
            return _binary_fit(design, fit_problem(
                problems[k], theta0, accelerate=self.accelerate, first=first, **options))

        self.noise_ = noise
        self.loss_ = loss
        if hasattr(self, "n_passes_"):  # set by a fit on dask data only
            del self.n_passes_
        return self.fit_problems(len(problems), fit_binary, problems[0].design.n_features)

    def _sample_inputs_on_cluster(self, X, y, sample_weight=None):
        """The fitted model's binary problems on a dask ``(X, y)`` as row back-ends
        (:func:`._dask.dask_problems`: the examples stay on the cluster), its estimates
        ``theta_hat``, and what the InferenceData keeps of the examples (nothing)."""
        problems = dask_problems(self, X, y, sample_weight)
        coef, intercept = np.atleast_2d(self.coef_), np.atleast_1d(self.intercept_)
        thetas = [np.append(coef[k], intercept[k])[: pr.n_params]
                  for k, pr in enumerate(problems)]
        return problems, thetas, {"y": None}

    def _sample_inputs_in_memory(self, X, y, sample_weight=None):
        """The fitted model's binary :class:`~bayesdrop.model.problem.Problem` objects on
        ``(X, y)``, its estimates ``theta_hat`` there, and what the InferenceData keeps of
        the examples."""
        y = column_vector(y, _num_samples(X))  # a column y: as fit, with its warning
        problems, thetas = self._problems(X, y, sample_weight)
        weights = self._example_weights(y, sample_weight, _num_samples(X))
        kept = None if weights is None or np.all(weights > 0) else np.flatnonzero(weights > 0)
        return problems, thetas, dict(y=self._observed(y), example_index=row_index(X),
                                      kept=kept)

    def _problems(self, X, y, sample_weight=None):
        """The fitted model's binary problems on ``(X, y)`` and its estimates ``theta_hat``."""
        check_is_fitted(self)
        X = self._validate_X(X)
        targets = self._encode_targets(y, X.shape[0])
        weights = self._example_weights(y, sample_weight, X.shape[0])
        problems = self._binary_problems(X, targets, self.noise_, self._make_loss(), weights)
        coef, intercept = np.atleast_2d(self.coef_), np.atleast_1d(self.intercept_)
        thetas = [pr.design.pack(coef[k], intercept[k]) for k, pr in enumerate(problems)]
        return problems, thetas

    def sample_posterior(self, X, y, *, sample_weight=None, draws=1000, tune=500, chains=4, thin=1,
                         random_state=None, progressbar=True, init="mode", cores=None,
                         store_augmentation=False, overrelax=-0.5, log_likelihood=True):
        """Sample the pseudo-posterior ``exp(-J(w, b))`` on ``(X, y)`` by Gibbs.

        Each binary (one-vs-rest) problem is sampled by :func:`bayesdrop.samplers.sample`:
        augmentation variables and ``theta`` drawn in turn from the same weighted
        least-squares system that IRLS solves. The chains are independent processes by
        default; the same ``random_state`` gives the same draws either way. On dense data
        the compiled sweep adds exact Metropolis-Hastings moves (from the Laplace
        approximation where ``J`` is smooth) and, for the hinge and epsilon-insensitive
        losses without noise, slice moves where tuning shows the sweep alone creeping
        (large ``C``; see :func:`bayesdrop.samplers.sample`'s ``mh``).

        **The estimator is not changed** (only :meth:`fit` sets fitted attributes): the
        mode of ``J`` on ``(X, y)`` -- where the chains start -- is found by the
        estimator's solver warm-started at the fitted coefficients (on the training data
        it is the fitted model itself) and returned in the group ``mode`` (``coef``,
        ``intercept``, ``lp = -J``), which :mod:`bayesdrop.diagnostics` compares the draws
        with. An estimator that was never fitted is fitted on ``(X, y)`` first, as
        :meth:`fit` would.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional
            Scales each example's term of ``J`` (and so of the pseudo-likelihood), as in
            :meth:`fit`; an integer weight is the same as that many copies of the example.
            ``class_weight`` applies as in :meth:`fit`.
        draws : int, default=1000
            Kept draws per chain.
        tune : int, default=500
            Burn-in sweeps per chain.
        chains : int, default=4
        thin : int, default=1
        random_state : None, int, SeedSequence or numpy.random.Generator
        progressbar : bool, default=True
            Quiet anyway when the ``CI`` environment variable is set.
        init : {"mode", "overdispersed"}, ndarray or InferenceData, default="mode"
            Start at the point estimate (the mode), or at it plus three times a draw from
            the Gaussian of the IRLS system (see :func:`bayesdrop.samplers.sample`); an
            array: every problem's chains there. The InferenceData of an earlier
            ``sample_posterior`` of this estimator (same classes, features and
            ``chains``): each chain goes on from its last draw, with ``tune=0`` a
            continuation of those chains (new random numbers; join the two posteriors with
            ``xarray.concat([first.posterior, second.posterior], "draw")``).
        cores : int, optional
            Parallel chain processes (default ``min(chains, cpu_count)``; 1: in sequence).
        store_augmentation : bool, default=False
            Keep full traces of the augmentation variables; their posterior means per
            example are always kept (group ``augmentation_mean``).
        overrelax : float in (-1, 1), default=-0.5
            Over-relaxation of the Gaussian step (distribution-preserving; 0 gives the
            plain Gibbs sampler); see :func:`bayesdrop.samplers.gibbs.step`.
        log_likelihood : bool, default=True
            Store the pointwise log pseudo-likelihood of every example under every draw
            (group ``log_likelihood``, for ``arviz.loo`` / ``waic`` / ``compare``; see
            :func:`bayesdrop.posterior.pointwise_log_likelihood`). Skipped with a warning
            when it would exceed 5e7 values (pass ``log_likelihood=False`` or thin).

        Returns
        -------
        arviz.InferenceData
            ``posterior`` (``coef`` with dims ``(chain, draw, [class,] feature)``,
            ``intercept``), ``sample_stats`` (``lp = -J``), ``log_likelihood`` (``y``),
            ``observed_data`` (``y``: the labels if numeric, else their index in
            ``classes_``, which the attribute ``classes`` lists, so that ArviZ's
            ``plot_ppc`` reads them), ``augmentation_mean``, ``mode``; the ``example``
            coordinate is the index of a pandas ``X``. Attributes name the loss, ``C``,
            the noise and its level, ``sampling_time`` (wall-clock seconds, tuning
            included) and the library version.
        """
        if not hasattr(self, "coef_"):
            self.fit(X, y, sample_weight=sample_weight)
        problems, thetas, extras = placement(X).sample_inputs(self, X, y, sample_weight)
        lazy = isinstance(problems[0], RowBackend)  # examples on a cluster: no per-example groups
        modes = [self._mode(problem, theta) for problem, theta in zip(problems, thetas)]
        thetas = [res.theta for res in modes]
        inits = None
        if hasattr(init, "posterior"):  # an earlier InferenceData: go on from its chains
            inits = self._last_draws(init, chains, problems)
            init = "mode"
        options = dict(draws=draws, tune=tune, chains=chains, thin=thin, init=init,
                       progressbar=progressbar, overrelax=overrelax)
        if not lazy:
            options.update(cores=cores, store_augmentation=store_augmentation,
                           linalg=self._solvers()[1], on_running=prefetch_arviz,
                           store_log_likelihood=store_log_likelihood(
                               log_likelihood, chains, draws, problems[0].design.n_samples))
        results = sample_problems(problems, thetas, random_state=random_state, inits=inits,
                                  **options)
        classes = getattr(self, "classes_", None)
        class_names = list(classes) if classes is not None and len(problems) > 1 else None
        attrs = {"estimator": type(self).__name__}
        if classes is not None:
            attrs["classes"] = ",".join(str(c) for c in classes)
        if lazy:
            attrs.update(backend="dask", n_chunks=int(problems[0].n_chunks))
        elif log_likelihood:
            extras["log_likelihood"] = maybe_log_likelihood(
                problems, [r.theta for r in results], results)
        idata = to_inference_data(results, loss=self.loss_, noise=self.noise_,
                                  fit_intercept=self.fit_intercept,
                                  feature_names=self._posterior_feature_names(),
                                  class_names=class_names, attrs=attrs,
                                  modes=thetas, mode_lp=[-res.objective[-1] for res in modes],
                                  **extras)
        convergence_warning(idata)
        return idata

    def _last_draws(self, idata, chains, problems):
        """``init=idata`` of :meth:`sample_posterior`: each problem's ``(chains, n_params)``
        starting points, the last draw of each chain of ``idata``'s posterior."""
        post = idata.posterior
        made_by = post.attrs.get("estimator")
        if made_by is not None and made_by != type(self).__name__:
            raise ValueError(f"init: an InferenceData of {made_by}, not of "
                             f"{type(self).__name__}")
        if "coef" not in post or self.fit_intercept != ("intercept" in post):
            raise ValueError("init: the InferenceData's posterior must hold 'coef' and, with "
                             "fit_intercept=True only, 'intercept' (one of sample_posterior's)")
        coef = np.asarray(post["coef"], dtype=float)[:, -1]  # (chain, [class,] feature)
        parts = [coef[:, None, :] if coef.ndim == 2 else coef]
        if self.fit_intercept:
            b = np.asarray(post["intercept"], dtype=float)[:, -1]
            parts.append((b[:, None] if b.ndim == 1 else b)[:, :, None])
        theta = np.concatenate(parts, axis=2)  # (chain, problem, n_params)
        source = problems[0] if isinstance(problems[0], RowBackend) else problems[0].design
        want = (chains, len(problems), source.n_params)
        if theta.shape != want:
            raise ValueError(f"init: its posterior has {theta.shape[0]} chain(s), "
                             f"{theta.shape[1]} problem(s) of {theta.shape[2]} parameters; "
                             f"this call needs {want[0]} (chains=), {want[1]} and {want[2]}")
        return [theta[:, k] for k in range(len(problems))]

    def sample_posterior_predictive(self, X, idata, *, random_state=None, corrupted=False):
        """Posterior predictive draws of ``y`` at ``X``, added to a copy of ``idata``.

        One ``y`` per posterior draw and row (see
        :func:`bayesdrop.predictive.posterior_predictive_draws` for the law), in the
        group ``posterior_predictive`` with dims ``(chain, draw, example)`` -- what
        ``arviz.plot_ppc`` and ``arviz.loo_pit`` read. ``idata`` is not modified.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        idata : arviz.InferenceData
            From :meth:`sample_posterior`.
        random_state : None, int, SeedSequence or numpy.random.Generator
        corrupted : bool, default=False
            Draw at inputs corrupted by the fitted noise model (``noise_``), one
            corrupted copy of ``X`` per posterior draw, instead of at the clean ``X``.

        Returns
        -------
        arviz.InferenceData
        """
        from .._arviz import with_posterior_predictive
        from ..predictive import posterior_predictive_draws

        check_is_fitted(self)
        index = row_index(X)
        X = self._validate_X(X)
        check_posterior_of(self, idata)
        y_rep = posterior_predictive_draws(idata, X,
                                           getattr(self, "classes_", None), random_state,
                                           noise=self.noise_ if corrupted else None,
                                           transform=self._posterior_transform())
        y_rep = self._observed(y_rep)
        return with_posterior_predictive(idata, y_rep, index)

    def _posterior_feature_names(self):
        return getattr(self, "feature_names_in_", None)

    def _posterior_transform(self):
        """The ``transform`` of :func:`bayesdrop.predictive.decision_draws` for this
        model's posteriors: None, the coefficients act on ``X`` itself (the latent models:
        their hidden features)."""

    def _observed(self, y):
        """``y`` as stored in ``observed_data`` and ``posterior_predictive``: the labels
        themselves if numeric, else their index in ``classes_`` (named by the attribute
        ``classes``), so that ArviZ's ``plot_ppc`` / ``loo_pit``, which need numbers,
        read them."""
        y = np.asarray(y)
        classes = getattr(self, "classes_", None)
        if classes is None or classes.dtype.kind in "biuf":
            return y
        return class_index(classes, y.ravel()).reshape(y.shape)

    def _mode(self, problem, theta):
        """``argmin J`` of ``problem`` (in memory, or a row back-end) from ``theta`` (the
        fitted coefficients)."""
        solver, linalg = self._solvers()
        if isinstance(problem, RowBackend):  # SMO and smoothing need the rows in memory
            return fit_rows(problem, theta,
                            solver="auto" if solver in ("dual", "smoothing") else solver,
                            tol=min(float(self.tol), 1e-8), max_iter=self.max_iter,
                            warn=False)
        return fit_problem(problem, theta, solver=solver, linalg=linalg,
                           tol=min(float(self.tol), 1e-8), max_iter=self.max_iter, warn=False)

    def _solvers(self):
        """``(solver, linalg)`` validated (old back-end values of ``solver`` moved)."""
        return check_solver(self.solver, self.linalg)


class _DropoutClassifier(OneVsRestClassifier, _DropoutLinearModel):
    """The dropout classifiers: one binary problem per class (one-vs-rest)."""

    @warns_at_caller
    def fit(self, X, y, sample_weight=None):
        """Minimise ``J`` (one problem per class, one-vs-rest, if multiclass).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional
            Scales each example's loss term: ``J = ||w||^2 + sum_n s_n term_n`` with
            ``s_n = sample_weight_n * class_weight[y_n]``. An integer weight equals that
            many copies of the example; weight 0 removes it. Negative or non-finite
            weights raise a ValueError.

        Returns
        -------
        self
        """
        return placement(X).fit(self, X, y, sample_weight)

    def _fit_in_memory(self, X, y, sample_weight):
        return self._fit_problems(*self._prepared(X, y, sample_weight))

    def _fit_on_cluster(self, X, y, sample_weight):
        return fit_dask(self, X, y, sample_weight)

    def _prepared(self, X, y, sample_weight):
        """``(X, targets, noise, weights)``: the validated inputs of a fit; sets
        ``classes_`` and ``n_features_in_``."""
        noise = self._check_params()
        X, y_idx = self._validate_fit(X, y)
        weights = self._example_weights(y, sample_weight, X.shape[0])
        return X, self._targets(y_idx), noise, weights

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
        X = self._validate_X(X)
        check_posterior_of(self, idata)
        return vote_fractions(idata, X, self._posterior_transform())


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
    {_CLASS_WEIGHT_DOC}
    {_SOLVER_DOC}
    {_N_JOBS_DOC}

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_iter_ : ndarray of shape (n_problems,)
        Iterations (Newton or IRLS steps) of each binary (one-vs-rest) problem.
    solver_ : ndarray of str, shape (n_problems,)
        The optimisers that fitted each problem, joined by ``+`` in the order they ran
        (``"newton"``, ``"irls"``, ``"dual"``, ``"smoothing"``, ``"homotopy"`` on a CV
        path, ``"newton+irls"``, ...; ``"bare"`` where the optimum is ``w = 0``, certified
        before Newton's first step, and ``"newton+bare"`` after its trap check; see the
        ``solver`` parameter).
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
                 class_weight=None, fit_intercept=True, solver="auto", linalg="auto",
                 tol=1e-8, max_iter=1000, accelerate=True, warm_start=False, n_jobs=None,
                 verbose=0):
        self.C = C
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.class_weight = class_weight
        self.noise = noise
        self.noise_level = noise_level
        self.margin = margin
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.linalg = linalg
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
    {_CLASS_WEIGHT_DOC}
    {_SOLVER_DOC}
    {_N_JOBS_DOC}

    Attributes
    ----------
    classes_, coef_, intercept_, n_iter_, solver_, objective_, converged_, noise_, loss_,
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

    def __init__(self, C=1.0, *, noise="dropout", noise_level=None, class_weight=None,
                 fit_intercept=True, solver="auto", linalg="auto", tol=1e-8, max_iter=1000,
                 accelerate=True, warm_start=False, n_jobs=None, verbose=0):
        self.C = C
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.class_weight = class_weight
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
        return LogisticLoss(self.C)

    def predict_proba(self, X):
        """Class probabilities ``sigmoid(w.x + b)`` on clean inputs.

        Multiclass: the one-vs-rest sigmoids normalised to sum to one.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        return self._proba(X)

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        return self._proba(X, log=True)
