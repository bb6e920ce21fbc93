"""Posterior sampling entry points and posterior predictive helpers.

:func:`sample_posterior` is the functional entry point (arrays in, InferenceData out); the
estimators' ``sample_posterior`` methods call :func:`sample_problems` for their binary /
one-vs-rest problems. The predictive helpers read the draws back from the InferenceData:

* :func:`decision_draws` -- ``w.x + b`` for every draw;
* :func:`vote_fractions` -- classifiers: the fraction of posterior draws voting for each
  class (binary: ``score > 0``; one-vs-rest: largest score);
* :func:`predictive_interval` -- regression: posterior mean and central interval of the
  regression function ``w.x + b``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from ._arviz import to_inference_data
from ._validation import as_float_design, check_scalar, seed_sequence
from .model.losses import make_loss
from .model.noise import make_noise
from .model.problem import Problem
from .samplers.driver import sample
from .solvers import fit_problem

__all__ = [
    "sigmoid_proba",
    "posterior_predictive_proba",
    "sample_problems",
    "sample_posterior",
    "decision_draws",
    "vote_fractions",
    "predictive_interval",
]


def sample_problems(problems, thetas_hat, *, random_state=None, **kwargs):
    """Run :func:`bayesdrop.samplers.sample` on each problem with independent seeds.

    ``thetas_hat[k]`` is the mode of problem ``k`` (``argmin J``), where its chains start.

    Problem ``k`` gets child ``k`` of the SeedSequence of ``random_state``.

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
    seeds = seed_sequence(random_state).spawn(len(problems))
    return [sample(pr, theta_hat=th, random_state=seed, **kwargs)
            for pr, th, seed in zip(problems, thetas_hat, seeds)]


def sample_posterior(X, y, *, loss="logistic", C=1.0, noise="dropout", noise_level=None,
                     fit_intercept=True, sample_weight=None, draws=1000, tune=500, chains=4,
                     thin=1, init="irls", random_state=None, progressbar=True, cores=None,
                     store_augmentation=False, linalg="auto", overrelax=-0.5,
                     feature_names=None, **loss_params):
    """Sample ``exp(-J(w, b))`` for one binary or regression problem (functional API).

    Fits the IRLS estimate first (for ``init`` and for the diagnostics), then runs the
    Gibbs sampler (:func:`bayesdrop.samplers.sample`).

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
        Two classes for ``"hinge"`` and ``"logistic"`` (any two labels, as for the
        estimators: the larger one is the positive class ``+1``; ``{-1, +1}`` and
        ``{0, 1}`` both work), reals for ``"epsilon_insensitive"``.
    loss : {"hinge", "logistic", "epsilon_insensitive"}
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
    **loss_params
        ``margin`` (hinge) or ``epsilon`` (epsilon-insensitive).

    Returns
    -------
    idata : arviz.InferenceData
        See :func:`bayesdrop._arviz.to_inference_data`; ``posterior.attrs`` also holds
        the IRLS estimate as ``irls_theta``.

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
    X = as_float_design(X)
    y_obs = np.asarray(y)
    if loss_obj.binary:
        y = binary_targets(y_obs)
    problem = Problem.create(X, y, loss_obj, noise_obj, fit_intercept,
                             sample_weight=sample_weight)
    fit = fit_problem(problem, None, linalg=linalg)
    (res,) = sample_problems([problem], [fit.theta], random_state=random_state,
                             draws=draws, tune=tune, chains=chains, thin=thin, init=init,
                             progressbar=progressbar, cores=cores,
                             store_augmentation=store_augmentation, linalg=linalg,
                             overrelax=overrelax)
    return to_inference_data([res], loss=loss_obj, noise=noise_obj,
                             fit_intercept=fit_intercept, y=y_obs,
                             feature_names=feature_names,
                             attrs={"irls_theta": fit.theta, "irls_objective": fit.objective[-1]})


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
    labels, idx = np.unique(y, return_inverse=True)
    if labels.shape[0] != 2:
        raise ValueError(f"{name} must hold exactly two classes for a binary loss, got "
                         f"{labels.shape[0]}: {labels[:5].tolist()}")
    return np.where(idx == 1, 1.0, -1.0)


def _coef_draws(idata):
    post = idata.posterior
    coef = post["coef"].values
    if "intercept" in post:
        b = post["intercept"].values
    else:
        b = np.zeros(coef.shape[:-1])
    return coef, b


def decision_draws(idata, X):
    """Scores ``w.x + b`` of every posterior draw.

    Parameters
    ----------
    idata : arviz.InferenceData
    X : ndarray or sparse matrix of shape (n_samples, n_features)

    Returns
    -------
    ndarray of shape (chain, draw, n_samples) or (chain, draw, n_samples, n_classes)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop import DropoutSVC
    >>> clf = DropoutSVC(noise_level=0.3)
    >>> idata = clf.sample_posterior(X, y, draws=20, tune=10, chains=1, random_state=0,
    ...                              progressbar=False)
    >>> decision_draws(idata, X[:5]).shape
    (1, 20, 5)
    """
    X = as_float_design(X)
    coef, b = _coef_draws(idata)
    if X.shape[1] != coef.shape[-1]:
        raise ValueError(f"X has {X.shape[1]} features, the posterior {coef.shape[-1]}")
    flat = coef.reshape(-1, coef.shape[-1])  # (draws [x classes], features)
    scores = np.asarray(X @ flat.T).T  # (draws [x classes], n)
    scores = scores.reshape(*coef.shape[:-1], X.shape[0]) + b[..., None]
    if coef.ndim == 4:  # (chain, draw, class, n) -> (chain, draw, n, class)
        scores = np.moveaxis(scores, 2, 3)
    return scores


def vote_fractions(idata, X):
    """Fraction of posterior draws that classify each row of ``X`` as each class.

    Binary problems vote ``score > 0`` for the second class; one-vs-rest problems vote
    for the class with the largest score.

    Returns
    -------
    ndarray of shape (n_samples, n_classes), rows summing to one; columns in the order
    of the estimator's ``classes_``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop import DropoutSVC
    >>> clf = DropoutSVC(noise_level=0.3)
    >>> idata = clf.sample_posterior(X, y, draws=20, tune=10, chains=1, random_state=0,
    ...                              progressbar=False)
    >>> V = vote_fractions(idata, X[:5])
    >>> V.shape, bool(np.allclose(V.sum(axis=1), 1))
    ((5, 2), True)
    """
    scores = decision_draws(idata, X)
    if scores.ndim == 3:
        p1 = np.mean(scores > 0, axis=(0, 1))
        return np.column_stack([1.0 - p1, p1])
    k = scores.shape[-1]
    winners = np.argmax(scores, axis=-1).reshape(-1, scores.shape[2])
    counts = np.stack([(winners == c).sum(axis=0) for c in range(k)], axis=1)
    return counts / winners.shape[0]


def sigmoid_proba(scores):
    """Class probabilities from scores, along the last axis.

    Binary (last axis of length 1): ``(1 - sigmoid(f), sigmoid(f))``; one-vs-rest: the
    sigmoids normalised to sum to one. Leading axes (e.g. chain, draw) are kept.

    Examples
    --------
    >>> sigmoid_proba(np.array([[0.0], [np.log(3.0)]])).tolist()
    [[0.5, 0.5], [0.25, 0.75]]
    >>> sigmoid_proba(np.zeros((2, 3))).round(3).tolist()[0]
    [0.333, 0.333, 0.333]
    """
    scores = np.asarray(scores, dtype=float)
    if scores.shape[-1] == 1:
        p1 = expit(scores[..., 0])
        return np.stack([1.0 - p1, p1], axis=-1)
    p = expit(scores)
    return p / p.sum(axis=-1, keepdims=True)


def posterior_predictive_proba(idata, X):
    """Posterior predictive class probabilities from the draws of ``sample_posterior``.

    Logistic loss: the posterior mean of the model's probabilities,
    ``E[sigmoid(w.x + b)]`` (one-vs-rest sigmoids normalised per draw). Other losses (the
    SVMs have no likelihood over classes): the vote fractions of the draws
    (:func:`vote_fractions`).

    Parameters
    ----------
    idata : arviz.InferenceData
    X : ndarray or sparse matrix of shape (n_samples, n_features)

    Returns
    -------
    ndarray of shape (n_samples, n_classes)

    Examples
    --------
    >>> from bayesdrop import DropoutLogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> idata = DropoutLogisticRegression(noise_level=0.3).sample_posterior(
    ...     X, y, draws=50, tune=20, chains=1, random_state=0, progressbar=False)
    >>> P = posterior_predictive_proba(idata, X[:4])
    >>> P.shape, bool(np.allclose(P.sum(axis=1), 1))
    ((4, 2), True)
    """
    if idata.posterior.attrs.get("loss") != "logistic":
        return vote_fractions(idata, X)
    scores = decision_draws(idata, X)
    if scores.ndim == 3:  # binary: one score per draw and example
        scores = scores[..., None]
    return sigmoid_proba(scores).mean(axis=(0, 1))


def predictive_interval(idata, X, prob=0.94):
    """Posterior mean and central ``prob`` interval of the regression function.

    The pseudo-posterior ``exp(-J)`` has no observation-noise model, so the interval is
    that of ``w.x + b`` (a credible band), computed from the draws.

    Returns
    -------
    mean : ndarray of shape (n_samples,)
    interval : ndarray of shape (n_samples, 2)

    Examples
    --------
    >>> from bayesdrop import DropoutSVR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 2)); y = X[:, 0] + 0.1 * rng.normal(size=60)
    >>> idata = DropoutSVR(noise_level=0.2).sample_posterior(
    ...     X, y, draws=50, tune=20, chains=1, random_state=0, progressbar=False)
    >>> mean, band = predictive_interval(idata, X[:3], prob=0.9)
    >>> band.shape, bool(np.all(band[:, 0] <= mean) and np.all(mean <= band[:, 1]))
    ((3, 2), True)
    """
    prob = check_scalar(prob, "prob", min_val=0.0, max_val=1.0, include_min=False,
                        include_max=False)
    scores = decision_draws(idata, X)
    if scores.ndim != 3:
        raise ValueError("predictive_interval needs a single-output (regression) posterior")
    flat = scores.reshape(-1, scores.shape[-1])
    lo, hi = np.quantile(flat, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
    return flat.mean(axis=0), np.column_stack([lo, hi])
