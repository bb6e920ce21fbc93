"""Estimator-level sampling API: InferenceData layout, netCDF round trip, diagnostics,
posterior predictive helpers."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_iris

from bayesdrop import (
    DropoutLogisticRegression,
    DropoutSVC,
    DropoutSVR,
    diagnostics,
    sample_posterior,
)
from bayesdrop._arviz import from_netcdf

from .conftest import sparse_counts

KW = dict(draws=150, tune=50, chains=2, random_state=0, progressbar=False, cores=1)


def test_binary_logistic_inference_data_layout_and_roundtrip(small_problem_data, tmp_path):
    X, y, _ = small_problem_data
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(5)])
    labels = np.where(y > 0, "spam", "ham")
    clf = DropoutLogisticRegression(C=0.7, noise_level=0.3)
    idata = clf.sample_posterior(frame, labels, **KW)
    post = idata.posterior
    assert post["coef"].dims == ("chain", "draw", "feature")
    assert list(post["feature"].values) == list(frame.columns)
    assert post["intercept"].shape == (2, 150)
    assert idata.sample_stats["lp"].shape == (2, 150)
    # string labels are stored as their index in classes_ (ArviZ's plots need numbers)
    assert list(clf.classes_[idata.observed_data["y"].values]) == list(labels)
    assert idata["augmentation_mean"]["lambda"].shape == (2, 120)
    attrs = post.attrs
    assert attrs["loss"] == "logistic" and attrs["C"] == 0.7
    assert attrs["noise"] == "dropout" and attrs["noise_level"] == 0.3
    assert attrs["inference_library"] == "bayesdrop" and attrs["classes"] == "ham,spam"
    path = tmp_path / "post.nc"
    idata.to_netcdf(str(path))
    back = from_netcdf(str(path))
    for group in idata.groups():
        assert back[group].equals(idata[group])
        assert dict(back[group].attrs) == pytest.approx(dict(idata[group].attrs))
    # lp is -J of the stored draws
    from bayesdrop import Problem

    problem = Problem.create(X, y, clf.loss_, clf.noise_, True)
    theta = np.append(post["coef"].values[1, 7], post["intercept"].values[1, 7])
    assert idata.sample_stats["lp"].values[1, 7] == pytest.approx(-problem.objective(theta),
                                                                   rel=1e-12)


def test_multiclass_svc_dims_votes_and_diagnostics():
    X, y = load_iris(return_X_y=True)
    svc = DropoutSVC(C=0.5, noise_level=0.2)
    idata = svc.sample_posterior(X, y, **KW)
    assert idata.posterior["coef"].dims == ("chain", "draw", "class", "feature")
    assert idata.posterior["coef"].shape == (2, 150, 3, 4)
    assert idata.sample_stats["lp"].dims == ("chain", "draw", "class")
    votes = svc.predict_vote_fractions(X, idata)
    assert votes.shape == (150, 3) and np.allclose(votes.sum(axis=1), 1.0)
    assert np.mean(svc.classes_[votes.argmax(axis=1)] == svc.predict(X)) > 0.9
    table = diagnostics.compare_with_mode(idata, svc)
    assert table.shape[0] == 15 and {"mode", "mean", "sd", "ess_bulk", "ess_tail", "r_hat",
                                     "mcse_mean", "z"} <= set(table.columns)
    assert table.loc["coef[2, x3]", "mode"] == pytest.approx(svc.coef_[2, 3])
    assert table.loc["intercept[1]", "mode"] == pytest.approx(svc.intercept_[1])
    mode = diagnostics.check_mode(idata, svc)
    assert mode["is_mode"].all() and (mode["gap"] >= 0).all()
    weights = diagnostics.augmentation_comparison(idata, svc, X, y)
    assert set(weights["variable"]) == {"u"} and weights.shape[0] == 3 * 150
    assert np.all(weights["posterior_mean"] > 0)


def test_svr_sparse_interval_and_plots(small_problem_data):
    X = sparse_counts(n=80, d=12, density=0.3, seed=2)
    rng = np.random.default_rng(0)
    y = np.asarray(X @ rng.normal(size=12)).ravel() + 0.1 * rng.normal(size=80)
    reg = DropoutSVR(C=2.0, epsilon=0.1, noise="poisson", noise_level=0.5)
    idata = reg.sample_posterior(X, y, store_augmentation=True, **KW)
    assert set(idata["augmentation_mean"].data_vars) == {"u", "u_prime"}
    assert idata.posterior["u"].shape == (2, 150, 80)
    mean, interval = reg.predict_interval(X, idata, prob=0.9)
    assert np.all(interval[:, 0] <= mean) and np.all(mean <= interval[:, 1])
    assert np.corrcoef(mean, reg.predict(X))[0, 1] > 0.99
    axes = diagnostics.plot_posterior_vs_mode(idata, reg, features=["x0", "x3"])
    assert len(axes) == 2 and axes[0].lines  # the IRLS marker
    ax = diagnostics.plot_weights(idata, reg, X, y)
    assert ax.get_xscale() == "log"
    import matplotlib.pyplot as plt

    plt.close("all")


def test_irls_is_mode_and_close_to_mean_for_logistic(cancer):
    X, y = cancer
    clf = DropoutLogisticRegression(C=1.0, noise_level=0.3)
    idata = clf.sample_posterior(X, y, draws=400, tune=100, chains=2, random_state=1,
                                 progressbar=False, cores=1)
    assert diagnostics.check_mode(idata, clf)["is_mode"].all()
    table = diagnostics.compare_with_mode(idata, clf)
    # a nearly Gaussian posterior: mode and mean within half a posterior sd
    assert np.abs(table["z"]).max() < 0.5
    weights = diagnostics.augmentation_comparison(idata, clf, X, y)
    rel = np.abs(weights["posterior_mean"] / weights["mode"] - 1)
    assert np.median(rel) < 0.1


def test_functional_entry_point_and_errors(small_problem_data):
    X, y, yr = small_problem_data
    hinge = idata = sample_posterior(X, y, loss="hinge", C=1.0, noise="dropout",
                                     noise_level=0.2, **KW)
    assert idata.posterior.attrs["loss"] == "hinge"
    assert len(idata.posterior.attrs["mode_theta"]) == 6
    idata = sample_posterior(sp.csr_matrix(X), yr, loss="epsilon_insensitive", epsilon=0.2,
                             **KW)
    assert idata.posterior["coef"].shape == (2, 150, 5)
    with pytest.raises(ValueError, match="loss must be one of"):
        sample_posterior(X, y, loss="probit")
    with pytest.raises(ValueError, match="does not match"):
        diagnostics.compare_with_mode(hinge, DropoutSVC().fit(X[:, :3], y))
    with pytest.raises(ValueError, match="idata is the posterior of a regression model"):
        diagnostics.compare_with_mode(idata, DropoutSVC().fit(X, y))
    clf = DropoutSVC().fit(X, y)
    with pytest.raises(ValueError, match="labels not seen"):
        clf._problems(X, np.where(y > 0, 2.0, -1.0))
    with pytest.raises(ValueError, match="one class"):
        DropoutSVC().sample_posterior(X, np.ones(120), **KW)
    with pytest.raises(ValueError, match="draws"):
        DropoutSVC().sample_posterior(X, y, draws=0)
    with pytest.raises(ValueError, match="prob"):
        DropoutSVR().fit(X, yr).predict_interval(X, idata, prob=1.0)


def test_sample_posterior_leaves_the_fitted_estimator_unchanged():
    """Only fit may change fitted attributes; the mode on the sampled data is returned."""
    import pickle

    from bayesdrop import Dropout, DropoutLogisticRegression, LogisticLoss, Problem
    from bayesdrop.diagnostics import check_mode, compare_with_mode

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = np.where(X[:, 0] + 0.7 * rng.normal(size=200) > 0, 1, 0)
    Xtr, ytr, Xte, yte = X[:120], y[:120], X[120:], y[120:]
    clf = DropoutLogisticRegression(C=0.5, noise_level=0.3).fit(Xtr, ytr)
    before = pickle.dumps(clf)
    idata = clf.sample_posterior(Xte, yte, draws=60, tune=20, chains=2, random_state=0,
                                 progressbar=False, cores=1)
    assert pickle.dumps(clf) == before  # not a single fitted attribute changed
    # the stored mode is the optimum on the test data, not the training fit
    ref = DropoutLogisticRegression(C=0.5, noise_level=0.3, tol=1e-12).fit(Xte, yte)
    np.testing.assert_allclose(idata["mode"]["coef"].values, ref.coef_[0], rtol=1e-6)
    assert not np.allclose(idata["mode"]["coef"].values, clf.coef_[0], rtol=1e-3)
    problem = Problem.create(Xte, 2.0 * yte - 1.0, LogisticLoss(0.5), Dropout(0.3))
    theta = np.append(idata["mode"]["coef"].values, idata["mode"]["intercept"].values)
    assert float(idata["mode"]["lp"]) == pytest.approx(-problem.objective(theta), rel=1e-12)
    assert bool(check_mode(idata, clf)["is_mode"].all())
    table = compare_with_mode(idata, clf)
    np.testing.assert_allclose(table["mode"].values[:3], ref.coef_[0], rtol=1e-6)
    # on the training data the mode is the fitted model
    idata_tr = clf.sample_posterior(Xtr, ytr, draws=20, tune=5, chains=1, random_state=0,
                                    progressbar=False, cores=1)
    # (the fit and the mode end within its tol of J*: the same J to 1e-12, and theta to
    # what that J excess allows, sqrt(J excess / curvature) ~ 1e-6 here)
    train = Problem.create(Xtr, 2.0 * ytr - 1.0, LogisticLoss(0.5), Dropout(0.3))
    fitted = np.append(clf.coef_[0], clf.intercept_)
    assert train.objective(fitted) == pytest.approx(-float(idata_tr["mode"]["lp"]), rel=1e-12)
    np.testing.assert_allclose(idata_tr["mode"]["coef"].values, clf.coef_[0], rtol=1e-5)


@pytest.mark.parametrize("estimator", ["logistic", "hinge", "squared"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_predictive_draws_have_the_predictive_probabilities(estimator, n_classes):
    """One predictive model: the labels ``posterior_predictive_draws`` draws (one per
    posterior draw and row) occur with the probabilities ``posterior_predictive_proba``
    gives -- for each row and class, the frequency over 1200 draws is within 4 standard
    errors (``sqrt(P (1 - P) / 1200)``, floored at one count) of ``P``; and ``P`` is the
    posterior mean of the pseudo-likelihood's ``sigmoid(2C m)`` (logistic, binary),
    recomputed here from the draws."""
    from scipy.special import expit

    from bayesdrop import DropoutLogisticRegression, DropoutSVC, MCFQuadraticClassifier
    from bayesdrop.predictive import (
        decision_draws,
        posterior_predictive_draws,
        posterior_predictive_proba,
    )

    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 2))
    labels = np.argmax(X @ rng.normal(size=(2, n_classes)) + rng.gumbel(size=(120, n_classes)),
                       axis=1)
    make = {"logistic": DropoutLogisticRegression, "hinge": DropoutSVC,
            "squared": MCFQuadraticClassifier}[estimator]
    est = make(C=0.7, noise_level=0.2).fit(X, labels)
    idata = est.sample_posterior(X, labels, draws=600, tune=100, chains=2, random_state=0,
                                 progressbar=False)
    rows = X[:25]
    P = posterior_predictive_proba(idata, rows)
    draws = posterior_predictive_draws(idata, rows, est.classes_, random_state=1)
    n = draws.shape[0] * draws.shape[1]
    assert n == 1200 and P.shape == (25, n_classes)
    for k, label in enumerate(est.classes_):
        freq = (draws == label).mean(axis=(0, 1))
        se = np.maximum(np.sqrt(P[:, k] * (1 - P[:, k]) / n), 1.0 / n)
        assert np.all(np.abs(freq - P[:, k]) <= 4 * se), (k, np.max(np.abs(freq - P[:, k]) / se))
    if estimator != "hinge" and n_classes == 2:
        # logistic sigmoid(2C m); the squared loss (C/2)(y - m)^2 of MCF's loss_ with
        # C' = 2C: log-odds (C'/2)((1 + m)^2 - (1 - m)^2) = 2C' m
        m = decision_draws(idata, rows)
        slope = 2 * 0.7 if estimator == "logistic" else 2 * (2 * 0.7)
        np.testing.assert_allclose(P[:, 1], expit(slope * m).mean(axis=(0, 1)), rtol=1e-12)


def test_calibrated_intervals_cover_exactly_as_split_conformal_prediction_says():
    """With ``n`` exchangeable calibration rows the calibrated interval covers a new ``y``
    with probability ``k / (n + 1)``, ``k = ceil((n + 1) prob)`` (continuous scores):
    18/20 for ``n = 19``, ``prob = 0.9``. Averaged over 300 random splits of 2000 held-out
    rows of heavy-tailed data on a scale (x 50) at which the model's own intervals cover
    far less; within 4 standard errors (the per-split coverage is Beta(k, n + 1 - k))."""
    rng = np.random.default_rng(0)
    n_pool, D = 2000, 3
    X = rng.normal(size=(120 + n_pool, D))
    y = 50.0 * (X @ [1.0, -0.5, 0.2] + rng.standard_t(3, size=X.shape[0]))
    reg = DropoutSVR(noise_level=0.1).fit(X[:120], y[:120])
    idata = reg.sample_posterior(X[:120], y[:120], draws=200, tune=100, chains=1,
                                 random_state=1, progressbar=False)
    pool_X, pool_y = X[120:], y[120:]
    _, own = reg.predict_interval(pool_X, idata, prob=0.9)
    own_cover = np.mean((own[:, 0] <= pool_y) & (pool_y <= own[:, 1]))
    assert own_cover < 0.5  # the model's temperature is off: what calibrate is for
    n, reps, covered = 19, 300, []
    for _ in range(reps):
        perm = rng.permutation(n_pool)
        cal, test = perm[:n], perm[n: n + 200]
        _, iv = reg.predict_interval(pool_X[test], idata, prob=0.9,
                                     calibrate=(pool_X[cal], pool_y[cal]))
        covered.append(np.mean((iv[:, 0] <= pool_y[test]) & (pool_y[test] <= iv[:, 1])))
    k = int(np.ceil(20 * 0.9))
    expected = k / (n + 1)
    beta_var = k * (n + 1 - k) / ((n + 1) ** 2 * (n + 2))
    se = np.sqrt((beta_var + expected * (1 - expected) / 200) / reps)
    assert abs(np.mean(covered) - expected) <= 4 * se


def test_calibrate_rejects_bad_input():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2)); y = X[:, 0] + rng.normal(size=40)
    reg = DropoutSVR().fit(X, y)
    idata = reg.sample_posterior(X, y, draws=30, tune=10, chains=1, random_state=0,
                                 progressbar=False)
    with pytest.raises(ValueError, match="at least 9 rows"):
        reg.predict_interval(X, idata, prob=0.9, calibrate=(X[:8], y[:8]))
    with pytest.raises(ValueError, match="kind='predictive'"):
        reg.predict_interval(X, idata, kind="mean", calibrate=(X, y))
    with pytest.raises(ValueError, match="rows"):
        reg.predict_interval(X, idata, calibrate=(X[:20], y[:30]))
    with pytest.raises(TypeError, match="pair"):
        reg.predict_interval(X, idata, calibrate=X)
    with pytest.raises(ValueError, match="finite"):
        reg.predict_interval(X, idata, calibrate=(X[:20], np.full(20, np.nan)))


@pytest.mark.parametrize("sparse", [False, True])
def test_squared_loss_posterior_is_its_exact_gaussian(sparse):
    """The squared loss has no augmentation: ``exp(-J)`` is ``N(A^{-1} r, A^{-1})`` with
    ``A = 2 I' + C' (Xbar^T Xbar + diag(sum_n v_n))`` and ``r = C' Xbar^T y`` (MCF's
    docstring, ``C' = 2C``), built here in numpy from ``X``. Draws without
    over-relaxation are independent: each coordinate's mean within 4 standard errors of
    ``A^{-1} r`` (``sd / sqrt(n)``), its variance within 4 standard errors
    (``var sqrt(2 / (n - 1))``) of ``diag(A^{-1})``; the mean is also the fit."""
    import scipy.sparse as sps

    from bayesdrop import MCFQuadraticClassifier

    rng = np.random.default_rng(7)
    X = rng.normal(size=(80, 3)) * [1.0, 0.5, 2.0]
    y = np.where(X[:, 0] + rng.normal(size=80) > 0, 1, -1)
    C, q = 0.4, 0.3
    est = MCFQuadraticClassifier(C=C, noise_level=q).fit(X, y)
    Xin = sps.csr_matrix(X) if sparse else X
    idata = est.sample_posterior(Xin, y, draws=2000, tune=1, chains=2, overrelax=0.0,
                                 random_state=0, progressbar=False)
    draws = np.column_stack([idata.posterior["coef"].values.reshape(-1, 3),
                             idata.posterior["intercept"].values.reshape(-1)])
    Cp = 2 * C
    Xbar = np.column_stack([X, np.ones(80)])
    v = q / (1 - q) * X**2  # dropout's variances
    A = Cp * Xbar.T @ Xbar
    A[:3, :3] += 2 * np.eye(3) + Cp * np.diag(v.sum(axis=0))
    cov = np.linalg.inv(A)
    mean = cov @ (Cp * Xbar.T @ y)
    np.testing.assert_allclose(mean[:3], est.coef_[0], rtol=1e-8)
    n = draws.shape[0]
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(draws.mean(axis=0) - mean) <= 4 * sd / np.sqrt(n))
    var = draws.var(axis=0, ddof=1)
    assert np.all(np.abs(var - sd**2) <= 4 * sd**2 * np.sqrt(2 / (n - 1)))


def test_squared_loss_regression_predictive_is_normal_around_the_scores():
    """On real targets (``SquaredLoss(binary=False)``) the pseudo-likelihood
    ``exp(-(C/2)(y - m)^2)`` normalised over ``y`` is ``N(m, 1/C)``: the predictive
    draws minus their scores have mean 0 and variance ``1/C`` (4 standard errors);
    intervals are for regression posteriors only (not MCF's classifier)."""
    from bayesdrop import MCFQuadraticClassifier, sample_posterior
    from bayesdrop.predictive import (
        decision_draws,
        posterior_predictive_draws,
        predictive_interval,
    )

    rng = np.random.default_rng(2)
    X = rng.normal(size=(60, 2))
    y = X @ [1.0, -0.5] + rng.normal(size=60)
    C = 2.5
    idata = sample_posterior(X, y, loss="squared", C=C, binary=False, draws=400, tune=5,
                             chains=1, random_state=0, progressbar=False)
    r = posterior_predictive_draws(idata, X, random_state=1) - decision_draws(idata, X)
    assert abs(r.mean()) <= 4 * np.sqrt(1 / C / r.size)
    assert abs(r.var() - 1 / C) <= 4 * (1 / C) * np.sqrt(2 / r.size)
    mean, band = predictive_interval(idata, X, prob=0.9)
    assert band.shape == (60, 2) and np.all(band[:, 0] < mean) and np.all(mean < band[:, 1])
    labels = np.where(y > 0, 1, 0)
    clf = MCFQuadraticClassifier().fit(X, labels)
    cls_idata = clf.sample_posterior(X, labels, draws=5, tune=1, chains=1, random_state=0,
                                     progressbar=False)
    with pytest.raises(ValueError, match="regression model.*'squared' loss on labels"):
        predictive_interval(cls_idata, X)


def _at_the_fit(idata, est):
    """A copy of ``idata`` whose every draw is the estimator's fitted coefficients."""
    out = idata.copy()
    for name, value in (("coef", est.coef_), ("intercept", est.intercept_)):
        if name in out.posterior:
            var = out.posterior[name]
            out.posterior[name] = var.copy(data=np.broadcast_to(
                np.asarray(value, dtype=float).reshape(var.shape[2:]), var.shape).copy())
    return out


@pytest.mark.parametrize("make", [
    lambda: DropoutSVC(noise_level=0.2), lambda: DropoutLogisticRegression(noise_level=0.2),
    lambda: __import__("bayesdrop").MCFQuadraticClassifier(noise_level=0.2),
    lambda: __import__("bayesdrop").DropoutLatentLogisticRegression(
        noise_level=0.2, n_hidden=4, max_iter=5, random_state=0),
    lambda: DropoutSVR(noise_level=0.2)], ids=["svc", "lr", "mcf", "latent", "svr"])
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_predictive_methods_at_the_fit_are_the_point_prediction(make, n_classes,
                                                                 fit_intercept):
    """With every posterior draw at the fitted coefficients, the draws' scores are the
    estimator's decision function (the regressor's prediction), the vote fractions pick
    ``predict``'s class and the regressor's interval of the mean is centred on
    ``predict`` -- whatever features the coefficients act on (the latent models' hidden
    units: their predictive methods used ``X`` itself)."""
    from bayesdrop.predictive import decision_draws

    X, y = load_iris(return_X_y=True)
    est = make().set_params(fit_intercept=fit_intercept)
    regression = isinstance(est, DropoutSVR)
    if regression:
        if n_classes == 3:
            pytest.skip("a regressor has one output")
        y = X[:, 0] - 0.5 * X[:, 1]
    elif n_classes == 2:
        y = (y == 2).astype(int)
    est.fit(X, y)
    idata = est.sample_posterior(X, y, draws=4, tune=2, chains=1, random_state=0,
                                 progressbar=False)
    fit = _at_the_fit(idata, est)
    scores = decision_draws(fit, X, est._posterior_transform())[0, 0]
    expected = est.predict(X) if regression else est.decision_function(X)
    np.testing.assert_allclose(scores, expected, rtol=1e-10, atol=1e-10)
    if regression:
        mean, _ = est.predict_interval(X, fit, kind="mean")
        np.testing.assert_allclose(mean, est.predict(X), rtol=1e-10, atol=1e-10)
    else:
        votes = est.predict_vote_fractions(X, fit)
        np.testing.assert_array_equal(est.classes_[votes.argmax(axis=1)], est.predict(X))
    draws = est.sample_posterior_predictive(X, idata, random_state=0)
    assert draws.posterior_predictive["y"].shape == (1, 4, X.shape[0])
