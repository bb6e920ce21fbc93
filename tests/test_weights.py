"""sample_weight and class_weight: integer weights == duplicated rows, zero weight ==
row removed, the scikit-learn reference with weights, the weighted Gibbs sampler equal in
distribution to the duplicated one, and errors naming the argument."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.svm import SVC
from sklearn.utils.class_weight import compute_class_weight

from bayesdrop import (
    Dropout,
    DropoutLatentSVC,
    DropoutLogisticRegression,
    DropoutSVC,
    DropoutSVR,
    EpsilonInsensitiveLoss,
    HingeLoss,
    LogisticLoss,
    Problem,
    SquaredLoss,
    sample_posterior,
)
from bayesdrop.model.augmentation import polya_gamma, polya_gamma_moments
from bayesdrop.solvers import fit_problem

RNG = np.random.default_rng(7)
X = RNG.normal(size=(60, 4))
Y_BIN = np.sign(X[:, 0] + 0.5 * RNG.normal(size=60))
Y_REG = X @ np.array([1.0, 2.0, 0.0, -1.0]) + 0.3 * RNG.normal(size=60)
W_INT = RNG.integers(0, 4, size=60).astype(float)
DUP = np.repeat(np.arange(60), W_INT.astype(int))

LOSSES = [(HingeLoss(1.0), Y_BIN), (LogisticLoss(0.5), Y_BIN),
          (EpsilonInsensitiveLoss(1.0, 0.1), Y_REG), (SquaredLoss(1.0, binary=False), Y_REG)]


@pytest.mark.parametrize("loss,y", LOSSES, ids=lambda v: getattr(v, "name", ""))
@pytest.mark.parametrize("noise", ["none", Dropout(0.3)], ids=["q0", "q03"])
@pytest.mark.parametrize("solver", ["auto", "irls", "newton"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_integer_weights_equal_duplicated_rows(loss, y, noise, solver, sparse):
    Xw = sp.csr_matrix(X) if sparse else X
    weighted = Problem.create(Xw, y, loss, noise, sample_weight=W_INT)
    copies = Problem.create(Xw[DUP], y[DUP], loss, noise)
    theta = RNG.normal(size=5)
    # the same J (and gradient) everywhere
    Ja, ga = weighted.objective(theta, gradient=True)
    Jb, gb = copies.objective(theta, gradient=True)
    assert Ja == pytest.approx(Jb, rel=1e-12)
    np.testing.assert_allclose(ga, gb, rtol=1e-10, atol=1e-10)
    smooth = noise != "none" or loss.smooth
    if solver == "newton" and not smooth:
        return
    a = fit_problem(weighted, solver=solver, tol=1e-12)
    b = fit_problem(copies, solver=solver, tol=1e-12)
    assert a.objective[-1] == pytest.approx(b.objective[-1], rel=1e-9)
    if smooth:  # a unique, well-conditioned optimum: the parameters agree too
        np.testing.assert_allclose(a.theta, b.theta, rtol=1e-6, atol=1e-6)


def test_zero_noise_hinge_weighted_dual_matches_libsvm():
    # libsvm's sample_weight scales C per example, like ours
    w = RNG.uniform(0.2, 3.0, size=60)
    ours = DropoutSVC(C=0.7, noise="none", tol=1e-12).fit(X, Y_BIN, sample_weight=w)
    ref = SVC(kernel="linear", C=0.7, tol=1e-12).fit(X, Y_BIN, sample_weight=w)
    assert ours.solver_[0].startswith("dual")
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=1e-6)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=1e-6)


def test_logistic_class_weight_balanced_matches_sklearn():
    y = np.where(X[:, 0] + 0.8 > 0, 1, 0)  # unbalanced
    ours = DropoutLogisticRegression(C=0.3, noise="none", class_weight="balanced",
                                     tol=1e-12).fit(X, y)
    ref = LogisticRegression(C=0.3, class_weight="balanced", tol=1e-12,
                             max_iter=10_000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-5, atol=1e-7)


def test_class_weight_dict_equals_sample_weight_and_combines():
    y = np.array(["a", "b", "c"])[RNG.integers(0, 3, size=60)]
    cw = {"a": 2.0, "b": 0.5, "c": 1.0}
    sw = RNG.uniform(0.5, 2.0, size=60)
    a = DropoutSVC(noise_level=0.2, class_weight=cw).fit(X, y, sample_weight=sw)
    b = DropoutSVC(noise_level=0.2).fit(X, y, sample_weight=sw * np.vectorize(cw.get)(y))
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-10)
    bal = DropoutSVC(noise_level=0.2, class_weight="balanced").fit(X, y)
    per = compute_class_weight("balanced", classes=np.unique(y), y=y)
    c = DropoutSVC(noise_level=0.2).fit(X, y, sample_weight=per[np.searchsorted(bal.classes_, y)])
    np.testing.assert_allclose(bal.coef_, c.coef_, rtol=1e-10)


@pytest.mark.parametrize("Est,y", [(DropoutSVC, Y_BIN), (DropoutLogisticRegression, Y_BIN),
                                   (DropoutSVR, Y_REG)])
def test_zero_weight_is_row_removed_and_caller_arrays_untouched(Est, y):
    w = np.ones(60)
    w[::5] = 0.0
    keep = w > 0
    Xc, yc, wc = X.copy(), y.copy(), w.copy()
    a = Est(noise_level=0.3, tol=1e-12).fit(X, y, sample_weight=w)
    b = Est(noise_level=0.3, tol=1e-12).fit(X[keep], y[keep])
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-12, atol=1e-14)
    assert np.array_equal(X, Xc) and np.array_equal(y, yc) and np.array_equal(w, wc)


def test_latent_weights_equal_duplicates():
    from bayesdrop.solvers.alternating import fit_latent

    keep = W_INT > 0
    kw = dict(n_hidden=3, random_state=0, max_iter=5, clean_start=0)
    a = fit_latent(X[keep], Y_BIN[keep], HingeLoss(1.0).weighted(W_INT[keep]), Dropout(0.2),
                   **kw)
    b = fit_latent(X[DUP], Y_BIN[DUP], HingeLoss(1.0), Dropout(0.2), **kw)
    np.testing.assert_allclose(a.objective, b.objective, rtol=1e-8)
    # the estimator passes the weights to the loss: a constant weight c is C -> c C
    c = DropoutLatentSVC(C=2.0, n_hidden=3, noise_level=0.2, random_state=0, max_iter=5)
    d = DropoutLatentSVC(C=1.0, n_hidden=3, noise_level=0.2, random_state=0, max_iter=5)
    c.fit(X, Y_BIN)
    d.fit(X, Y_BIN, sample_weight=np.full(60, 2.0))
    np.testing.assert_allclose(c.objective_[0], d.objective_[0], rtol=1e-9)


@pytest.mark.parametrize("bad,match", [
    (-np.ones(60), "non-negative"), (np.full(60, np.nan), "NaN"), (np.ones(59), "59 entries"),
    (np.zeros(60), "zero for every"), (np.ones((60, 1)), "1-dimensional"),
    (np.full(60, 1e300), "overflow"),
])
def test_bad_sample_weight_names_the_argument(bad, match):
    with pytest.raises(ValueError, match=match) as info:
        DropoutSVC().fit(X, Y_BIN, sample_weight=bad)
    assert "sample_weight" in str(info.value)


def test_bad_class_weight():
    with pytest.raises(ValueError, match="class_weight"):
        DropoutSVC(class_weight="uniform").fit(X, Y_BIN)


def test_polya_gamma_per_example_shape_has_exact_moments():
    n = 200_000
    h = np.tile([0.3, 1.0, 2.7, 5.5], n // 4)
    z = np.tile([0.0, 1.5, 4.0, 30.0], n // 4)
    lam = polya_gamma(h, z, random_state=3)
    for k in range(4):
        mean, var = polya_gamma_moments(h[k], z[k])
        x = lam[k::4]
        assert abs(x.mean() - mean) < 4 * np.sqrt(var / x.shape[0])
        # variance: 4 standard errors from the sample fourth moment
        se_var = np.sqrt(np.var((x - x.mean()) ** 2) / x.shape[0])
        assert abs(x.var() - var) < 4 * se_var
    with pytest.raises(ValueError, match="h must be"):
        polya_gamma(np.array([1.0, -1.0]), np.zeros(2))


@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_weighted_posterior_equals_duplicated_in_distribution(loss):
    rng = np.random.default_rng(11)
    Xs = rng.normal(size=(25, 2))
    y = np.where(Xs[:, 0] + 0.7 * rng.normal(size=25) > 0, 1, -1)
    w = rng.integers(1, 4, size=25).astype(float)
    dup = np.repeat(np.arange(25), w.astype(int))
    kw = dict(loss=loss, C=0.5, noise="dropout", noise_level=0.3, draws=3000, tune=300,
              chains=2, progressbar=False, cores=1)
    a = sample_posterior(Xs, y, sample_weight=w, random_state=1, **kw)
    b = sample_posterior(Xs[dup], y[dup], random_state=2, **kw)
    from bayesdrop._arviz import mcse

    for var in ("coef", "intercept"):
        da = a.posterior[var].values.reshape(2, 3000, -1)
        db = b.posterior[var].values.reshape(2, 3000, -1)
        for j in range(da.shape[-1]):
            se = np.hypot(mcse(da[..., j]), mcse(db[..., j]))
            assert abs(da[..., j].mean() - db[..., j].mean()) < 4 * se, (var, j)
            np.testing.assert_allclose(da[..., j].std(), db[..., j].std(), rtol=0.1)


def test_functional_sample_posterior_accepts_zero_one_labels():
    rng = np.random.default_rng(0)
    Xs = rng.normal(size=(40, 2))
    y01 = (Xs[:, 0] > 0).astype(int)
    kw = dict(loss="hinge", noise="none", draws=50, tune=10, chains=1, progressbar=False,
              random_state=0)
    a = sample_posterior(Xs, y01, **kw)
    b = sample_posterior(Xs, 2 * y01 - 1, **kw)
    np.testing.assert_array_equal(a.posterior["coef"].values, b.posterior["coef"].values)
    with pytest.raises(ValueError, match="two classes"):
        sample_posterior(Xs, np.zeros(40), **kw)


@pytest.mark.parametrize("make", [
    lambda: __import__("bayesdrop.baselines", fromlist=["x"]).MCFLogisticRegression(
        noise_level=0.3, tol=1e-10),
    lambda: __import__("bayesdrop.baselines", fromlist=["x"]).MCFLogisticRegression(
        noise="gaussian", noise_level=0.3, tol=1e-10),
    lambda: __import__("bayesdrop.baselines", fromlist=["x"]).MCFQuadraticClassifier(
        noise_level=0.3),
    lambda: __import__("bayesdrop.baselines", fromlist=["x"]).WagerDropoutLogisticRegression(
        noise_level=0.3, tol=1e-10),
    lambda: __import__("bayesdrop.baselines", fromlist=["x"]).TLogisticRegression(
        t=1.5, tol=1e-10),
    lambda: __import__("bayesdrop.baselines", fromlist=["x"]).InvariantSVC(
        n_changes=1, tol=1e-10, max_iter=5000, solver="bmrm"),
    lambda: __import__("bayesdrop.baselines", fromlist=["x"]).InvariantSVC(
        n_changes=1, tol=1e-9, max_iter=20000, solver="bcfw", random_state=0),
], ids=["mcf-logistic-dropout", "mcf-logistic-gaussian", "mcf-quadratic", "wager", "t-logistic",
        "invariant-bmrm", "invariant-bcfw"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_baselines_integer_weights_equal_duplicated_rows(make, sparse):
    Xw = sp.csr_matrix(X) if sparse else X
    a = make().fit(Xw, Y_BIN, sample_weight=W_INT)
    b = make().fit(Xw[DUP], Y_BIN[DUP])
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-8)


def test_mcf_logistic_weights_at_zero_noise_match_sklearn():
    from bayesdrop.baselines import MCFLogisticRegression

    w = RNG.uniform(0.1, 3.0, size=60)
    ours = MCFLogisticRegression(C=0.5, noise_level=0.0, tol=1e-10).fit(X, Y_BIN,
                                                                         sample_weight=w)
    ref = LogisticRegression(C=0.5, tol=1e-12).fit(X, Y_BIN, sample_weight=w)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-5)
