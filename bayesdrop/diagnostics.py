"""Compare posterior draws with the point estimate, the mode (MATH.md section 4).

The Gibbs chain targets ``exp(-J(w, b))`` and the solvers return ``argmin J``, so

* the point estimate is the posterior **mode**: no draw may have a larger ``lp = -J``
  than the point estimate (:func:`check_mode`);
* for a nearly Gaussian posterior the mode and the mean are close in units of the
  posterior sd (the ``z`` column of :func:`compare_with_mode`);
* the IRLS weights ``E[u_n | theta_mode]`` (the augmentation means at the point
  estimate) and the posterior means ``E[u_n | data]`` agree to first order
  (:func:`augmentation_comparison`, :func:`plot_weights`).
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.utils.validation import check_is_fitted

from . import _arviz
from ._validation import check_scalar

__all__ = [
    "compare_with_mode",
    "check_mode",
    "augmentation_comparison",
    "plot_posterior_vs_mode",
    "plot_weights",
]


def _mode_parameters(estimator, idata=None):
    """The mode as (coef (n_problems, D), intercept (n_problems,)): the group ``mode`` of
    ``idata`` (the mode on the sampled data) if present, else the fitted estimator's."""
    if idata is not None and "mode" in idata.groups():
        mode = idata["mode"]
        coef = np.asarray(mode["coef"].values, dtype=float).reshape(-1, mode.sizes["feature"])
        intercept = (np.atleast_1d(np.asarray(mode["intercept"].values, dtype=float))
                     if "intercept" in mode else np.zeros(coef.shape[0]))
        return coef, intercept
    check_is_fitted(estimator)
    coef = np.atleast_2d(np.asarray(estimator.coef_, dtype=float))
    intercept = np.atleast_1d(np.asarray(estimator.intercept_, dtype=float))
    return coef, intercept


def _check_match(idata, estimator):
    """A ``ValueError`` naming ``idata`` unless it is a posterior of ``estimator``'s kind,
    problems and features (``NotFittedError`` for an unfitted estimator)."""
    from .predictive import check_posterior_of

    check_is_fitted(estimator)
    check_posterior_of(estimator, idata)
    coef, _ = _mode_parameters(estimator)
    post = idata.posterior["coef"]
    n_problems = post.sizes.get("class", 1)
    if post.sizes["feature"] != coef.shape[1] or n_problems != coef.shape[0]:
        raise ValueError(
            f"the posterior ({n_problems} problem(s) x {post.sizes['feature']} features) "
            f"does not match the estimator ({coef.shape[0]} x {coef.shape[1]})"
        )


def compare_with_mode(idata, estimator, hdi_prob=0.94):
    """Per-coefficient table: the point estimate against the posterior.

    Parameters
    ----------
    idata : arviz.InferenceData
        From ``estimator.sample_posterior``.
    estimator : fitted DropoutSVC, DropoutLogisticRegression or DropoutSVR
    hdi_prob : float

    Returns
    -------
    pandas.DataFrame
        Indexed like ``arviz.summary`` (``coef[x0]``, ``coef[1, x0]``, ``intercept``, ...),
        with columns ``mode``, ``mean``, ``sd``, the HDI bounds, ``mcse_mean``,
        ``mcse_sd``, ``ess_bulk``, ``ess_tail``, ``r_hat`` and the standardised distance
        ``z = (mean - mode) / sd``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop import DropoutLogisticRegression
    >>> clf = DropoutLogisticRegression(noise_level=0.3)
    >>> idata = clf.sample_posterior(X, y, draws=100, tune=50, chains=2, random_state=0,
    ...                              progressbar=False, cores=1)
    >>> table = compare_with_mode(idata, clf)
    >>> len(table), {"mode", "mean", "sd", "ess_bulk", "r_hat"} <= set(table.columns)
    (4, True)
    """
    _check_match(idata, estimator)
    hdi_prob = check_scalar(hdi_prob, "hdi_prob", min_val=0.0, max_val=1.0,
                            include_min=False, include_max=False)
    coef, intercept = _mode_parameters(estimator, idata)
    var_names = ["coef"] + (["intercept"] if "intercept" in idata.posterior else [])
    table = _arviz.summary_stats(idata, var_names=var_names, hdi_prob=hdi_prob)
    mode_values = list(coef.ravel())  # class-major, as ArviZ flattens (class, feature)
    if "intercept" in var_names:
        mode_values += list(intercept)
    table.insert(0, "mode", np.asarray(mode_values))
    table["z"] = (table["mean"] - table["mode"]) / table["sd"]
    return table


def check_mode(idata, estimator, rtol=1e-7):
    """Check that the point estimate (the minimiser of ``J`` that the solver found) is the
    posterior mode.

    ``lp_mode = -J`` at the point estimate (the group ``mode`` of ``idata``; without it the
    last entry of the estimator's ``objective_``) must be at least the
    largest ``lp`` of any draw, up to ``rtol * max(1, |lp_mode|)`` (the solvers' stopping
    tolerance).

    Returns
    -------
    pandas.DataFrame
        One row per binary problem: ``lp_mode``, ``lp_max_draws``, ``gap`` (``>= 0``
        when no draw beats the point estimate) and ``is_mode``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop import DropoutSVC
    >>> clf = DropoutSVC(noise_level=0.3)
    >>> idata = clf.sample_posterior(X, y, draws=100, tune=50, chains=2, random_state=0,
    ...                              progressbar=False, cores=1)
    >>> bool(check_mode(idata, clf)["is_mode"].all())
    True
    """
    import pandas as pd

    _check_match(idata, estimator)
    rtol = check_scalar(rtol, "rtol", min_val=0.0)
    if "mode" in idata.groups():  # the mode on the sampled data
        history = [[-v] for v in np.atleast_1d(idata["mode"]["lp"].values)]
    else:
        history = estimator.objective_
        if isinstance(history, np.ndarray) and history.ndim == 1:
            history = [history]
    lp = idata.sample_stats["lp"].values
    if lp.ndim == 2:
        lp = lp[..., None]
    rows = []
    for k, hist in enumerate(history):
        lp_mode = -float(hist[-1])
        lp_max = float(np.max(lp[..., k]))
        gap = lp_mode - lp_max
        rows.append({"lp_mode": lp_mode, "lp_max_draws": lp_max, "gap": gap,
                     "is_mode": bool(gap >= -rtol * max(1.0, abs(lp_mode)))})
    return pd.DataFrame(rows)


def augmentation_comparison(idata, estimator, X, y):
    """IRLS weights at the mode, ``E[aug | theta_mode]``, against posterior means
    ``E[aug | data]``.

    Returns
    -------
    pandas.DataFrame
        One row per example (and problem, and augmentation variable) with columns
        ``problem``, ``variable``, ``example``, ``mode`` and ``posterior_mean`` (averaged
        over chains).

    Examples
    --------
    >>> from bayesdrop import DropoutSVC
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> clf = DropoutSVC(noise_level=0.3)
    >>> idata = clf.sample_posterior(X, y, draws=50, tune=20, chains=1, random_state=0,
    ...                              progressbar=False)
    >>> table = augmentation_comparison(idata, clf, X, y)
    >>> len(table), {"mode", "posterior_mean"} <= set(table.columns)
    (60, True)
    """
    import pandas as pd

    _check_match(idata, estimator)
    if "augmentation_mean" not in idata.groups():
        loss = idata.posterior.attrs["loss"]
        raise ValueError(f"idata has no augmentation_mean group: the {loss!r} loss draws "
                         "no augmentation variables")
    problems, thetas = estimator._problems(X, y)
    if "mode" in idata.groups():  # the mode on the sampled data
        coef, intercept = _mode_parameters(estimator, idata)
        thetas = [pr.design.pack(coef[k], intercept[k]) for k, pr in enumerate(problems)]
    group = idata["augmentation_mean"]
    frames = []
    for k, (problem, theta) in enumerate(zip(problems, thetas)):
        m, s = problem.design.scores(theta)
        expected = problem.loss.expected_augmentation(m, s, problem.y)
        for j, name in enumerate(group.data_vars):
            post = group[name].values
            post = post[:, k] if post.ndim == 3 else post
            frames.append(pd.DataFrame({
                "problem": k, "variable": name, "example": np.arange(problem.y.shape[0]),
                "mode": expected[j], "posterior_mean": post.mean(axis=0),
            }))
    return pd.concat(frames, ignore_index=True)


def plot_posterior_vs_mode(idata, estimator, features=None, problem=0, max_plots=12):
    """Posterior densities of coefficients with the point estimate marked.

    Parameters
    ----------
    idata, estimator
    features : sequence of feature names, optional
        Default: the first ``max_plots`` features.
    problem : int
        One-vs-rest problem (class index) for multiclass posteriors.

    Returns
    -------
    numpy.ndarray of matplotlib Axes

    Examples
    --------
    >>> from bayesdrop import DropoutSVC
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> clf = DropoutSVC(noise_level=0.3)
    >>> idata = clf.sample_posterior(X, y, draws=50, tune=20, chains=1, random_state=0,
    ...                              progressbar=False)
    >>> import matplotlib; matplotlib.use("Agg")
    >>> axes = plot_posterior_vs_mode(idata, clf)
    >>> np.asarray(axes).size >= 3
    True
    """
    _check_match(idata, estimator)
    coef, _ = _mode_parameters(estimator, idata)
    names = list(idata.posterior["feature"].values)
    max_plots = check_scalar(max_plots, "max_plots", min_val=1, integer=True)
    n_problems = coef.shape[0]
    if (isinstance(problem, bool) or not isinstance(problem, numbers.Integral)
            or not 0 <= problem < n_problems):
        raise ValueError(f"problem must be an integer in [0, {n_problems}) (the posterior's "
                         f"one-vs-rest problems), got {problem!r}")
    if features is None:
        features = names[:max_plots]
    features = list(features)
    unknown = [f for f in features if f not in names]
    if not features or unknown:
        raise ValueError(f"features must be a non-empty list of the posterior's feature "
                         f"names {names[:5]}{' ...' if len(names) > 5 else ''}; unknown: "
                         f"{unknown}")
    coords = {"feature": list(features)}
    if "class" in idata.posterior["coef"].dims:
        coords["class"] = [idata.posterior["class"].values[problem]]
    axes = np.atleast_1d(_arviz.plot_density(idata, ["coef"], coords, None)).ravel()
    for ax, name in zip(axes, features):
        value = coef[problem, names.index(name)]
        ax.axvline(value, color="C3", linestyle="--", label="point estimate")
        # ArviZ's "coef\nfeature, class" titles overlap in a grid: the feature name only
        ax.set_title(str(name), fontsize="medium")
        for text in ax.texts:
            text.set_fontsize("small")
    axes[0].legend(loc="upper right", fontsize="small")
    fig = axes[0].figure
    if fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    return axes


def plot_weights(idata, estimator, X, y, ax=None):
    """Scatter of the IRLS weights at the mode against posterior mean augmentation weights
    (log-log).

    Returns
    -------
    matplotlib Axes

    Examples
    --------
    >>> from bayesdrop import DropoutSVC
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> clf = DropoutSVC(noise_level=0.3)
    >>> idata = clf.sample_posterior(X, y, draws=50, tune=20, chains=1, random_state=0,
    ...                              progressbar=False)
    >>> import matplotlib; matplotlib.use("Agg")
    >>> ax = plot_weights(idata, clf, X, y)
    >>> ax.get_xscale(), ax.get_yscale()
    ('log', 'log')
    """
    import matplotlib.pyplot as plt

    table = augmentation_comparison(idata, estimator, X, y)
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 4.5))
    for name, part in table.groupby("variable"):
        ax.loglog(part["mode"], part["posterior_mean"], ".", alpha=0.5, label=name)
    lo = float(np.nanmin(table[["mode", "posterior_mean"]].values))
    hi = float(np.nanmax(table[["mode", "posterior_mean"]].values))
    ax.plot([lo, hi], [lo, hi], "k:", lw=1)
    ax.set_xlabel("IRLS weight at the mode, E[aug | theta_mode]")
    ax.set_ylabel("posterior mean E[aug | data]")
    ax.legend()
    return ax
