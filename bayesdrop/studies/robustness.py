"""Robustness study harnesses: nightmare at test time, label noise, uncertainty.

Each study takes ``models``, a mapping ``name -> estimator or list of estimators`` (a
hyper-parameter grid, e.g. from :func:`grid`), selects one candidate per model on a
validation split carved from the training data under the same condition as the test
(same deletion level, same label-noise rate), and returns a tidy
:class:`pandas.DataFrame` with one row per (model, condition[, repeat]). :func:`bayesdrop.studies.plots.plot_study`
draws any of them.

The conditions:

- *feature deletion* (:func:`delete_features`): every entry of a test row is set to zero
  independently with probability ``f`` (no rescaling: the features are missing, not
  dropped out); sparse input stays sparse;
- *label noise* (:func:`bayesdrop.studies.datasets.flip_labels`): a fraction of the training (and
  validation) labels is flipped; the test labels are clean;
- *uncertainty* (:func:`uncertainty_study`): the Bayesian estimators' posterior predictive
  probabilities are scored by error, Brier score, expected calibration error and log loss
  next to their point estimates.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.model_selection import ParameterGrid, train_test_split

from .._validation import check_random_state, check_scalar, seed_sequence
from .datasets import flip_labels
from ..predictive import posterior_predictive_proba

__all__ = [
    "grid",
    "delete_features",
    "expected_calibration_error",
    "calibration_table",
    "check_proba",
    "MAX_BINS",
    "classification_metrics",
    "nightmare_at_test_time",
    "label_noise_study",
    "uncertainty_study",
]

#: deletion fractions of the nightmare-at-test-time protocol
DELETION_LEVELS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def grid(estimator, param_grid):
    """Clones of ``estimator``, one per point of ``param_grid`` (``sklearn`` ParameterGrid).

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> [e.C for e in grid(LogisticRegression(), {"C": [0.1, 1.0]})]
    [0.1, 1.0]
    """
    return [clone(estimator).set_params(**p) for p in ParameterGrid(param_grid)]


def delete_features(X, fraction, random_state=None):
    """Set each entry of ``X`` to zero independently with probability ``fraction``.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n_samples, n_features)
        Not modified.
    fraction : float in [0, 1]
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    ndarray or CSR matrix
        A copy with the deleted entries zeroed (sparse input stays sparse).

    Examples
    --------
    >>> Xd = delete_features(np.ones((1000, 10)), 0.3, random_state=0)
    >>> round(float(1 - Xd.mean()), 2)
    0.3
    """
    fraction = check_scalar(fraction, "fraction", min_val=0.0, max_val=1.0)
    rng = check_random_state(random_state)
    if sp.issparse(X):
        X = sp.csr_matrix(X, copy=True)
        X.data = X.data * (rng.random(X.data.shape[0]) >= fraction)
        X.eliminate_zeros()
        return X
    X = np.array(X, dtype=float, copy=True)
    X *= rng.random(X.shape) >= fraction
    return X

#: rounding allowed outside ``[0, 1]`` in predicted probabilities (:func:`check_proba`)
PROBA_SLACK = 1e-9


def check_proba(proba, y_idx):
    """``(proba, y_idx)`` as arrays, checked: ``proba`` a finite float matrix of shape
    ``(n_samples, n_classes)`` with entries in ``[0, 1]``, ``y_idx`` integers in
    ``[0, n_classes)``, one per row -- a ``ValueError`` or ``TypeError`` naming the
    argument otherwise (not an index error from inside numpy).

    Examples
    --------
    >>> check_proba([[0.2, 0.8]], [1])[1].tolist()
    [1]
    >>> check_proba([[0.2, 0.8]], [2])
    Traceback (most recent call last):
    ...
    ValueError: y_idx must hold class indices in [0, 2) (the columns of proba), got 2
    """
    try:
        proba = np.asarray(proba, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"proba must be an array of probabilities: {exc}") from None
    if proba.ndim != 2 or proba.shape[1] < 1:
        raise ValueError(f"proba must have shape (n_samples, n_classes), got {proba.shape}")
    if not np.all(np.isfinite(proba)):
        raise ValueError("proba contains NaN or infinity")
    if proba.size and (proba.min() < -PROBA_SLACK or proba.max() > 1.0 + PROBA_SLACK):
        raise ValueError(f"proba must hold probabilities in [0, 1], got values in "
                         f"[{proba.min():.3g}, {proba.max():.3g}]")
    y = np.asarray(y_idx)
    if y.ndim != 1 or y.shape[0] != proba.shape[0]:
        raise ValueError(f"y_idx must have shape ({proba.shape[0]},) (one class index per "
                         f"row of proba), got {y.shape}")
    if y.dtype.kind not in "iub":
        if y.dtype.kind != "f" or not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
            raise ValueError("y_idx must hold integer class indices (the columns of "
                             f"proba), got dtype {y.dtype}")
        y = y.astype(np.int64)
    if y.size and (y.min() < 0 or y.max() >= proba.shape[1]):
        bad = y.min() if y.min() < 0 else y.max()
        raise ValueError(f"y_idx must hold class indices in [0, {proba.shape[1]}) (the "
                         f"columns of proba), got {bad}")
    return proba, y


def expected_calibration_error(proba, y_idx, n_bins=15):
    """Expected calibration error of the top-class probability.

    ``ECE = sum_b (n_b / n) |acc_b - conf_b|`` over ``n_bins`` equal-width bins of the
    confidence ``max_c p_c`` (Guo et al. 2017).

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
    y_idx : ndarray of int, shape (n_samples,)
        Index of the true class in the columns of ``proba``.
    n_bins : int, default=15

    Returns
    -------
    float

    Examples
    --------
    >>> p = np.array([[0.9, 0.1], [0.9, 0.1], [0.6, 0.4], [0.6, 0.4]])
    >>> round(expected_calibration_error(p, np.array([0, 0, 0, 1]), n_bins=10), 3)
    0.1
    """
    proba, y_idx = check_proba(proba, y_idx)
    n_bins = check_scalar(n_bins, "n_bins", min_val=1, integer=True)
    conf = proba.max(axis=1)
    correct = proba.argmax(axis=1) == y_idx
    bins = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    ece = 0.0
    for b in np.unique(bins):
        sel = bins == b
        ece += sel.mean() * abs(correct[sel].mean() - conf[sel].mean())
    return float(ece)


#: most bins of :func:`calibration_table` (its per-bin arrays: 8 MB each at this size;
#: bins beyond the number of predictions are empty)
MAX_BINS = 10**6


def calibration_table(proba, y_idx, n_bins=10, *, strategy="uniform", kind="auto"):
    """The table behind a reliability diagram: per bin of predicted probability, the mean
    prediction against the observed frequency.

    ``kind="positive"`` (binary ``proba``): the probability of the second class against
    the fraction of examples in it, binned as ``sklearn.calibration.calibration_curve``
    bins (``strategy`` "uniform": ``n_bins`` equal widths on ``[0, 1]``; "quantile": equal
    counts), whose ``(prob_true, prob_pred)`` are the table's non-empty rows.
    ``kind="confidence"``: the top-class probability ``max_c p_c`` against the accuracy
    (any number of classes; with ``strategy="uniform"`` its weighted mean gap
    ``sum_b n_b / n |accuracy_b - mean_predicted_b|`` is the expected calibration error up
    to how a probability on a bin edge is assigned). ``"auto"``: "positive" for two
    columns, else "confidence".

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
    y_idx : ndarray of int, shape (n_samples,)
        Index of the true class in the columns of ``proba``.
    n_bins : int, default=10
        At most :data:`MAX_BINS`.
    strategy : {"uniform", "quantile"}, default="uniform"
    kind : {"auto", "positive", "confidence"}, default="auto"

    Returns
    -------
    pandas.DataFrame
        One row per non-empty bin: ``bin_lower``, ``bin_upper``, ``count``,
        ``mean_predicted``, ``observed`` (fraction positive, or accuracy) and ``gap``
        (``observed - mean_predicted``: above 0 under-confident, below over-confident).

    Examples
    --------
    >>> p1 = np.array([0.1, 0.15, 0.8, 0.85, 0.9])
    >>> table = calibration_table(np.column_stack([1 - p1, p1]), np.array([0, 1, 1, 1, 0]),
    ...                           n_bins=2)
    >>> table[["count", "mean_predicted", "observed"]].round(3).values.tolist()
    [[2.0, 0.125, 0.5], [3.0, 0.85, 0.667]]
    """
    import pandas as pd

    proba, y_idx = check_proba(proba, y_idx)
    n_bins = check_scalar(n_bins, "n_bins", min_val=1, max_val=MAX_BINS, integer=True)
    if strategy not in ("uniform", "quantile"):
        raise ValueError(f"strategy must be 'uniform' or 'quantile', got {strategy!r}")
    if kind == "auto":
        kind = "positive" if proba.shape[1] == 2 else "confidence"
    if kind == "positive":
        if proba.shape[1] != 2:
            raise ValueError("kind='positive' needs binary proba (two columns)")
        pred, observed = proba[:, 1], (y_idx == 1).astype(float)
    elif kind == "confidence":
        pred = proba.max(axis=1)
        observed = (proba.argmax(axis=1) == y_idx).astype(float)
    else:
        raise ValueError(f"kind must be 'auto', 'positive' or 'confidence', got {kind!r}")
    if strategy == "quantile":
        edges = np.percentile(pred, np.linspace(0, 100, n_bins + 1))
    else:
        edges = np.linspace(0.0, 1.0, n_bins + 1)
    ids = np.searchsorted(edges[1:-1], pred)  # calibration_curve's assignment
    count = np.bincount(ids, minlength=n_bins).astype(float)
    nonempty = count > 0
    mean_pred = np.bincount(ids, weights=pred, minlength=n_bins)[nonempty] / count[nonempty]
    freq = np.bincount(ids, weights=observed, minlength=n_bins)[nonempty] / count[nonempty]
    return pd.DataFrame({"bin_lower": edges[:-1][nonempty], "bin_upper": edges[1:][nonempty],
                         "count": count[nonempty], "mean_predicted": mean_pred,
                         "observed": freq, "gap": freq - mean_pred})


def classification_metrics(proba, y_idx, *, floor=1e-12):
    """Error, Brier score, expected calibration error and log loss.

    ``brier = mean_n sum_c (p_nc - 1[y_n = c])^2``; ``log_loss = -mean_n log max(p_{n y_n},
    floor)`` (the floor keeps vote fractions of 0 finite and is documented in the output).

    Parameters
    ----------
    proba : ndarray of shape (n_samples, n_classes)
    y_idx : ndarray of int, shape (n_samples,)
    floor : float, default=1e-12

    Returns
    -------
    dict
        ``error``, ``brier``, ``ece``, ``log_loss``.

    Examples
    --------
    >>> m = classification_metrics(np.array([[0.8, 0.2], [0.3, 0.7]]), np.array([0, 0]))
    >>> m["error"], round(m["brier"], 2)
    (0.5, 0.53)
    """
    proba, y_idx = check_proba(proba, y_idx)
    floor = check_scalar(floor, "floor", min_val=0.0, max_val=1.0)
    onehot = np.zeros_like(proba)
    onehot[np.arange(proba.shape[0]), y_idx] = 1.0
    p_true = proba[np.arange(proba.shape[0]), y_idx]
    return {
        "error": float(np.mean(proba.argmax(axis=1) != y_idx)),
        "brier": float(np.mean(np.sum((proba - onehot) ** 2, axis=1))),
        "ece": expected_calibration_error(proba, y_idx),
        "log_loss": float(-np.mean(np.log(np.maximum(p_true, floor)))),
    }


def _candidates(models):
    """``{name: [candidate estimators]}`` from ``models`` (a dict of name to an estimator
    or a list of them), checked: a ``TypeError`` or ``ValueError`` naming ``models``."""
    if not isinstance(models, Mapping) or not models:
        raise TypeError("models must be a non-empty dict of name to an estimator (or a list "
                        f"of candidate estimators), got {type(models).__name__}")
    out = {}
    for name, est in models.items():
        cands = list(est) if isinstance(est, (list, tuple)) else [est]
        if not cands:
            raise ValueError(f"models[{name!r}] is an empty list of candidates")
        for cand in cands:
            if not (hasattr(cand, "fit") and hasattr(cand, "get_params")):
                raise TypeError(f"models[{name!r}] must be a scikit-learn estimator or a list "
                                f"of them, got {type(cand).__name__}")
        out[name] = cands
    return out


def _levels(values, name, *, max_val, include_max):
    """``values`` as a non-empty list of floats in ``[0, max_val]`` (or ``[0, max_val)``),
    a ``TypeError`` / ``ValueError`` naming ``name`` otherwise."""
    if isinstance(values, (str, bytes, Mapping)) or not np.iterable(values):
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}")
    out = [check_scalar(v, name, min_val=0.0, max_val=max_val, include_max=include_max)
           for v in values]
    if not out:
        raise ValueError(f"{name} must hold at least one value")
    return out


def _params_label(est, cands):
    """The parameters of ``est`` that vary over its model's candidates (the grid axes)."""
    p = est.get_params(deep=False)
    others = [c.get_params(deep=False) for c in cands]
    keys = sorted(k for k in p if any(not _same(o[k], p[k]) for o in others))
    keys = keys or [k for k in ("C", "noise_level", "t", "n_changes") if k in p]
    return ", ".join(f"{k}={p[k]}" for k in keys)


def _same(a, b):
    try:
        return bool(np.all(a == b))
    except Exception:  # objects without a usable ==
        return a is b


def _error(est, X, y):
    return float(np.mean(est.predict(X) != y))


def _split(X, y, validation_fraction, rng):
    idx = np.arange(X.shape[0])
    fit_idx, val_idx = train_test_split(idx, test_size=validation_fraction, stratify=y,
                                        random_state=int(rng.integers(2**31 - 1)))
    return fit_idx, val_idx


def nightmare_at_test_time(models, X_train, y_train, X_test, y_test, *,
                           deletion=DELETION_LEVELS, validation_fraction=0.2, refit=True,
                           random_state=0, verbose=False):
    """Train on clean data, test with a fraction of the features deleted.

    For every model, each candidate is fitted once on the clean fitting part of the
    training data; for each deletion level ``f`` the candidate with the lowest
    validation error *under the same deletion level* is selected (as in the papers), then
    (``refit=True``) refitted on the whole training set, and its error on the test set
    with deletion level ``f`` is recorded. Deletion masks are seeded per level and shared
    by all models.

    Parameters
    ----------
    models : dict of str -> estimator or list of estimators
    X_train, y_train, X_test, y_test : arrays (``X`` dense or sparse)
    deletion : sequence of float in [0, 1], default 0, 0.1, ..., 0.9
    validation_fraction : float in (0, 1), default=0.2
    refit : bool, default=True
    random_state : int, default=0
    verbose : bool, default=False
        Print one line per fitted candidate.

    Returns
    -------
    pandas.DataFrame
        Columns ``model``, ``deletion``, ``selected`` (parameters), ``val_error``,
        ``test_error``, ``fit_seconds`` (of the fits on the fitting part, summed over the
        grid).

    Examples
    --------
    >>> from bayesdrop import DropoutSVC
    >>> from bayesdrop.studies.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> models = {"Dropout-SVM": grid(DropoutSVC(C=0.1), {"noise_level": [0.1, 0.5]}),
    ...           "SVM": DropoutSVC(C=0.1, noise_level=0.0)}
    >>> df = nightmare_at_test_time(models, X[:400], y[:400], X[400:], y[400:],
    ...                             deletion=[0.0, 0.5])
    >>> df[["model", "deletion"]].values.tolist()
    [['Dropout-SVM', 0.0], ['Dropout-SVM', 0.5], ['SVM', 0.0], ['SVM', 0.5]]
    """
    import pandas as pd

    validation_fraction = check_scalar(validation_fraction, "validation_fraction",
                                       min_val=0.0, max_val=1.0, include_min=False,
                                       include_max=False)
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    deletion = _levels(deletion, "deletion", max_val=1.0, include_max=True)
    ss = seed_sequence(random_state)
    split_seed, val_seed, test_seed = ss.spawn(3)
    fit_idx, val_idx = _split(X_train, y_train, validation_fraction,
                              np.random.default_rng(split_seed))
    X_fit, y_fit = X_train[fit_idx], y_train[fit_idx]
    X_val, y_val = X_train[val_idx], y_train[val_idx]
    val_sets = [delete_features(X_val, f, np.random.default_rng(s))
                for f, s in zip(deletion, val_seed.spawn(len(deletion)))]
    test_sets = [delete_features(X_test, f, np.random.default_rng(s))
                 for f, s in zip(deletion, test_seed.spawn(len(deletion)))]
    rows = []
    for name, cands in _candidates(models).items():
        fitted, val_err, seconds = [], [], 0.0
        for est in cands:
            t0 = time.perf_counter()
            e = clone(est).fit(X_fit, y_fit)
            seconds += time.perf_counter() - t0
            fitted.append(e)
            val_err.append([_error(e, Xv, y_val) for Xv in val_sets])
            if verbose:
                print(f"  {name} [{_params_label(est, cands)}]: val errors "
                      f"{np.round(val_err[-1], 3).tolist()}", flush=True)
        val_err = np.array(val_err)
        refitted = {}
        for j, f in enumerate(deletion):
            best = int(np.argmin(val_err[:, j]))
            if refit and best not in refitted:
                refitted[best] = clone(cands[best]).fit(X_train, y_train)
            final = refitted[best] if refit else fitted[best]
            rows.append({"model": name, "deletion": f,
                         "selected": _params_label(cands[best], cands),
                         "val_error": float(val_err[best, j]),
                         "test_error": _error(final, test_sets[j], y_test),
                         "fit_seconds": seconds})
    return pd.DataFrame(rows)


def label_noise_study(models, X_train, y_train, X_test, y_test, *, rates=(0.0, 0.1, 0.2),
                      n_repeats=3, validation_fraction=0.2, random_state=0):
    """Train with a fraction of flipped labels, test on clean labels.

    For each rate and repeat, the training labels are flipped
    (:func:`bayesdrop.studies.datasets.flip_labels`, a fresh seed per repeat shared by all
    models), each model's candidate is selected on a validation split with the same
    (noisy) labels, refitted on the whole noisy training set, and scored on the clean
    test set.

    Parameters
    ----------
    models : dict of str -> estimator or list of estimators
    X_train, y_train, X_test, y_test : arrays
    rates : sequence of float in [0, 1), default (0, 0.1, 0.2)
    n_repeats : int, default=3
    validation_fraction : float in (0, 1), default=0.2
    random_state : int, default=0

    Returns
    -------
    pandas.DataFrame
        Columns ``model``, ``rate``, ``repeat``, ``selected``, ``val_error`` (noisy),
        ``test_error`` (clean).

    Examples
    --------
    >>> from sklearn.linear_model import LogisticRegression
    >>> from bayesdrop.studies.datasets import make_long_servedio
    >>> X, y, _ = make_long_servedio(300, random_state=0)
    >>> Xt, yt, _ = make_long_servedio(500, random_state=1)
    >>> df = label_noise_study({"LR": LogisticRegression()}, X, y, Xt, yt, rates=(0.0, 0.1),
    ...                        n_repeats=1)
    >>> df[["rate", "test_error"]].round(2).values.tolist()[0]
    [0.0, 0.0]
    """
    import pandas as pd

    n_repeats = check_scalar(n_repeats, "n_repeats", min_val=1, integer=True)
    rates = _levels(rates, "rates", max_val=1.0, include_max=False)
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    cands_all = _candidates(models)
    rows = []
    seeds = seed_sequence(random_state).spawn(len(rates) * n_repeats)
    for i, rate in enumerate(rates):
        for r in range(n_repeats):
            rng = np.random.default_rng(seeds[i * n_repeats + r])
            y_noisy, _ = flip_labels(y_train, rate, rng)
            fit_idx, val_idx = _split(X_train, y_noisy, validation_fraction, rng)
            for name, cands in cands_all.items():
                errs = [np.nan]
                if len(cands) > 1:
                    errs = [_error(clone(e).fit(X_train[fit_idx], y_noisy[fit_idx]),
                                   X_train[val_idx], y_noisy[val_idx]) for e in cands]
                best = int(np.nanargmin(errs)) if len(cands) > 1 else 0
                final = clone(cands[best]).fit(X_train, y_noisy)
                rows.append({"model": name, "rate": float(rate), "repeat": r,
                             "selected": _params_label(cands[best], cands),
                             "val_error": errs[best],
                             "test_error": _error(final, X_test, y_test)})
    return pd.DataFrame(rows)


def _point_proba(est, X):
    if hasattr(est, "predict_proba"):
        return est.predict_proba(X)
    pred = np.searchsorted(est.classes_, est.predict(X))
    P = np.zeros((X.shape[0], est.classes_.shape[0]))
    P[np.arange(X.shape[0]), pred] = 1.0
    return P


def uncertainty_study(models, X_train, y_train, X_test, y_test, *, deletion=DELETION_LEVELS,
                      label_noise=0.0, draws=500, tune=200, chains=2, random_state=0,
                      progressbar=False):
    """Point estimate against posterior predictive, under deletion and label noise.

    Each model (an estimator with ``sample_posterior``, e.g. :class:`~bayesdrop.DropoutSVC`
    or :class:`~bayesdrop.DropoutLogisticRegression`, fixed hyper-parameters) is fitted
    and sampled once on the training data (labels flipped at rate ``label_noise``); then
    for each deletion level the test set is scored twice: with the IRLS point estimate
    (``predict_proba``; one-hot predictions for the SVMs) and with the posterior
    predictive probabilities (:func:`bayesdrop.predictive.posterior_predictive_proba`).

    Returns
    -------
    pandas.DataFrame
        Columns ``model``, ``deletion``, ``label_noise``, ``kind`` (``"point"`` or
        ``"posterior"``), ``error``, ``brier``, ``ece``, ``log_loss``, and ``min_ess`` (the
        smallest bulk ESS of the coefficients, for the posterior rows).

    Examples
    --------
    >>> from bayesdrop import DropoutLogisticRegression
    >>> from bayesdrop.studies.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer()
    >>> df = uncertainty_study({"Dropout-LR": DropoutLogisticRegression(C=0.1, noise_level=0.3)},
    ...                        X[:300], y[:300], X[300:], y[300:], deletion=[0.0, 0.5],
    ...                        draws=100, tune=50, chains=1)
    >>> df[["deletion", "kind"]].values.tolist()
    [[0.0, 'point'], [0.0, 'posterior'], [0.5, 'point'], [0.5, 'posterior']]
    """
    import pandas as pd

    from .._arviz import min_ess

    deletion = _levels(deletion, "deletion", max_val=1.0, include_max=True)
    _candidates(models)
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    ss = seed_sequence(random_state)
    flip_seed, test_seed, *model_seeds = ss.spawn(2 + len(models))
    y_fit, _ = flip_labels(y_train, label_noise, np.random.default_rng(flip_seed))
    test_sets = [delete_features(X_test, f, np.random.default_rng(s))
                 for f, s in zip(deletion, test_seed.spawn(len(deletion)))]
    rows = []
    for (name, est), seed in zip(models.items(), model_seeds):
        if not hasattr(est, "sample_posterior"):
            raise TypeError(f"models[{name!r}] has no sample_posterior method")
        est = clone(est)
        idata = est.sample_posterior(X_train, y_fit, draws=draws, tune=tune, chains=chains,
                                     random_state=seed, progressbar=progressbar)
        ess_min = min_ess(idata, "coef")
        y_idx = np.searchsorted(est.classes_, y_test)
        for f, Xt in zip(deletion, test_sets):
            for kind, P in (("point", _point_proba(est, Xt)),
                            ("posterior", posterior_predictive_proba(
                                idata, Xt, est._posterior_transform()))):
                rows.append({"model": name, "deletion": float(f),
                             "label_noise": float(label_noise), "kind": kind,
                             **classification_metrics(P, y_idx),
                             "min_ess": ess_min if kind == "posterior" else np.nan})
    return pd.DataFrame(rows)
