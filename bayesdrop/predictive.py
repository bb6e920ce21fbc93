"""What is read back from posterior draws: scores, predictive draws and probabilities,
regression intervals (the InferenceData of :mod:`bayesdrop.posterior` in, arrays out).

* :func:`decision_draws` -- ``w.x + b`` for every draw;
* :func:`posterior_predictive_draws`, :func:`posterior_predictive_proba` -- labels drawn
  from, and the probabilities of, the one predictive model: the pseudo-likelihood
  normalised over the labels (:func:`label_logits`);
* :func:`vote_fractions` -- classifiers: the fraction of posterior draws voting for each
  class (binary: ``score > 0``; one-vs-rest: largest score);
* :func:`predictive_interval` -- regression: posterior mean and central interval of the
  regression function ``w.x + b`` or of a new target, optionally calibrated by split
  conformal prediction on held-out rows.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, softmax

from ._validation import as_float_design, check_random_state, check_scalar

__all__ = ["REGRESSION_LOSSES", "calibration_pair", "check_posterior_of", "decision_draws",
           "label_logits", "posterior_predictive_draws", "posterior_predictive_proba",
           "predictive_interval", "predictive_proba_of_scores", "sigmoid_proba",
           "vote_fractions"]


def _coef_draws(idata):
    post = idata.posterior
    coef = post["coef"].values
    if "intercept" in post:
        b = post["intercept"].values
    else:
        b = np.zeros(coef.shape[:-1])
    return coef, b


def decision_draws(idata, X, transform=None):
    """Scores ``w.x + b`` of every posterior draw.

    Parameters
    ----------
    idata : arviz.InferenceData
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    transform : callable, optional
        ``transform(X, k)``: the features problem ``k``'s coefficients act on, where they
        are not the columns of ``X`` -- the latent models' hidden features
        (``sigmoid(X alpha_k + c_k)``; the estimators pass it).

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
    return _scores(X if transform is not None else as_float_design(X), *_coef_draws(idata),
                   transform)


def _scores(X, coef, b, transform=None):
    """:func:`decision_draws` of the draws ``coef`` (chain, draw, [class,] feature) and
    ``b`` at a checked ``X``."""
    if transform is not None:
        return _transformed_scores(X, coef, b, transform)
    if X.shape[1] != coef.shape[-1]:
        raise ValueError(f"X has {X.shape[1]} features, the posterior {coef.shape[-1]}")
    flat = coef.reshape(-1, coef.shape[-1])  # (draws [x classes], features)
    scores = np.asarray(X @ flat.T).T  # (draws [x classes], n)
    scores = scores.reshape(*coef.shape[:-1], X.shape[0]) + b[..., None]
    if coef.ndim == 4:  # (chain, draw, class, n) -> (chain, draw, n, class)
        scores = np.moveaxis(scores, 2, 3)
    return scores


def _predictive_attrs(idata):
    attrs = idata.posterior.attrs
    return (str(attrs["loss"]), float(attrs["C"]), float(attrs.get("margin", 1.0)),
            float(attrs.get("epsilon", 0.0)))


def _is_regression(attrs):
    """Whether a posterior's attributes are those of a regression model: the
    epsilon-insensitive loss, or the squared loss on real targets (``binary = 0``)."""
    loss = attrs.get("loss")
    return loss in REGRESSION_LOSSES and not (loss == "squared"
                                               and bool(attrs.get("binary", 1)))


def check_posterior_of(estimator, idata):
    """Raise a ``ValueError`` naming ``idata`` unless it is a posterior of the kind
    ``estimator`` makes: a regression posterior for a regressor, a classification one
    for a classifier, with one problem (two classes) or one per class of ``classes_``.

    Examples
    --------
    >>> from bayesdrop import DropoutSVC
    >>> X = np.random.default_rng(0).normal(size=(20, 2)); y = (X[:, 0] > 0).astype(int)
    >>> clf = DropoutSVC().fit(X, y)
    >>> check_posterior_of(clf, "not a posterior")
    Traceback (most recent call last):
    ...
    ValueError: idata must be the InferenceData of sample_posterior, got str
    """
    from sklearn.base import is_classifier

    attrs = getattr(getattr(idata, "posterior", None), "attrs", None)
    if attrs is None or "loss" not in attrs:
        raise ValueError("idata must be the InferenceData of sample_posterior, got "
                         f"{type(idata).__name__}")
    regression = _is_regression(attrs)
    if is_classifier(estimator) == regression:
        kind = "a regression" if regression else "a classification"
        raise ValueError(f"idata is the posterior of {kind} model (the {attrs['loss']!r} "
                         f"loss); {type(estimator).__name__} needs one of its own kind")
    classes = getattr(estimator, "classes_", None)
    if classes is not None:
        coef = idata.posterior["coef"]
        problems = coef.shape[2] if coef.ndim == 4 else 1
        expected = 1 if len(classes) == 2 else len(classes)
        if problems != expected:
            raise ValueError(f"idata holds {problems} one-vs-rest problem(s), the estimator "
                             f"{len(classes)} classes ({expected} problem(s))")


def _transformed_scores(X, coef, b, transform):
    """The scores of every draw on problem-specific features ``transform(X, k)`` (the
    latent models' hidden features of problem ``k``): shape as :func:`decision_draws`."""
    problems = coef.shape[2] if coef.ndim == 4 else 1
    out = []
    for k in range(problems):
        H = np.asarray(transform(X, k), dtype=np.float64)
        ck, bk = (coef[:, :, k], b[:, :, k]) if coef.ndim == 4 else (coef, b)
        if H.shape[1] != ck.shape[-1]:
            raise ValueError(f"the features of problem {k} are {H.shape[1]}, the "
                             f"posterior's {ck.shape[-1]}")
        scores = (H @ ck.reshape(-1, ck.shape[-1]).T).T  # (draws, n)
        out.append(scores.reshape(*ck.shape[:2], H.shape[0]) + bk[..., None])
    return out[0] if coef.ndim == 3 else np.stack(out, axis=-1)


def _corrupted_decision_draws(idata, X, noise, rng, transform=None):
    """Scores of every draw on its own corrupted copy ``x~ ~ p(x~ | x)`` of ``X``."""
    X = as_float_design(X)
    coef, b = _coef_draws(idata)
    lead = coef.shape[:2]
    flat_coef = coef.reshape(lead[0] * lead[1], *coef.shape[2:])
    flat_b = b.reshape(lead[0] * lead[1], *b.shape[2:])
    # each draw scored (as decision_draws does) on its own corrupted copy of X
    scores = np.array([_scores(noise.corrupt(X, rng), c[None, None], bb[None, None],
                               transform)[0, 0]
                       for c, bb in zip(flat_coef, flat_b)])  # (S, n[, K])
    return scores.reshape(*lead, *scores.shape[1:])


def posterior_predictive_draws(idata, X, classes=None, random_state=None, noise=None,
                               transform=None):
    """One draw of ``y`` per posterior draw and row of ``X``: ``y ~ p(y | w, b, x)``.

    ``p`` is the model's pseudo-likelihood of one example, ``exp(-2C loss(y, w.x + b))``,
    normalised over ``y`` at the clean input ``x``:

    * logistic: ``P(y = +1) = sigmoid(2C m)`` (``sigmoid(m)`` for ``C = 1/2``);
    * hinge: ``P(y = +1) = sigmoid(2C (max(0, l + m) - max(0, l - m)))``;
    * one-vs-rest with classes ``k``: ``P(y = k) ∝ exp(2C (loss_k(-1) - loss_k(+1)))``
      (the product of the binary pseudo-likelihoods, normalised over the labels);
    * epsilon-insensitive: density ``∝ exp(-2C max(0, |y - m| - eps))`` -- uniform on the
      tube ``m +- eps`` with probability ``2 eps / (2 eps + 1/C)``, else ``m +- (eps + E)``
      with ``E ~ Exponential(rate 2C)`` and an even sign.

    Parameters
    ----------
    idata : arviz.InferenceData
        From ``sample_posterior`` (its attributes name the loss and ``C``).
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    classes : array-like, optional
        Labels of the classes (``classes_``); default ``-1, +1`` / ``0 .. K-1``.
    random_state : None, int, SeedSequence or Generator
    noise : NoiseModel, optional
        Draw at corrupted inputs instead: each posterior draw scores its own corrupted
        copy ``x~ ~ p(x~ | x)`` of ``X`` (the model's generative story: the features are
        corrupted, then the label follows the pseudo-likelihood at ``w.x~ + b``). Costs
        one corrupted copy of ``X`` per draw.
    transform : callable, optional
        ``transform(X, k)``: the features problem ``k``'s coefficients act on, where they
        are not the columns of ``X`` -- the latent models' hidden features
        (``sigmoid(X alpha_k + c_k)``; the estimators pass it).

    Returns
    -------
    ndarray of shape (chain, draw, n_samples)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 1)); y = np.where(X[:, 0] + rng.logistic(size=300) > 0, 1, 0)
    >>> from bayesdrop import DropoutLogisticRegression
    >>> clf = DropoutLogisticRegression(C=0.5, noise="none")
    >>> idata = clf.sample_posterior(X, y, draws=200, tune=50, chains=1, random_state=0,
    ...                              progressbar=False)
    >>> y_rep = posterior_predictive_draws(idata, X, clf.classes_, random_state=1)
    >>> y_rep.shape, bool(abs(y_rep.mean() - y.mean()) < 0.05)
    ((1, 200, 300), True)
    """
    rng = check_random_state(random_state)
    loss, C, margin, eps = _predictive_attrs(idata)
    if noise is None:
        scores = decision_draws(idata, X, transform)
    else:
        scores = _corrupted_decision_draws(idata, X, noise, rng, transform)
    if loss == "epsilon_insensitive":
        tail = rng.exponential(1.0 / (2.0 * C), size=scores.shape) + eps
        sign = np.where(rng.random(scores.shape) < 0.5, -1.0, 1.0)
        inside = rng.random(scores.shape) < 2.0 * eps / (2.0 * eps + 1.0 / C)
        tube = rng.uniform(-eps, eps, size=scores.shape)
        return scores + np.where(inside, tube, sign * tail)
    if loss == "squared" and _is_regression(idata.posterior.attrs):
        # exp(-(C/2) (y - m)^2) normalised over real y: N(m, 1/C)
        return scores + rng.normal(scale=1.0 / np.sqrt(C), size=scores.shape)
    delta = label_logits(loss, C, margin, scores)
    if scores.ndim == 3:  # one binary problem
        labels = np.array([-1, 1]) if classes is None else np.asarray(classes)
        pick = rng.random(scores.shape) < expit(delta)
        return labels[pick.astype(int)]
    labels = np.arange(scores.shape[-1]) if classes is None else np.asarray(classes)
    return labels[np.argmax(delta + rng.gumbel(size=delta.shape), axis=-1)]


def vote_fractions(idata, X, transform=None):
    """Fraction of posterior draws that classify each row of ``X`` as each class.

    Binary problems vote ``score > 0`` for the second class; one-vs-rest problems vote
    for the class with the largest score. ``transform``: as in :func:`decision_draws`.

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
    scores = decision_draws(idata, X, transform)
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


def label_logits(loss, C, margin, scores):
    """The log-odds of the labels under the model's pseudo-likelihood of one example,
    ``p(y | m) ∝ exp(-2C loss(y, m))`` normalised over ``y``, from scores ``m``.

    Binary (``scores`` of any shape): ``log p(+1) / p(-1) = 2C (loss(-1, m) - loss(+1, m))``
    -- ``2C m`` for the logistic loss (``P(y = +1) = sigmoid(2C m)``), ``2C (max(0, l + m)
    - max(0, l - m))`` for the hinge with margin ``l``, ``2C m`` for the squared loss (its
    term ``(C/2) (y - m)^2`` is ``2C loss`` with ``loss = (y - m)^2 / 4``). One-vs-rest (a
    last axis of ``K`` classes): class ``k``'s logit is that binary log-odds of its problem
    (the product of the binary pseudo-likelihoods with ``+1`` for ``k`` and ``-1`` for the others,
    normalised over the ``K`` labels: ``P(y = k) = softmax_k``). ``2C`` is the
    pseudo-likelihood's inverse temperature: ``C = 1/2`` gives the logistic regression
    likelihood ``sigmoid(m)``, a larger ``C`` a sharper one (``docs/guide.md``).

    Examples
    --------
    >>> label_logits("logistic", 0.5, 1.0, np.array([0.0, 2.0])).tolist()
    [0.0, 2.0]
    >>> label_logits("hinge", 1.0, 1.0, np.array([0.5, 3.0])).tolist()
    [2.0, 8.0]
    """
    if loss == "logistic":
        return 2.0 * C * scores
    if loss == "hinge":
        return 2.0 * C * (np.maximum(0.0, margin + scores) - np.maximum(0.0, margin - scores))
    if loss == "squared":
        return 2.0 * C * scores
    raise ValueError(f"no predictive distribution over labels for the {loss} loss")


def posterior_predictive_proba(idata, X, transform=None):
    """Posterior predictive class probabilities: the probabilities of the labels that
    :func:`posterior_predictive_draws` draws, averaged over the posterior draws,

        P(y = k | x, data) = E_posterior[ p(y = k | w, b, x) ],

    with ``p`` the model's pseudo-likelihood of one example normalised over the labels
    (:func:`label_logits`): ``E[sigmoid(2C (w.x + b))]`` for the logistic loss, the
    hinge's ``E[sigmoid(2C (max(0, l + m) - max(0, l - m)))]``, per-draw softmax of the
    one-vs-rest logits for several classes. (The fraction of draws that *classify* ``x``
    as each class is :func:`vote_fractions`.)

    Parameters
    ----------
    idata : arviz.InferenceData
        From ``sample_posterior`` of a classifier (its attributes name the loss and ``C``).
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    transform : callable, optional
        ``transform(X, k)``: the features problem ``k``'s coefficients act on, where they
        are not the columns of ``X`` -- the latent models' hidden features
        (``sigmoid(X alpha_k + c_k)``; the estimators pass it).

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
    return predictive_proba_of_scores(idata, decision_draws(idata, X, transform))


def predictive_proba_of_scores(idata, scores):
    """:func:`posterior_predictive_proba` from the draws' scores
    (:func:`decision_draws`), for a caller that has them already."""
    loss, C, margin, _ = _predictive_attrs(idata)
    delta = label_logits(loss, C, margin, scores)
    if scores.ndim == 3:  # binary: the log-odds of the second class per draw and example
        p1 = expit(delta).mean(axis=(0, 1))
        return np.column_stack([1.0 - p1, p1])
    return softmax(delta, axis=-1).mean(axis=(0, 1))


#: the losses of regression posteriors (:func:`predictive_interval`)
REGRESSION_LOSSES = ("epsilon_insensitive", "squared")


def predictive_interval(idata, X, prob=0.94, *, kind="predictive", random_state=0,
                        calibrate=None):
    """Posterior mean of ``w.x + b`` and a central ``prob`` interval for each row.

    Parameters
    ----------
    idata : arviz.InferenceData
        A regression posterior (:class:`~bayesdrop.DropoutSVR`).
    X : ndarray or sparse matrix of shape (n_samples, n_features)
    prob : float in (0, 1)
    kind : {"predictive", "mean"}, default="predictive"
        ``"predictive"``: an interval for a **new observation** ``y`` at ``x`` -- quantiles
        of :func:`posterior_predictive_draws` (the posterior of ``w.x + b`` plus the
        model's own noise: the tube ``+- epsilon`` and exponential tails of rate ``2C``).
        ``"mean"``: the credible band of the regression function ``w.x + b`` only
        (much narrower; it does not cover new observations).
    random_state : None, int, SeedSequence or Generator, default=0
        For the predictive draws (fixed by default so the interval is reproducible).
    calibrate : tuple ``(X_cal, y_cal)`` or None, default=None
        Held-out rows (not used to fit or sample) on which the predictive intervals are
        rescaled to cover ``prob`` of new observations (normalised split conformal
        prediction: Papadopoulos et al. 2002, Lei et al. 2018). With ``c_i``, ``h_i``
        the centre and half-width of row ``i``'s model interval, the scores
        ``r_i = |y_i - c_i| / h_i`` of the ``n`` calibration rows give
        ``s = r_(k)``, the ``k = ceil((n + 1) prob)``-th smallest, and every interval
        becomes ``c +- s h``. If the calibration rows and a new row are exchangeable,
        the new ``y`` lies in its interval with probability at least ``prob`` -- whatever
        the pseudo-likelihood's temperature ``2C`` and the scale of ``y``, which set the
        model's own intervals (these cover ``prob`` only when the model's noise
        ``exp(-2C loss)`` matches the data's; see the user guide). Needs
        ``n >= prob / (1 - prob)`` rows (9 for ``prob=0.9``); ``kind="predictive"`` only.

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
    >>> mean, band = predictive_interval(idata, X[:3], prob=0.9, kind="mean")
    >>> _, pred = predictive_interval(idata, X[:3], prob=0.9)
    >>> bool(np.all(pred[:, 0] < band[:, 0]) and np.all(band[:, 1] < pred[:, 1]))
    True

    Calibrated on held-out rows (here the model's own intervals are too narrow: ``y``
    has a scale of 10 and ``C = 1``):

    >>> y10 = 10.0 * (X[:, 0] + rng.normal(size=60))
    >>> idata = DropoutSVR(noise_level=0.2).sample_posterior(
    ...     X[:30], y10[:30], draws=50, tune=20, chains=1, random_state=0,
    ...     progressbar=False)
    >>> _, raw = predictive_interval(idata, X[45:], prob=0.9)
    >>> _, cal = predictive_interval(idata, X[45:], prob=0.9,
    ...                              calibrate=(X[30:45], y10[30:45]))
    >>> bool(np.all(cal[:, 1] - cal[:, 0] > raw[:, 1] - raw[:, 0]))
    True
    """
    prob = check_scalar(prob, "prob", min_val=0.0, max_val=1.0, include_min=False,
                        include_max=False)
    if kind not in ("predictive", "mean"):
        raise ValueError(f"kind must be 'predictive' or 'mean', got {kind!r}")
    if calibrate is not None and kind != "predictive":
        raise ValueError("calibrate needs kind='predictive' (it calibrates intervals for "
                         "new observations)")
    attrs = idata.posterior.attrs if hasattr(idata, "posterior") else {}
    loss = attrs.get("loss")
    if not _is_regression(attrs):
        raise ValueError("idata must be the posterior of a regression model (loss one of "
                         f"{REGRESSION_LOSSES}, e.g. from DropoutSVR.sample_posterior); got "
                         f"a posterior of the {loss!r} loss"
                         + (" on labels (a classifier's)" if loss == "squared" else ""))
    scores = decision_draws(idata, X)
    if scores.ndim != 3:
        raise ValueError("predictive_interval needs a single-output (regression) posterior")
    flat = scores.reshape(-1, scores.shape[-1])
    values = flat
    if kind == "predictive":
        values = posterior_predictive_draws(idata, X, random_state=random_state)
        values = values.reshape(-1, values.shape[-1])
    lo, hi = np.quantile(values, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
    if calibrate is not None:
        lo, hi = _conformal(idata, prob, random_state, calibrate, lo, hi)
    return flat.mean(axis=0), np.column_stack([lo, hi])


def calibration_pair(calibrate):
    """``(X_cal, y_cal)`` from ``calibrate`` of :func:`predictive_interval`, or a
    TypeError naming it."""
    try:
        X_cal, y_cal = calibrate
    except (TypeError, ValueError):
        raise TypeError("calibrate must be a pair (X_cal, y_cal)") from None
    return X_cal, y_cal


def _conformal(idata, prob, random_state, calibrate, lo, hi):
    """The intervals ``[lo, hi]`` rescaled about their centres by the normalised split
    conformal factor of the held-out rows ``calibrate`` (see
    :func:`predictive_interval`)."""
    X_cal, y_cal = calibration_pair(calibrate)
    y_cal = np.asarray(y_cal, dtype=np.float64)
    if y_cal.ndim != 1 or not np.all(np.isfinite(y_cal)):
        raise ValueError("calibrate's y_cal must be a 1-D array of finite numbers")
    n = y_cal.shape[0]
    k = int(np.ceil((n + 1) * prob - 1e-12))
    if k > n:
        raise ValueError(f"calibrate needs at least {int(np.ceil(prob / (1 - prob) - 1e-12))} "
                         f"rows for prob={prob:g}, got {n}")
    _, cal = predictive_interval(idata, X_cal, prob, random_state=random_state)
    if cal.shape[0] != n:
        raise ValueError(f"calibrate's X_cal has {cal.shape[0]} rows and y_cal {n}")
    centre, half = cal.mean(axis=1), (cal[:, 1] - cal[:, 0]) / 2.0
    floor = 1e-12 * max(float(np.max(np.abs(cal))), 1.0)  # a zero-width interval
    score = np.abs(y_cal - centre) / np.maximum(half, floor)
    s = np.sort(score)[k - 1]
    mid, width = (lo + hi) / 2.0, (hi - lo) / 2.0
    return mid - s * width, mid + s * width
