"""One-hidden-layer models (MATH.md section 6)."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.datasets import load_iris, make_moons

from bayesdrop import (
    Dropout,
    DropoutLatentLogisticRegression,
    DropoutLatentSVC,
    DropoutLogisticRegression,
    DropoutSVC,
    HingeLoss,
    LogisticLoss,
    NoNoise,
    Problem,
    diagnostics,
)
from bayesdrop.model.latent import (
    LatentDesign,
    latent_gradients,
    latent_objective,
    noise_entries,
)
from bayesdrop.solvers import alternating, irls, lbfgs
from bayesdrop.solvers.alternating import fit_latent


def _data(sparse, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, 5))
    if sparse:
        X = sp.csr_matrix(np.where(np.abs(X) > 0.7, X, 0.0))
    y = np.where(rng.normal(size=40) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("loss", [HingeLoss(0.7), LogisticLoss(1.3)], ids=repr)
@pytest.mark.parametrize("sparse", [False, True])
def test_alpha_gradient_matches_finite_differences(loss, sparse):
    X, y = _data(sparse)
    entries = noise_entries(X, Dropout(0.3))
    rng = np.random.default_rng(1)
    alpha, theta = rng.normal(size=(6, 4)), rng.normal(size=5)
    J, grad = latent_objective(X, entries, y, loss, theta, alpha, 0.7)
    num = np.zeros_like(alpha)
    h = 1e-6
    for i in range(6):
        for k in range(4):
            a = alpha.copy()
            a[i, k] += h
            jp, _ = latent_objective(X, entries, y, loss, theta, a, 0.7)
            a[i, k] -= 2 * h
            jm, _ = latent_objective(X, entries, y, loss, theta, a, 0.7)
            num[i, k] = (jp - jm) / (2 * h)
    assert np.max(np.abs(num - grad)) <= 1e-6 * np.max(np.abs(grad))


@pytest.mark.parametrize("loss", [HingeLoss(0.7), LogisticLoss(1.3)], ids=repr)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("intercept", [True, False])
def test_theta_gradient_matches_explicit_J(loss, sparse, intercept):
    """dJ/d(w, b) of latent_gradients against central differences of the explicit
    per-example J (independent code); its J and alpha-gradient equal latent_objective's."""
    X, y = _data(sparse, seed=2)
    entries = noise_entries(X, Dropout(0.3))
    v = 0.3 / 0.7 * (X.toarray() if sparse else X) ** 2
    rng = np.random.default_rng(3)
    alpha, theta = rng.normal(size=(6, 4)), rng.normal(size=5 if intercept else 4)
    J, g_theta, g_alpha = latent_gradients(X, entries, y, loss, theta, alpha, 0.7, intercept)
    J_ref, g_alpha_ref = latent_objective(X, entries, y, loss, theta, alpha, 0.7, intercept)
    assert J == J_ref and np.array_equal(g_alpha, g_alpha_ref)

    def explicit(t):
        full = t if intercept else np.append(t, 0.0)
        return _explicit_J(X, v, y, loss, full, alpha) + 0.7 * np.sum(alpha[:-1] ** 2)

    assert explicit(theta) == pytest.approx(J, rel=1e-12)
    h = 1e-6
    num = np.array([(explicit(theta + h * e) - explicit(theta - h * e)) / (2 * h)
                    for e in np.eye(theta.size)])
    np.testing.assert_allclose(g_theta, num, rtol=1e-6, atol=1e-6 * np.max(np.abs(num)))


@pytest.mark.parametrize("loss", [HingeLoss(0.7), LogisticLoss(1.3)], ids=repr)
@pytest.mark.parametrize("sparse", [False, True])
def test_joint_lbfgs_reaches_a_stationary_point_as_low_as_the_alternation(loss, sparse):
    """L-BFGS in all parameters: monotone history, a stationary point of J (gradient
    small against its start), and J no higher than the alternating solver's (+0.1%)."""
    X, y = make_moons(120, noise=0.15, random_state=4)
    X = np.hstack([X, np.zeros((120, 1))])  # an all-zero feature (no noise there)
    if sparse:
        X = sp.csr_matrix(X)
    kw = dict(n_hidden=6, alpha_penalty=0.05, random_state=0, tol=1e-9)
    yb = np.where(y == 1, 1.0, -1.0)
    res = lbfgs.fit_latent(X, yb, loss, Dropout(0.2), max_iter=20_000, **kw)
    alt = alternating.fit_latent(X, yb, loss, Dropout(0.2), max_iter=300, **kw)
    assert res.converged
    assert np.all(np.diff(res.objective) <= 0.0)
    J, g_theta, g_alpha = latent_gradients(X, res.entries, yb, loss, res.theta, res.alpha,
                                           0.05)
    assert J == pytest.approx(res.objective[-1], rel=1e-12)
    _, g0_theta, g0_alpha = latent_gradients(
        X, res.entries, yb, loss, np.zeros_like(res.theta), res.alpha, 0.05)
    g_norm = np.linalg.norm(np.r_[g_theta, g_alpha.ravel()])
    assert g_norm <= 1e-3 * np.linalg.norm(np.r_[g0_theta, g0_alpha.ravel()])
    assert res.objective[-1] <= alt.objective[-1] * (1 + 1e-3)


def test_latent_solver_choice():
    """auto: L-BFGS where J is smooth, else the alternation; lbfgs refused where J has
    kinks; both reach a good fit."""
    X, y = make_moons(100, noise=0.1, random_state=0)
    kw = dict(n_hidden=6, random_state=0)
    auto = DropoutLatentSVC(noise_level=0.1, **kw).fit(X, y)
    alt = DropoutLatentSVC(noise_level=0.1, solver="alternating", **kw).fit(X, y)
    assert auto.n_iter_[0] > alt.n_iter_[0]  # L-BFGS iterations, not alternations
    assert auto.score(X, y) > 0.95 and alt.score(X, y) > 0.95
    assert auto.objective_[0][-1] <= alt.objective_[0][-1] * (1 + 1e-3)
    clean = DropoutLatentSVC(noise="none", **kw).fit(X, y)  # zero noise: alternating
    assert clean.n_iter_[0] <= 50
    with pytest.raises(ValueError, match="smooth J"):
        DropoutLatentSVC(noise="none", solver="lbfgs").fit(X, y)
    with pytest.raises(ValueError, match="solver must be"):
        DropoutLatentLogisticRegression(solver="newton").fit(X, y)


def _explicit_J(X, v, y, loss, theta, alpha):
    """J(w, b | alpha) with S_n = Jac_n^T diag(v_n) Jac_n built per example."""
    Xd = X.toarray() if sp.issparse(X) else X
    G = expit(Xd @ alpha[:-1] + alpha[-1])
    Gp = G * (1 - G)
    w, b = theta[:-1], theta[-1]
    s = np.empty(Xd.shape[0])
    for n in range(Xd.shape[0]):
        jac = alpha[:-1] * Gp[n]  # Jac[d, k] = g'_nk alpha_dk
        S = jac.T @ np.diag(v[n]) @ jac
        s[n] = w @ S @ w
    value, _, _ = loss.terms(G @ w + b, s, y)
    return w @ w + value.sum()


@pytest.mark.parametrize("loss", [HingeLoss(0.7), LogisticLoss(1.3)], ids=repr)
@pytest.mark.parametrize("sparse", [False, True])
def test_w_step_with_frozen_hidden_layer(loss, sparse):
    """With alpha frozen the w-step is the linear model on the hidden features: the
    IRLS optimum equals L-BFGS on the explicitly built full-covariance objective, and at
    zero noise it equals the linear estimator fitted on the hidden features."""
    X, y = _data(sparse, seed=2)
    noise = Dropout(0.3)
    v = noise.feature_variance_values(X.toarray() if sp.issparse(X) else X)
    alpha = np.random.default_rng(3).normal(size=(6, 4))
    design = LatentDesign(X, noise_entries(X, noise), alpha, True)
    problem = Problem(design, loss, y)
    fit = irls.fit(problem, None, tol=1e-12)
    J_ref = minimize(lambda th: _explicit_J(X, v, y, loss, th, alpha), np.zeros(5),
                     method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-10,
                                                  "maxiter": 5000}).fun
    assert fit.objective[-1] <= J_ref * (1 + 1e-6)
    assert _explicit_J(X, v, y, loss, fit.theta, alpha) == pytest.approx(fit.objective[-1],
                                                                        rel=1e-10)
    # zero noise: the linear estimator on the hidden features
    design0 = LatentDesign(X, noise_entries(X, NoNoise()), alpha, True)
    problem0 = Problem(design0, loss, y)
    fit0 = irls.fit(problem0, None, tol=1e-12)
    Est = DropoutSVC if loss.name == "hinge" else DropoutLogisticRegression
    lin = Est(C=loss.C, noise="none", tol=1e-12).fit(design0.G, y)
    J_lin = problem0.objective(design0.pack(lin.coef_[0], lin.intercept_[0]))
    J_irls = fit0.objective[-1]
    assert J_irls == pytest.approx(J_lin, rel=1e-10)
    # J is 2-strongly convex in w (its ||w||^2), so at the minimiser (here the linear
    # fit) J(theta) >= J* + ||w - w*||^2: the IRLS weights are as close to the linear
    # model's as IRLS's excess of J allows (rounding slack 1e-13 J)
    excess = max(J_irls - J_lin, 0.0)
    assert np.sum((fit0.theta[:-1] - lin.coef_[0]) ** 2) <= excess + 1e-13 * J_lin


@pytest.mark.parametrize("loss", [HingeLoss(0.7), LogisticLoss(1.3)], ids=repr)
@pytest.mark.parametrize("noise", [NoNoise(), Dropout(0.3)], ids=repr)
def test_w_step_solver_reaches_the_irls_optimum(loss, noise):
    """``alternating.w_step``: Newton on the plain hidden-feature design for a smooth loss
    at zero noise, IRLS otherwise; either way the minimiser of ``J`` over ``theta`` --
    the same ``J`` as IRLS run to ``tol = 1e-14`` (relative 1e-10) and a stationary
    point of the latent objective in ``theta``."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 5))
    y = np.where(X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=300) > 0, 1.0, -1.0)
    alpha = 2.0 * rng.normal(size=(6, 8))
    loss = type(loss)(20.0)  # weak penalty: Newton needs several steps
    design = LatentDesign(X, noise_entries(X, noise), alpha, True)
    res = alternating.w_step(design, loss, y, None, 100)
    ref = irls.fit(Problem(design, loss, y), None, tol=1e-14, max_iter=100000, warn=False)
    newton_path = loss.smooth and isinstance(noise, NoNoise)
    assert (res.solver == "newton") == newton_path
    assert res.objective[-1] == pytest.approx(ref.objective[-1], rel=1e-10)
    assert res.objective[-1] <= ref.objective[-1] * (1 + 1e-12)
    if loss.smooth:  # the theta-gradient of the latent objective vanishes there
        _, g_theta, _ = latent_gradients(X, noise_entries(X, noise), y, loss, res.theta,
                                         alpha, 0.0)
        assert np.max(np.abs(g_theta)) <= 1e-6 * max(1.0, abs(res.objective[-1]))


def test_zero_noise_objective_is_plain_one_hidden_layer_svm():
    X, y = make_moons(120, noise=0.2, random_state=1)
    y = 2.0 * y - 1
    res = fit_latent(X, y, HingeLoss(0.8), NoNoise(), n_hidden=6, alpha_penalty=0.05,
                     random_state=0, max_iter=10)
    a, w, b = res.alpha, res.theta[:-1], res.theta[-1]
    G = expit(X @ a[:-1] + a[-1])
    plain = w @ w + 0.05 * np.sum(a[:-1] ** 2) + 2 * 0.8 * np.sum(
        np.maximum(0, 1 - y * (G @ w + b)))
    assert res.objective[-1] == pytest.approx(plain, rel=1e-9)
    assert np.all(np.diff(res.objective) <= 1e-9 * abs(res.objective[0]))


@pytest.mark.parametrize("Est", [DropoutLatentSVC, DropoutLatentLogisticRegression])
def test_latent_beats_linear_on_two_moons(Est):
    X, y = make_moons(400, noise=0.15, random_state=0)
    Xt, yt = make_moons(400, noise=0.15, random_state=1)
    lat = Est(C=1.0, noise_level=0.1, n_hidden=10, random_state=0).fit(X, y)
    Lin = DropoutSVC if Est is DropoutLatentSVC else DropoutLogisticRegression
    lin = Lin(C=1.0, noise_level=0.1).fit(X, y)
    assert lat.score(Xt, yt) > lin.score(Xt, yt) + 0.05
    hist = lat.objective_[0]
    assert np.all(np.diff(hist) <= 1e-9 * abs(hist[0]))


def test_multiclass_transform_sparse_and_conditional_posterior():
    X, y = load_iris(return_X_y=True)
    clf = DropoutLatentSVC(C=1.0, noise_level=0.2, n_hidden=5, max_iter=5, random_state=0)
    clf.fit(sp.csr_matrix(X), y)
    assert clf.transform(X).shape == (150, 15)
    assert clf.hidden_weights_.shape == (3, 4, 5) and clf.coef_.shape == (3, 5)
    # dense and sparse code paths: same start, same first alternation (later ones of a
    # non-convex problem drift apart at rounding level)
    yb = np.where(y == 1, 1.0, -1.0)
    runs = [fit_latent(Xin, yb, HingeLoss(1.0), Dropout(0.2), n_hidden=5, max_iter=1,
                       random_state=0, clean_start=0)
            for Xin in (X, sp.csr_matrix(X))]
    assert np.allclose(runs[0].objective, runs[1].objective, rtol=1e-8)
    idata = clf.sample_posterior(X, y, draws=100, tune=20, chains=2, random_state=0,
                                 progressbar=False, cores=1)
    assert idata.posterior["coef"].shape == (2, 100, 3, 5)
    assert idata.posterior.attrs["conditional_on_hidden_layer"] == 1
    assert list(idata.posterior["feature"].values) == [f"h{k}" for k in range(5)]
    import pandas as pd

    frame = pd.DataFrame(X, columns=list("abcd"))
    binary = DropoutLatentLogisticRegression(n_hidden=3, max_iter=2, random_state=0)
    post = binary.sample_posterior(frame, y == 2, draws=20, tune=5, chains=1,
                                   progressbar=False, random_state=0)
    assert post.posterior["coef"].shape == (1, 20, 3)
    assert diagnostics.check_mode(idata, clf)["is_mode"].all()


@pytest.mark.parametrize("classes", [2, 3])
def test_posterior_predictive_acts_on_the_hidden_features(classes):
    """The latent posterior's coefficients act on each problem's hidden features
    ``sigmoid(X alpha_k + c_k)`` (``n_hidden`` of them, not ``X``'s columns): its
    predictive methods work for any ``n_hidden`` (they raised "X has 4 features, the
    posterior 5"), and with every draw at the fitted output weights the votes are the
    point prediction, row for row, and the predictive draws' scores its decision
    function."""
    from bayesdrop.predictive import decision_draws

    X, y = load_iris(return_X_y=True)
    if classes == 2:
        y = (y == 2).astype(int)
    clf = DropoutLatentSVC(noise_level=0.2, n_hidden=5, max_iter=5, random_state=0).fit(X, y)
    idata = clf.sample_posterior(X, y, draws=20, tune=5, chains=1, random_state=0,
                                 progressbar=False)
    reps = clf.sample_posterior_predictive(X, idata, random_state=0)
    assert reps.posterior_predictive["y"].shape == (1, 20, 150)
    corrupted = clf.sample_posterior_predictive(X, idata, random_state=0, corrupted=True)
    assert corrupted.posterior_predictive["y"].shape == (1, 20, 150)
    at_mode = idata.copy()
    coef = at_mode.posterior["coef"]
    at_mode.posterior["coef"] = coef.copy(data=np.broadcast_to(
        clf.coef_.reshape(coef.shape[2:]), coef.shape).copy())
    b = at_mode.posterior["intercept"]
    at_mode.posterior["intercept"] = b.copy(data=np.broadcast_to(
        clf.intercept_.reshape(b.shape[2:]), b.shape).copy())
    votes = clf.predict_vote_fractions(X, at_mode)
    np.testing.assert_array_equal(clf.classes_[votes.argmax(axis=1)], clf.predict(X))
    assert set(np.unique(votes)) <= {0.0, 1.0}
    scores = decision_draws(at_mode, X, clf._posterior_transform())[0, 0]
    np.testing.assert_allclose(scores, clf.decision_function(X), rtol=1e-12, atol=1e-12)


def test_latent_bad_parameters():
    X, y = make_moons(50, random_state=0)
    for kw, msg in [(dict(n_hidden=0), "n_hidden"), (dict(alpha_penalty=-1.0), "alpha_penalty"),
                    (dict(C=0.0), "C"), (dict(noise_level=1.5), "noise_level")]:
        with pytest.raises(ValueError, match=msg):
            DropoutLatentSVC(**kw).fit(X, y)
    with pytest.raises(ValueError, match="one class"):
        DropoutLatentLogisticRegression().fit(X, np.zeros(50))


@pytest.mark.parametrize("loss_name", ["logistic", "hinge", "epsilon", "weighted"])
def test_compiled_latent_passes_equal_the_numpy_ones(loss_name, monkeypatch):
    """For dense X the element-wise passes of ``latent_gradients`` run compiled; they give
    ``J`` and both gradients of the numpy formulas (forced by hiding the loss's kernels) to
    rounding, for every built-in loss and with sample weights."""
    from bayesdrop import EpsilonInsensitiveLoss, HingeLoss, LogisticLoss
    from bayesdrop.model import latent as L

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 6))
    y = np.sign(rng.normal(size=50))
    loss = {"logistic": LogisticLoss(0.7), "hinge": HingeLoss(1.3),
            "epsilon": EpsilonInsensitiveLoss(1.0, 0.2),
            "weighted": LogisticLoss(0.7).weighted(rng.integers(1, 3, size=50) * 1.0)}[loss_name]
    if loss_name == "epsilon":
        y = rng.normal(size=50)
    entries = L.noise_entries(X, Dropout(0.3))
    alpha, theta = rng.normal(size=(7, 4)), rng.normal(size=5)
    compiled = L.latent_gradients(X, entries, y, loss, theta, alpha, 0.3)
    monkeypatch.setattr(L, "has_kernels", lambda loss: False)
    numpy_ = L.latent_gradients(X, entries, y, loss, theta, alpha, 0.3)
    assert compiled[0] == pytest.approx(numpy_[0], rel=1e-13)
    for a, b in zip(compiled[1:], numpy_[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13 * np.abs(b).max())
