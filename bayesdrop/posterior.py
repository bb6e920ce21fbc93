"""Posterior sampling entry points: find the mode, sample, build the InferenceData.

:func:`sample_posterior` is the functional entry point (arrays in, InferenceData out); the
estimators' ``sample_posterior`` methods call :func:`sample_problems` for their binary /
one-vs-rest problems. What is read back from the draws (scores, predictive draws and
probabilities, intervals) is :mod:`bayesdrop.predictive`.
"""

from __future__ import annotations

import warnings

import numpy as np

from ._arviz import convergence_warning, to_inference_data
from ._arviz import prefetch as prefetch_arviz
from ._validation import (as_float_design, check_scalar, encode_labels,
                          seed_sequence)
from .model.losses import make_loss
from .model.noise import make_noise
from .model.objective import terms_many
from .model.problem import Problem
from .samplers.driver import sample
from .samplers.result import truncate
from .linalg.dask_backend import placement_of
from .solvers import fit_problem, fit_rows

__all__ = ["binary_targets", "maybe_log_likelihood", "pointwise_log_likelihood", "sample_posterior",
           "sample_problems", "store_log_likelihood"]


def sample_problems(problems, thetas_hat, *, random_state=None, inits=None, **kwargs):
    """Run :func:`bayesdrop.samplers.sample` on each problem with independent seeds.

    ``thetas_hat[k]`` is the mode of problem ``k`` (``argmin J``), where its chains start
    -- or at ``inits[k]`` (an ``init`` array of shape ``(chains, n_params)``), if given.

    Problem ``k`` gets child ``k`` of the SeedSequence of ``random_state``.

    The problems are sampled one after the other. A Ctrl-C stops the problem being
    sampled (:func:`~bayesdrop.samplers.sample`); in the last one, every problem's result
    is cut to the chains and draws it has (:func:`~bayesdrop.samplers.result.truncate`,
    ``interrupted=True``); in an earlier one, ``KeyboardInterrupt`` is raised at once
    (the later problems would have no draws).

    Returns
    -------
    list of SamplerResult

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss
    >>> from bayesdrop.solvers import irls
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 2)); y = np.sign(X[:, 0])
    >>> problems = [Problem.create(X, y, LogisticLoss(1.0)), Problem.create(X, -y, LogisticLoss(1.0))]
    >>> thetas = [irls.fit(p).theta for p in problems]
    >>> res = sample_problems(problems, thetas, random_state=0, draws=20, tune=5, chains=1,
    ...                       progressbar=False)
    >>> [r.theta.shape for r in res]
    [(1, 20, 3), (1, 20, 3)]
    """
    problems, thetas_hat = list(problems), list(thetas_hat)
    if len(thetas_hat) != len(problems):
        raise ValueError(f"thetas_hat must hold one mode per problem: {len(thetas_hat)} for "
                         f"{len(problems)} problems")
    seeds = seed_sequence(random_state).spawn(len(problems))
    results = []
    for k, (pr, th, seed) in enumerate(zip(problems, thetas_hat, seeds)):
        if inits is not None:
            kwargs["init"] = inits[k]
        results.append(sample(pr, theta_hat=th, random_state=seed, **kwargs))
        if results[-1].interrupted and k < len(problems) - 1:
            # the later problems have no draws: nothing consistent to return, and
            # sampling them would make Ctrl-C wait for their whole chains
            raise KeyboardInterrupt(
                f"sampling interrupted in problem {k + 1} of {len(problems)} (one-vs-rest "
                "classes are sampled one after the other): the posterior needs draws of "
                "every problem, so none is returned")
    if len(results) > 1 and results[-1].interrupted:  # the last one: a common shape
        chains, draws = results[-1].theta.shape[:2]
        results = [truncate(r, chains, draws) for r in results]
    return results


def sample_posterior(X, y, *, loss="logistic", C=1.0, noise="dropout", noise_level=None,
                     fit_intercept=True, sample_weight=None, draws=1000, tune=500, chains=4,
                     thin=1, init="mode", random_state=None, progressbar=True, cores=None,
                     store_augmentation=False, linalg="auto", overrelax=-0.5,
                     feature_names=None, log_likelihood=True, **loss_params):
    """Sample ``exp(-J(w, b))`` for one binary or regression problem (functional API).

    Fits the point estimate (the mode) first (for ``init`` and for the diagnostics), then runs the
    Gibbs sampler (:func:`bayesdrop.samplers.sample`).

    Parameters
    ----------
    X : ndarray, sparse matrix or dask array of shape (n_samples, n_features)
        A row-chunked ``dask.array`` is sampled on its cluster
        (:mod:`bayesdrop.samplers.rows`; ``cores``, ``store_augmentation``, ``linalg``
        and ``log_likelihood`` do not apply, and there are no per-example groups).
    y : array-like of shape (n_samples,)
        Two classes for ``"hinge"`` and ``"logistic"`` (any two labels, as for the
        estimators: the larger one is the positive class ``+1``; ``{-1, +1}`` and
        ``{0, 1}`` both work), reals for ``"epsilon_insensitive"`` and for ``"squared"``
        with ``binary=False``.
    loss : {"hinge", "logistic", "epsilon_insensitive", "squared"}
        ``"squared"`` (MCF-quadratic, ``(C/2) E (y - w.x~ - b)^2``) has no augmentation:
        its ``exp(-J)`` is Gaussian and every sweep is an exact draw of it.
    C : float > 0
    noise, noise_level
        As for the estimators.
    fit_intercept : bool
    sample_weight : array-like of shape (n_samples,), optional
        Scales each example's term of ``J`` (:meth:`bayesdrop.model.losses.Loss.weighted`).
    draws, tune, chains, thin, init, random_state, progressbar, cores,
    store_augmentation, linalg, overrelax
        See :func:`bayesdrop.samplers.sample`.
    feature_names : sequence of str, optional
    log_likelihood : bool, default=True
        Store the group ``log_likelihood`` (see :func:`pointwise_log_likelihood`).
    **loss_params
        ``margin`` (hinge), ``epsilon`` (epsilon-insensitive) or ``binary`` (squared:
        labels, the default, or real targets).

    Returns
    -------
    idata : arviz.InferenceData
        See :func:`bayesdrop._arviz.to_inference_data`; ``posterior.attrs`` also holds
        the point estimate (the minimiser of ``J``, whichever solver found it) as
        ``mode_theta`` and its ``J`` as ``mode_objective``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 2)); y = np.where(X[:, 0] + rng.normal(size=100) > 0, 1, -1)
    >>> idata = sample_posterior(X, y, C=0.5, noise="none", draws=200, tune=50, chains=2,
    ...                          random_state=1, progressbar=False, cores=1)
    >>> idata.posterior["coef"].shape
    (2, 200, 2)
    """
    loss_obj = make_loss(loss, C=C, **loss_params)
    noise_obj = make_noise(noise, noise_level)
    # where the data live (placement_of): a Problem in memory, or the row back-end of a
    # dask X (its examples stay on the cluster: no per-example groups)
    lazy = placement_of(X) == "cluster"
    problem, y_obs, kept, attrs = (_dask_problem if lazy else _memory_problem)(
        X, y, loss_obj, noise_obj, fit_intercept, sample_weight)
    options = dict(draws=draws, tune=tune, chains=chains, thin=thin, init=init,
                   progressbar=progressbar, overrelax=overrelax)
    if lazy:
        fit = fit_rows(problem)
    else:
        fit = fit_problem(problem, None, linalg=linalg)
        options.update(cores=cores, store_augmentation=store_augmentation, linalg=linalg,
                       on_running=prefetch_arviz,
                       store_log_likelihood=store_log_likelihood(
                           log_likelihood, chains, draws, problem.design.n_samples))
    (res,) = sample_problems([problem], [fit.theta], random_state=random_state, **options)
    ll = maybe_log_likelihood([problem], [res.theta], [res]) \
        if log_likelihood and not lazy else None
    attrs.update(mode_theta=fit.theta, mode_objective=fit.objective[-1])
    idata = to_inference_data([res], loss=loss_obj, noise=noise_obj,
                              fit_intercept=fit_intercept, y=y_obs,
                              feature_names=feature_names, log_likelihood=ll, kept=kept,
                              attrs=attrs)
    convergence_warning(idata)
    return idata


def _memory_problem(X, y, loss, noise, fit_intercept, sample_weight):
    """:func:`sample_posterior`'s problem in memory: ``(problem, observed y, kept rows,
    attrs)``."""
    X = as_float_design(X)
    y_obs = np.asarray(y)
    problem = Problem.create(X, binary_targets(y_obs) if loss.binary else y, loss, noise,
                             fit_intercept, sample_weight=sample_weight)
    kept = None
    if sample_weight is not None and problem.design.n_samples < y_obs.shape[0]:
        kept = np.flatnonzero(np.asarray(sample_weight, dtype=float) > 0)
    attrs = {}
    if y_obs.dtype.kind not in "biuf":  # labels as their index (ArviZ's plots need numbers)
        labels, y_obs = np.unique(y_obs, return_inverse=True)
        attrs["classes"] = ",".join(str(c) for c in labels)
    return problem, y_obs, kept, attrs


def _dask_problem(X, y, loss, noise, fit_intercept, sample_weight):
    """:func:`sample_posterior`'s problem on a row-chunked dask ``X``: its row back-end
    (:class:`~bayesdrop.linalg.dask_backend.DaskRows`), ``(problem, None, None, attrs)``."""
    from .linalg.dask_backend import DaskRows, check_dask_design, labels_of

    n, _ = check_dask_design(X)
    positive = labels = None
    if loss.binary:
        labels = labels_of(y, n)
        if labels.shape[0] != 2:
            raise ValueError(f"y must have exactly two classes for the {loss.name} loss, got "
                             f"{labels.shape[0]}")
        positive = labels[1]
    rows = DaskRows(X, y, loss, noise, fit_intercept, sample_weight, positive=positive,
                    labels=labels)
    return rows, None, None, {"backend": "dask", "n_chunks": rows.n_chunks}


#: largest ``draws x examples`` log-likelihood array built without being asked
#: explicitly (8 bytes each: 400 MB)
MAX_LOG_LIKELIHOOD = 50_000_000


def pointwise_log_likelihood(problems, thetas, block=256):
    """``log p(y_n | theta) = -sum_k term_nk(theta_k)``: the pointwise log
    pseudo-likelihood of each example under each draw (one-vs-rest: summed over the
    binary problems, whose pseudo-likelihoods multiply).

    ``exp(-J) = exp(-||w||^2) prod_n exp(-term_n)``, so these are the factors of the
    pseudo-posterior (weighted examples carry their weight, MATH.md / ``docs/weights.md``)
    -- what ``arviz.loo`` / ``waic`` / ``compare`` need. They are not normalised over
    ``y`` (for the hinge and epsilon-insensitive losses no normaliser is part of the
    model), so compare models with the same loss and ``C``.

    Parameters
    ----------
    problems : list of Problem
        All with the same examples.
    thetas : list of ndarray of shape (chains, draws, n_params)
    block : int
        Draws scored at once.

    Returns
    -------
    ndarray of shape (chains, draws, n_samples)

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss
    >>> X = np.array([[1.0], [-1.0]]); y = np.array([1.0, -1.0])
    >>> problem = Problem.create(X, y, LogisticLoss(0.5), fit_intercept=False)
    >>> ll = pointwise_log_likelihood([problem], [np.array([[[2.0]]])])
    >>> bool(np.allclose(ll[0, 0], -np.log1p(np.exp(-2.0))))  # 2C log(1 + e^{-y m})
    True
    """
    block = check_scalar(block, "block", min_val=1, integer=True)
    problems, thetas = list(problems), [np.asarray(t, dtype=np.float64) for t in thetas]
    if not problems or len(thetas) != len(problems):
        raise ValueError(f"thetas must hold the draws of each problem: {len(thetas)} for "
                         f"{len(problems)} problems")
    chains, draws = thetas[0].shape[:2]
    n = problems[0].design.n_samples
    for k, (problem, theta) in enumerate(zip(problems, thetas)):
        shape = (chains, draws, problem.design.n_params)
        if theta.shape != shape or problem.design.n_samples != n:
            raise ValueError(f"thetas[{k}] must have shape {shape} (chains, draws, the "
                             f"problem's parameters) on the same {n} examples, got "
                             f"{theta.shape}")
    out = np.zeros((chains * draws, n))
    for problem, theta in zip(problems, thetas):
        flat = theta.reshape(chains * draws, -1)
        for start in range(0, flat.shape[0], block):
            out[start:start + block] -= terms_many(problem.design, problem.loss, problem.y,
                                                   flat[start:start + block])
    return out.reshape(chains, draws, n)


def maybe_log_likelihood(problems, thetas, results=None):
    """:func:`pointwise_log_likelihood`, or None with a warning above
    :data:`MAX_LOG_LIKELIHOOD` values.

    When every one of ``results`` (the problems' :class:`~bayesdrop.samplers.SamplerResult`)
    kept its pointwise terms during sampling (``store_log_likelihood=True``), they are
    summed instead of being computed again."""
    chains, draws = thetas[0].shape[:2]
    size = chains * draws * problems[0].design.n_samples
    if size > MAX_LOG_LIKELIHOOD:
        warnings.warn(f"the log_likelihood group would hold {size:.3g} values (more than "
                      f"{MAX_LOG_LIKELIHOOD:.0e}): not stored; pass log_likelihood=False, "
                      "fewer draws or thin", UserWarning, stacklevel=3)
        return None
    if results is not None and all(r.log_likelihood is not None for r in results):
        return sum(r.log_likelihood for r in results[1:]) + results[0].log_likelihood
    return pointwise_log_likelihood(problems, thetas)


def store_log_likelihood(log_likelihood, chains, draws, n_samples):
    """Whether the sampler should keep the pointwise terms (wanted and at most
    :data:`MAX_LOG_LIKELIHOOD` values); ``chains`` and ``draws`` checked first, with the
    sampler's messages."""
    chains = check_scalar(chains, "chains", min_val=1, integer=True)
    draws = check_scalar(draws, "draws", min_val=1, integer=True)
    return bool(log_likelihood) and chains * draws * n_samples <= MAX_LOG_LIKELIHOOD


def binary_targets(y, name="y"):
    """Two labels as ``-1`` (the smaller) and ``+1`` (the larger), as the classifiers do.

    Examples
    --------
    >>> binary_targets([0, 1, 1]).tolist(), binary_targets(["no", "yes"]).tolist()
    ([-1.0, 1.0, 1.0], [-1.0, 1.0])
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {y.shape}")
    if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
        raise ValueError(f"{name} contains NaN or infinity")
    labels, idx = encode_labels(y, name)  # as the classifiers encode them
    if labels.shape[0] != 2:
        raise ValueError(f"{name} must hold exactly two classes for a binary loss, got "
                         f"{labels.shape[0]}: {labels[:5].tolist()}")
    return np.where(idx == 1, 1.0, -1.0)
